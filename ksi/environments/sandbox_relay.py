"""The sandbox's half of the network relay: run *inside* bubblewrap, stdlib only.

``python -I -S sandbox_relay.py DIR ADDR:PORT=SOCKET... -- ARGV...`` listens on
``ADDR:PORT`` (a loopback address) for each pair (inside the sandbox's own network
namespace, which holds nothing but loopback), starts ``ARGV`` (the agent),
and copies each connection to the Unix socket ``DIR/SOCKET``, where KSI's
host-side relay (:mod:`ksi.environments.sandbox_net`) connects only to the
endpoint the agent declared. It exits with the agent's status when the
agent ends: the sandbox's PID namespace, and every connection, end with it.

The host answers each connection with one line first: ``OK`` or
``NO <why>``; a refusal is written to stderr (the agent's log), so the user
sees why the agent could not connect. Run with ``-I -S``: no site-packages,
no ``PYTHON*`` variables, nothing from the agent's environment. This file
must import nothing from KSI (it runs under KSI's bare interpreter, with the
KSI package itself possibly hidden).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading

_CHUNK = 65536


def _pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy ``src`` to ``dst`` until EOF; then half-close ``dst``."""
    try:
        while True:
            data = src.recv(_CHUNK)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


def _status_line(host: socket.socket) -> bytes:
    """The host's first line (``OK`` / ``NO <why>``), byte by byte: nothing after it is read."""
    line = b""
    while not line.endswith(b"\n") and len(line) < 4096:
        byte = host.recv(1)
        if not byte:
            break
        line += byte
    return line


def _serve(client: socket.socket, path: str) -> None:
    host = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        host.connect(path)
        # The client speaks first through the proxy (its CONNECT), before the host's answer.
        upstream = threading.Thread(target=_pump, args=(client, host), daemon=True)
        upstream.start()
        status = _status_line(host)
        if status.startswith(b"NO "):
            sys.stderr.write(status[3:].decode("utf-8", "replace"))
            sys.stderr.flush()
        _pump(host, client)
        upstream.join()
    except OSError as exc:
        sys.stderr.write(f"sandbox: the network relay failed: {exc}\n")
    finally:
        host.close()
        client.close()


def _accept(listener: socket.socket, path: str) -> None:
    while True:
        client, _ = listener.accept()
        threading.Thread(target=_serve, args=(client, path), daemon=True).start()


def main(args: list[str]) -> int:
    split = args.index("--")
    directory, pairs, argv = args[0], args[1:split], args[split + 1 :]
    for pair in pairs:
        address, name = pair.rsplit("=", 1)
        addr, _, port = address.rpartition(":")
        family = socket.AF_INET6 if ":" in addr else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((addr.strip("[]"), int(port)))
        listener.listen(64)
        path = os.path.join(directory, name)
        threading.Thread(target=_accept, args=(listener, path), daemon=True).start()
    # The agent must not inherit KSI's choice to ignore these.
    for sig in (signal.SIGINT, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    try:
        child = subprocess.Popen(argv)
    except OSError as exc:
        sys.stderr.write(f"sandbox: cannot start {argv[0]}: {exc}\n")
        return 127
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: child.send_signal(signum))
    code = child.wait()
    if code < 0:  # killed by a signal: end the same way, so bwrap reports it as before
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


if __name__ == "__main__":
    sys.stdout.flush()
    os._exit(main(sys.argv[1:]))
