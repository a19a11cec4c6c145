"""The session's coordinator: one Ray actor, living on the driver's node.

Ray alone cannot promise that an attempt's body runs once: a task whose node
dies may be re-run elsewhere, and a lost result may be rebuilt by running the
task again. So every attempt task *claims* its key here before it starts the
agent, and runs only if the claim is granted:

- a key is granted to one dispatch only, ever, in a session: a second
  execution of the same dispatch, or of another one, is refused;
- when a dispatch fails, the driver *revokes* it: if it never claimed, it never
  ran, and the driver may dispatch the job again; if it did, the claim tells on
  which node the attempt ran (and died);
- :meth:`cancel` (Ctrl-C, ``--max-cost``) refuses every later claim and wakes
  every task waiting in :meth:`wait_cancelled`, which then stops its agent.

An async actor: its methods run one at a time between awaits, so claim and
revoke never interleave.
"""

from __future__ import annotations

import asyncio

import attrs


@attrs.frozen
class NodeInfo:
    """Where an attempt ran, as the error record of a dead node names it."""

    node_id: str
    ip: str
    hostname: str

    def describe(self) -> str:
        return f"{self.hostname} ({self.ip}, Ray node {self.node_id[:12]})"


@attrs.frozen
class Claim:
    dispatch: int
    node: NodeInfo


class Coordinator:
    """Claims of attempt keys, revocations, and the session's cancel signal."""

    def __init__(self) -> None:
        self._claims: dict[str, Claim] = {}
        self._revoked: set[tuple[str, int]] = set()
        self._cancelled = asyncio.Event()

    async def claim(self, key: str, dispatch: int, node: NodeInfo) -> bool:
        """May dispatch ``dispatch`` of ``key`` start its attempt on ``node``? (once only)"""
        if self._cancelled.is_set() or key in self._claims or (key, dispatch) in self._revoked:
            return False
        self._claims[key] = Claim(dispatch, node)
        return True

    async def revoke(self, key: str, dispatch: int) -> Claim | None:
        """The dispatch failed: its claim (it started), or None (it never will)."""
        found = self._claims.get(key)
        if found is not None and found.dispatch == dispatch:
            return found
        self._revoked.add((key, dispatch))
        return None

    async def cancel(self) -> None:
        self._cancelled.set()

    async def wait_cancelled(self) -> bool:
        await self._cancelled.wait()
        return True
