"""Halting whatever the agent left running in its container, before the verifier and after it.

The harbor evaluator grades inside the attempt's container while it still
runs, so a process the agent detached from its exec's sweep
(``env -u KSI_PROC_TAG sh -c 'while :; do echo 1 > /logs/verifier/reward.txt; done' &``)
would still be running while the verifier writes the reward and while KSI
reads it. Before ``tests/test.sh`` runs, and again before its reward is
copied out, :data:`HALT_SCRIPT` runs in the container:

1. it stops every process of the container's PID namespace at once
   (``kill -STOP -1``: the kernel signals them all under one lock, so a
   process forking in a loop cannot slip a child past it), except PID 1
   (the kernel never signals it that way) and the script itself;
2. it lets its own chain of parents go on (``kill -CONT``);
3. it kills every stopped process, except the lowest-numbered child of
   PID 1, which may be the container's own main process (``sleep infinity``
   under an init): killing it would stop the container. That one stays
   stopped, and a stopped process runs no code;
4. it checks that nothing else is left running (a stop takes effect when
   the process is next scheduled, so it looks again for up to 5 seconds),
   else it fails and the attempt is not graded.

``kill -1`` reaches every process its caller may signal in its PID
namespace, so the script does all this only where that namespace is the
container's own: not KSI's (the evaluator passes KSI's namespace, the
script compares), and entered from outside (its chain of parents ends at
``docker exec``'s parent 0, not at the namespace's init), which is what
``docker exec`` and ``podman exec`` give. Anywhere else it changes nothing
and says so (exit :data:`NOT_A_CONTAINER`). After step 1 it starts no
process but ``sleep`` between two checks, so none of its own is caught by one.
"""

from __future__ import annotations

import os

#: The script ran where ``kill -1`` would reach beyond the container: nothing was done.
NOT_A_CONTAINER = 10
#: A process other than the script's could not be stopped: grading must not go on.
STILL_RUNNING = 11

HALT_SCRIPT = r"""
ns=$(readlink /proc/self/ns/pid 2>/dev/null)
if [ -z "$ns" ] || [ "$ns" = "$1" ]; then
  echo "ksi-halt: this exec shares KSI's process namespace; nothing halted" >&2; exit 10
fi
keep=" "; p=$$
while [ "$p" -gt 1 ]; do
  keep="$keep$p "
  read -r s 2>/dev/null < "/proc/$p/stat" || break
  s=${s##*) }; set -- $s; p=$2
done
if [ "$p" != 0 ]; then
  echo "ksi-halt: this exec was not entered from outside its namespace; nothing halted" >&2
  exit 10
fi
kill -STOP -1 2>/dev/null
for p in $keep; do kill -CONT "$p" 2>/dev/null; done
main=""; killed=" "; n=0
for d in /proc/[0-9]*; do
  p=${d#/proc/}
  case "$keep" in *" $p "*) continue ;; esac
  [ "$p" = 1 ] && continue
  read -r s 2>/dev/null < "$d/stat" || continue
  s=${s##*) }; set -- $s
  if [ "$2" = 1 ] && { [ -z "$main" ] || [ "$p" -lt "$main" ]; }; then
    [ -n "$main" ] && kill -KILL "$main" 2>/dev/null && killed="$killed$main " && n=$((n+1))
    main=$p; continue
  fi
  kill -KILL "$p" 2>/dev/null && killed="$killed$p " && n=$((n+1))
done
tries=0
while :; do
  left=""
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    case "$keep$killed" in *" $p "*) continue ;; esac
    [ "$p" = 1 ] && continue
    read -r s 2>/dev/null < "$d/stat" || continue
    s=${s##*) }; set -- $s
    case "$1" in T|t|Z|X|x) ;; *) left="$left $p" ;; esac
  done
  [ -z "$left" ] && break
  tries=$((tries+1))
  if [ "$tries" -gt 50 ]; then echo "ksi-halt: still running:$left" >&2; exit 11; fi
  sleep 0.1
done
echo "$n"
"""


def own_pid_namespace() -> str:
    """KSI's own PID namespace (``pid:[4026531836]``): the script does nothing there."""
    return os.readlink("/proc/self/ns/pid")
