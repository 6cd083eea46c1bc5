"""Refit the in-server NVLink coefficients of cosim.collectives.calibration from measured all-reduce times.

    python bench/fit_nvlink_all_reduce.py PATH/all_reduce.csv [--datasheet-gbps 450]
    python bench/fit_nvlink_all_reduce.py PATH/all_reduce.csv --report a100 [--report-min-size-bytes 65536]

The CSV has vidur's profiling format (microsoft/vidur data/profiling/network/<gpu>_dgx/all_reduce.csv):
columns ``size`` (bytes), ``num_workers``, ``devices_per_node`` and ``time_stats.all_reduce.median``
(milliseconds); only rows with every worker on one node are used. Prints launch_ns, step_ns, the bus
bandwidth, its efficiency against the datasheet NVLink rate, and the fit's relative error per GPU count.
``--report GPU`` instead scores the coefficients SHIPPED in cosim.collectives.calibration for that GPU
(in-sample): max and median relative error per GPU count over every measured size >= --report-min-size-bytes,
and beside it the measurement's own scatter: how many points lie > 10% from the median of their 19 size
neighbours, and the size above which none does (no deterministic T(S, n) can be within 10% of a point below it).
"""

from __future__ import annotations

import argparse
import csv

import numpy as np

from cosim.collectives.calibration import all_reduce_ns, calibration_for, fit_all_reduce


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--datasheet-gbps", type=float, default=450.0, help="NVLink GB/s per GPU per direction")
    ap.add_argument("--min-size-bytes", type=int, default=2 << 20)
    ap.add_argument("--report", metavar="GPU", help="score the shipped coefficients of GPU (a100, h100) instead")
    ap.add_argument("--report-min-size-bytes", type=int, default=64 << 10)
    args = ap.parse_args()
    with open(args.csv, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["num_workers"] == r["devices_per_node"]]
    size = np.array([int(r["size"]) for r in rows], np.float64)
    n = np.array([int(r["num_workers"]) for r in rows], np.float64)
    t_ns = np.array([float(r["time_stats.all_reduce.median"]) * 1e6 for r in rows])
    if args.report:
        report(args.report, size, n, t_ns, args.report_min_size_bytes)
        return
    launch, step, bus = fit_all_reduce(size, n, t_ns, min_size_bytes=args.min_size_bytes)
    print(f"launch_ns={launch:.0f} step_ns={step:.0f} bus_bytes_per_s={bus:.4g} "
          f"efficiency={bus / (args.datasheet_gbps * 1e9):.4f}")
    model = launch + 2 * (n - 1) * step + 2 * (n - 1) / n * size / bus * 1e9
    for count in np.unique(n):
        m = (n == count) & (size >= 4 << 20)
        err = np.abs(model[m] / t_ns[m] - 1)
        print(f"  {int(count)} GPUs, 4-64 MiB: {m.sum()} points, |error| p50 {np.median(err):.3f} "
              f"p90 {np.percentile(err, 90):.3f} max {err.max():.3f}")


def report(gpu: str, size: np.ndarray, n: np.ndarray, t_ns: np.ndarray, min_size_bytes: int) -> None:
    """Print, per GPU count, the shipped model's max and median |error| over sizes >= min_size_bytes."""
    cal = calibration_for(gpu)
    model = all_reduce_ns(cal, size, n)
    for count in np.unique(n):
        m = (n == count) & (size >= min_size_bytes)
        err = np.abs(model[m] / t_ns[m] - 1)
        worst = int(size[m][np.argmax(err)])
        order = np.argsort(size[m])
        sizes, times = size[m][order], t_ns[m][order]
        local = np.array([np.median(times[max(0, i - 9):i + 10]) for i in range(len(times))])
        scattered = np.flatnonzero(np.abs(times / local - 1) > 0.1)
        smooth_from = int(sizes[scattered[-1] + 1]) if len(scattered) and scattered[-1] + 1 < len(sizes) else (
            int(sizes[0]) if not len(scattered) else -1)
        print(f"{gpu} {int(count)} GPUs, sizes {int(size[m].min())}-{int(size[m].max())} B: {m.sum()} points, "
              f"|error| median {np.median(err):.3f} max {err.max():.3f} (at {worst} B); "
              f"measurement scatter: {len(scattered)} points > 10% off their neighbours, none above {smooth_from} B")


if __name__ == "__main__":
    main()
