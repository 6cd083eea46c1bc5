"""The input contract, fuzzed: generated CLI options, damaged trace files and damaged results files.

Whatever the input, ``cosim`` exits 0 (or 1 for a simulation that did not complete), or 2 with one line
``Error: ...`` on stderr; never a traceback, a native abort, a hang or a half-written output file. Each case
runs ``cosim`` in a child process so that an abort is seen as an exit code, not as a dead test runner.

Used by ``tests/test_fuzz_contract.py`` (a few dozen examples in CI) and ``bench/fuzz_contract.py``
(thousands, for a soak).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[1]
TRACE = REPO / "traces" / "llama2-7b-2l_dp8-zero1.h5"
PROFILE = REPO / "tests" / "data" / "compute-profile-sample.csv"

#: hostile spellings of numbers, sizes and names
HOSTILE = ("0", "-1", "1", "2", "1e309", "-1e309", "nan", "inf", "-inf", "abc", "1e-9", "99999999999999999999",
           "4MiB", "1.5", "0x10", "1e12", " ", "none", "true")

#: (option, values it takes): valid values mixed with hostile ones
OPTIONS = {
    "--hosts": ("4", "16", "3"), "--link-gbps": ("100", "400", "0.001"), "--link-delay-ns": ("0", "1000"),
    "--flow-bytes": ("0", "64KiB", "1MB"), "--topology": ("single-switch", "leaf-spine", "fat-tree",
                                                          "rail-optimized", "torus"),
    "--transport": ("roce", "ib", "both", "tcp"), "--spines": ("1", "2"), "--oversubscription": ("1", "2", "0.5"),
    "--hosts-per-leaf": ("2", "4", "3"), "--gpus-per-server": ("1", "2", "8"), "--seed": ("0", "1", "18446744073709551616"),
    "--queue-interval-ns": ("1000", "1", "0"), "--max-sim-time-ms": ("0.01", "1", "0"),
    "--pattern": ("incast", "permutation", "ring"),
    "--set": ("HostNic::MtuBytes=1024", "SharedBufferMmu::BufferBytes=100000", "FabricSwitch::HeadroomBytes=1",
              "EgressPort::DataRate=0bps", "HostNic::Dcqcn=abc", "Foo=1", "X::Y", "HostNic::MtuBytes=-5",
              "FabricNode::VlReservedBytes=64", "SharedBufferMmu::DynamicThresholdAlpha=nan"),
}

#: trace datasets to damage, and what to write into them
TRACE_DATASETS = ("ops/kind", "ops/rank", "ops/bytes", "ops/group", "ops/peer", "ops/coll_id", "ops/duration_ns",
                  "deps/ptr", "deps/idx", "groups/ptr", "groups/ranks", "groups/kind", "ops/match_id")
DAMAGE = ("value", "truncate", "delete", "dtype", "attr")


def cli_args():
    """Strategy: ``cosim run`` options, some valid, some hostile, in any order."""
    value = lambda opt: st.one_of(st.sampled_from(OPTIONS[opt]), st.sampled_from(HOSTILE))  # noqa: E731
    pair = st.sampled_from(sorted(OPTIONS)).flatmap(lambda opt: st.tuples(st.just(opt), value(opt)))
    return st.lists(pair, min_size=1, max_size=5)


def trace_damage():
    """Strategy: (dataset, kind of damage, index, value) to apply to a copy of a valid trace."""
    return st.tuples(st.sampled_from(TRACE_DATASETS), st.sampled_from(DAMAGE), st.integers(0, 400),
                     st.sampled_from((-1, 0, 1, 7, 255, 2**31 - 1, 2**40, -(2**40))))


def child_env() -> dict[str, str]:
    """The environment of a cosim child: the repository's package, and the plugin the tests use if one is
    named (COSIM_NS3_LIBRARY), nothing else of the caller's."""
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    if os.environ.get("COSIM_NS3_LIBRARY"):
        env["COSIM_NS3_LIBRARY"] = os.environ["COSIM_NS3_LIBRARY"]
    return env


