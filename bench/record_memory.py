"""Memory of the merge, the record and its writing, per flow of a run, measured with tracemalloc.

    python bench/record_memory.py bench/llama3-405b-1k.toml --set limits.fast_forward=true -o /tmp/r.h5

Plans and simulates the run as ``cosim run`` does, then reports, for the merge of a decomposed run's parts
(when it has them), the record (cosim.record.record) and the writing of the results file: the peak of the
memory numpy and Python hold during the phase, above what they held before the merge, in bytes per flow of
the run (the ns-3 engine's own memory is not traced: it is given back before the merge). These are the
phases `cosim.memory.RECORD_BYTES_PER_FLOW` stands for. Sizes of allocations do not depend on the machine's
load, so the figures reproduce where wall times do not.
"""

from __future__ import annotations

import argparse
import json
import time
import tracemalloc

from cosim.decompose import exact
from cosim.plan import compile as compile_plan
from cosim.record import record
from cosim.results import write_results
from cosim.run import execute, experiments_of


def _value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="a TOML path or shipped experiment name")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="an override")
    parser.add_argument("-o", "--output", required=True, help="the results file to write")
    args = parser.parse_args()
    overrides = {k: _value(v) for k, v in (item.split("=", 1) for item in args.set)}
    plan = compile_plan(experiments_of(args.source, overrides)[0])
    tracemalloc.start()
    marks: dict[str, float] = {}
    merge = exact.merge

    def traced_merge(*a, **k):
        tracemalloc.reset_peak()
        marks["base"] = tracemalloc.get_traced_memory()[0]
        out = merge(*a, **k)
        marks["merge"] = tracemalloc.get_traced_memory()[1]
        return out

    exact.merge = traced_merge
    t0 = time.perf_counter()
    outcome = execute(plan)
    print(f"simulated in {time.perf_counter() - t0:.1f} s", flush=True)
    n = int(outcome.out.flow_op.size)
    if "base" not in marks:  # a whole run: no merge
        marks["base"] = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    rec = record(plan, outcome)
    marks["record"] = tracemalloc.get_traced_memory()[1]
    tracemalloc.reset_peak()
    write_results(args.output, [rec])
    marks["write"] = tracemalloc.get_traced_memory()[1]
    print(f"flows {n}")
    for phase in ("merge", "record", "write"):
        if phase in marks:
            print(f"{phase}: peak {(marks[phase] - marks['base']) / n:.1f} B per flow above the memory before the "
                  "merge")


if __name__ == "__main__":
    main()
