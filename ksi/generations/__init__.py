"""The self-improvement loop: generations of attempts, distilled into notes.

* ``steps``: plan a generation, give its attempts notes, distil it;
* ``forum``: between attempts and distillation, agents holding the attempts'
  evidence compare notes, room by room and round by round;
* ``phases``: ``generations.jsonl`` (what resume by phase reads);
* ``setup``: the strategy, distiller and seed notes, checked before a run starts;
* ``figures``: per-generation figures from a run directory;
* ``evidence``: what a distiller reads, from **scored** attempts only;
* ``strategies``, ``evidence_distiller``, ``agent_distiller``: the built-in
  strategies and distillers, registered like any plugin's.

The notes themselves and where they are kept are :mod:`ksi.knowledge`;
docs/generations.md is the user's page.
"""
