"""Refit the in-server NVLink calibration of cosim.collectives.calibration from measured all-reduce times,
or score the shipped one.

    python bench/fit_nvlink_all_reduce.py PATH/all_reduce.csv [--datasheet-gbps 450]
    python bench/fit_nvlink_all_reduce.py PATH/all_reduce.csv --curve h100 [--datasheet-gbps 450] [-o FILE]
    python bench/fit_nvlink_all_reduce.py PATH/all_reduce.csv --report h100

The CSV has vidur's profiling format (microsoft/vidur data/profiling/network/<gpu>_dgx/all_reduce.csv):
columns ``size`` (bytes), ``num_workers``, ``devices_per_node`` and ``time_stats.all_reduce.{min,max,median}``
(milliseconds); only rows with every worker on one node are used.

Without a mode it fits the one-line model (launch_ns, step_ns, bus bandwidth; what the tuner uses for the
NVLink part of collectives across servers) and prints its error per GPU count. ``--curve GPU`` fits the
measured all-reduce curve of GPU per GPU count (cosim.collectives.calibration.fit_all_reduce_curve: knots
within --tolerance of the robust curve, the Simple line; NCCL's protocol switch sizes are kept from the
shipped curves of that GPU) and writes it into the knots file -o FILE (that GPU's entry replaced, the others
kept; without -o, the file's content is printed). To regenerate the shipped file:

    python bench/fit_nvlink_all_reduce.py PATH/a100_dgx/all_reduce.csv --curve a100 --datasheet-gbps 300 \\
        -o cosim/collectives/nvlink_all_reduce_curves.json
    python bench/fit_nvlink_all_reduce.py PATH/h100_dgx/all_reduce.csv --curve h100 --datasheet-gbps 450 \\
        -o cosim/collectives/nvlink_all_reduce_curves.json

``--report GPU`` scores the SHIPPED curves of GPU in-sample, per GPU count, at sizes >= --report-min-size-bytes
(64 KiB), and says PASS / FAIL against 10 % for the columns the model is held to (robust max, settled max):

- robust: error against the robust measured curve (median of each size's 19 neighbours), median and max;
- settled: max error over the points whose 3 samples agree (max - min <= 10 % of the median) and whose
  median the robust curve is within 10 % of (measured, as every error here, relative to the point) — the
  points a deterministic model can be held to;
- raw: median and max error against every measured median (the scattered ones included: not held to).
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from pathlib import Path

import numpy as np

from cosim.collectives.calibration import (
    ALL_REDUCE_CURVES,
    all_reduce_curve_for,
    curves_document,
    fit_all_reduce,
    fit_all_reduce_curve,
    load_curves,
    robust_curve,
)
from cosim.h5io import atomic_output

TOLERANCE = 0.10
SOURCE = ("NCCL all-reduce inside one DGX, data/profiling/network/{a100_dgx,h100_dgx}/all_reduce.csv of "
          "microsoft/vidur, commit 7d47513, MIT license")


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


def score(curve, col: dict, min_size_bytes: int) -> dict:
    """The --report figures of ``curve`` against one GPU count's measurements (module docstring)."""
    s, med = col["size"], col["median"]
    r = robust_curve(med)
    model = curve.time_ns(s)
    k = s >= min_size_bytes
    rob = np.abs(model / r - 1)[k]
    raw = np.abs(model / med - 1)[k]
    settled = (((col["max"] - col["min"]) <= TOLERANCE * med) & (np.abs(r / med - 1) <= TOLERANCE))[k]
    worst = int(np.argmax(np.where(settled, raw, -1.0)))
    return {"knots": len(curve.knot_bytes), "robust_median": float(np.median(rob)), "robust_max": float(rob.max()),
            "settled": int(settled.sum()), "points": int(k.sum()),
            "settled_max": float(raw[settled].max()) if settled.any() else 0.0,
            "settled_worst_bytes": int(s[k][worst]), "raw_median": float(np.median(raw)), "raw_max": float(raw.max())}


