"""A run directory's own files, read and written by every part that needs them.

* ``run_state``: ``run.json`` (what a run is: id, configuration, task set, sessions);
* ``config``: the run's configuration inside it, and the rules for resuming;
* ``journal``: one durable JSON line per finished attempt.

Where each file lives is :mod:`ksi.layout`. The driver (:mod:`ksi.runs`) writes
them; generations, reporting and the viewer read them.
"""
