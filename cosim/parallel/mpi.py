"""The MPI world a run was started in (``mpiexec -n N cosim run ...``, ``srun``), through mpi4py.

    world = mpi_world()        # None when this process is the only one (no MPI launcher, or one rank)
    world.rank, world.size, world.comm

mpi4py is imported only when a launcher says there are several ranks, so a plain run neither needs nor
loads it.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

from cosim.errors import CosimInputError

#: environment variables MPI launchers set to the number of ranks: Open MPI, MPICH/Hydra and PMI-2, PMIx,
#: and a Slurm job step (srun; a batch script's own SLURM_NTASKS says nothing about this process)
SIZE_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_STEP_NUM_TASKS")
#: and to this process's rank
RANK_VARIABLES = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID")


@dataclass(frozen=True, slots=True)
class MpiWorld:
    """This process's place among the ranks of the run."""

    comm: object  # mpi4py.MPI.Comm (COMM_WORLD)
    rank: int
    size: int


def launched_size() -> int:
    """Ranks the launcher started (1 without a launcher)."""
    for name in SIZE_VARIABLES:
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 1:
            return int(value)
    return 1


def launched_rank() -> int:
    """This process's rank as its launcher set it (0 without a launcher, or when it started one process):
    known before mpi4py is loaded, so that errors found before any MPI call are reported once."""
    if launched_size() <= 1:
        return 0
    for name in RANK_VARIABLES:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return 0


@functools.cache
def mpi_world() -> MpiWorld | None:
    """The MPI world of this process, or None when it runs alone."""
    size = launched_size()
    if size <= 1:
        return None
    try:
        from mpi4py import MPI  # noqa: PLC0415 - only under an MPI launcher
    except ImportError:
        raise CosimInputError("mpiexec", f"started {size} processes, but mpi4py is not installed",
                              "pip install mpi4py (and an MPI library, e.g. Debian's mpich), or run "
                              "one process") from None
    comm = MPI.COMM_WORLD
    if comm.Get_size() <= 1:
        return None
    return MpiWorld(comm=comm, rank=comm.Get_rank(), size=comm.Get_size())


def is_root() -> bool:
    """True on rank 0, or when there is no MPI world: the process that reports and writes results."""
    world = mpi_world()
    return world is None or world.rank == 0