def run_cosim(args: list[str], cwd: Path, timeout_s: float = 120.0) -> subprocess.CompletedProcess:
    """``python -m cosim ARGS`` in a child process (the repository's package, as the tests use it)."""
    return subprocess.run([sys.executable, "-m", "cosim", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout_s, env=child_env())


def check_contract(proc: subprocess.CompletedProcess, output: Path | None = None) -> None:
    """Exit 0/1, or 2 with one ``Error:`` line; no traceback; no output file after a failure."""
    where = f"exit {proc.returncode}\nstdout: {proc.stdout[-2000:]}\nstderr: {proc.stderr[-2000:]}"
    assert proc.returncode in (0, 1, 2), where
    assert "Traceback" not in proc.stderr + proc.stdout, where
    if proc.returncode == 2:
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("Error:"), where
        if output is not None:
            assert not output.exists(), f"half-written {output}\n{where}"
    if output is not None:
        assert not list(output.parent.glob(f".{output.name}*")) and not list(output.parent.glob("*.tmp")), \
            f"temporary file left\n{where}"


def damage_trace(src: Path, dst: Path, dataset: str, kind: str, index: int, value: int) -> None:
    """Copy trace ``src`` to ``dst`` with one dataset damaged."""
    shutil.copy(src, dst)
    with h5py.File(dst, "r+") as h5:
        data = h5[dataset][()]
        if kind == "value" and data.size:
            data = data.copy()
            data[index % data.size] = np.asarray(value).astype(data.dtype, casting="unsafe")
            h5[dataset][...] = data
        elif kind == "truncate":
            del h5[dataset]
            h5[dataset] = data[: max(0, data.size - 1 - index % max(1, data.size))]
        elif kind == "delete":
            del h5[dataset]
        elif kind == "dtype":
            del h5[dataset]
            h5[dataset] = data.astype(np.float64) + 0.5
        else:
            h5.attrs["n_ranks"] = value


def damage_results(src: Path, dst: Path, dataset: str, kind: str, index: int, value: int) -> None:
    """Copy results file ``src`` to ``dst`` with one run's dataset or attribute damaged."""
    shutil.copy(src, dst)
    with h5py.File(dst, "r+") as h5:
        run = next(iter(h5["runs"].values()))
        if kind == "attr":
            run.attrs[("summary", "config", "provenance")[index % 3]] = ("[1]", "{", "null", "3")[value % 4]
            return
        names = []
        run.visititems(lambda k, o: names.append(k) if isinstance(o, h5py.Dataset) else None)
        name = names[index % len(names)]
        data = run[name][()]
        if kind == "value" and data.size:
            data = data.copy()
            bad = (np.nan if data.dtype.kind == "f" else value)
            data[index % data.size] = np.asarray(bad).astype(data.dtype, casting="unsafe")
            run[name][...] = data
        elif kind == "truncate":
            del run[name]
            run[name] = data[: max(0, data.size - 1)]
        elif kind == "delete":
            del run[name]
        elif kind == "dtype":
            del run[name]
            run[name] = np.array([b"x"] * max(1, data.size))
        else:
            del run[name]
            run[name] = h5py.SoftLink(f"/runs/{run.name.rsplit('/', 1)[-1]}/{name}")


# ---------------------------------------------------------------- parts folders of `cosim run --parts-dir`

#: a run that decomposes into two independent parts (one job under each leaf), and the same run edited
PARTS_EXPERIMENT = """name = "pj"
seed = {seed}
[network]
topology = "leaf-spine"
hosts = 8
hosts_per_leaf = 4
[[workloads]]
name = "a"
kind = "flows"
pattern = "permutation"
flow_bytes = "{a_bytes}"
hosts = [0, 1, 2, 3]
[[workloads]]
name = "b"
kind = "flows"
pattern = "incast"
flow_bytes = "32KiB"
hosts = [4, 5, 6, 7]
"""
#: (seed, a's flow size): experiment A, and B that a resubmitted job array would have after an edit
PARTS_VARIANTS = ((1, "64KiB"), (2, "128KiB"))
PARTS_DAMAGE = ("mix_part", "mix_manifest", "truncate_part", "flip_part", "delete_part", "empty_part",
                "value_part", "truncate_manifest", "edit_manifest", "stray_part")


def make_parts(folder: Path) -> list[Path]:
    """Parts folders of experiments A and B (PARTS_VARIANTS) below ``folder``, each complete and mergeable."""
    made = []
    for seed, a_bytes in PARTS_VARIANTS:
        spec = folder / f"pj-{seed}.toml"
        spec.write_text(PARTS_EXPERIMENT.format(seed=seed, a_bytes=a_bytes))
        parts = folder / f"parts-{seed}"
        check_contract(run_cosim(["run", str(spec), "--parts-dir", str(parts), "-q"], cwd=folder))
        made.append(parts)
    return made


def parts_damage():
    """Strategy: (kind of damage, index, value) to apply to a copy of A's parts folder."""
    return st.tuples(st.sampled_from(PARTS_DAMAGE), st.integers(0, 10**6),
                     st.sampled_from((-1, 0, 1, 255, 2**31 - 1, 2**53, -(2**40))))


def damage_parts(a: Path, b: Path, dst: Path, kind: str, index: int, value: int) -> None:
    """Copy A's parts folder ``a`` to ``dst`` and damage it, mixing in B's (``b``) for the mix kinds."""
    shutil.copytree(a, dst)
    parts = sorted(dst.glob("*.npz"))
    part = parts[index % len(parts)]
    manifest = next(dst.glob("*.parts.json"))
    if kind == "mix_part":
        shutil.copy(b / part.name, part)
    elif kind == "mix_manifest":
        shutil.copy(b / manifest.name, manifest)
    elif kind in ("truncate_part", "truncate_manifest"):
        target = part if kind == "truncate_part" else manifest
        data = target.read_bytes()
        target.write_bytes(data[: index % max(1, len(data))])
    elif kind == "flip_part":
        data = bytearray(part.read_bytes())
        data[index % len(data)] ^= 1 + (value & 0x7F)
        part.write_bytes(bytes(data))
    elif kind == "delete_part":
        part.unlink()
    elif kind == "empty_part":
        part.write_bytes(b"")
    elif kind == "value_part":  # a well-formed part file with one array damaged in value
        with np.load(part) as z:
            arrays = {k: z[k] for k in z.files}
        name = sorted(k for k, x in arrays.items() if x.size and x.dtype.kind in "iuf")[index % 7]
        data = arrays[name].copy()
        bad = np.nan if data.dtype.kind == "f" and value < 0 else value
        data.flat[index % data.size] = np.asarray(bad).astype(data.dtype, casting="unsafe")
        arrays[name] = data
        with open(part, "wb") as fh:
            np.savez(fh, **arrays)
    elif kind == "edit_manifest":
        doc = json.loads(manifest.read_text())
        key = sorted(doc)[index % len(doc)]
        doc[key] = (value, None, "x", [], {})[index % 5]
        manifest.write_text(json.dumps(doc))
    else:  # a part of another run name beside A's
        shutil.copy(b / part.name, dst / part.name.replace("pj.", "other."))


def check_merged_is_one_experiment(output: Path) -> None:
    """A merge that succeeded is one experiment's run, never a mix: every flow of job a has A's size or every
    one B's, and no flow delivered more than it sent."""
    with h5py.File(output, "r") as h5:
        (run,) = h5["runs"].values()
        size = run["flows/size_bytes"][()]
        delivered = run["flows/delivered_bytes"][()]
    assert (delivered <= size).all(), f"{output}: a flow delivered more than it sent"
    a_sizes = {int(s) for s in size if s != 32 * 1024}
    assert len(a_sizes) <= 1, f"{output}: job a mixes flow sizes {a_sizes}"


def merge_damaged_parts(a: Path, b: Path, damaged: Path, merged: Path, damage: tuple, cwd: Path) -> None:
    """Damage a copy of parts folder ``a`` (``damage_parts``), merge it into ``merged``: the contract holds,
    and a merge that succeeds is one experiment's run."""
    damage_parts(a, b, damaged, *damage)
    proc = run_cosim(["merge", str(damaged), "-o", str(merged)], cwd=cwd)
    check_contract(proc, merged)
    if proc.returncode == 0:
        check_merged_is_one_experiment(merged)


# ---------------------------------------------------------------- faults on one element

#: the element every generated fault takes down, and the run they hit
FAULT_LINK = "leaf0-spine0"
FAULT_RUN = ["run", "--pattern", "permutation", "--topology", "leaf-spine", "--hosts", "8", "--flow-bytes", "256KiB",
             "--max-sim-time-ms", "1"]


def run_with_faults(faults, output: Path) -> subprocess.CompletedProcess:
    """FAULT_RUN with ``faults`` (--fault texts) into ``output``, its contract checked."""
    proc = run_cosim([*FAULT_RUN, *(a for f in faults for a in ("--fault", f)), "-q", "-o", str(output)],
                     cwd=output.parent)
    check_contract(proc, output)
    return proc


def fault_options():
    """Strategy: 1-4 ``--fault`` values taking FAULT_LINK down, overlapping or nested at will: (start, length)
    outages, some open-ended, and now and then a Poisson process of outages."""
    outage = st.tuples(st.integers(0, 300), st.one_of(st.none(), st.integers(1, 400))).map(
        lambda t: f"link_down:{FAULT_LINK}@{t[0]}us" + ("" if t[1] is None else f",duration_ns={t[1]}us"))
    poisson = st.tuples(st.sampled_from(("1e3", "1e5", "3e6")), st.integers(1, 300), st.integers(1, 100),
                        st.integers(0, 3)).map(
        lambda t: f"link_down:{FAULT_LINK}@0,rate_per_s={t[0]},until_ns={t[1]}us,duration_ns={t[2]}us,seed={t[3]}")
    return st.lists(st.one_of(outage, outage, poisson), min_size=1, max_size=4)


def down_intervals(intervals: list[tuple[float, float]], end_ns: float) -> list[tuple[float, float]]:
    """The union of [start, stop) intervals, clipped to [0, end_ns], as sorted disjoint intervals."""
    out: list[list[float]] = []
    for a, b in sorted((a, min(b, end_ns)) for a, b in intervals if a <= end_ns):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out if b > a or b == end_ns]


