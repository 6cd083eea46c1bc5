"""What a run needs in memory, and what the machine has, checked before the work that would exhaust it.

Three phases hold memory in proportion to the run (measured in bench/README.md):

- planning (:data:`PLAN_BYTES_PER_DAG_OP`): the trace, the lowered DAG, the decomposition and the merged
  result tables — every op of the run, whether simulated or copied from an identical part;
- simulating (:data:`ENGINE_BYTES_PER_DAG_OP`): ns-3's DAG executor, its flows and packets — only the ops
  one simulation runs (a decomposed run's largest part, or every op of a whole run), a flow a BLOCK op
  starts counted as an op;
- merging and recording (:func:`record_bytes`): the flows of every part put together and sorted,
  their transfers, and the columns of their table computed a slice at a time (cosim.telemetry.FlowTable)
  — every flow of the run, on top of the plan, after the engine has given its memory back.

A run refused here gets a one-line input error before it starts the phase, never an out-of-memory kill
in the middle of it.
"""

from __future__ import annotations

import os

from cosim.errors import CosimInputError

#: peak memory of planning and merging per DAG op, bytes: `cosim run bench/llama2-7b-16k.toml` (16,384
#: GPUs, 145 M DAG ops) peaked at 16.2 GB in the merge, 112 B per op, rounded up
PLAN_BYTES_PER_DAG_OP = 115
#: memory the engine adds per simulated DAG op, bytes: a 256-GPU whole run (640 k ops, 60 k flows) rose
#: 155 B per op while simulating, rounded up
ENGINE_BYTES_PER_DAG_OP = 160
#: memory the merge, the results record and its writing add per flow of the run, bytes, above what the
#: process holds when the simulation starts (the check's moment); and per flow of the first
#: :data:`RECORD_SLICE_FLOWS`, the slice of rows they compute and deflate at a time: the Llama-3-405B
#: iteration with calls across servers as BLOCK ops (`workload.flow_blocks = "on"`) and fast-forward
#: peaked 1.65 GB above that moment with 10.8 M flows (2,048 GPUs) and 12.17 GB with 115.6 M flows (16,384
#: GPUs): 100.4 B per flow and 0.56 GB, which these constants give within 0.03 GB at both sizes
RECORD_BYTES_PER_FLOW = 100
RECORD_SLICE_FLOWS = 1 << 22
RECORD_BYTES_PER_SLICE_FLOW = 140
#: peak memory of planning a service per op of its step trace, bytes (the trace is built op by op in Python
#: lists, then lowered): the shipped disaggregated-serving experiment's dry run peaked at 1.32 GB with 3,000
#: requests (1.72 M ops per plan) and at 0.25 GB with 48, about 640 B per op, rounded up
STEP_TRACE_BYTES_PER_OP = 700


def available_bytes() -> int | None:
    """MemAvailable of /proc/meminfo (Linux), else physical memory, else None."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (OSError, ValueError, AttributeError):
        return None


def _short_of(need: float) -> int | None:
    """The memory available now, bytes, when ``need`` exceeds it; None when it fits (or is unknown)."""
    mem = available_bytes()
    return None if mem is None or need <= mem else mem


def check_simulation_fits(n_ops: int, *, processes: int = 1) -> None:
    """Refuse to simulate ``n_ops`` DAG ops (and flows BLOCK ops start) at once (summed over ``processes``
    parallel simulations) when the engine's :data:`ENGINE_BYTES_PER_DAG_OP` for them exceeds the memory
    available now."""
    need = int(n_ops) * ENGINE_BYTES_PER_DAG_OP
    if (mem := _short_of(need)) is None:
        return
    where = f" in {processes} processes" if processes > 1 else ""
    raise CosimInputError("limits", f"simulating {n_ops:.3g} DAG ops at once{where} needs about {need / 1e9:.1f} GB "
                          f"({ENGINE_BYTES_PER_DAG_OP} B per op), {mem / 1e9:.1f} GB is available",
                          "raise workload.chunk_bytes, use fewer --jobs, keep limits.decompose = auto, or split "
                          "the run across machines with --parts-dir/--shard")


def peak_bytes(n_ops: float, n_block_flows: float) -> int:
    """The memory a run of ``n_ops`` DAG ops whose BLOCK ops start ``n_block_flows`` flows needs at its peak:
    planning and merging every op or simulating them at once, whichever is more, and merging and recording
    the flows its ops do not count (a FLOW op's flow is counted as its op)."""
    return int(n_ops * max(PLAN_BYTES_PER_DAG_OP, ENGINE_BYTES_PER_DAG_OP) + record_bytes(n_block_flows))


def record_bytes(n_flows: float) -> int:
    """Memory the merge, the record and its writing add for a run of ``n_flows`` flows, bytes."""
    return int(n_flows * RECORD_BYTES_PER_FLOW + min(n_flows, RECORD_SLICE_FLOWS) * RECORD_BYTES_PER_SLICE_FLOW)


def check_record_fits(n_flows: int) -> None:
    """Refuse to start a simulation whose merge and results record (:func:`record_bytes` of its ``n_flows``)
    would not fit in the memory available now: the run would end after its simulation with nothing
    written."""
    need = record_bytes(n_flows)
    if (mem := _short_of(need)) is None:
        return
    raise CosimInputError("limits", f"the run's {n_flows:.3g} flows need about {need / 1e9:.1f} GB to merge and "
                          f"record ({RECORD_BYTES_PER_FLOW} B per flow) once simulated, {mem / 1e9:.1f} GB is "
                          "available", "give the run fewer flows (fewer ranks or iterations, a larger "
                          "workload.chunk_bytes) or more memory")


def check_plan_fits(n_ops: float, field: str, fix: str, *, what: str = "flows",
                    bytes_per_op: int = PLAN_BYTES_PER_DAG_OP) -> None:
    """Refuse a plan of about ``n_ops`` ops (a workload's flows counted before they are drawn, or ``what``
    else) whose ``bytes_per_op`` (:data:`PLAN_BYTES_PER_DAG_OP` unless said) exceed the memory available
    now; the error names ``field``."""
    need = float(n_ops) * bytes_per_op
    if (mem := _short_of(need)) is None:
        return
    raise CosimInputError(field, f"makes about {n_ops:.3g} {what}, and planning them needs about {need / 1e9:.3g} GB "
                          f"({bytes_per_op} B per op), {mem / 1e9:.1f} GB is available", fix)


def release_freed_heap() -> None:
    """Give the pages of freed heap memory back to the OS (glibc's ``malloc_trim``; nothing elsewhere).

    glibc keeps the pages of freed heap blocks resident while allocations still alive sit above them: a
    simulation's millions of small ns-3 objects (packets, events, flows) and a merge's temporaries (arrays
    below the mmap threshold, which glibc raises up to 32 MB as arrays are freed) leave hundreds of MB so,
    which the run's later arrays (tens of MB each, mapped on their own) do not reuse."""
    try:
        import ctypes  # noqa: PLC0415

        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return
    trim(0)
