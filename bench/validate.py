"""Megatron-LM's Table 1 (Narayanan et al., SC'21) co-simulated: TFLOP/s per A100 against the paper's.

Each row is one GPT of the paper's Table 1 with the configuration of its artifact script
(``examples/sc21/run_table_1.sh`` in NVIDIA/Megatron-LM: tensor / pipeline degrees, micro-batch and global
batch) on the paper's cluster: DGX A100 80GB servers, eight InfiniBand HDR 200 Gb/s NICs per server
(rail-optimized), sequence 2048, vocabulary 51,200, full activation recomputation, the 2021 software stack of
the ``megatron-gpt-*`` model presets (unfused attention, dropout 0.1, fp16 with loss scaling). The
simulated TFLOP/s per GPU use the paper's count (``megatron_flop_per_s_per_gpu``: 96·B·s·l·h²·(1 + s/(6h) +
V/(16·l·h)) per iteration, the recomputed forward counted).

Data parallelism is reduced where the paper used more GPUs than ``--servers`` servers (default 2) hold, to
d = max(2, 8·servers/(t·p)) replicas, keeping the work of every GPU the same: the same micro-batches per
replica (B/(b·d) of the paper), so the global batch shrinks with d. The gradient all-reduce still crosses
servers over the NICs, but over fewer ranks (ring traffic per GPU 2(d−1)/d of the gradients instead of
about 2×), so communication is somewhat lighter than on the paper's cluster.

    python bench/validate.py                     # all rows, packet-level co-simulation on InfiniBand
    python bench/validate.py --rows 1.7b 3.6b     # some rows
    python bench/validate.py --servers 4         # less reduction of data parallelism, slower
    python bench/validate.py --free-comm         # compute only (zero-time communication), seconds
    python bench/validate.py --clock-ratio 0.95  # GPUs sustain 95 % of the profiles' clock (hardware field)
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One row of Table 1 and its artifact script's batch sizes."""

    size: str  #: parameter count, the model preset's suffix
    tp: int
    pp: int
    gpus: int  #: GPUs of the paper's run
    global_batch: int  #: sequences per iteration B
    micro_batch: int  #: sequences per micro-batch b
    paper_tflops: float  #: achieved TFLOP/s per GPU in the paper

    @property
    def dp(self) -> int:
        """Data-parallel degree of the paper's run."""
        return self.gpus // (self.tp * self.pp)

    @property
    def microbatches(self) -> int:
        """Micro-batches per replica per iteration, B/(b·d)."""
        return self.global_batch // (self.micro_batch * self.dp)


ROWS = (
    Row(size="1.7b", tp=1, pp=1, gpus=32, global_batch=512, micro_batch=16, paper_tflops=137.0),
    Row(size="3.6b", tp=2, pp=1, gpus=64, global_batch=512, micro_batch=16, paper_tflops=138.0),
    Row(size="7.5b", tp=4, pp=1, gpus=128, global_batch=512, micro_batch=16, paper_tflops=142.0),
    Row(size="18.4b", tp=8, pp=1, gpus=256, global_batch=1024, micro_batch=8, paper_tflops=135.0),
    Row(size="39.1b", tp=8, pp=2, gpus=512, global_batch=1536, micro_batch=4, paper_tflops=138.0),
)


def replicas(row: Row, servers: int) -> int:
    """Data-parallel replicas simulated for ``row`` on about ``servers`` 8-GPU servers (module docstring)."""
    return min(row.dp, max(2, 8 * servers // (row.tp * row.pp)))


def experiment(row: Row, d: int, clock_ratio: float = 1.0):
    """The Experiment of ``row`` with ``d`` data-parallel replicas, its GPUs at ``clock_ratio`` of the
    profiles' clock (HardwareSpec.sustained_clock_ratio)."""
    from cosim.spec import from_document  # noqa: PLC0415

    doc = {"name": f"megatron-gpt-{row.size}",
           "network": {"transport": "ib", "topology": "rail-optimized", "link_gbps": 200.0, "gpus_per_server": 8},
           "workload": {"kind": "training", "model": f"megatron-gpt-{row.size}", "gpu": "a100",
                        "hardware_overrides": {"sustained_clock_ratio": clock_ratio},
                        "parallelism": {"tp": row.tp, "pp": row.pp, "dp": d, "micro_batch_size": row.micro_batch,
                                        "global_batch_size": row.micro_batch * d * row.microbatches,
                                        "recompute": True}}}
    return from_document(doc)[0]


def simulate(row: Row, d: int, free_comm: bool, clock_ratio: float = 1.0) -> tuple[float, int, float]:
    """(TFLOP/s per GPU, GPUs simulated, wall seconds) of ``row`` with ``d`` replicas."""
    t0 = time.perf_counter()
    exp = experiment(row, d, clock_ratio)
    if free_comm:
        from cosim.workload.summary import summarize  # noqa: PLC0415

        s = summarize(exp.workload.generate_trace(8))
        return s.megatron_flop_per_s_per_gpu_compute_only / 1e12, s.n_ranks, time.perf_counter() - t0
    from cosim.run import run  # noqa: PLC0415

    rec = run(exp)
    s = rec.summary
    if s["status"] != "complete":
        raise RuntimeError(f"{row.size}: run ended {s['status']}")
    return s["megatron_flop_per_s_per_gpu"] / 1e12, s["n_ranks"], time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    """Print one line per row: the configuration, the simulated and the paper's TFLOP/s, their ratio."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", nargs="*", default=[r.size for r in ROWS], help="row sizes (default: all)")
    ap.add_argument("--servers", type=int, default=2, help="8-GPU servers to simulate about (default 2)")
    ap.add_argument("--free-comm", action="store_true", help="compute only: communication takes no time")
    ap.add_argument("--clock-ratio", type=float, default=1.0,
                    help="sustained SM clock / the kernel profiles' clock, (0, 1] (default 1)")
    args = ap.parse_args(argv)
    unknown = set(args.rows) - {r.size for r in ROWS}
    if unknown:
        print(f"unknown row {sorted(unknown)[0]!r}; choose among {', '.join(r.size for r in ROWS)}", file=sys.stderr)
        return 2
    print(f"{'model':<8}{'TP':>3}{'PP':>3}{'DP paper':>9}{'DP sim':>7}{'b':>4}{'m':>4}{'GPUs sim':>9}"
          f"{'TFLOP/s sim':>12}{'paper':>7}{'ratio':>7}{'wall s':>8}")
    for row in ROWS:
        if row.size not in args.rows:
            continue
        d = replicas(row, args.servers)
        tflops, ranks, wall = simulate(row, d, args.free_comm, args.clock_ratio)
        print(f"{row.size:<8}{row.tp:>3}{row.pp:>3}{row.dp:>9}{d:>7}{row.micro_batch:>4}"
              f"{row.microbatches:>4}{ranks:>9}{tflops:>12.1f}{row.paper_tflops:>7.0f}"
              f"{tflops / row.paper_tflops:>7.3f}{wall:>8.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
