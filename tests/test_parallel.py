"""Partitioned runs (limits.partitions, cosim.parallel): the same datasets on one process and on MPI ranks,
the physics of a run whose links are cut between partitions, and one-line refusals."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from tests.conftest import run_main

#: two training jobs (TP2 x DP2 each) spread over the two leaves of a 2:1 leaf-spine: their rings meet on the
#: spines, and neither job depends on the other
TWO_JOBS = """
name = "two-jobs"
[network]
topology = "leaf-spine"
transport = "roce"
gpus_per_server = 2
hosts_per_leaf = 4
spines = 2
oversubscription = 2.0
link_gbps = 100.0
link_delay_ns = 1000.0
"""
JOB = """
[[workloads]]
name = "{name}"
kind = "training"
placement = "spread"
model = "llama2-7b"
gpu = "h100"
chunk_bytes = "4MiB"
model_overrides = {{ num_layers = 1, hidden_size = 1024, num_heads = 8, num_kv_heads = 8, ffn_hidden_size = 2816, vocab_size = 8192, seq_length = 1024 }}
[workloads.parallelism]
tp = 2
dp = 2
micro_batch_size = 1
global_batch_size = 2
"""


def _experiment(tmp_path: Path, jobs=("job0", "job1")) -> Path:
    path = tmp_path / "two-jobs.toml"
    path.write_text(TWO_JOBS + "".join(JOB.format(name=j) for j in jobs))
    return path


def _mpiexec() -> str | None:
    """The MPI launcher beside this interpreter (the test extras' mpich), else one on PATH."""
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else shutil.which("mpiexec")


def _datasets(path: Path) -> dict:
    """Every dataset of every run of a results file, and its summary without the wall-clock keys."""
    out = {}
    with h5py.File(path, "r") as h5:
        for name, run in h5["runs"].items():
            run.visititems(lambda key, obj, name=name: out.__setitem__(f"{name}/{key}", obj[()])
                           if isinstance(obj, h5py.Dataset) else None)
            summary = json.loads(run.attrs["summary"])
            out[f"{name}/summary"] = {k: v for k, v in summary.items() if k not in ("wall_time_s", "packet_hops_per_s")}
    return out


def _assert_same(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    for key, x in a.items():
        if isinstance(x, dict):
            assert x == b[key], key
        else:
            assert x.dtype == b[key].dtype and x.shape == b[key].shape, key
            assert np.array_equal(x, b[key], equal_nan=x.dtype.kind == "f"), key


@pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None or _mpiexec() is None,
                    reason="needs mpi4py and an MPI launcher (pip install '.[test]' installs both)")
@pytest.mark.parametrize("transport,jobs,ranks", [("roce", 2, 2), ("ib", 2, 2), ("uec", 2, 2), ("ib", 4, 3)])
def test_mpi_ranks_write_the_datasets_one_process_writes(tmp_path, transport, jobs, ranks):
    """Partitions spread over MPI ranks (one each, or several on one rank) exchange their cut links' packets
    between windows and give, bit for bit, the results file the same partitions give in one process (counters
    and event counts included)."""
    exp = _experiment(tmp_path, jobs=[f"job{j}" for j in range(jobs)])
    args = [str(exp), "-q", "--transport", transport, "--set", f"limits.partitions={jobs}"]
    one = tmp_path / "one.h5"
    subprocess.run([sys.executable, "-m", "cosim", "run", *args, "-o", str(one)], check=True, timeout=300)
    two = tmp_path / "two.h5"
    done = subprocess.run([_mpiexec(), "-n", str(ranks), sys.executable, "-m", "cosim", "run", *args, "-o", str(two)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == "" and done.stderr == ""  # -q, and rank 1 says nothing either
    got = _datasets(two)
    _assert_same(_datasets(one), got)
    summary = got["two-jobs/summary"]
    assert summary["status"] == "complete" and summary["drops"] == 0


@pytest.mark.parametrize("transport", ["roce", "ib"])
def test_a_partitioned_run_delivers_every_byte_across_its_cut_links(tmp_path, transport, capsys):
    """Two partitions in one process: every flow delivers its bytes, nothing is dropped on a lossless fabric,
    the cut links carry the jobs' traffic both ways (PFC pauses or credits included), and each job's iteration
    takes about what it takes in the undivided run (another tie order, the same fabric)."""
    exp = _experiment(tmp_path)
    times = {}
    for partitions in (1, 2):
        out = tmp_path / f"p{partitions}.h5"
        code, _, err = run_main(["run", str(exp), "-q", "--transport", transport, "-o", str(out),
                                 "--set", f"limits.partitions={partitions}"], capsys)
        assert code == 0, err
        with h5py.File(out, "r") as h5:
            run = h5["runs/two-jobs"]
            s = json.loads(run.attrs["summary"])
            assert s["status"] == "complete" and s["drops"] == 0
            flows = run["flows"]
            assert np.array_equal(flows["delivered_bytes"][()], flows["size_bytes"][()])
            times[partitions] = [s["job0_iteration_time_ns"], s["job1_iteration_time_ns"]]
            if partitions == 2:
                config = json.loads(run.attrs["config"])
                split = config["decomposition"]
                assert split["partitions"] == 2 and split["partition_cut_links"] > 0
                ports = run["ports"]
                node, peer, sent = ports["node"][()], ports["peer"][()], ports["tx_packets"][()]
    assert np.allclose(times[2], times[1], rtol=0.25), times
    # the leaves hold NICs of both jobs, so some host links are cut: packets crossed them both ways
    from cosim.plan import compile  # noqa: PLC0415
    from cosim.run import experiments_of  # noqa: PLC0415

    plan = compile(experiments_of(str(exp), {"network.transport": transport, "limits.partitions": 2})[0])
    part = plan.partitioning.node_partition
    cut = part[node] != part[peer]
    assert cut.any() and (sent[cut] > 0).sum() >= cut.sum() // 2


def test_the_dry_run_shows_the_partitions(tmp_path, capsys):
    code, out, err = run_main(["run", str(_experiment(tmp_path)), "--dry-run", "--set", "limits.partitions=2"], capsys)
    assert code == 0, err
    assert "#   partitions: 2" in out and "#   partition_lookahead_ns: 1000.0" in out
    assert "#   partition_nodes: [" in out


@pytest.mark.parametrize("extra,words", [
    (["--set", "limits.partitions=3"], "form 2 group(s)"),
    (["--set", "limits.partitions=2", "--fault", "link_down:leaf0-spine1@1ms"], "with faults"),
    (["--set", "limits.partitions=2", "--set", "limits.fast_forward=true"], "limits.fast_forward"),
    (["--set", "limits.partitions=0"], "limits.partitions"),
])
def test_what_cannot_be_partitioned_is_refused_in_one_line(tmp_path, capsys, extra, words):
    code, _, err = run_main(["run", str(_experiment(tmp_path)), "-q", "-o", str(tmp_path / "x.h5"), *extra], capsys)
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "x.h5").exists()


def test_one_job_is_never_split(tmp_path, capsys):
    code, _, err = run_main(["run", str(_experiment(tmp_path, jobs=("job0",))), "--dry-run",
                             "--set", "limits.partitions=2"], capsys)
    assert code == 2 and "a job is never split" in err, err


@pytest.mark.parametrize("launcher", [{"PMI_SIZE": "2", "PMI_RANK": "{rank}"},
                                      {"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "{rank}"}])
def test_bad_input_under_a_launcher_is_reported_by_rank_0_alone(launcher, monkeypatch, capsys):
    """Every rank of `mpiexec -n N cosim run ...` finds the same bad input and exits 2; only rank 0 prints the
    line, so the job's log holds it once."""
    for rank in (0, 1):
        for name, value in launcher.items():
            monkeypatch.setenv(name, value.format(rank=rank))
        code, _, err = run_main(["run", "incast", "--set", "network.link_gbps=-1", "--dry-run"], capsys)
        assert code == 2
        assert (err.count("Error:") == 1) if rank == 0 else err == ""


#: run by `mpiexec -n 2`: one case of a rank failing next to a collective; every rank writes what it got or
#: raised, and must leave
MPI_FAILURE_SCRIPT = """
import sys

from cosim.errors import CosimInputError
from cosim.parallel import simulate as parallel
from cosim.parallel.mpi import gather, mpi_world, share

world = mpi_world()
case = sys.argv[1]


def bad_input():
    raise CosimInputError("network.link_gbps", "must be > 0", "e.g. 100")


def no_room():
    if world.rank == 1:
        raise MemoryError("no room for the part")
    return world.rank


def partitioned():
    from cosim.plan import compile
    from cosim.run import experiments_of

    exp = experiments_of(sys.argv[2], {"limits.partitions": 2})[0]
    plan = compile(exp)
    attributes = dict(plan.attributes, **({"NoSuch::Attribute": "1"} if world.rank == 1 else {}))
    out, _ = parallel.simulate(exp, plan.fabric, plan.dag.columns(), plan.partitioning, attributes=attributes,
                               max_sim_time_ns=plan.max_sim_time_ns)
    return out.network.status


cases = {
    "ok": lambda: (share(world, lambda: {"rank": world.rank}), gather(world, lambda: 10 * world.rank)),
    "input": lambda: share(world, bad_input),
    "unpicklable": lambda: share(world, lambda: lambda: 0),
    "gather": lambda: gather(world, no_room),
    "partitioned": partitioned,
}
try:
    said = f"got {cases[case]()!r}"
except Exception as exc:
    said = f"raised {type(exc).__name__} input={isinstance(exc, CosimInputError)}: {exc}"
with open(f"{sys.argv[3]}/rank{world.rank}.txt", "w") as f:  # one file each: the ranks' stdout interleave
    f.write(said)
"""


@pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None or _mpiexec() is None,
                    reason="needs mpi4py and an MPI launcher (pip install '.[test]' installs both)")
@pytest.mark.parametrize("case,rank0,rank1", [
    ("ok", "got ({'rank': 0}, [0, 10])", "got ({'rank': 0}, None)"),
    ("input", "raised CosimInputError input=True: network.link_gbps: must be > 0 (e.g. 100)",
     "raised RankFailed input=True: network.link_gbps: must be > 0 (e.g. 100)"),
    ("unpicklable", "raised AttributeError input=False: Can't pickle local object",
     "raised RankFailed input=True: MPI rank 0: AttributeError: Can't pickle local object"),
    ("gather", "raised RankFailed input=True: MPI rank 1: MemoryError: no room for the part",
     "raised MemoryError input=False: no room for the part"),
    ("partitioned", "raised RankFailed input=True: --set NoSuch::Attribute: no such ns-3 attribute",
     "raised CosimInputError input=True: --set NoSuch::Attribute: no such ns-3 attribute"),
])
def test_a_rank_that_fails_next_to_a_collective_makes_every_rank_leave_with_its_error(tmp_path, case, rank0, rank1):
    """A rank whose value for a collective cannot be made or pickled (rank 0's merged output, a rank's part,
    a rank that cannot build its fabric while the other waits in the first window) sends a failure in its
    place: it re-raises its own error and every other rank raises RankFailed, an input error with the same
    one-line message, so the CLI ends every rank with one line and exit code 2 instead of a hang."""
    script = tmp_path / "fail.py"
    script.write_text(MPI_FAILURE_SCRIPT)
    done = subprocess.run([_mpiexec(), "-n", "2", sys.executable, str(script), case, str(_experiment(tmp_path)),
                           str(tmp_path)], capture_output=True, text=True, timeout=300)  # a guard against a hang
    assert done.returncode == 0, done.stderr[-2000:]
    said = [(tmp_path / f"rank{r}.txt").read_text() for r in (0, 1)]
    assert said[0].startswith(rank0) and said[1].startswith(rank1), said
