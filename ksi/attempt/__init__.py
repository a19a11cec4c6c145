"""One attempt, wherever it runs: a job in, a record out.

* ``job``: :class:`~ksi.attempt.job.AttemptJob`, a frozen, picklable attempt;
* ``execute``: :func:`~ksi.attempt.execute.run_job` (seed, run the agent, capture,
  grade, write the attempt's files) and the components a job names;
* ``capture``: the tree that gets graded; ``diff``: ``diff.patch`` against the seed;
* ``envscrub``: the environment an agent may see; ``safety``: isolation and host
  grading decisions; ``components``: resolving component specs by name;
* ``cancel``: stopping running attempts on Ctrl-C; ``diskfull``: a full disk.

Executors and plugins import the public contract from :mod:`ksi.jobs`, not these
modules.
"""
