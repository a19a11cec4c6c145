"""Capture on real trees: what an agent leaves behind vs. what gets graded."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ksi.attempt.capture import (
    DEFAULT_MAX_FILE_BYTES,
    CaptureReport,
    capture_repo,
    remove_tree,
)
from ksi.protected_files import ProtectRule


@pytest.fixture
def trees(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A seed repo, the live repo seeded from it, and where capture writes."""
    seed = tmp_path / "seeds" / "t1" / "repo"
    (seed / "src").mkdir(parents=True)
    (seed / "tests").mkdir()
    (seed / "src" / "app.py").write_text("def add(a, b):\n    return 0\n")
    (seed / "tests" / "test_app.py").write_text("from src.app import add\nassert add(1, 2) == 3\n")
    (seed / "tests" / "conftest.py").write_text("# fixtures\n")
    (seed / "run_tests.sh").write_text("#!/bin/sh\npython tests/test_app.py\n")
    (seed / "run_tests.sh").chmod(0o755)
    (seed / "README.md").write_text("# t1\n")
    live = tmp_path / "attempt" / "workspace" / "repo"
    shutil.copytree(seed, live, symlinks=True)
    return seed, live, tmp_path / "attempt" / "captured" / "repo"


def skipped_map(report: CaptureReport) -> dict[str, str]:
    return {s.path: s.reason for s in report.skipped}


def test_untouched_repo_is_copied_whole_with_modes(trees: tuple[Path, Path, Path]) -> None:
    seed, live, dest = trees
    report = capture_repo(live, seed, dest)
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()) == [
        "README.md",
        "run_tests.sh",
        "src/app.py",
        "tests/conftest.py",
        "tests/test_app.py",
    ]
    assert os.access(dest / "run_tests.sh", os.X_OK)
    assert report.skipped == ()
    assert report.restored == ()
    assert report.files_copied == 5
    assert report.bytes_copied == sum(p.stat().st_size for p in dest.rglob("*") if p.is_file())


