"""A whole run, on the machine holding the run directory (``ksi.run`` is the function).

* ``driver``: one ``ksi run`` (plan, submit, journal, observers, budget, Ctrl-C);
* ``progress``: what a run shows while it runs; ``api``: :func:`ksi.run`;
* ``check`` and ``regrade``: ``ksi check`` and ``ksi regrade``.

The run directory's files (``run.json``, the journal, the configuration and its
resume rules) are :mod:`ksi.rundir`; where each lives is :mod:`ksi.layout`; what
a record holds is :mod:`ksi.records`.
"""