def check_down_time_is_the_union(output: Path) -> None:
    """The link's down time in the faults table (its down and up actions) is the union of its faults'
    outages (each resolved fault from its start for its duration; open-ended ones to the end of the run)."""
    with h5py.File(output, "r") as h5:
        (run,) = h5["runs"].values()
        summary = json.loads(run.attrs["summary"])
        config = json.loads(run.attrs["config"])
        table = {k: run[f"faults/{k}"][()] for k in run["faults"]} if "faults" in run else {}
    end = float(summary["sim_time_ns"])
    resolved = config["faults"]["faults"]
    want = down_intervals([(f["at_ns"], f["at_ns"] + f["duration_ns"] if "duration_ns" in f else np.inf)
                           for f in resolved if f["kind"] == "link_down"], end)
    actions = config["faults"]["actions"]
    got, since = [], None
    for t, code in sorted(zip(table.get("time_ns", []), table.get("action", [])), key=lambda x: x[0]):
        if actions[code] == "down" and since is None:
            since = float(t)
        elif actions[code] == "up" and since is not None:
            got.append((since, float(t)))
            since = None
    if since is not None:
        got.append((since, end))
    assert len(got) == len(want) and np.allclose(got, want, rtol=0, atol=1.0), \
        f"{output}: down {got}, union of the faults {want}"