def report(gpu: str, data: dict, min_size_bytes: int) -> bool:
    """Print the --report table of the shipped curves (module docstring); True if every held column passes."""
    print(f"{'GPUs':>4} {'knots':>5} {'robust median':>13} {'max':>6} {'settled pts':>11} {'max':>6} "
          f"{'(at MiB)':>8} {'raw median':>10} {'max':>7}  verdict (robust max, settled max <= 10 %)")
    ok = True
    for count, col in data.items():
        f = score(all_reduce_curve_for(gpu, count), col, min_size_bytes)
        passed = f["robust_max"] <= TOLERANCE and f["settled_max"] <= TOLERANCE
        ok &= passed
        print(f"{count:>4} {f['knots']:>5} {f['robust_median']:>13.1%} {f['robust_max']:>6.1%} "
              f"{f['settled']:>5}/{f['points']:<5} {f['settled_max']:>6.1%} {f['settled_worst_bytes'] / 2**20:>8.2f} "
              f"{f['raw_median']:>10.1%} {f['raw_max']:>7.1%}  {'PASS' if passed else 'FAIL'}")
    return ok


def refit_curves(gpu: str, data: dict, datasheet_bytes_per_s: float, tolerance: float) -> dict:
    """The fitted curves of ``gpu`` per GPU count, NCCL's switch sizes kept from the shipped curves."""
    out = {}
    for count, col in data.items():
        shipped = all_reduce_curve_for(gpu, count)
        out[count] = fit_all_reduce_curve(col["size"], col["median"], count, gpu=gpu,
                                          datasheet_bytes_per_s=datasheet_bytes_per_s,
                                          ll128_from_bytes=shipped.ll128_from_bytes,
                                          simple_from_bytes=shipped.simple_from_bytes, tolerance=tolerance)
        c = out[count]
        print(f"{gpu} x {count}: {len(c.knot_bytes)} knots, Simple line busbw {c.simple_bus_bytes_per_s / 1e9:.0f} "
              f"GB/s ({c.simple_bus_bytes_per_s / datasheet_bytes_per_s:.3f} of the datasheet rate)", file=sys.stderr)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--datasheet-gbps", type=float, default=450.0, help="NVLink GB/s per GPU per direction")
    ap.add_argument("--min-size-bytes", type=int, default=2 << 20, help="one-line fit: smallest size used")
    ap.add_argument("--curve", metavar="GPU", help="fit the measured all-reduce curve of GPU (a100, h100)")
    ap.add_argument("--tolerance", type=float, default=0.02, help="--curve: knots' max error vs the robust curve")
    ap.add_argument("-o", "--output", help="--curve: knots file to write GPU's entry into")
    ap.add_argument("--report", metavar="GPU", help="score the shipped curves of GPU instead")
    ap.add_argument("--report-min-size-bytes", type=int, default=64 << 10)
    args = ap.parse_args()
    data = load(args.csv)
    if args.report:
        raise SystemExit(0 if report(args.report, data, args.report_min_size_bytes) else 1)
    datasheet = args.datasheet_gbps * 1e9
    if args.curve:
        gpu = args.curve.lower()
        curves = {g: dict(t) for g, t in ALL_REDUCE_CURVES.items()}
        if args.output and Path(args.output).exists():
            curves = {g: dict(t) for g, t in load_curves(Path(args.output)).items()}
        curves[gpu] = refit_curves(gpu, data, datasheet, args.tolerance)
        command = ("python bench/fit_nvlink_all_reduce.py PATH/<gpu>_dgx/all_reduce.csv --curve <gpu> "
                   "--datasheet-gbps <NVLink GB/s> -o cosim/collectives/nvlink_all_reduce_curves.json "
                   f"(tolerance {args.tolerance})")
        text = json.dumps(curves_document(curves, source=SOURCE, command=command), indent=1)
        text = re.sub(r"\[([^\[\]{}]*)\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text) + "\n"
        if not args.output:
            print(text, end="")
            return
        with atomic_output(args.output) as tmp:
            tmp.write_text(text)
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


def _read_curves(path: str) -> dict:
    from cosim.collectives.calibration import _load_curves
    return _load_curves(Path(path))


if __name__ == "__main__":
    main()
