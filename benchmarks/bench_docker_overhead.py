"""Per-attempt overhead of KSI's ``docker`` environment against a bare ``docker run --rm``.

One KSI attempt costs ``start`` (create + start, through the Engine API socket
when it is the CLI's daemon, else ``docker run -d``) + ``exec true`` (``docker
exec``) + ``halt`` (stop the container before capture) + ``stop`` (remove it);
the baseline is ``docker run --rm IMAGE true``, the least any
container-per-attempt design can pay. Both loops run in the same process,
interleaved, so engine warm-up and machine load hit both alike. Target: ratio <= 1.3.

    python benchmarks/bench_docker_overhead.py [--iterations 20] [--image ksi-test/busybox]
    KSI_DOCKER_API=0 python benchmarks/bench_docker_overhead.py   # the CLI-only path (podman's)

Needs a running Docker engine and the image (``.ci/build-test-images.sh``).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from ksi.environments.docker import DockerEnvironment
from ksi.environments.images import default_docker_binary
from ksi.interfaces import AttemptContext, Invocation
from ksi.models import TaskSpec


def bare_run(binary: str, image: str) -> float:
    started = time.perf_counter()
    subprocess.run([binary, "run", "--rm", image, "true"], check=True, capture_output=True)
    return time.perf_counter() - started


def ksi_attempt(env: DockerEnvironment, task: TaskSpec, root: Path, n: int) -> float:
    workspace = root / f"a{n}" / "workspace"
    (workspace / "repo").mkdir(parents=True)
    ctx = AttemptContext("bench-" + uuid.uuid4().hex[:8], task, n, workspace.parent, workspace, {})
    started = time.perf_counter()
    handle = env.start(ctx)
    try:
        res = handle.exec(
            Invocation(("true",)),
            timeout=60,
            stdout_path=workspace.parent / "out.log",
            stderr_path=workspace.parent / "err.log",
            log_cap_bytes=1 << 20,
        )
        handle.halt()  # an attempt halts the container before capture
    finally:
        handle.stop()
    elapsed = time.perf_counter() - started
    if res.exit_code != 0:
        sys.exit(f"exec failed: {res}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--image", default="ksi-test/busybox:latest")
    args = parser.parse_args()
    binary = default_docker_binary()
    env = DockerEnvironment(image=args.image, network="bridge")
    task = TaskSpec(id="bench")
    env.prepare([task])
    bare: list[float] = []
    ksi: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        bare_run(binary, args.image)  # warm-up, not counted
        ksi_attempt(env, task, Path(tmp), -1)
        for n in range(args.iterations):
            bare.append(bare_run(binary, args.image))
            ksi.append(ksi_attempt(env, task, Path(tmp), n))
    b, k = statistics.median(bare), statistics.median(ksi)
    api = "Engine API socket" if env._engine_api() is not None else "CLI only"
    print(f"iterations: {args.iterations}, image: {args.image}, engine: {binary} ({api})")
    rows = (("bare `docker run --rm IMAGE true`", bare), ("ksi start+exec+halt+stop", ksi))
    for label, xs in rows:
        med, mean = statistics.median(xs) * 1000, statistics.mean(xs) * 1000
        print(f"{label:36s} median {med:5.0f} ms  mean {mean:5.0f} ms")
    ratio = k / b
    print(f"ratio (median): {ratio:.2f}x (target <= 1.3x): {'OK' if ratio <= 1.3 else 'OVER'}")


if __name__ == "__main__":
    main()
