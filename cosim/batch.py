"""A decomposed run across machines: job-array tasks simulate its parts, ``cosim merge`` joins them.

    write_shard(exp, "parts", shard=(i, n))     # task i of n: its parts, one file each, and the manifest
    merge_parts("parts", "out.h5")              # every run of the manifests, exactly as ``cosim run`` gives it

Part k of a run (a piece of its cosim.decompose.exact.Decomposition, made again from the experiment on
every machine: it is a pure function of the experiment) runs in task k % n. Its output arrays go to
``<run>.part<k>.npz`` (written atomically); ``<run>.parts.json`` holds the experiment and the number of
parts. A run that does not decompose is one part. The merge plans each run again, checks every part is
there, reruns until the end of the whole run the parts that finish first (as a local run does) and
writes the results file. Parts run with the same binaries give the same arrays on any machine.

The manifest and every part file carry the experiment's fingerprint (:func:`fingerprint`): a part left by
another experiment of the same run name (a job array resubmitted after an edit) is refused by the merge,
never mixed in; so is a damaged part file or manifest, each naming the shard to rerun.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path

import numpy as np

from cosim import __version__, engine, memory
from cosim.decompose import exact as decompose_run
from cosim.errors import CosimInputError
from cosim.h5io import atomic_output, write_image
from cosim.plan import compile  # noqa: A004 - the plan's verb
from cosim.record import record
from cosim.results.store import rescue
from cosim.run import Outcome, alone_runs
from cosim.spec import from_document, to_document

MANIFEST_SUFFIX = ".parts.json"
MANIFEST_SCHEMA = "cosim.parts/2"


def dag_inputs(plan) -> tuple:
    """(fabric, columns, gpu_node, attributes) of a compiled run's DAG."""
    if plan.whole_only:
        raise CosimInputError("faults", f"{plan.whole_only}: the run runs whole",
                              "run it with 'cosim run' (no --parts-dir)")
    if any(p.kind.iterates for p in plan.jobs):
        raise CosimInputError("workload", "an inference run iterates whole runs", "run it with 'cosim run'")
    return plan.fabric, plan.dag.columns(), np.arange(plan.fabric.n_nodes), plan.attributes


def _decomposition(exp, fabric, columns, gpu_node, attributes) -> decompose_run.Decomposition:
    """The run's decomposition; a run that does not decompose is one piece of every op."""
    d = (decompose_run.decomposition(fabric, columns, gpu_node=gpu_node, attributes=attributes)
         if exp.limits.decompose == "auto" else decompose_run._whole("limits.decompose is off"))
    if d.mode != "whole":
        return d
    n = int(np.asarray(columns["kind"]).size)
    op = decompose_run.OP
    piece = decompose_run.Piece(ops=np.arange(n, dtype=op), dep_ptr=np.asarray(columns["dep_ptr"]),
                                dep_idx=np.asarray(columns["dep_idx"]), copies=1)
    return decompose_run.Decomposition(
        mode="whole", reason=d.reason, pieces=(piece,), op_piece=np.zeros(n, op),
        op_image=np.arange(n, dtype=op), node_image=np.arange(fabric.n_nodes, dtype=np.int64),
        node_piece=np.zeros(fabric.n_nodes, np.int64))


def _settings(plan) -> dict:
    exp = plan.experiment
    return {"seed": exp.seed, "attributes": plan.attributes,
            "queue_sample_interval_ns": exp.telemetry.queue_sample_interval_ns,
            "max_sim_time_ns": plan.max_sim_time_ns}


