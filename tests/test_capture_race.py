"""Capture against a live attacker: a process swapping directories for symlinks while it reads.

The attack of issue 11: something the agent left running keeps exchanging a
directory of ``repo/`` with a symlink to a host directory (atomically, with
``renameat2(RENAME_EXCHANGE)``), hoping capture lists the directory, then
opens a path through it after the swap and copies host files (or, through
``/proc/self``, KSI's own environment with its API keys) into ``captured/``
and ``diff.patch``. The swapper here is a real concurrent process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

SECRET = "host-secret-5b0d7c1e"
ENV_SECRET = "sk-ksi-env-secret-9f3a"

#: Exchanges repo/<name> with repo/<name>.swap (a symlink) as fast as it can, until killed.
SWAPPER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
pairs = [(a.encode(), b.encode()) for a, b in zip(sys.argv[1::2], sys.argv[2::2])]
open(os.environ["READY"], "w").close()
n = 0
while True:
    for a, b in pairs:
        if libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) != 0:
            sys.exit("renameat2: " + os.strerror(ctypes.get_errno()))
    n += 1
"""

#: Captures (and diffs) the live repo over and over; reports what each capture saw.
CAPTURER = r"""
import json, os, sys
from pathlib import Path
from ksi.attempt.capture import capture_repo
from ksi.attempt.diff import write_diff
live, seed, out, rounds = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
secrets = [s.encode() for s in sys.argv[5:]]
leaks, saw_dir, saw_link = [], 0, 0
for i in range(rounds):
    dest = out / "captured" / "repo"
    capture_repo(live, seed, dest)
    write_diff(seed, dest, out / "diff.patch")
    for root, dirs, files in os.walk(dest):
        for name in files:
            path = os.path.join(root, name)
            if os.path.islink(path):
                continue
            data = open(path, "rb").read()
            if any(s in data for s in secrets) or name in ("secret.txt", "environ"):
                leaks.append(os.path.relpath(path, dest))
    patch = (out / "diff.patch").read_bytes() if (out / "diff.patch").exists() else b""
    if any(s in patch for s in secrets):
        leaks.append("diff.patch")
    saw_dir += (dest / "d" / "own.txt").is_file()
    saw_link += not (dest / "d").exists()
print(json.dumps({"leaks": leaks, "saw_dir": saw_dir, "saw_link": saw_link}))
"""


def _have_renameat2() -> bool:
    import ctypes

    return hasattr(ctypes.CDLL(None), "renameat2")


@pytest.mark.skipif(not _have_renameat2(), reason="libc without renameat2")
@pytest.mark.parametrize("target", ["host_dir", "proc_self"])
def test_capture_never_copies_through_a_directory_swapped_for_a_symlink(
    tmp_path: Path, target: str
) -> None:
    host = tmp_path / "host"
    host.mkdir()
    (host / "secret.txt").write_text(SECRET + "\n")
    (host / "own.txt").write_text(SECRET + "\n")  # the same name as the agent's file
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "README.md").write_text("seed\n")
    live = tmp_path / "workspace" / "repo"
    (live / "d").mkdir(parents=True)
    (live / "d" / "own.txt").write_text("agent work\n")
    (live / "d" / "sub").mkdir()
    (live / "d" / "sub" / "more.txt").write_text("more agent work\n")
    (live / "README.md").write_text("seed\n")
    # /proc/self, read by the capturing process, is KSI's own process: environ holds its keys.
    (live / "d.swap").symlink_to("/proc/self" if target == "proc_self" else host)
    (live / "f.txt").write_text("agent file\n")
    (live / "f.txt.swap").symlink_to(host / "secret.txt")
    ready = tmp_path / "ready"
    swapper = subprocess.Popen(
        [
            sys.executable,
            "-c",
            SWAPPER,
            str(live / "d"),
            str(live / "d.swap"),
            str(live / "f.txt"),
            str(live / "f.txt.swap"),
        ],
        env={**os.environ, "READY": str(ready)},
    )
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert swapper.poll() is None, "the swapper died"
            assert time.monotonic() < deadline, "the swapper never started"
            time.sleep(0.01)
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                CAPTURER,
                str(live),
                str(seed),
                str(tmp_path / "attempt"),
                "200",
                SECRET,
                ENV_SECRET,
            ],
            env={**os.environ, "KSI_TEST_API_KEY": ENV_SECRET},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert swapper.poll() is None, "the swapper stopped before capture finished"
    finally:
        swapper.kill()
        swapper.wait()
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["leaks"] == []
    # The race was real: captures saw the directory in place and saw the symlink in its place.
    assert seen["saw_dir"] > 0 and seen["saw_link"] > 0, seen
