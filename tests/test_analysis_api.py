"""The notebook API: open_results → runs with DataFrames, summary and experiment frames."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from cosim import results
from cosim.errors import CosimInputError
from cosim.results.api import Results, Run, open_results
from cosim.run import run as run_experiment
from cosim.spec import make


@pytest.fixture(scope="module")
def path(engine_ns, tmp_path_factory):
    """Two 4-host incasts, DCQCN on and off, in one results file."""
    runs = [run_experiment(make("flows", name=n, hosts=4, flow_bytes=200_000, dcqcn=d))
            for n, d in (("on", True), ("off", False))]
    return results.write_results(tmp_path_factory.mktemp("api") / "r.h5", runs)


def test_results_is_a_mapping_of_runs(path):
    """open_results gives runs by name in write order, with summary, config, experiment and provenance."""
    res = open_results(path)
    assert isinstance(res, Results) and list(res) == ["on", "off"] and len(res) == 2  # write order
    run = res["on"]
    assert isinstance(run, Run) and run.name == "on" and run.summary["status"] == "complete"
    assert run.config["experiment"]["network"]["dcqcn"] is True and run.experiment["network"]["hosts"] == 4
    assert run.provenance["seed"] == 1 and "flows" in run.groups()
    with pytest.raises(KeyError, match="runs are on, off"):
        res["nope"]


def test_tables_as_frames_and_as_arrays(path):
    run = open_results(path)["on"]
    flows = run.flows
    assert len(flows) == run.summary["flows"] == 3
    assert flows["fct_ns"].max() == pytest.approx(run.summary["fct_max_ns"])
    assert flows["src"].dtype == np.int32  # dtypes of the file kept
    arrays = run.table("queues", as_frame=False)
    assert isinstance(arrays["bytes"], np.ndarray) and len(run.queues) == arrays["bytes"].size
    assert 0 < arrays["bytes"].max() <= run.ports["peak_queue_bytes"].max()  # sampled vs exact peak
    empty = run.stalls  # RoCE run: no credit stalls → empty frame with the schema's columns
    assert len(empty) == 0 and {"time_ns", "node", "port", "vl", "stalled"} <= set(empty.columns)
    with pytest.raises(KeyError, match="tables are"):
        run.table("bogus")


def test_summary_and_experiment_frames(path):
    """summary_frame has a row per run; experiment_frame the dotted fields that differ, joinable with it."""
    res = open_results(path)
    frame = res.summary_frame()
    assert list(frame.index) == ["on", "off"] and frame.index.name == "run"
    assert list(frame.columns[:3]) == ["status", "flows", "flows_completed"]
    assert frame.loc["on", "cnps_sent"] == res["on"].summary["cnps_sent"] and frame.loc["off", "cnps_sent"] == 0
    varying = res.experiment_frame()
    assert list(varying.columns) == ["network.dcqcn"] and not varying.loc["off", "network.dcqcn"]
    assert "network.hosts" in res.experiment_frame(varying_only=False).columns
    joined = varying.join(frame[["fct_p99_ns"]])
    assert joined.shape == (2, 2)
    assert res.compare(baseline="on").runs == ("on", "off")


def test_without_pandas_the_error_names_the_extra(path, monkeypatch):
    run = open_results(path)["on"]
    monkeypatch.setitem(sys.modules, "pandas", None)  # what an environment without pandas sees
    with pytest.raises(ImportError, match=r"cosim\[analysis\]"):
        run.flows
    assert run.table("flows", as_frame=False)["fct_ns"].size == 3


def test_not_a_results_file_is_an_input_error(tmp_path):
    bad = tmp_path / "x.h5"
    bad.write_bytes(b"nope")
    with pytest.raises(CosimInputError, match="not a readable HDF5 file"):
        open_results(bad)
