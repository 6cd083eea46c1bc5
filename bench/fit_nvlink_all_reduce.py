"""Refit the in-server NVLink coefficients of cosim.collectives.calibration from measured all-reduce times,
or score the shipped ones.

    python bench/fit_nvlink_all_reduce.py PATH/all_reduce.csv [--datasheet-gbps 450]
    python bench/fit_nvlink_all_reduce.py PATH/all_reduce.csv --protocols h100 [--datasheet-gbps 450]
    python bench/fit_nvlink_all_reduce.py PATH/all_reduce.csv --report h100

The CSV has vidur's profiling format (microsoft/vidur data/profiling/network/<gpu>_dgx/all_reduce.csv):
columns ``size`` (bytes), ``num_workers``, ``devices_per_node`` and ``time_stats.all_reduce.{min,max,median}``
(milliseconds); only rows with every worker on one node are used.

Without a mode it fits the one-line model (launch_ns, step_ns, bus bandwidth; what the tuner uses for the
NVLink part of collectives across servers) and prints its error per GPU count. ``--protocols GPU`` fits
NCCL's per-protocol lines (cosim.collectives.calibration.fit_protocol_lines) per GPU count and prints them
as the Python entry of PROTOCOL_LINES to paste into calibration.py. ``--report GPU`` scores the SHIPPED
per-protocol model of GPU in-sample, per GPU count, at sizes >= --report-min-size-bytes (64 KiB):

- robust: error against the robust measured curve (median of each size's 19 neighbours), median and max,
  and the size from which it stays within 10 %;
- settled: max error over the points whose 3 samples agree (max - min <= 10 % of the median) and whose
  median is within 10 % of the robust curve — the points a deterministic model can be held to;
- raw: median and max error against every measured median, and max error above the size where the
  scatter ends (the first size above which every median is within 10 % of its robust curve).
"""

from __future__ import annotations

import argparse
import csv

import numpy as np

from cosim.collectives.calibration import (PROTOCOL_NAMES, fit_all_reduce, fit_protocol_lines,
                                           protocol_lines_for, robust_curve)

TOLERANCE = 0.10


def load(path: str) -> dict[int, dict[str, np.ndarray]]:
    """Per GPU count: size (bytes) and the min / median / max time (ns) of every in-server row, by size."""
    with open(path, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["num_workers"] == r["devices_per_node"]]
    out = {}
    for count in sorted({int(r["num_workers"]) for r in rows}):
        rr = sorted((r for r in rows if int(r["num_workers"]) == count), key=lambda r: int(r["size"]))
        col = {"size": np.array([int(r["size"]) for r in rr], np.float64)}
        for stat in ("min", "median", "max"):
            col[stat] = np.array([float(r[f"time_stats.all_reduce.{stat}"]) * 1e6 for r in rr])
        out[count] = col
    return out


def first_size_from_which(size: np.ndarray, bad: np.ndarray) -> int:
    """The smallest size above which no point is bad (-1 if the last one is)."""
    if not bad.any():
        return int(size[0])
    last = int(np.flatnonzero(bad)[-1])
    return int(size[last + 1]) if last + 1 < size.size else -1


def report(gpu: str, data: dict, min_size_bytes: int) -> None:
    """Print the --report table of the shipped per-protocol model (module docstring)."""
    print(f"{'GPUs':>4} {'robust median':>13} {'max':>6} {'<=10% from':>11} {'settled pts':>11} {'max':>6} "
          f"{'raw median':>10} {'max':>6} {'scatter ends':>12} {'max above':>9}")
    for count, col in data.items():
        s, med = col["size"], col["median"]
        r = robust_curve(med)
        model = protocol_lines_for(gpu, count).time_ns(s)
        k = s >= min_size_bytes
        rob = np.abs(model / r - 1)[k]
        raw = np.abs(model / med - 1)[k]
        scattered = (np.abs(med / r - 1) > TOLERANCE)[k]
        tight = ((col["max"] - col["min"]) <= TOLERANCE * med)[k]
        settled = tight & ~scattered
        sk = s[k]
        rob_from = first_size_from_which(sk, rob > TOLERANCE)
        scatter_end = first_size_from_which(sk, scattered)
        above = raw[sk >= scatter_end] if scatter_end >= 0 else np.zeros(0)
        print(f"{count:>4} {np.median(rob):>13.1%} {rob.max():>6.1%} {mib(rob_from):>11} "
              f"{int(settled.sum()):>5}/{k.sum():<5} {raw[settled].max() if settled.any() else 0:>6.1%} "
              f"{np.median(raw):>10.1%} {raw.max():>6.1%} {mib(scatter_end):>12} "
              f"{above.max() if above.size else 0:>9.1%}")


def mib(size: int) -> str:
    return "never" if size < 0 else f"{size / (1 << 20):.2f} MiB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--datasheet-gbps", type=float, default=450.0, help="NVLink GB/s per GPU per direction")
    ap.add_argument("--min-size-bytes", type=int, default=2 << 20, help="one-line fit: smallest size used")
    ap.add_argument("--protocols", metavar="GPU", help="fit the per-protocol lines of GPU (a100, h100)")
    ap.add_argument("--report", metavar="GPU", help="score the shipped per-protocol model of GPU instead")
    ap.add_argument("--report-min-size-bytes", type=int, default=64 << 10)
    args = ap.parse_args()
    data = load(args.csv)
    if args.report:
        report(args.report, data, args.report_min_size_bytes)
        return
    datasheet = args.datasheet_gbps * 1e9
    if args.protocols:
        print(f'    "{args.protocols}": {{')
        for count, col in data.items():
            lines = fit_protocol_lines(col["size"], col["median"], count, gpu=args.protocols,
                                       datasheet_bytes_per_s=datasheet)
            lat = ", ".join(f"{v:_.0f}.0" for v in lines.latency_ns)
            eff = ", ".join(f"{v:.4f}" for v in lines.efficiency)
            print(f"        {count}: ProtocolLines(gpu={lines.gpu!r}, n_ranks={count}, "
                  f"ll128_from_bytes={lines.ll128_from_bytes:_}, simple_from_bytes={lines.simple_from_bytes:_},\n"
                  f"                           latency_ns=({lat}), efficiency=({eff}),\n"
                  f"                           datasheet_bytes_per_s={datasheet / 1e9:.0f}e9),  # busbw "
                  + " / ".join(f"{p} {e * args.datasheet_gbps:.0f}" for p, e in zip(PROTOCOL_NAMES, lines.efficiency))
                  + " GB/s")
        print("    },")
        return
    size = np.concatenate([c["size"] for c in data.values()])
    n = np.concatenate([np.full(c["size"].size, count, np.float64) for count, c in data.items()])
    t_ns = np.concatenate([c["median"] for c in data.values()])
    launch, step, bus = fit_all_reduce(size, n, t_ns, min_size_bytes=args.min_size_bytes)
    print(f"launch_ns={launch:.0f} step_ns={step:.0f} bus_bytes_per_s={bus:.4g} efficiency={bus / datasheet:.4f}")
    model = launch + 2 * (n - 1) * step + 2 * (n - 1) / n * size / bus * 1e9
    for count in np.unique(n):
        m = (n == count) & (size >= 4 << 20)
        err = np.abs(model[m] / t_ns[m] - 1)
        print(f"  {int(count)} GPUs, 4-64 MiB: {m.sum()} points, |error| p50 {np.median(err):.3f} "
              f"p90 {np.percentile(err, 90):.3f} max {err.max():.3f}")


if __name__ == "__main__":
    main()
