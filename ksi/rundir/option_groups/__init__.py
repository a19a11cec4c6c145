"""A run's settings by area, one module per table of docs/running.md.

Each module declares one attrs class of fields (each with its
:class:`~ksi.rundir.run_option.RunOption`); :class:`ksi.rundir.config.RunConfig`
inherits them all. Adding a setting is one field in its area's module, plus
the code that uses it.
"""
