"""The Agent Client Protocol client the ``acp`` agent runs inside the attempt's environment.

An ACP agent speaks JSON-RPC on its stdin and stdout, so its client must run
where those pipes are: in the attempt's environment (a sandbox, a container),
not in KSI's process. The ``acp`` agent (:mod:`ksi.agents.acp`) therefore
copies this file into the workspace and runs it as the agent process; it
starts the ACP agent's command, sends the prompt, answers permission requests
per a policy, and writes what the session showed to a log that KSI reads on
the host once the process has ended. It imports nothing from ``ksi`` (a
container need not hold KSI), only the standard library and the
``agent-client-protocol`` package; ``python -m ksi.agents.acp_client`` runs it
too, to try an ACP agent by hand. It needs Python 3.10 or later (the package's
own floor).

The log (``--log``) is JSON lines, written and flushed one at a time so a
killed run keeps everything up to the kill. Every line has ``event`` and
``time`` (Unix seconds); protocol objects are kept as the protocol spells
them (camelCase, ``_meta``):

* ``started``: ``argv`` (the ACP agent's command), ``policy``, ``cwd``;
* ``initialized``: ``protocol_version``, ``agent`` (``agentInfo``: ``name``,
  ``title``, ``version``), ``auth_methods`` (their ids);
* ``session``: ``session_id``; ``mode``: ``mode`` (after ``--mode``);
* ``update``: ``update``, one ``session/update`` notification's update as
  sent (``sessionUpdate`` says which: ``agent_message_chunk``,
  ``agent_thought_chunk``, ``tool_call``, ``tool_call_update``, ``plan``,
  ``usage_update``...);
* ``permission``: ``tool_call`` and ``options`` as the agent asked,
  ``policy``, and ``chosen`` (the option answered, ``null`` when none fits
  and the request was answered ``cancelled``);
* ``result``: the turn's end: ``stop_reason``, ``usage`` (ACP's, when
  reported), ``meta`` (the response's ``_meta``, where some agents put usage);
* ``error``: ``stage`` (``client``, ``initialize``, ``authenticate``,
  ``session``, ``mode``, ``prompt``), ``message``, ``code``, ``data``.

Exit status: 0 when the turn ended (whatever its stop reason), 1 when the
protocol failed (an ``error`` line says how), 2 for bad arguments, 3 when the
``agent-client-protocol`` package is missing.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    # start-up: ``ksi run`` imports this module (for POLICIES) with any agent; only the
    # client itself, run as a program, needs argparse and asyncio (10 ms)
    import argparse
    import asyncio

#: The permission policies and the option kinds each answers with, in preference order.
POLICIES: dict[str, tuple[str, ...]] = {
    "allow": ("allow_once", "allow_always"),
    "allow-always": ("allow_always", "allow_once"),
    "deny": ("reject_once", "reject_always"),
}
#: What installs the protocol package (KSI's extra; a container's Python needs the package).
INSTALL_HINT = (
    "pip install 'ksi[acp]' (in a container image: pip install 'agent-client-protocol>=0.12.1')"
)
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NO_PACKAGE = 3
#: Largest protocol message read (an agent may send a whole file's diff in one update).
_STREAM_LIMIT = 64 * 1024 * 1024


class SessionLog:
    """The JSON-lines log of one session (see the module docstring)."""

    def __init__(self, fh: TextIO) -> None:
        self._fh = fh

    def write(self, event: str, **fields: Any) -> None:
        line = json.dumps({"event": event, "time": time.time(), **fields}, default=str)
        self._fh.write(line + "\n")
        self._fh.flush()


def _wire(model: Any) -> Any:
    """A protocol object as the protocol sends it (camelCase, no unset fields)."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _say(text: str) -> None:
    """A line for ``agent.stdout.log``, for a person reading the attempt."""
    print(text, flush=True)


class KsiClient:
    """The client side of the session: records every update, answers permission requests."""

    def __init__(self, log: SessionLog, policy: str) -> None:
        self.log = log
        self.policy = policy

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        """Keep the update as sent."""
        wire = _wire(update)
        self.log.write("update", update=wire)
        if wire.get("sessionUpdate") == "tool_call":
            _say(f"[tool] {wire.get('title', '')}")

    async def request_permission(
        self, options: list[Any], session_id: str, tool_call: Any, **kwargs: Any
    ) -> Any:
        """Answer with the option the policy prefers; ``cancelled`` when none is offered."""
        # optional: the protocol package (see converse)
        from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

        chosen = next(
            (o for kind in POLICIES[self.policy] for o in options if o.kind == kind), None
        )
        self.log.write(
            "permission",
            tool_call=_wire(tool_call),
            options=[_wire(o) for o in options],
            policy=self.policy,
            chosen=_wire(chosen) if chosen is not None else None,
        )
        title = getattr(tool_call, "title", None) or getattr(tool_call, "tool_call_id", "")
        _say(f"[permission] {chosen.kind if chosen else 'cancelled'}: {title}")
        if chosen is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(option_id=chosen.option_id, outcome="selected")
        )


