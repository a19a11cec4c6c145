"""Generations' knowledge: what one generation's attempts showed, for the next one.

* ``models``: notes (:class:`~ksi.knowledge.models.Note`), a generation's stored
  notes, the evidence a distiller reads and what strategies and distillers are asked;
* ``evidence``: evidence from a generation's **scored** attempts (the rule that
  keeps unscored attempts out of every note lives there, once);
* ``store``: ``knowledge/<generation>/`` in the run directory (immutable once
  written), bundles for ``ksi knowledge export`` / ``--seed-knowledge``;
* ``render``: ``KNOWLEDGE.md`` for one attempt, under the one size budget;
* ``strategies``, ``evidence_distiller``, ``agent_distiller``: the built-in
  strategies and distillers, registered like any plugin's.

The loop itself (plan, attempts, distil, resume by phase) is
:mod:`ksi.runner.generations`; docs/generations.md is the user's page.
"""