def test_agent_work_is_kept(trees: tuple[Path, Path, Path]) -> None:
    seed, live, dest = trees
    (live / "src" / "app.py").write_text("def add(a, b):\n    return a + b\n")
    (live / "src" / "new_module.py").write_text("X = 1\n")
    (live / "README.md").unlink()  # deleting a non-test file is the agent's call
    # "test" inside a name is not a test file (issue 15: an oracle's greatest.py scored 0).
    for name in ("greatest.py", "latest.py", "contest.py", "attestation.py", "LATEST.md"):
        (live / "src" / name).write_text(f"# {name}\n")
    report = capture_repo(live, seed, dest)
    assert (dest / "src" / "app.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert (dest / "src" / "new_module.py").read_text() == "X = 1\n"
    for name in ("greatest.py", "latest.py", "contest.py", "attestation.py", "LATEST.md"):
        assert (dest / "src" / name).read_text() == f"# {name}\n"
    assert not (dest / "README.md").exists()
    assert report.skipped == ()


def test_edited_and_deleted_test_files_are_restored_from_the_seed(
    trees: tuple[Path, Path, Path],
) -> None:
    seed, live, dest = trees
    (live / "tests" / "test_app.py").write_text("assert True  # tampered\n")
    (live / "tests" / "conftest.py").unlink()
    report = capture_repo(live, seed, dest)
    assert (dest / "tests" / "test_app.py").read_text() == (
        seed / "tests" / "test_app.py"
    ).read_text()
    assert (dest / "tests" / "conftest.py").read_text() == "# fixtures\n"
    assert set(report.restored) == {"tests/test_app.py", "tests/conftest.py"}
    assert "edited by the agent" in skipped_map(report)["tests/test_app.py"]


def test_new_files_that_look_like_tests_are_dropped_and_listed(
    trees: tuple[Path, Path, Path],
) -> None:
    seed, live, dest = trees
    dropped = (
        "tests/test_extra.py",
        "tests/helpers.py",  # anything under a tests/ directory
        "src/__tests__/app.js",
        "spec/app_spec.rb",
        "src/test/Main.java",
        "src/test_more.py",
        "src/app_test.go",
        "src/app.test.ts",
        "src/app_spec.rb",
        "src/app.spec.js",
        "src/conftest.py",
        "Tests.py",
        "src/Test_Upper.py",  # conventions in any letter case
    )
    for rel in dropped:
        (live / rel).parent.mkdir(parents=True, exist_ok=True)
        (live / rel).write_text("assert True\n")
    report = capture_repo(live, seed, dest)
    skipped = skipped_map(report)
    for rel in dropped:
        assert not (dest / rel).exists(), rel
        assert "looks like a test" in skipped[rel] and "created by the agent" in skipped[rel]
    assert report.skipped_counts == {"test_created": len(dropped)}


def test_deleted_seed_test_file_is_listed_as_restored(trees: tuple[Path, Path, Path]) -> None:
    seed, live, dest = trees
    (live / "tests" / "conftest.py").unlink()
    report = capture_repo(live, seed, dest)
    assert (dest / "tests" / "conftest.py").read_text() == "# fixtures\n"
    assert skipped_map(report) == {
        "tests/conftest.py": "test file deleted by the agent: seed version restored"
    }


def test_protect_globs_add_files_the_conventions_miss(trees: tuple[Path, Path, Path]) -> None:
    """run_tests.sh is no test by convention: a task or run protects it with a glob."""
    seed, live, dest = trees
    (live / "run_tests.sh").write_text("#!/bin/sh\nexit 0\n")  # the agent games the eval
    (live / "golden").mkdir()
    (live / "golden" / "new.out").write_text("forged\n")
    unprotected = capture_repo(live, seed, dest)
    assert (dest / "run_tests.sh").read_text() == "#!/bin/sh\nexit 0\n"
    assert (dest / "golden" / "new.out").exists() and unprotected.skipped == ()

    report = capture_repo(live, seed, dest, protect=ProtectRule(("run_tests.sh", "golden/*")))
    assert (dest / "run_tests.sh").read_text() == (seed / "run_tests.sh").read_text()
    assert not (dest / "golden" / "new.out").exists()
    skipped = skipped_map(report)
    assert "edited by the agent" in skipped["run_tests.sh"]
    assert "matches the protect glob 'golden/*'" in skipped["golden/new.out"]


def test_directory_named_like_a_test_file_cannot_shadow_it(
    trees: tuple[Path, Path, Path],
) -> None:
    seed, live, dest = trees
    (live / "tests" / "test_app.py").unlink()
    (live / "tests" / "test_app.py").mkdir()
    (live / "tests" / "test_app.py" / "x.py").write_text("pass\n")
    report = capture_repo(live, seed, dest)
    assert (dest / "tests" / "test_app.py").read_text() == (
        seed / "tests" / "test_app.py"
    ).read_text()
    assert "tests/test_app.py" in report.restored


def test_symlinked_test_dir_cannot_redirect_restored_files(
    trees: tuple[Path, Path, Path],
) -> None:
    seed, live, dest = trees
    (live / "elsewhere").mkdir()
    shutil.rmtree(live / "tests")
    (live / "tests").symlink_to("elsewhere")
    report = capture_repo(live, seed, dest)
    assert not (dest / "tests").is_symlink()
    assert (dest / "tests" / "test_app.py").read_text() == (
        seed / "tests" / "test_app.py"
    ).read_text()
    assert list((dest / "elsewhere").iterdir()) == []
    assert "tests" in skipped_map(report)


def test_score_json_is_dropped_everywhere(trees: tuple[Path, Path, Path]) -> None:
    seed, live, dest = trees
    (live / "score.json").write_text('{"score": 1.0}')
    (live / "src" / "score.json").write_text('{"score": 1.0}')
    report = capture_repo(live, seed, dest)
    assert not (dest / "score.json").exists()
    assert not (dest / "src" / "score.json").exists()
    skipped = skipped_map(report)
    assert "score.json" in skipped["score.json"]
    assert "src/score.json" in skipped


def test_symlinks_out_of_the_workspace_are_not_followed(
    trees: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    seed, live, dest = trees
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("host secret\n")
    (live / "passwd").symlink_to("/etc/passwd")
    (live / "src" / "secret.txt").symlink_to(secret)
    (live / "src" / "up.txt").symlink_to("../../../../outside/secret.txt")
    (live / "outdir").symlink_to(secret.parent, target_is_directory=True)
    report = capture_repo(live, seed, dest)
    skipped = skipped_map(report)
    for rel in ("passwd", "src/secret.txt", "src/up.txt", "outdir"):
        assert not os.path.lexists(dest / rel), rel
        assert "outside repo/" in skipped[rel]
    found = [p for p in dest.rglob("*") if p.is_file() and "host secret" in p.read_text()]
    assert found == []


def test_symlinks_inside_the_repo_are_kept_as_relative_links(
    trees: tuple[Path, Path, Path],
) -> None:
    seed, live, dest = trees
    (live / "docs").mkdir()
    (live / "docs" / "app_link.py").symlink_to("../src/app.py")
    (live / "abs_link.py").symlink_to(live / "src" / "app.py")  # absolute, but inside
    (live / "srcdir").symlink_to("src", target_is_directory=True)
    report = capture_repo(live, seed, dest)
    assert os.readlink(dest / "docs" / "app_link.py") == "../src/app.py"
    assert os.readlink(dest / "abs_link.py") == "src/app.py"
    assert os.readlink(dest / "srcdir") == "src"
    assert (dest / "abs_link.py").read_text() == (dest / "src" / "app.py").read_text()
    assert report.symlinks_kept == 3
    assert report.skipped == ()


def test_dangling_and_looping_symlinks_are_listed(trees: tuple[Path, Path, Path]) -> None:
    seed, live, dest = trees
    (live / "dangling").symlink_to("does-not-exist")
    (live / "loop_a").symlink_to("loop_b")
    (live / "loop_b").symlink_to("loop_a")
    report = capture_repo(live, seed, dest)
    skipped = skipped_map(report)
    assert "dangling" in skipped["dangling"]
    assert "loop" in skipped["loop_a"]
    assert "loop" in skipped["loop_b"]
    assert not any(os.path.lexists(dest / n) for n in ("dangling", "loop_a", "loop_b"))


def test_oversized_file_is_skipped_and_listed_with_its_size(
    trees: tuple[Path, Path, Path],
) -> None:
    seed, live, dest = trees
    big = live / "data" / "huge.bin"
    big.parent.mkdir()
    with open(big, "wb") as fh:
        fh.truncate(50 * 1024 * 1024)  # sparse: no 50 MB written to disk
    report = capture_repo(live, seed, dest)
    assert not (dest / "data" / "huge.bin").exists()
    (entry,) = [s for s in report.skipped if s.path == "data/huge.bin"]
    assert entry.size == 50 * 1024 * 1024
    assert str(DEFAULT_MAX_FILE_BYTES) in entry.reason


def test_size_limit_is_inclusive(trees: tuple[Path, Path, Path]) -> None:
    seed, live, dest = trees
    (live / "exact.txt").write_bytes(b"x" * 100)
    (live / "over.txt").write_bytes(b"x" * 101)
    report = capture_repo(live, seed, dest, max_file_bytes=100)
    assert (dest / "exact.txt").read_bytes() == b"x" * 100
    assert not (dest / "over.txt").exists()
    assert skipped_map(report).keys() == {"over.txt"}


def test_many_files_are_all_captured(trees: tuple[Path, Path, Path]) -> None:
    seed, live, dest = trees
    for i in range(2000):
        sub = live / "gen" / f"d{i % 20}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"f{i}.txt").write_text(f"{i}\n")
    report = capture_repo(live, seed, dest)
    copied = [p for p in (dest / "gen").rglob("*.txt")]
    assert len(copied) == 2000
    assert (dest / "gen" / "d7" / "f1987.txt").read_text() == "1987\n"
    assert report.files_copied == 2005


def test_bytecode_noise_is_dropped_without_listing(trees: tuple[Path, Path, Path]) -> None:
    seed, live, dest = trees
    (live / "src" / "__pycache__").mkdir()
    (live / "src" / "__pycache__" / "app.cpython-311.pyc").write_bytes(b"\x00bytecode")
    (live / "stray.pyc").write_bytes(b"\x00")
    report = capture_repo(live, seed, dest)
    assert not (dest / "src" / "__pycache__").exists()
    assert not (dest / "stray.pyc").exists()
    assert report.noise_dropped == 2
    assert report.skipped == ()


def test_fifo_and_socket_are_skipped(trees: tuple[Path, Path, Path]) -> None:
    seed, live, dest = trees
    os.mkfifo(live / "pipe")
    report = capture_repo(live, seed, dest)  # would hang if it opened the fifo blocking
    assert not os.path.lexists(dest / "pipe")
    assert "fifo" in skipped_map(report)["pipe"]


def test_missing_live_repo_yields_only_the_seed_test_files(
    trees: tuple[Path, Path, Path],
) -> None:
    seed, live, dest = trees
    shutil.rmtree(live)
    report = capture_repo(live, seed, dest)
    files = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert files == ["tests/conftest.py", "tests/test_app.py"]  # run_tests.sh: no test name
    assert report.repo_missing
    assert "repo/ missing" in skipped_map(report)["."]


def test_live_repo_replaced_by_a_symlink_is_not_followed(
    trees: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    seed, live, dest = trees
    shutil.rmtree(live)
    outside = tmp_path / "outside_repo"
    outside.mkdir()
    (outside / "loot.txt").write_text("not yours\n")
    live.symlink_to(outside, target_is_directory=True)
    report = capture_repo(live, seed, dest)
    assert not (dest / "loot.txt").exists()
    assert report.repo_missing
    assert "symlink" in skipped_map(report)["."]


def test_non_utf8_names_are_captured_and_listed_readably(
    trees: tuple[Path, Path, Path],
) -> None:
    seed, live, dest = trees
    live_b = os.fsencode(live)
    with open(os.path.join(live_b, b"caf\xe9.txt"), "wb") as fh:
        fh.write(b"latin-1 name\n")
    with open(os.path.join(live_b, b"test_\xff.py"), "wb") as fh:
        fh.write(b"assert True\n")
    report = capture_repo(live, seed, dest)
    assert os.path.exists(os.path.join(os.fsencode(dest), b"caf\xe9.txt"))
    assert "created by the agent" in skipped_map(report)["test_\\xff.py"]
    json.dumps([s.path for s in report.skipped]).encode("utf-8")  # journal-safe text


def test_deep_nesting_is_captured_and_removable(trees: tuple[Path, Path, Path]) -> None:
    seed, live, dest = trees
    try:
        deep = str(live)
        for _ in range(1200):  # deeper than Python's recursion limit
            deep = os.path.join(deep, "d")
            os.mkdir(deep)
        Path(deep, "leaf.txt").write_text("bottom\n")
        capture_repo(live, seed, dest)
        leaf = Path(dest, *["d"] * 1200, "leaf.txt")
        assert leaf.read_text() == "bottom\n"
        remove_tree(dest)
        assert not dest.exists()
    finally:  # pytest's own tmp cleanup recurses and would choke on this tree
        remove_tree(live)
        remove_tree(dest)


def test_existing_destination_is_replaced(trees: tuple[Path, Path, Path]) -> None:
    seed, live, dest = trees
    dest.mkdir(parents=True)
    (dest / "leftover.txt").write_text("from an earlier try\n")
    capture_repo(live, seed, dest)
    assert not (dest / "leftover.txt").exists()
    assert (dest / "src" / "app.py").exists()


_CHILD = """
import json, sys
from pathlib import Path
from ksi.attempt.capture import capture_repo, remove_tree
live, seed, dest = map(Path, sys.argv[1:4])
report = capture_repo(live, seed, dest)
out = {"skipped": {s.path: s.reason for s in report.skipped},
       "files": sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())}
remove_tree(live)  # a wipe of a tree holding a 000 directory
out["live_removed"] = not live.exists()
print(json.dumps(out))
"""


def _unprivileged() -> list[str]:
    """Argv prefix that makes permission bits bind (root reads everything otherwise)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: cannot make a directory unreadable")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search"]


def test_unreadable_directory_is_listed_and_does_not_stop_capture(tmp_path: Path) -> None:
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "test_x.py").write_text("assert True\n")
    live = tmp_path / "live"
    live.mkdir()
    (live / "test_x.py").write_text("assert True\n")
    (live / "ok.txt").write_text("fine\n")
    (live / "locked").mkdir()
    (live / "locked" / "inner.txt").write_text("hidden\n")
    (live / "locked_file.txt").write_text("no read\n")
    (live / "locked").chmod(0o000)
    (live / "locked_file.txt").chmod(0o000)
    argv = [*_unprivileged(), sys.executable, "-c", _CHILD]
    proc = subprocess.run(
        [*argv, str(live), str(seed), str(tmp_path / "dest")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert "unreadable directory" in out["skipped"]["locked"]
    assert "unreadable file" in out["skipped"]["locked_file.txt"]
    assert out["files"] == ["ok.txt", "test_x.py"]
    assert out["live_removed"]


def test_negative_limit_is_rejected(trees: tuple[Path, Path, Path]) -> None:
    seed, live, dest = trees
    with pytest.raises(ValueError, match="max_file_bytes"):
        capture_repo(live, seed, dest, max_file_bytes=-1)


def test_copy_tree_keeps_links_modes_and_nesting(tmp_path: Path) -> None:
    from ksi.attempt.capture import copy_tree

    src = tmp_path / "src"
    (src / "a" / "b").mkdir(parents=True)
    (src / "a" / "b" / "deep.txt").write_text("deep")
    script = src / "run.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o755)
    (src / "link").symlink_to("a/b/deep.txt")
    (src / "empty").mkdir()
    copy_tree(src, tmp_path / "dst")
    dst = tmp_path / "dst"
    assert (dst / "a" / "b" / "deep.txt").read_text() == "deep"
    assert (dst / "run.sh").stat().st_mode & 0o777 == 0o755
    assert os.readlink(dst / "link") == "a/b/deep.txt"
    assert (dst / "empty").is_dir()
    with pytest.raises(FileExistsError):
        copy_tree(src, dst)


_CHILD_ROOT = """
import json, sys
from pathlib import Path
from ksi.attempt.capture import capture_repo
live, seed, dest = map(Path, sys.argv[1:4])
report = capture_repo(live, seed, dest)
files = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
print(json.dumps({"skipped": {s.path: s.reason for s in report.skipped},
                  "missing": report.repo_missing, "unreadable": report.repo_unreadable,
                  "counts": report.skipped_counts, "files": files}))
"""


def test_unreadable_live_repo_is_reported_as_unreadable_not_deleted(tmp_path: Path) -> None:
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "test_x.py").write_text("assert True\n")
    live = tmp_path / "live"
    live.mkdir()
    (live / "work.py").write_text("x = 1\n")
    live.chmod(0o000)
    args = [str(live), str(seed), str(tmp_path / "dest")]
    try:
        proc = subprocess.run(
            [*_unprivileged(), sys.executable, "-c", _CHILD_ROOT, *args],
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        live.chmod(0o755)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    reason = out["skipped"]["."]
    assert "unreadable" in reason and "Permission denied" in reason and "0000" in reason
    assert "deleted" not in reason and "missing" not in reason
    assert out["unreadable"] and not out["missing"]
    assert out["counts"] == {"repo_unreadable": 1}
    assert out["files"] == ["test_x.py"]


def test_unreadable_workspace_is_reported_as_such_not_as_a_deleted_repo(tmp_path: Path) -> None:
    """``chmod 000`` on the workspace (repo/'s parent) keeps capture out of an intact repo/."""
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "test_x.py").write_text("assert True\n")
    workspace = tmp_path / "workspace"
    live = workspace / "repo"
    live.mkdir(parents=True)
    (live / "work.py").write_text("x = 1\n")
    workspace.chmod(0o000)
    args = [str(live), str(seed), str(tmp_path / "dest")]
    try:
        proc = subprocess.run(
            [*_unprivileged(), sys.executable, "-c", _CHILD_ROOT, *args],
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        workspace.chmod(0o755)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    reason = out["skipped"]["."]
    assert "unreadable" in reason and "Permission denied" in reason, reason
    assert "permissions of its workspace" in reason and "mode 0000" in reason, reason
    assert "deleted" not in reason and "missing" not in reason
    assert out["unreadable"] and not out["missing"]
    assert out["counts"] == {"repo_unreadable": 1}
    assert out["files"] == ["test_x.py"]


def test_deleted_workspace_is_named_in_the_reason(trees: tuple[Path, Path, Path]) -> None:
    seed, live, dest = trees
    shutil.rmtree(live.parent)
    report = capture_repo(live, seed, dest)
    reason = skipped_map(report)["."]
    assert "the agent deleted its workspace" in reason, reason
    assert report.repo_missing and not report.repo_unreadable
    assert report.skipped_counts == {"repo_missing": 1}
    files = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert files == ["tests/conftest.py", "tests/test_app.py"]


def test_workspace_swapped_for_a_symlink_is_not_followed(
    trees: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """repo/ would otherwise be read from wherever the link points."""
    seed, live, dest = trees
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "repo").mkdir(parents=True)
    (elsewhere / "repo" / "loot.txt").write_text("not yours\n")
    shutil.rmtree(live.parent)
    live.parent.symlink_to(elsewhere, target_is_directory=True)
    report = capture_repo(live, seed, dest)
    reason = skipped_map(report)["."]
    assert "replaced its workspace" in reason and "symlink (not followed)" in reason, reason
    assert not (dest / "loot.txt").exists()
    assert report.repo_missing


def test_skipped_list_is_capped_but_every_skip_is_counted(
    trees: tuple[Path, Path, Path],
) -> None:
    from ksi.attempt.capture import MAX_LISTED_SKIPS

    seed, live, dest = trees
    planted = live / "planted"
    planted.mkdir()
    for i in range(MAX_LISTED_SKIPS + 300):
        (planted / f"test_{i:05d}.py").write_text("assert True\n")
    (live / "passwd").symlink_to("/etc/passwd")
    report = capture_repo(live, seed, dest)
    assert len(report.skipped) == MAX_LISTED_SKIPS
    assert report.skipped_counts == {"symlink_outside": 1, "test_created": MAX_LISTED_SKIPS + 300}
    assert report.skipped_total == MAX_LISTED_SKIPS + 301
    listed = [s.path for s in report.skipped]
    assert listed == sorted(listed) and listed[0] == "passwd"


_CHILD_FEW_FDS = """
import resource, sys
from pathlib import Path
from ksi.attempt.capture import capture_repo, remove_tree
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
live, seed, dest = map(Path, sys.argv[1:4])
report = capture_repo(live, seed, dest)
assert report.skipped == (), report.skipped
leaf = Path(dest, *["d"] * 1200, "leaf.txt")
assert leaf.read_text() == "bottom\\n", leaf
remove_tree(dest)
print("ok")
"""


def test_deep_nesting_is_captured_with_few_file_descriptors(
    trees: tuple[Path, Path, Path],
) -> None:
    seed, live, dest = trees
    try:
        deep = str(live)
        for _ in range(1200):
            deep = os.path.join(deep, "d")
            os.mkdir(deep)
        Path(deep, "leaf.txt").write_text("bottom\n")
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD_FEW_FDS, str(live), str(seed), str(dest)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert proc.stdout.strip() == "ok"
    finally:
        remove_tree(live)
        remove_tree(dest)