async def converse(args: argparse.Namespace, log: SessionLog) -> int:
    """Start the ACP agent, hold one session with it, end it."""
    # optional: the protocol package (KSI's ``acp`` extra), imported only here
    from acp import spawn_agent_process

    with open(args.prompt_file, encoding="utf-8") as fh:
        prompt = fh.read()
    cwd = os.getcwd()
    argv = ["/bin/sh", "-c", args.cmd]
    log.write("started", argv=argv, policy=args.permission, cwd=cwd)
    # Typed Any: the protocol's Client also has file and terminal methods, which KSI does
    # not offer (nor advertise): the package answers those with "method not found".
    client: Any = KsiClient(log, args.permission)
    # stderr=None: the agent's stderr is ours (the attempt's agent.stderr.log); a pipe
    # nobody reads would stall a chatty agent.
    transport = {"stderr": None, "limit": _STREAM_LIMIT}
    async with spawn_agent_process(
        client, argv[0], *argv[1:], env=dict(os.environ), cwd=cwd, transport_kwargs=transport
    ) as (conn, proc):
        try:
            return await _turn(args, log, conn, proc, prompt, cwd)
        finally:
            # A process the agent started may still hold its stdout open: asyncio then
            # closes the pipe only at exit, after the loop ("Event loop is closed").
            pipes = getattr(proc, "_transport", None)
            if pipes is not None:
                pipes.close()


async def _turn(
    args: argparse.Namespace,
    log: SessionLog,
    conn: Any,
    proc: asyncio.subprocess.Process,
    prompt: str,
    cwd: str,
) -> int:
    """initialize, (authenticate), session/new, (session/set_mode), session/prompt."""
    # optional: the protocol package (see converse)
    from acp import PROTOCOL_VERSION, RequestError, text_block
    from acp.schema import ClientCapabilities, Implementation

    stage = "initialize"
    try:
        init = await conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(),
            client_info=Implementation(name="ksi", version=args.client_version),
        )
        log.write(
            "initialized",
            protocol_version=init.protocol_version,
            agent=_wire(init.agent_info) if init.agent_info else None,
            auth_methods=[m.id for m in init.auth_methods or [] if hasattr(m, "id")],
        )
        if args.auth:
            stage = "authenticate"
            await conn.authenticate(method_id=args.auth)
        stage = "session"
        session = await conn.new_session(cwd=cwd, mcp_servers=[])
        log.write("session", session_id=session.session_id)
        if args.mode:
            stage = "mode"
            await conn.set_session_mode(session_id=session.session_id, mode_id=args.mode)
            log.write("mode", mode=args.mode)
        stage = "prompt"
        result = await conn.prompt(session_id=session.session_id, prompt=[text_block(prompt)])
    except RequestError as exc:
        log.write("error", stage=stage, message=str(exc), code=exc.code, data=exc.data)
        print(f"ACP {stage} failed: {exc} {exc.data or ''}", file=sys.stderr)
        return EXIT_FAILED
    except ConnectionError:
        code = await _exit_code(proc)
        message = f"the ACP agent closed the connection during {stage} (exit code {code})"
        log.write("error", stage=stage, message=message, code=None, data=None)
        print(message, file=sys.stderr)
        return EXIT_FAILED
    log.write(
        "result",
        stop_reason=result.stop_reason,
        usage=_wire(result.usage) if result.usage else None,
        meta=result.field_meta,
    )
    _say(f"[end] {result.stop_reason}")
    return 0


async def _exit_code(proc: asyncio.subprocess.Process) -> int | None:
    """The agent's exit status, when it exits within a few seconds of closing the pipe."""
    import asyncio  # start-up: see the imports above

    done, _ = await asyncio.wait([asyncio.ensure_future(proc.wait())], timeout=5)
    return proc.returncode if done else None


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    import argparse  # start-up: see the imports above

    parser = argparse.ArgumentParser(
        prog="python -m ksi.agents.acp_client",
        description="Run one ACP agent session on a prompt and log it (KSI's acp agent).",
    )
    parser.add_argument("--log", required=True, help="the JSON-lines session log to write")
    parser.add_argument("--prompt-file", required=True, help="the prompt, a UTF-8 text file")
    parser.add_argument("--permission", choices=tuple(POLICIES), default="allow")
    parser.add_argument("--mode", default="", help="a session mode id to set (session/set_mode)")
    parser.add_argument("--auth", default="", help="an auth method id to authenticate with")
    parser.add_argument("--client-version", default="", help="what to tell the agent (KSI's)")
    parser.add_argument("cmd", help="the ACP agent's shell command (/bin/sh -c)")
    return parser.parse_args(list(argv))


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
    except SystemExit as exc:
        return EXIT_USAGE if exc.code else 0
    with open(args.log, "w", encoding="utf-8") as fh:
        log = SessionLog(fh)
        try:
            import acp  # noqa: F401  (the optional package: say so clearly when it is missing)
        except ImportError as exc:
            message = (
                f"the acp agent needs the agent-client-protocol package in {sys.executable} "
                f"({exc}); install it: {INSTALL_HINT}"
            )
            log.write("error", stage="client", message=message, code=None, data=None)
            print(message, file=sys.stderr)
            return EXIT_NO_PACKAGE
        import asyncio  # start-up: see the imports above

        return asyncio.run(converse(args, log))


if __name__ == "__main__":
    sys.exit(main())
