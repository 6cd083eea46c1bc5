"""What `cosim compare` saves by reading summaries only: a results file of N copies of the built-in run
read whole (every table, as `cosim plot` of every figure does) and with ``tables=()`` (summaries read,
every table's structure checked: what `cosim compare` does), paired in one process.

    python bench/bench_results_read.py [--runs 6] [--repeat 5]

Prints the file size and the median (min, max) seconds of each read and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
from pathlib import Path

from cosim.results import write_results
from cosim.results.store import read_results
from cosim.run import run
from cosim.spec import catalog, from_document


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=6, help="copies of the built-in run in the file")
    ap.add_argument("--repeat", type=int, default=5, help="paired reads")
    args = ap.parse_args()
    doc, where = catalog.load_document(catalog.DEFAULT)
    record = run(from_document(doc, where=where)[0])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "runs.h5"
        write_results(path, [dataclasses.replace(record, name=f"run{i}") for i in range(args.runs)])
        whole, summaries = [], []
        for _ in range(args.repeat):
            t = time.perf_counter()
            read_results(path)
            whole.append(time.perf_counter() - t)
            t = time.perf_counter()
            read_results(path, ())
            summaries.append(time.perf_counter() - t)
        print(f"{args.runs} runs, {path.stat().st_size / 1e6:.1f} MB")
    for what, times in (("every table", whole), ("summaries + structure (compare)", summaries)):
        print(f"{what}: median {statistics.median(times):.3f} s (min {min(times):.3f}, max {max(times):.3f})")
    print(f"ratio of medians: {statistics.median(whole) / statistics.median(summaries):.1f}x")


if __name__ == "__main__":
    main()
