"""A folded run's queue log is a StreamedTable: produced a time slice at a time, written to the results file
slice by slice, and read back equal to the log built whole. A large run's flows are a FlowTable, its derived
columns computed a slice of rows at a time: the same values, summary and file as the table held whole."""

import dataclasses

import h5py
import numpy as np
import pytest
from test_decompose_run import RAILS

from cosim import telemetry
from cosim.decompose import exact as decompose_run
from cosim.results import read_results, write_results
from cosim.run import experiments_of, run
from cosim.streamed import StreamedTable, table_rows, table_slices


def _datasets(path):
    """Every dataset of a results file: (values, dtype, chunks, compression, shuffle) by name."""
    out = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                out[name] = (obj[()], obj.dtype, obj.chunks, obj.compression, obj.shuffle)
        f.visititems(visit)
    return out


def test_streamed_queue_log_writes_what_the_whole_log_writes(engine_ns, monkeypatch, tmp_path):
    """The four-rail training of test_decompose_run, folded to one rail, its queue log merged 100 rows of a
    part at a time: the record holds a StreamedTable; the file written from it and the file written from the
    same log materialized hold the same datasets (values, dtypes, chunks and compression), and reading back
    gives the materialized log."""
    monkeypatch.setattr(decompose_run, "QUEUE_MERGE_SLICE_ROWS", 100)
    rec = run(experiments_of({}, RAILS)[0])
    queues = rec.queues
    assert isinstance(queues, StreamedTable) and rec.config["decomposition"]["decompose"] == "symmetric"
    whole = queues.materialize()
    assert queues.rows == whole["time_ns"].size > 4096  # compressed, chunked datasets
    assert len(list(queues.slices())) > 10
    streamed_file, whole_file = tmp_path / "streamed.h5", tmp_path / "whole.h5"
    write_results(streamed_file, [rec])
    write_results(whole_file, [dataclasses.replace(rec, queues=whole)])
    a, b = _datasets(streamed_file), _datasets(whole_file)
    assert a.keys() == b.keys() and any(name.endswith("queues/time_ns") for name in a)
    for name in a:
        (x, *layout_a), (y, *layout_b) = a[name], b[name]
        assert layout_a == layout_b, name
        assert np.array_equal(x, y), name
    back = read_results(streamed_file)[rec.name].queues
    for name, col in whole.items():
        assert back[name].dtype == col.dtype and np.array_equal(back[name], col), name
        assert np.array_equal(queues[name], col), name
    # the percentile reads the part's log, each row once per port copying it: that of the whole log
    assert queues.copied_from is not None
    interval_ns, sim_ns = rec.config["experiment"]["telemetry"]["queue_sample_interval_ns"], rec.summary["sim_time_ns"]
    for q in (50.0, 90.0, 99.0, 99.9, 100.0):
        for n_ports in (8, len(rec.ports["node"])):
            assert (telemetry.queue_percentile_bytes(queues, n_ports, interval_ns, sim_ns, q=q)
                    == telemetry.queue_percentile_bytes(whole, n_ports, interval_ns, sim_ns, q=q)), (q, n_ports)
    assert telemetry.queue_percentile_bytes(queues, 8, interval_ns, sim_ns, q=100.0) > 0


def test_a_streamed_table_checks_its_rows():
    """Slices are cast to the announced dtypes; producing other than the announced rows is an error."""
    parts = [{"a": np.arange(3), "b": np.ones(3)}, {"a": np.arange(2), "b": np.zeros(2)}]
    t = StreamedTable(5, {"a": np.int32, "b": np.float64}, lambda: iter(parts))
    assert table_rows(t) == 5 and t.nbytes == 5 * 12 and list(t) == ["a", "b"]
    assert t["a"].dtype == np.int32 and t["a"].tolist() == [0, 1, 2, 0, 1]
    assert [s["b"].size for s in table_slices(t, 1)] == [3, 2]
    with pytest.raises(AssertionError, match="announced"):
        StreamedTable(4, {"a": np.int32, "b": np.float64}, lambda: iter(parts)).materialize()


@pytest.mark.parametrize("case", ["rails-blocks", "multi-job"])
def test_a_large_runs_flow_table_holds_what_the_whole_table_holds(case, engine_ns, monkeypatch, tmp_path):
    """Above telemetry.HELD_FLOW_ROWS flows the record's flows table is a FlowTable computing its columns a
    slice of rows at a time (here 50): the folded four-rail training with its data-parallel calls as BLOCK
    ops, and two jobs beside an incast (a workload column, each job's rows of the transfer column). Its
    summary, every table and the file written from it equal those of the same run holding every column; a
    pickled FlowTable arrives as those columns."""
    import pickle  # noqa: PLC0415

    from test_decompose_run import MULTI_JOB, SIMULATOR_COST  # noqa: PLC0415

    doc, over = ({}, {**RAILS, "workload.flow_blocks": "on"}) if case == "rails-blocks" else (MULTI_JOB, {})
    held = run(experiments_of(doc, over)[0])
    monkeypatch.setattr(telemetry, "HELD_FLOW_ROWS", 0)
    monkeypatch.setattr(telemetry, "FLOW_SLICE_ROWS", 50)
    lazy = run(experiments_of(doc, over)[0])
    flows = lazy.flows
    assert isinstance(flows, telemetry.FlowTable) and not isinstance(held.flows, StreamedTable)
    assert flows.rows > 100 and list(flows) == list(held.flows)
    for name, column in held.flows.items():
        assert flows[name].dtype == column.dtype, name
        assert np.array_equal(flows[name], column, equal_nan=column.dtype.kind == "f"), name
    assert ({k: v for k, v in lazy.summary.items() if k not in SIMULATOR_COST}
            == {k: v for k, v in held.summary.items() if k not in SIMULATOR_COST})
    lazy_file, held_file = tmp_path / "lazy.h5", tmp_path / "held.h5"
    write_results(lazy_file, [lazy])
    write_results(held_file, [dataclasses.replace(lazy, flows=held.flows)])
    a, b = _datasets(lazy_file), _datasets(held_file)
    assert a.keys() == b.keys()
    for name in a:
        (x, *layout_a), (y, *layout_b) = a[name], b[name]
        assert layout_a == layout_b and np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), name
    unpickled = pickle.loads(pickle.dumps(flows))
    assert type(unpickled) is dict and unpickled.keys() == held.flows.keys()
    assert all(np.array_equal(unpickled[k], v, equal_nan=v.dtype.kind == "f") for k, v in held.flows.items())