# ---------------------------------------------------------------- concurrent writers

def concurrent_appends(folder: Path, names: tuple[str, str], stagger_s: float = 0.0,
                       timeout_s: float = 120.0) -> None:
    """Two ``cosim run --append`` into one file at once (the second started ``stagger_s`` later): each exits
    0 with its run in the file, or 2 with one line saying where its finished run was saved instead (a rescue
    file holding it) or, for a run name the file already holds, refusing before it simulates; never a lost
    run."""
    output = folder / "shared.h5"
    argv = [sys.executable, "-m", "cosim", "run", "--hosts", "4", "--flow-bytes", "64KiB", "-q", "--append",
            "-o", str(output)]
    procs = []
    for i, name in enumerate(names):
        if i:
            time.sleep(stagger_s)
        procs.append(subprocess.Popen([*argv, "--name", name], cwd=folder, env=child_env(), text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    done = [(p, *p.communicate(timeout=timeout_s)) for p in procs]
    kept = set()
    if output.exists():
        with h5py.File(output, "r") as h5:
            kept = set(h5["runs"])
    for (proc, out, err), name in zip(done, names):
        where = f"{name}: exit {proc.returncode}\nstdout: {out[-2000:]}\nstderr: {err[-2000:]}"
        assert proc.returncode in (0, 2) and "Traceback" not in out + err, where
        if proc.returncode == 0:
            assert name in kept, f"{where}\nits run is not in {output} ({sorted(kept)})"
        else:
            errors = [line for line in err.splitlines() if line.startswith("Error:")]
            assert len(errors) == 1, where
            saved = [w.rstrip(",;") for w in errors[0].split() if "cosim-rescued-" in w]
            if saved:
                with h5py.File(saved[0], "r") as h5:
                    assert name in h5["runs"], where
                Path(saved[0]).unlink()
            else:  # refused before anything was simulated: the same run name already in the file
                assert names[0] == names[1] and name in kept, where


# ---------------------------------------------------------------- calibration profiles

#: hostile CSV cells for `cosim calibrate`
CELLS = ("1e308", "1e-300", "0", "-1", "nan", "inf", "-inf", "", "abc", "1e309", "99999999999999999999", "True",
         "0x10", " ", "1e-9", "2.5")


def calibration_damage():
    """Strategy: (row, column, cell) to write into a copy of the sample profile (row 0 is the header), or a
    whole-file damage (``column`` -1: drop that column; -2: keep only ``row`` lines)."""
    return st.tuples(st.integers(0, 25), st.integers(-2, 70), st.sampled_from(CELLS))


def damage_calibration(src: Path, dst: Path, row: int, column: int, cell: str) -> None:
    """Copy profile CSV ``src`` to ``dst`` with one cell, column or its length damaged."""
    lines = src.read_text().splitlines()
    rows = [line.split(",") for line in lines]
    if column == -2:
        rows = rows[: row % (len(rows) + 1)]
    elif column == -1:
        drop = row % len(rows[0])
        rows = [r[:drop] + r[drop + 1:] for r in rows]
    else:
        r = rows[row % len(rows)]
        r[column % len(r)] = cell
    dst.write_text("\n".join(",".join(r) for r in rows) + ("\n" if rows else ""))


# ---------------------------------------------------------------- inference arrival rates

#: hostile Poisson arrival rates, requests per second
RATES = ("1e-12", "1e-9", "1e-6", "0.001", "1", "10", "1e4", "1e6", "1e9", "1e10", "0", "-1", "nan", "inf", "abc")


def inference_settings():
    """Strategy: --set values of an inference run: its arrival rate and now and then a request count, a
    time limit or a batch size. (Request counts stay small: a plan of many thousand requests is minutes
    of lowering, measured in bench/fuzz_contract.py's notes, not a contract question.)"""
    extra = st.sampled_from(((), ("workload.requests=1",), ("workload.requests=3",), ("workload.requests=0",),
                             ("limits.max_sim_time_ns=1000",), ("workload.max_decode_batch=1",)))
    return st.tuples(st.sampled_from(RATES), extra)
