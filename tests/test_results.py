"""HDF5 results: round trip, schema checks, atomic writes."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest

from cosim import results
from cosim.errors import CosimInputError
from cosim.run import run as run_experiment
from cosim.spec import make


@pytest.fixture(scope="module")
def record(engine_ns):
    """One small incast run, recorded."""
    return run_experiment(make("flows", name="small", hosts=4, flow_bytes=100_000))


def test_round_trip_preserves_everything(tmp_path, record):
    path = results.write_results(tmp_path / "r.h5", [record])
    back = results.read_results(path)["small"]
    assert back.config == json.loads(json.dumps(record.config))
    assert back.summary == json.loads(json.dumps(record.summary))
    assert back.provenance["seed"] == 1 and back.provenance["ns3_version"] == "3.44"
    for group in results.GROUPS:
        for name, values in record.table(group).items():
            np.testing.assert_array_equal(back.table(group)[name], values)
    with h5py.File(path) as h5:
        assert h5.attrs["schema"] == results.SCHEMA and h5.attrs["schema_version"] == results.SCHEMA_VERSION
        for group in h5["runs/small"]:
            for ds in h5[f"runs/small/{group}"].values():
                assert "units" in ds.attrs and ds.attrs["description"]
    assert [p.name for p in tmp_path.iterdir()] == ["r.h5"]  # no temporary left behind


def test_append_keeps_earlier_runs(tmp_path, record):
    path = tmp_path / "r.h5"
    results.write_results(path, [record])
    other = results.RunRecord(name="other", config={}, provenance={}, summary={"flows": 0},
                              flows=record.flows, queues=record.queues, ports=record.ports)
    results.write_results(path, [other], append=True)
    assert sorted(results.read_results(path)) == ["other", "small"]


def test_failed_write_leaves_no_file(tmp_path, record):
    bad = results.RunRecord(name="bad/name", config={}, provenance={}, summary={})
    with pytest.raises(CosimInputError, match="run name"):
        results.write_results(tmp_path / "r.h5", [bad])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("content", [b"not hdf5 at all", b""])
def test_corrupt_file_is_an_input_error(tmp_path, content):
    path = tmp_path / "bad.h5"
    path.write_bytes(content)
    with pytest.raises(CosimInputError, match="not a readable HDF5 file"):
        results.read_results(path)


def test_foreign_hdf5_is_rejected(tmp_path):
    path = tmp_path / "foreign.h5"
    with h5py.File(path, "w") as h5:
        h5["x"] = 1
    with pytest.raises(CosimInputError, match="not a cosim results file"):
        results.read_results(path)


def test_truncated_results_file_is_rejected(tmp_path, record):
    path = results.write_results(tmp_path / "r.h5", [record])
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CosimInputError):
        results.read_results(path)
