"""diff.patch on real trees: readable, git-compatible, bounded."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ksi.attempt.diff import MAX_TEXT_DIFF_BYTES, TRUNCATION_MARK, DiffStats, write_diff


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    seed = tmp_path / "seed"
    (seed / "src").mkdir(parents=True)
    (seed / "src" / "app.py").write_text("def add(a, b):\n    return 0\n\n\nX = 1\n")
    (seed / "old.txt").write_text("to be removed\n")
    (seed / "same.txt").write_text("unchanged\n")
    (seed / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00old")
    captured = tmp_path / "captured"
    shutil.copytree(seed, captured, symlinks=True)
    return seed, captured


def test_added_removed_modified_and_binary(pair: tuple[Path, Path], tmp_path: Path) -> None:
    seed, captured = pair
    (captured / "src" / "app.py").write_text("def add(a, b):\n    return a + b\n\n\nX = 1\n")
    (captured / "old.txt").unlink()
    (captured / "src" / "new.py").write_text("Y = 2\nZ = 3\n")
    (captured / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00new")
    out = tmp_path / "diff.patch"
    stats = write_diff(seed, captured, out)
    text = out.read_text()
    assert stats == DiffStats(files_changed=4, insertions=3, deletions=2)
    assert "diff --git a/src/app.py b/src/app.py\n" in text
    assert "--- a/src/app.py\n+++ b/src/app.py\n" in text
    assert "-    return 0\n+    return a + b\n" in text
    assert "deleted file mode 100644\n--- a/old.txt\n+++ /dev/null\n" in text
    assert "-to be removed\n" in text
    assert "new file mode 100644\n--- /dev/null\n+++ b/src/new.py\n@@ -0,0 +1,2 @@\n" in text
    assert "Binary files a/logo.png and b/logo.png differ\n" in text
    assert "same.txt" not in text


def test_identical_trees_write_no_patch(pair: tuple[Path, Path], tmp_path: Path) -> None:
    """Nothing changed, no file (an empty diff.patch would be one inode per attempt for
    nothing); a patch left there by an earlier diff does not stand for this one."""
    seed, captured = pair
    out = tmp_path / "diff.patch"
    out.write_text("diff --git a/stale b/stale\n")
    assert write_diff(seed, captured, out) == DiffStats(0, 0, 0)
    assert not out.exists()


def test_git_apply_reproduces_the_captured_tree(pair: tuple[Path, Path], tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    seed, captured = pair
    (captured / "logo.png").unlink()  # git cannot apply a binary diff without full blobs
    (seed / "logo.png").unlink()
    (captured / "src" / "app.py").write_text("def add(a, b):\n    return a + b")  # no final \n
    (captured / "empty.txt").write_text("")
    (captured / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (captured / "run.sh").chmod(0o755)
    (captured / "same.txt").chmod(0o755)  # mode-only change
    (captured / "ff.txt").write_text("page one\fstill line one\nline two\n")
    (captured / "link").symlink_to("src/app.py")
    (captured / "old.txt").unlink()
    out = tmp_path / "diff.patch"
    write_diff(seed, captured, out)
    assert "\\ No newline at end of file\n" in out.read_text()
    work = tmp_path / "work"
    shutil.copytree(seed, work, symlinks=True)
    proc = subprocess.run(
        ["git", "apply", "--whitespace=nowarn", str(out)],
        cwd=work,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr + out.read_text()
    for path in captured.rglob("*"):
        rel = path.relative_to(captured)
        if path.is_symlink():
            assert os.readlink(work / rel) == os.readlink(path)
        elif path.is_file():
            assert (work / rel).read_bytes() == path.read_bytes(), rel
            assert os.access(work / rel, os.X_OK) == os.access(path, os.X_OK), rel
    assert not (work / "old.txt").exists()


def test_invalid_utf8_is_replaced_and_bytecode_ignored(
    pair: tuple[Path, Path], tmp_path: Path
) -> None:
    seed, captured = pair
    (captured / "latin1.txt").write_bytes(b"caf\xe9\n")
    (captured / "__pycache__").mkdir()
    (captured / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\x00")
    out = tmp_path / "diff.patch"
    stats = write_diff(seed, captured, out)
    assert stats.files_changed == 1
    assert "+caf\ufffd\n" in out.read_text(encoding="utf-8")
    assert "__pycache__" not in out.read_text()


def test_large_files_are_noted_not_line_diffed(pair: tuple[Path, Path], tmp_path: Path) -> None:
    seed, captured = pair
    (captured / "big.txt").write_text("line\n" * (MAX_TEXT_DIFF_BYTES // 5 + 1))
    out = tmp_path / "diff.patch"
    stats = write_diff(seed, captured, out)
    assert stats.files_changed == 1
    assert "Files /dev/null and b/big.txt differ (too large to diff" in out.read_text()


def test_patch_is_capped_and_truncation_noted(pair: tuple[Path, Path], tmp_path: Path) -> None:
    seed, captured = pair
    for i in range(50):
        (captured / f"gen{i:02}.txt").write_text("".join(f"row {n}\n" for n in range(100)))
    out = tmp_path / "diff.patch"
    stats = write_diff(seed, captured, out, max_bytes=4000)
    text = out.read_text()
    assert stats.truncated
    assert stats.files_changed == 50 and stats.insertions == 5000  # stats count everything
    assert text.rstrip("\n").splitlines()[-1].startswith(TRUNCATION_MARK)
    body = text[: text.index(TRUNCATION_MARK)]
    assert len(body.encode()) <= 4000
    assert body.endswith("\n")  # cut at a line boundary


def test_missing_seed_counts_as_empty(tmp_path: Path) -> None:
    captured = tmp_path / "captured"
    captured.mkdir()
    (captured / "a.txt").write_text("a\n")
    out = tmp_path / "diff.patch"
    assert write_diff(tmp_path / "no-seed", captured, out) == DiffStats(1, 1, 0)


def test_readers_of_the_patch_name_the_files_it_changes(
    pair: tuple[Path, Path], tmp_path: Path
) -> None:
    """The notes' "files touched" and the viewer's per-file counts name every changed file,
    a path holding " b/" included (a header split at its first " b/" cut it short)."""
    from ksi.attempt.evidence import files_touched
    from ksi.view.diffs import classify, file_changes

    seed, captured = pair
    (captured / "src" / "app.py").write_text("def add(a, b):\n    return a + b\n\n\nX = 1\n")
    (captured / "notes a b").mkdir()
    (captured / "notes a b" / "x b").mkdir()
    (captured / "notes a b" / "x b" / "c.txt").write_text("one\ntwo\n")
    (captured / "old.txt").unlink()
    out = tmp_path / "diff.patch"
    write_diff(seed, captured, out)
    text = out.read_text()
    expected = {"src/app.py", "notes a b/x b/c.txt", "old.txt"}
    assert set(files_touched(text)) == expected
    counts = {
        change.path: (change.added, change.removed) for change in file_changes(classify(text))
    }
    assert counts == {"src/app.py": (1, 1), "notes a b/x b/c.txt": (2, 0), "old.txt": (0, 1)}
