"""The MPI world a run was started in (``mpiexec -n N cosim run ...``, ``srun``), through mpi4py.

    world = mpi_world()        # None when this process is the only one (no MPI launcher, or one rank)
    world.rank, world.size, world.comm

mpi4py is imported only when a launcher says there are several ranks, so a plain run neither needs nor
loads it.

A rank that fails between two collectives would leave the others waiting in the next one forever, so the
run's collectives that follow local work carry a failure in place of the data: :func:`share` (one rank's
value to all) and :func:`gather` (every rank's value to one), and :func:`fail_together` where the ranks already
exchange state. The failing rank re-raises its error; every other rank raises :class:`RankFailed` with its
message, an input error the CLI reports in one line (rank 0 alone prints it) instead of hanging.
"""

from __future__ import annotations

import functools
import os
import pickle
from collections.abc import Callable
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


@dataclass(frozen=True, slots=True)
class Failure:
    """What a failed rank tells the others: its rank, its error's type and one-line message (a
    CosimInputError's field, problem and fix, so the others' error reads exactly as its own)."""

    rank: int
    kind: str
    field: str
    problem: str
    fix: str | None = None

    @classmethod
    def of(cls, exc: BaseException, rank: int) -> Failure:
        """The Failure of ``exc`` raised on ``rank``."""
        kind = type(exc).__name__
        if isinstance(exc, CosimInputError) and isinstance(getattr(exc, "field", None), str):
            return cls(rank, kind, exc.field, str(getattr(exc, "problem", exc)), getattr(exc, "fix", None))
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        return cls(rank, kind, f"MPI rank {rank}", f"{kind}: {lines[-1]}" if lines else kind)


class RankFailed(CosimInputError):
    """Another rank of the run failed (``failure``): this rank stops too, with that rank's message."""

    def __init__(self, failure: Failure):
        self.failure = failure
        super().__init__(failure.field, failure.problem, failure.fix)


def fail_together(world: MpiWorld, failure: BaseException | None) -> None:
    """Called by every rank once they all know some rank failed (``failure``: this rank's error, None if it
    did not fail): the ranks exchange their failures, then the failed ranks re-raise their own error and the
    others raise RankFailed with the error of the lowest failed rank."""
    _raise_failed(world.comm.allgather(None if failure is None else Failure.of(failure, world.rank)), failure)


def _raise_failed(told: list, failure: BaseException | None) -> None:
    """Raise ``failure`` (this rank's error), else RankFailed with the first Failure in ``told`` (what every
    rank said), if any."""
    if failure is not None:
        raise failure
    first = next((f for f in told if isinstance(f, Failure)), None)
    if first is not None:
        raise RankFailed(first)


def share(world: MpiWorld, produce: Callable[[], object], root: int = 0) -> object:
    """``produce()`` computed on rank ``root``, on every rank (as ``comm.bcast``: pickled once, sent as bytes).

    If ``produce`` or pickling its value raises on ``root``, the other ranks get the failure in place of the
    value and raise RankFailed, and ``root`` re-raises the error."""
    from mpi4py import MPI  # noqa: PLC0415 - loaded by mpi_world already

    comm = world.comm
    if world.rank == root:
        try:
            value = produce()
            blob = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - every error must reach the other ranks
            comm.bcast(Failure.of(exc, root), root=root)
            raise
        comm.bcast(len(blob), root=root)
        comm.Bcast([blob, len(blob), MPI.BYTE], root=root)
        return value
    head = comm.bcast(None, root=root)
    if isinstance(head, Failure):
        raise RankFailed(head)
    blob = bytearray(head)
    comm.Bcast([blob, head, MPI.BYTE], root=root)
    return pickle.loads(blob)


def gather(world: MpiWorld, produce: Callable[[], object], root: int = 0) -> list | None:
    """Every rank's ``produce()``, as a list on rank ``root`` (None on the others), as ``comm.gather``.

    If ``produce`` or pickling its value raises on some rank, every rank raises (fail_together): a failed
    rank its own error, the others RankFailed."""
    from mpi4py import MPI  # noqa: PLC0415 - loaded by mpi_world already

    comm = world.comm
    failure, blob = None, b""
    try:
        blob = pickle.dumps(produce(), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # noqa: BLE001 - every error must reach the other ranks
        failure = exc
    sizes = comm.allgather(Failure.of(failure, world.rank) if failure is not None else len(blob))
    _raise_failed(sizes, failure)
    if world.rank != root:
        comm.Gatherv([blob, len(blob), MPI.BYTE], None, root=root)
        return None
    offsets = [0]
    for n in sizes:
        offsets.append(offsets[-1] + n)
    buf = bytearray(offsets[-1])
    comm.Gatherv([blob, len(blob), MPI.BYTE], [buf, (sizes, offsets[:-1]), MPI.BYTE], root=root)
    view = memoryview(buf)
    return [pickle.loads(view[offsets[r]:offsets[r + 1]]) for r in range(world.size)]
