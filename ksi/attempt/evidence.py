"""What the knowledge store takes from an attempt's ``diff.patch``, cut where it is written.

The evidence of a scored attempt that the store keeps
(:mod:`ksi.generations.run_store`) holds two pieces of its ``diff.patch``:
the paths it touches and its start. The attempt holds the patch's bytes when
it writes them, so it cuts the pieces there, in its worker (a thread, another
process, another machine), and they reach the driver on the job's outcome:
the driver, which alone writes the store, then opens nothing of the
attempt's while the next attempts wait for it. A record that comes without
them (a resume, a regrade, the journal synced into the store, an executor
that does not carry them) has its file read and cut by the same function, so
both ways store the same evidence.
"""

from __future__ import annotations

import attrs

from ksi.attempt.diff import header_path

#: What ends a piece cut to its share of the knowledge budget.
CUT_MARK = "\n# ksi: cut to the knowledge budget\n"


@attrs.frozen
class DiffEvidence:
    """An attempt's ``diff.patch`` as its evidence holds it."""

    #: The knowledge budget the pieces were cut for (another budget reads the file again).
    budget_bytes: int
    #: The paths the diff changes (read from its first four budgets' bytes).
    files_touched: tuple[str, ...] = ()
    #: The diff's start, within half the budget.
    diff: str = ""


def diff_bytes_needed(budget_bytes: int) -> int:
    """How much of a ``diff.patch``'s start :func:`diff_evidence` reads."""
    return 4 * budget_bytes + 1


def files_touched(diff: str) -> tuple[str, ...]:
    """The paths a ``diff.patch`` changes, in its order."""
    return tuple(path for line in diff.splitlines() if (path := header_path(line)) is not None)


def cut_start(data: bytes, limit: int) -> str:
    """At most ``limit`` bytes of a text's start (a diff's headers come first), marked when
    cut."""
    text = data[:limit].decode("utf-8", "replace")
    return text + CUT_MARK if len(data) > limit else text


def diff_evidence(diff: bytes, budget_bytes: int) -> DiffEvidence:
    """The pieces of ``diff`` (a ``diff.patch``'s start, at least
    :func:`diff_bytes_needed` bytes of it when it has them; ``b""``: none) an attempt's
    evidence holds."""
    return DiffEvidence(
        budget_bytes=budget_bytes,
        files_touched=files_touched(cut_start(diff, 4 * budget_bytes)),
        diff=cut_start(diff, budget_bytes // 2),
    )
