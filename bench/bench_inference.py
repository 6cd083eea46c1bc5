"""Cost of the batching fixed point of an inference run: wall time of each phase per packet-level run.

Runs one variant of the shipped ``disaggregated-serving`` experiment (or the one named) the way
cosim.kinds.inference.InferenceKind.execute does, timing each phase of each pass: the analytic pass
(serve), the step trace, the lowering, the packet-level run, and how far the pass's predicted step ends
were from the measured ones. Prints one row per pass (plan s: cosim.plan.compile, which also lowers the
analytic pass once).

    python bench/bench_inference.py                         # serving-layer on RoCE
    python bench/bench_inference.py --variant whole --transport ib
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from cosim.kinds import inference
from cosim.kinds.base import Piece
from cosim.plan import assemble
from cosim.plan import compile as compile_plan
from cosim.run import experiments_of, simulate


def passes(exp) -> list[dict]:
    """One dict per packet-level run: phase wall times (s), DAG ops, flows, prediction error (ms)."""
    rows = []
    t0 = time.perf_counter()
    plan = compile_plan(exp)
    jp = plan.jobs[0]
    w, p = exp.workload, jp.state.plan
    plan_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    sched = inference.schedule_of(w, p)
    serve_s = time.perf_counter() - t0
    for i in range(w.max_batching_iterations):
        t0 = time.perf_counter()
        st = inference.step_trace_of(w, p, sched)
        t1 = time.perf_counter()
        dag = inference.lower_step_trace(w, p, st)
        t2 = time.perf_counter()
        out, _ = simulate(plan, assemble(plan.jobs, {jp.index: Piece.of_flow_dag(dag, jp.hosts)}), whole=True)
        t3 = time.perf_counter()
        m = inference.measure(p, sched, st, out.op_start_ns[dag.trace_start], out.op_finish_ns[dag.trace_done])
        err = max(np.max(np.abs(sched.prefill.end_ns - m.prefill_end_ns), initial=0.0),
                  np.max(np.abs(sched.decode.end_ns - m.decode_end_ns), initial=0.0))
        rows.append({"pass": i, "plan_s": plan_s if i == 0 else 0.0, "serve_s": serve_s, "trace_s": t1 - t0,
                     "lower_s": t2 - t1, "simulate_s": t3 - t2, "dag_ops": dag.n_ops,
                     "flows": int(out.flow_op.size), "predicted_end_error_ms": err / 1e6})
        t0 = time.perf_counter()
        again = inference.schedule_of(w, p, **dict(zip(("kv_delay_ns", "prefill_extra_ns", "decode_extra_ns"),
                                                         inference.corrections(p, sched, m))))
        serve_s = time.perf_counter() - t0
        if again.decisions() == sched.decisions():
            # at the fixed point the re-decided schedule predicts this very run
            rows[-1]["fixed_point_error_ms"] = max(
                np.max(np.abs(again.prefill.end_ns - m.prefill_end_ns), initial=0.0),
                np.max(np.abs(again.decode.end_ns - m.decode_end_ns), initial=0.0)) / 1e6
            break
        sched = again
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--experiment", default="disaggregated-serving")
    ap.add_argument("--variant", default="layer", help="variant name of the experiment (layer, whole)")
    ap.add_argument("--transport", default="roce", choices=("roce", "ib"))
    args = ap.parse_args()
    exps = [e for e in experiments_of(args.experiment, {"network.transport": args.transport})
            if e.name.endswith(f"-{args.variant}") or e.name == args.variant]
    if not exps:
        raise SystemExit(f"no variant {args.variant!r} in {args.experiment}")
    rows = passes(exps[0])
    print(f"{exps[0].name} on {args.transport}: {len(rows)} packet-level run(s)")
    print(f"{'pass':>4} {'plan s':>7} {'serve s':>8} {'trace s':>8} {'lower s':>8} {'sim s':>7} {'DAG ops':>9} "
          f"{'flows':>7} {'pred err ms':>12}")
    for r in rows:
        print(f"{r['pass']:>4} {r['plan_s']:7.2f} {r['serve_s']:8.2f} {r['trace_s']:8.2f} {r['lower_s']:8.2f} "
              f"{r['simulate_s']:7.2f} {r['dag_ops']:>9} {r['flows']:>7} {r['predicted_end_error_ms']:12.3g}"
              + (f"  fixed point (re-decided: {r['fixed_point_error_ms']:.2g} ms)" if "fixed_point_error_ms" in r
                 else ""))


if __name__ == "__main__":
    main()