def fingerprint(exp) -> str:
    """SHA-256 of the resolved experiment and the cosim version: equal for the parts of one experiment only."""
    text = json.dumps({"cosim": __version__, "experiment": to_document(exp)}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def part_path(folder: Path, run_name: str, k: int) -> Path:
    """The file of part ``k`` of run ``run_name``."""
    return Path(folder) / f"{run_name}.part{k:05d}.npz"


def write_shard(exp, folder, *, shard: tuple[int, int] = (0, 1), progress=None) -> list[Path]:
    """Simulate the parts of ``exp`` that shard ``shard`` = (I, N) runs (part k when k % N == I) into
    ``folder``; write the run's manifest; return the part files written."""
    folder = Path(folder)
    plan = compile(exp)
    fabric, columns, gpu_node, attributes = dag_inputs(plan)
    d = _decomposition(exp, fabric, columns, gpu_node, attributes)
    digest = fingerprint(exp)
    manifest = {"schema": MANIFEST_SCHEMA, "run": exp.name, "experiment": to_document(exp), "fingerprint": digest,
                "parts": len(d.pieces), "decomposition": d.describe()}
    written = []
    for k in range(shard[0], len(d.pieces), shard[1]):
        out = decompose_run.run_piece(fabric, decompose_run.piece_columns(columns, d.pieces[k]),
                                      dict(_settings(plan), progress=progress))
        buffer = io.BytesIO()
        np.savez(buffer, **_flatten(out), fingerprint=np.frombuffer(digest.encode(), np.uint8))
        path = part_path(folder, exp.name, k)
        try:
            write_image(path, buffer.getvalue())
        except CosimInputError as exc:  # a simulated part is never lost to its output
            raise rescue(path, buffer.getvalue(), exc) from None
        written.append(path)
    # the manifest last: a shard that failed leaves no manifest promising its parts
    with atomic_output(folder / f"{exp.name}{MANIFEST_SUFFIX}") as tmp:
        tmp.write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    return written


_DAG_SCALARS = ("failed_collective", "failed_at_ns", "subs_finished")


def _flatten(out: engine.DagOutput) -> dict:
    net = out.network
    arrays = {"op_start_ns": out.op_start_ns, "op_finish_ns": out.op_finish_ns, "flow_op": out.flow_op,
              "flow_start_ns": out.flow_start_ns} | ({} if out.flow_sub is None else {"flow_sub": out.flow_sub})
    scalars = {}
    for field in engine.SimulationOutput.__dataclass_fields__:
        value = getattr(net, field)
        if isinstance(value, dict):
            if field == "counters":
                scalars[field] = value
            else:  # a table (columns by name) or tables by name (logs)
                for k, x in value.items():
                    arrays |= ({f"net.{field}.{k}.{c}": np.asarray(y) for c, y in x.items()} if isinstance(x, dict)
                               else {f"net.{field}.{k}": np.asarray(x)})
        elif isinstance(value, np.ndarray):
            arrays[f"net.{field}"] = value
        else:
            scalars[field] = list(value) if isinstance(value, tuple) else value
    scalars["dag"] = {field: getattr(out, field) for field in _DAG_SCALARS}
    arrays["scalars"] = np.frombuffer(json.dumps(scalars).encode(), np.uint8)
    return arrays


def _unflatten(data) -> engine.DagOutput:
    scalars = json.loads(bytes(data["scalars"]).decode())
    fields = {}
    for field in engine.SimulationOutput.__dataclass_fields__:
        if field in scalars:
            value = scalars[field]
            fields[field] = tuple(value) if field == "deadlock_cycle" else value
        elif f"net.{field}" in data:
            fields[field] = data[f"net.{field}"]
        else:
            prefix = f"net.{field}."
            fields[field] = {}
            for k in data.files:
                if k.startswith(prefix):
                    name, _, column = k[len(prefix):].partition(".")
                    if column:
                        fields[field].setdefault(name, {})[column] = data[k]
                    else:
                        fields[field][name] = data[k]
    return engine.DagOutput(op_start_ns=data["op_start_ns"], op_finish_ns=data["op_finish_ns"],
                            flow_op=data["flow_op"], flow_start_ns=data["flow_start_ns"],
                            flow_sub=data["flow_sub"] if "flow_sub" in data.files else None,
                            network=engine.SimulationOutput(**fields), **scalars.get("dag", {}))


def manifests(folder) -> list[Path]:
    """The part manifests in ``folder``, by name."""
    return sorted(Path(folder).glob(f"*{MANIFEST_SUFFIX}"))


def merge_parts(folder, output, *, jobs: int = 1) -> list[str]:
    """Merge the parts of every run in ``folder`` into ``output`` (atomically); return the run names.
    A missing part is a CosimInputError naming it."""
    from cosim.results import write_results  # noqa: PLC0415

    folder = Path(folder)
    found = manifests(folder)
    if not found:
        raise CosimInputError(str(folder), f"holds no part manifest (*{MANIFEST_SUFFIX})",
                              "run 'cosim run EXPERIMENT --parts-dir DIR' (one array task per shard) first")
    records = []
    for m in found:
        info = _manifest(m)
        exp = from_document(info["experiment"], where=str(m))[0]
        missing = [part_path(folder, exp.name, k) for k in range(info["parts"])
                   if not part_path(folder, exp.name, k).is_file()]
        if missing:
            raise CosimInputError(str(folder), f"{len(missing)} of {info['parts']} parts of run {exp.name!r} have no "
                                  f"file yet (first: {missing[0].name})", "run the missing shards")
        if info["fingerprint"] != fingerprint(exp):
            raise CosimInputError(str(m), "does not match the experiment it holds (edited by hand, or written by "
                                  "another cosim)", "rerun the shards with this cosim")
        plan = compile(exp)
        memory.check_record_fits(plan.dag.n_flows())  # before reading the parts: they stay for a larger machine
        fabric, columns, gpu_node, attributes = dag_inputs(plan)
        d = _decomposition(exp, fabric, columns, gpu_node, attributes)
        if len(d.pieces) != info["parts"]:
            raise CosimInputError(str(m), f"lists {info['parts']} parts, the experiment makes {len(d.pieces)}",
                                  "rerun the shards with this cosim")
        outs = [_part(part_path(folder, exp.name, k), info["fingerprint"], k, info["parts"])
                for k in range(info["parts"])]
        settings = _settings(plan)
        how = d.describe() if d.mode != "whole" else {"decompose": "whole", "decompose_reason": d.reason}
        out, why = (outs[0], "") if d.mode == "whole" else decompose_run.finish(fabric, columns, d, outs, settings,
                                                                              jobs=jobs)
        if out is None:  # only the whole run is exact: run it here
            out = engine.simulate_dag(fabric, **columns, **settings)
            how = {"decompose": "whole", "decompose_reason": f"{d.mode} parts were simulated, but {why}: ran the "
                   "whole run"}
        records.append(record(plan, Outcome(out=out, dag=plan.dag, states=tuple(p.state for p in plan.jobs),
                                            decomposition=how, alone=alone_runs(plan))))
    write_results(output, records)
    return [r.name for r in records]


def _manifest(path: Path) -> dict:
    """The checked contents of a part manifest (a damaged one is a CosimInputError naming it)."""
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CosimInputError(str(path), f"is damaged ({type(exc).__name__})", "rerun any shard of its run to "
                              "write it again") from None
    if not isinstance(info, dict) or info.get("schema") != MANIFEST_SCHEMA:
        raise CosimInputError(str(path), "is not a cosim part manifest", "rerun the shards")
    ok = (isinstance(info.get("experiment"), dict) and isinstance(info.get("fingerprint"), str)
          and isinstance(info.get("parts"), int) and not isinstance(info.get("parts"), bool) and info["parts"] >= 1)
    if not ok:
        raise CosimInputError(str(path), "lacks the experiment, its fingerprint or the number of parts",
                              "rerun the shards with this cosim")
    return info


def _part(path: Path, digest: str, k: int, n_parts: int) -> engine.DagOutput:
    """Part ``k``'s engine output from ``path``, refused when damaged or made by another experiment than the
    one of fingerprint ``digest``."""
    try:
        with np.load(path) as data:
            made_by = bytes(data["fingerprint"]).decode() if "fingerprint" in data.files else ""
            if made_by != digest:
                raise CosimInputError(str(path), "was made by another experiment than its run's manifest (a "
                                      "shard of an earlier version of the experiment)",
                                      f"rerun shard {k} (part k runs in task k % N of N; {n_parts} parts), or "
                                      "remove the folder's stale parts and rerun every shard")
            return _unflatten(data)
    except CosimInputError:
        raise
    except (OSError, ValueError, KeyError, EOFError, UnicodeDecodeError, zipfile.BadZipFile) as exc:
        raise CosimInputError(str(path), f"is damaged ({type(exc).__name__})",
                              f"rerun the shard that writes part {k}") from None
