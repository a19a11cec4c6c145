"""Knowledge: the notes one generation's attempts left for the next.

* ``models``: notes (:class:`~ksi.knowledge.models.Note`), a generation's stored
  notes, and what strategies and distillers are asked and answer;
* ``store``: ``knowledge/<generation>/`` in the run directory (immutable once
  written), bundles for ``ksi knowledge export`` / ``--seed-knowledge``;
* ``render``: ``KNOWLEDGE.md`` for one attempt, under the one size budget;
* ``forum``: the forum's post files (the public contract), the posts and sessions
  kept, and their store (``forum/<generation>/``); ``forum_render``: ``FORUM.md``
  for a session, and the forum's record for people;
* ``choices``: the generation options' defaults (read by the CLI at start).

The loop that writes and reads them is :mod:`ksi.generations`.
"""

from ksi._moved import install as _install_moved

_install_moved()
