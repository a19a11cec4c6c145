"""Which directories a task's ``workspace_dir`` may name, and how long a path may be.

A ``workspace_dir`` is copied into the run and handed to the agent (which may
send it to a model provider), so a tasks file from someone else must not be
able to pull in secrets. The rule, checked at load time on the *resolved*
path (symlinks followed):

- never the filesystem root, your home directory or one of its parents, a
  system directory (``/etc``, ``/root``, ``/proc``...) or anything inside one
  (your own home's subdirectories stay usable, even when home is ``/root``),
  or a credentials directory in your home (``~/.ssh``, ``~/.aws``...);
- a relative path written without ``..`` (``"repo"``) reads as "beside the
  tasks file", so it must stay there: a symlink that leads such a path out
  of the tasks file's directory is refused (write the real path instead, so
  the tasks file says plainly where the files come from).

Task sources that read a directory of their own (Harbor task directories,
Polyglot exercises, ARC task files) check it with :func:`link_problems`: a
prompt, test or reference solution read through a symlink out of the task's
tree would put a host file into a prompt, a container or a run.

The run directory itself is checked when a run starts
(:meth:`ksi.layout.RunLayout.check_tasks`): starting files must
neither contain it nor lie inside it.
"""

from __future__ import annotations

from pathlib import Path, PurePath

from ksi.fstree import links_leaving
from ksi.models import Problem
from ksi.relpaths import MAX_NAME_BYTES

#: The longest path the kernel accepts (Linux ``PATH_MAX``, including the final NUL).
PATH_MAX = 4096

#: System directories whose contents are never starting files (either spelling on macOS).
SYSTEM_DIRS = tuple(
    Path(p)
    for p in (
        "/etc", "/root", "/proc", "/sys", "/dev", "/boot", "/run", "/usr", "/bin", "/sbin",
        "/lib", "/lib32", "/lib64", "/libx32", "/snap", "/lost+found",
        "/var/lib", "/var/log", "/var/run", "/var/spool", "/var/mail", "/var/backups",
        "/var/db", "/var/root", "/System", "/Library",
        "/private/etc", "/private/var/db", "/private/var/root", "/private/var/log",
    )
)  # fmt: skip
#: Directories in a home directory that hold credentials.
CREDENTIAL_DIRS = (".ssh", ".aws", ".gnupg", ".config", ".docker", ".kube", ".azure")


def path_length_problem(text: str, what: str) -> str:
    """Why ``text`` is too long to be a path on disk, or ``""``."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size >= PATH_MAX:
        return f"{what} is {size} bytes long, over the system limit of {PATH_MAX - 1}; shorten it"
    for part in text.replace("\\", "/").split("/"):
        part_size = len(part.encode("utf-8", "surrogatepass"))
        if part_size > MAX_NAME_BYTES:
            return (
                f"{what} has a component of {part_size} bytes ({part[:20]!r}...), over the "
                f"{MAX_NAME_BYTES}-byte limit of a file name; shorten it"
            )
    return ""


def _inside(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def _home() -> Path | None:
    try:
        return Path.home().resolve()
    except (OSError, RuntimeError, KeyError):
        return None


def workspace_dir_problem(text: str, resolved: Path, base_dir: Path) -> str:
    """Why a ``workspace_dir`` written as ``text`` and resolving to ``resolved`` is refused.

    ``""`` when it may be used. ``base_dir`` is the (resolved) directory of the
    tasks file.
    """
    shown = f"{text!r} (resolved to {str(resolved)!r})"
    fix = "; point workspace_dir at a directory that holds only the task's starting files"
    if resolved == Path(resolved.anchor):
        return f"{shown} is the filesystem root, which holds every file on the machine{fix}"
    home = _home()
    if home is not None and home == Path(home.anchor):
        home = None
    if home is not None and _inside(home, resolved):
        return (
            f"{shown} holds your home directory, with its keys and credentials; "
            f"its files would be copied into the run and shown to the agent{fix}"
        )
    if home is not None and _inside(resolved, home):
        # Your own projects live here (even when home is /root): only credentials are off limits.
        for name in CREDENTIAL_DIRS:
            if _inside(resolved, home / name):
                return (
                    f"{shown} is inside {str(home / name)!r}, which holds credentials; "
                    f"its files would be copied into the run and shown to the agent{fix}"
                )
    else:
        for system in SYSTEM_DIRS:
            if _inside(resolved, system):
                return (
                    f"{shown} is inside the system directory {str(system)!r}; its files "
                    f"(secrets among them) would be copied into the run and shown to the agent{fix}"
                )
    written = PurePath(text)
    looks_local = (
        not written.is_absolute() and not text.startswith("~") and ".." not in written.parts
    )
    if looks_local and not _inside(resolved, base_dir):
        return (
            f"{shown} reads as a directory beside the tasks file but a symlink leads it out of "
            f"{str(base_dir)!r}; write the real path instead (an absolute or ../ path), so the "
            "tasks file says where the starting files come from"
        )
    return ""


def link_problems(
    root: Path, what: str, *, task_id: str | None = None, skip_hidden: bool = False
) -> list[Problem]:
    """A problem for every symlink below ``root`` that leads out of it.

    ``what`` names the tree in the message ("the task directory"). Links that
    stay inside are fine: they are the task's own files under another name.
    """
    return [
        Problem(
            str(root / rel),
            f"is a symlink to {target!r}, outside {what} ({root}); a task may use only "
            "files inside it: copy the file in instead of linking to it",
            task_id=task_id,
        )
        for rel, target in links_leaving(root, skip_hidden=skip_hidden)
    ]
