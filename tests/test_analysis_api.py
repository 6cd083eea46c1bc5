"""The notebook API: open_results → runs with DataFrames, summary and scenario frames."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from cosim import results
from cosim.runs import flows as scenario
from cosim.results.frames import Results, Run, open_results
from cosim.errors import CosimInputError


@pytest.fixture(scope="module")
def path(engine_ns, tmp_path_factory):
    runs = [scenario.run(scenario.ScenarioSpec(name=n, hosts=4, flow_bytes=200_000, dcqcn=d))
            for n, d in (("on", True), ("off", False))]
    return results.write_results(tmp_path_factory.mktemp("api") / "r.h5", runs)


def test_results_is_a_mapping_of_runs(path):
    res = open_results(path)
    assert isinstance(res, Results) and list(res) == ["on", "off"] and len(res) == 2  # write order
    run = res["on"]
    assert isinstance(run, Run) and run.name == "on" and run.summary["status"] == "complete"
    assert run.config["scenario"]["dcqcn"] is True and run.scenario["hosts"] == 4
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


def test_summary_and_scenario_frames(path):
    res = open_results(path)
    frame = res.summary_frame()
    assert list(frame.index) == ["on", "off"] and frame.index.name == "run"
    assert list(frame.columns[:3]) == ["status", "flows", "flows_completed"]
    assert frame.loc["on", "cnps_sent"] == res["on"].summary["cnps_sent"] and frame.loc["off", "cnps_sent"] == 0
    varying = res.scenario_frame()
    assert list(varying.columns) == ["dcqcn"] and not varying.loc["off", "dcqcn"]
    assert "hosts" in res.scenario_frame(varying_only=False).columns
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
