"""Run a command next to a MockModel, both inside one network namespace when asked.

``python -m mockmodel.launch SCRIPT LOG -- COMMAND...`` loads the pickled
:class:`LaunchSpec` from SCRIPT, starts a :class:`~.server.MockModel` serving
it, replaces ``{mock_url}`` in COMMAND with the server's URL, runs COMMAND,
and pickles what the server saw (:class:`LaunchLog`) to LOG. Started as
``unshare -n python -m mockmodel.launch ...`` it first brings the new
namespace's loopback up: the mock and everything COMMAND starts (``ksi run``,
the agent CLI, bubblewrap) then share a network with only 127.0.0.1 in it, so
a CLI that tried to reach its real provider (or any other host) would fail
instead of leaving the machine.
"""

from __future__ import annotations

import fcntl
import os
import pickle
import socket
import struct
import subprocess
import sys
from pathlib import Path

import attrs

from .server import EXHAUSTED, MockModel, Request, Served, Step

_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1


@attrs.frozen
class LaunchSpec:
    script: tuple[Step, ...]
    then: Step = EXHAUSTED
    port: int = 0


@attrs.frozen
class LaunchLog:
    served: tuple[Served, ...]
    requests: tuple[Request, ...]
    #: Interfaces of the namespace the command ran in (``lo`` alone under ``unshare -n``).
    interfaces: tuple[str, ...]


def loopback_up() -> None:
    """Set ``lo`` up (a new network namespace starts with it down)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifreq = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, _SIOCGIFFLAGS, ifreq))[1]
        if not flags & _IFF_UP:
            fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | _IFF_UP))


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: python -m mockmodel.launch SCRIPT LOG -- COMMAND...", file=sys.stderr)
        return 2
    spec_path, log_path, command = Path(argv[0]), Path(argv[1]), argv[3:]
    spec: LaunchSpec = pickle.loads(spec_path.read_bytes())
    loopback_up()
    with MockModel(spec.script, then=spec.then, port=spec.port) as mock:
        args = [a.replace("{mock_url}", mock.url) for a in command]
        env = {k: v.replace("{mock_url}", mock.url) for k, v in os.environ.items()}
        rc = subprocess.call(args, env=env)
        log = LaunchLog(
            tuple(mock.model_calls()),
            tuple(mock.requests),
            tuple(name for _, name in socket.if_nameindex()),
        )
    log_path.write_bytes(pickle.dumps(log))
    return rc


if __name__ == "__main__":
    # Through the package, so the pickled log names mockmodel.launch.LaunchLog, not __main__'s.
    from mockmodel.launch import main as package_main

    sys.exit(package_main(sys.argv[1:]))
