"""What an agent did: typed trajectories, their ATIF file, and digests for the knowledge loop.

* :mod:`~ksi.trajectories.models`: :class:`Trajectory`, :class:`Step`,
  :class:`ToolCall`, :class:`ToolResult` (ATIF's shape, KSI's usage);
* :mod:`~ksi.trajectories.builder`: :class:`TrajectoryBuilder`, which agent
  plugins use to read their CLI's output into one;
* :mod:`~ksi.trajectories.atif` and :mod:`~ksi.trajectories.writer`: the
  attempt's ``trajectory.json`` (ATIF, bounded) and reading it back;
* :mod:`~ksi.trajectories.digest`: the few facts of a trajectory a
  distiller gets (failed commands, files, first test run, repeats).
"""

from ksi.trajectories.atif import from_atif, to_atif
from ksi.trajectories.builder import TrajectoryBuilder, arguments, iso_time
from ksi.trajectories.digest import TrajectoryDigest, digest
from ksi.trajectories.models import ATIF_VERSION, Step, ToolCall, ToolResult, Trajectory
from ksi.trajectories.writer import (
    TRAJECTORY_FILE,
    Limits,
    bound,
    read_trajectory,
    write_trajectory,
)

__all__ = [
    "ATIF_VERSION",
    "TRAJECTORY_FILE",
    "Limits",
    "Step",
    "ToolCall",
    "ToolResult",
    "Trajectory",
    "TrajectoryBuilder",
    "TrajectoryDigest",
    "arguments",
    "bound",
    "digest",
    "from_atif",
    "iso_time",
    "read_trajectory",
    "to_atif",
    "write_trajectory",
]
