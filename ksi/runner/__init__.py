"""The attempt lifecycle: seeding, running, capture, grading, journal, resume.

Two halves, joined by a value:

* the **driver** side, on the machine holding the run directory:
  ``driver`` (one ``ksi run``: plan, submit, journal, observers, budget,
  retries, Ctrl-C), ``run_state`` (``run.json``), ``journal``, ``summary``,
  ``config``, ``envscrub`` (what the agent may see), ``progress``;
* ``job``: :class:`~ksi.runner.job.AttemptJob`, a frozen, picklable attempt;
* the **attempt** side, wherever a job runs: ``attempt``
  (:func:`~ksi.runner.attempt.execute_attempt`), ``capture``, ``diff``,
  ``cancel`` (stopping running attempts), ``components`` (resolving specs).

Generations (the self-improvement loop, docs/generations.md): ``generations``
(plan, notes for each attempt, distil), ``phases`` (``generations.jsonl``),
``generation_setup`` (strategy, distiller and seed notes, checked before the
run starts), ``generation_models`` and ``generation_summary`` (per-generation
figures); the notes themselves are :mod:`ksi.knowledge`.

``layout`` says where everything lives on disk; ``regrade``, ``report`` and
``check`` work on finished run directories; ``api`` is :func:`ksi.run`.
"""
