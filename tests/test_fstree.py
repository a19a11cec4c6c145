"""The one tree copy (``ksi.fstree.copy_tree``) and its descriptor walk, on real trees."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ksi.fstree import copy_tree


def listing(root: Path) -> dict[str, str]:
    """Every entry under ``root``: relative path -> content, link target or ``dir``."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = "-> " + os.readlink(path)
            elif path.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = path.read_text()
    return out


def test_a_deep_and_wide_tree_is_copied_exactly(tmp_path: Path) -> None:
    """Deep enough that the walk re-opens directories it closed while climbing back up."""
    src = tmp_path / "src"
    level = src
    for depth in range(150):
        (level / "side").mkdir(parents=True)
        (level / "side" / f"f{depth}.txt").write_text(f"side {depth}\n")
        (level / f"at{depth}.txt").write_text(f"level {depth}\n")
        level = level / "d"
    copy_tree(src, tmp_path / "dst")
    expected = listing(src)
    assert len(expected) == 150 * 4 - 1
    assert listing(tmp_path / "dst") == expected


def test_links_are_copied_not_followed_and_specials_are_skipped(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("host secret\n")
    src = tmp_path / "src"
    src.mkdir()
    (src / "to_dir").symlink_to(outside, target_is_directory=True)
    (src / "to_file").symlink_to(outside / "secret.txt")
    os.mkfifo(src / "fifo")
    (src / "ro.txt").write_text("read only\n")
    (src / "ro.txt").chmod(0o444)
    copy_tree(src, tmp_path / "dst")
    dst = tmp_path / "dst"
    assert os.readlink(dst / "to_dir") == str(outside)
    assert os.readlink(dst / "to_file") == str(outside / "secret.txt")
    assert not os.path.lexists(dst / "fifo")
    assert (dst / "ro.txt").stat().st_mode & 0o777 == 0o444
    assert sorted(os.listdir(dst)) == ["ro.txt", "to_dir", "to_file"]


def test_a_symlink_in_place_of_the_source_root_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "x.txt").write_text("x\n")
    (tmp_path / "link").symlink_to(tmp_path / "real", target_is_directory=True)
    with pytest.raises(OSError):
        copy_tree(tmp_path / "link", tmp_path / "dst")
    assert not (tmp_path / "dst" / "x.txt").exists()


def test_merge_replaces_what_is_in_the_way_without_writing_through_links(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched\n")
    victim_dir = tmp_path / "victim_dir"
    victim_dir.mkdir()
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_text("new a\n")
    (src / "sub" / "b.txt").write_text("new b\n")
    dst = tmp_path / "dst"
    dst.mkdir()
    (dst / "a.txt").symlink_to(victim)  # a copy must not write through this
    (dst / "sub").symlink_to(victim_dir, target_is_directory=True)
    (dst / "kept.txt").write_text("already here\n")
    copy_tree(src, dst, merge=True)
    assert victim.read_text() == "untouched\n"
    assert list(victim_dir.iterdir()) == []
    assert listing(dst) == {
        "a.txt": "new a\n",
        "kept.txt": "already here\n",
        "sub": "dir",
        "sub/b.txt": "new b\n",
    }
    with pytest.raises(FileExistsError):
        copy_tree(src, dst)


_CHILD_000 = """
import sys
from pathlib import Path
from ksi.fstree import remove_tree
remove_tree(Path(sys.argv[1]))
print("gone" if not Path(sys.argv[1]).exists() else "left")
"""


def test_remove_tree_empties_000_directories_without_touching_what_links_point_to(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    outside.chmod(0o500)
    tree = tmp_path / "tree"
    (tree / "locked" / "inner").mkdir(parents=True)
    (tree / "locked" / "inner" / "f.txt").write_text("x\n")
    (tree / "locked" / "link").symlink_to(outside, target_is_directory=True)
    (tree / "locked" / "inner").chmod(0o000)
    (tree / "locked").chmod(0o000)
    argv = [sys.executable, "-c", _CHILD_000, str(tree)]
    if os.geteuid() == 0:
        setpriv = "/usr/bin/setpriv"
        if not Path(setpriv).exists():
            pytest.skip("running as root without setpriv: permission bits do not bind")
        argv = [setpriv, "--bounding-set=-dac_override,-dac_read_search", *argv]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    finally:
        if tree.exists():  # the removal failed: let pytest's own cleanup have it
            subprocess.run(["chmod", "-R", "u+rwx", str(tree)], check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "gone"
    assert outside.stat().st_mode & 0o777 == 0o500  # the link's target was not chmod-ed
    outside.chmod(0o700)


def test_links_leaving_names_every_link_that_resolves_outside_and_no_other(
    tmp_path: Path,
) -> None:
    from ksi.fstree import links_leaving

    root, outside = tmp_path / "task", tmp_path / "host"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret").write_text("s")
    (root / "a.txt").write_text("a")
    (root / "inside").symlink_to("a.txt")
    (root / "sub" / "up-and-in").symlink_to("../a.txt")
    (root / "sub" / "up-and-out").symlink_to("../../host/secret")
    (root / "absolute").symlink_to(outside / "secret")
    (root / "chain").symlink_to("absolute")  # inside, to a link that leaves
    (root / "dangling-out").symlink_to("/nonexistent/elsewhere")
    (root / "dir-out").symlink_to(outside, target_is_directory=True)
    (root / ".hidden").symlink_to(outside)
    found = dict(links_leaving(root))
    assert sorted(found) == [
        ".hidden", "absolute", "chain", "dangling-out", "dir-out", "sub/up-and-out"
    ]  # fmt: skip
    assert found["chain"] == "absolute"
    assert ".hidden" not in dict(links_leaving(root, skip_hidden=True))


def test_open_file_inside_refuses_links_dot_dot_and_non_regular_files(tmp_path: Path) -> None:
    from ksi.fstree import drop_links, open_file_inside

    root = tmp_path / "run"
    (root / "attempts" / "t").mkdir(parents=True)
    (root / "attempts" / "t" / "log").write_text("inside")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "log").write_text("outside")
    (root / "attempts" / "linked").symlink_to(tmp_path / "outside")
    (root / "attempts" / "t" / "file-link").symlink_to(tmp_path / "outside" / "log")
    os.mkfifo(root / "attempts" / "t" / "fifo")
    fd = open_file_inside(root, "attempts/t/log")
    with os.fdopen(fd) as fh:
        assert fh.read() == "inside"
    for rel in ("attempts/linked/log", "attempts/t/file-link", "../outside/log",
                str(tmp_path / "outside" / "log"), "attempts/t/fifo", "attempts/t"):  # fmt: skip
        with pytest.raises(OSError):
            os.close(open_file_inside(root, rel))
    assert drop_links(root) == ["attempts/linked", "attempts/t/fifo", "attempts/t/file-link"]
    assert sorted(p.name for p in (root / "attempts").rglob("*")) == ["log", "t"]
    assert (tmp_path / "outside" / "log").read_text() == "outside"
