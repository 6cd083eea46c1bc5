"""HDF5 results: round trip, schema checks, atomic writes."""

from __future__ import annotations

import dataclasses
import json

import h5py
import numpy as np
import pytest

from cosim import results
from cosim.errors import CosimInputError
from cosim.results import store
from cosim.run import run as run_experiment
from cosim.spec import make
from cosim.streamed import StreamedTable


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


@pytest.mark.parametrize("rows", [4096, 4097, 65536, 250_001])
def test_chunks_deflated_by_threads_are_what_hdf5_stores(tmp_path, record, rows, monkeypatch):
    """Columns above 4,096 rows are deflated by the writer's threads and written chunk by chunk (a streamed
    table's slices cut across chunks): every dataset holds the values, chunks, shuffle and deflate level of
    h5py's own write of the same array, and its chunks the same stored bytes."""
    monkeypatch.setattr(store, "ROWS_IN_FLIGHT", 1000)  # written while later slices are deflated
    rng = np.random.default_rng(rows)
    reps = -(-rows // record.flows["src"].size)
    flows = {k: np.tile(np.asarray(v), reps)[:rows] for k, v in record.flows.items()}
    flows["fct_ns"][::7] = np.nan
    queues = {"time_ns": np.sort(rng.integers(0, 10**6, rows)).astype(np.float64),
              "node": rng.integers(0, 40, rows).astype(np.int32), "port": rng.integers(0, 3, rows).astype(np.int32),
              "bytes": rng.integers(0, 2, rows) * rng.integers(0, 1 << 20, rows)}
    cuts = [0, *np.sort(rng.integers(0, rows, 5)).tolist(), rows]
    streamed = StreamedTable(rows, {k: x.dtype for k, x in queues.items()},
                             lambda: ({k: x[lo:hi] for k, x in queues.items()} for lo, hi in zip(cuts, cuts[1:])))
    path = results.write_results(tmp_path / "r.h5", [dataclasses.replace(record, flows=flows, queues=streamed)])
    mine = h5py.File(path)
    theirs = h5py.File(tmp_path / "h5py.h5", "w")
    checked = 0
    for group, table in (("flows", flows), ("queues", queues)):
        for name, values in table.items():
            ds = mine[f"runs/small/{group}/{name}"]
            big = rows > 4096
            ref = theirs.create_dataset(f"{group}/{name}", data=values, chunks=True if big else None,
                                        compression="gzip" if big else None,
                                        compression_opts=store.GZIP_LEVEL if big else None, shuffle=big)
            assert (ds.dtype, ds.chunks, ds.compression, ds.compression_opts, ds.shuffle) == \
                (ref.dtype, ref.chunks, ref.compression, ref.compression_opts, ref.shuffle), name
            np.testing.assert_array_equal(ds[()], values)
            if big:
                for lo in range(0, rows, ds.chunks[0]):
                    assert ds.id.read_direct_chunk((lo,)) == ref.id.read_direct_chunk((lo,)), (name, lo)
                checked += 1
    assert checked == (len(flows) + len(queues) if rows > 4096 else 0)
