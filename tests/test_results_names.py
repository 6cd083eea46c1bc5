"""Results files name what their codes and row numbers stand for: code tables (CF flag attributes), node
names, and one named dimension per table (an HDF5 dimension scale netCDF readers take as the dimension)."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
from test_training_metrics import _two_group_trace

from cosim import results
from cosim.network.names import node_names
from cosim.network.topology import leaf_spine
from cosim.results.codes import CODE_NAMES, DIMENSIONS, NOT_A_VARIABLE
from cosim.run import run as run_experiment
from cosim.spec import make
from cosim.workload.trace import CollKind, GroupKind, OpKind

MIB = 1 << 20


@pytest.fixture(scope="module")
def written(engine_ns, tmp_path_factory):
    """(record, path) of a TP + DP all-reduce training run on 4 GPUs, 2 per server, written to a file."""
    exp = make("training", name="train", transport="roce", topology="single-switch", gpus_per_server=2,
               link_gbps=100, chunk_bytes=MIB, algorithm="ring")
    record = run_experiment(exp, trace=_two_group_trace(4, tp_bytes=MIB, dp_bytes=2 * MIB))
    return record, results.write_results(tmp_path_factory.mktemp("names") / "t.h5", [record])


def test_every_table_has_one_named_dimension_without_data(written):
    """Each column's first axis carries the table's dimension scale, named for what a row is; the scale is a
    netCDF-4 dimension that is not a variable, of the table's length, with no storage allocated."""
    record, path = written
    with h5py.File(path) as h5:
        run = h5["runs/train"]
        groups = [g for g in run if isinstance(run[g], h5py.Group)]
        assert {"flows", "ops", "collectives", "ports", "nodes"} <= set(groups)
        for g in groups:
            dim = DIMENSIONS[g]
            scale = run[g][dim]
            assert scale.is_scale and scale.id.get_storage_size() == 0
            assert scale.attrs["NAME"].decode().startswith(NOT_A_VARIABLE)
            columns = [run[g][c] for c in run[g] if c != dim]
            assert columns and all(c.dims[0].label == dim and c.dims[0][0] == scale for c in columns)
            assert all(c.shape == scale.shape for c in columns)
            assert scale.shape[0] == len(next(iter(record.table(g).values())))


def test_code_columns_carry_their_names(written):
    """ops/kind, collectives/kind and group_kind hold CF flag_values and flag_meanings from the enums, and the
    codes stored are among the flag values."""
    _, path = written
    with h5py.File(path) as h5:
        run = h5["runs/train"]
        for (group, col), names in CODE_NAMES.items():
            if group not in run:
                continue
            ds = run[group][col]
            assert list(ds.attrs["flag_values"]) == list(names)
            assert ds.attrs["flag_values"].dtype == ds.dtype
            assert ds.attrs["flag_meanings"].split() == list(names.values())
            assert set(np.unique(ds[()])) <= set(names)
        assert run["ops/kind"].attrs["flag_meanings"] == "compute collective send recv"
        meanings = run["collectives/group_kind"].attrs["flag_meanings"].split()
        assert meanings[GroupKind.TP] == "tp" and meanings[GroupKind.DP] == "dp"
        assert "flag_values" not in run["ops/rank"].attrs  # a number, not a code


def test_node_names_and_named_tables_read_back(written):
    """nodes/name names every node as the figures do; the reader skips the dimension scales (the tables read
    back as written) and Run.table(..., names=True) turns codes and node ids into names."""
    record, path = written
    back = results.read_results(path)["train"]
    for g in results.GROUPS:
        assert sorted(back.table(g)) == sorted(record.table(g)), g
    names = back.nodes["name"]
    assert names.tolist() == record.nodes["name"].tolist() and names[0] == "host0"
    assert names.tolist()[-1] == "switch0"  # the single switch
    run = results.open(path)["train"]
    ops, raw_ops = run.table("ops", names=True), run.ops
    assert ops["kind"].tolist() == [OpKind(k).name.lower() for k in raw_ops["kind"]]
    assert set(ops["kind"]) == {"collective"}  # the trace holds only collectives
    coll = run.table("collectives", names=True, as_frame=False)
    assert sorted(set(coll["group_kind"])) == ["dp", "tp"] and set(coll["kind"]) == {"all_reduce"}
    flows = run.table("flows", names=True)
    raw = run.flows
    assert flows["src"].tolist() == [names[i] for i in raw["src"]]
    ports = run.table("ports", names=True)
    assert set(ports["node"]) <= set(names) and "switch0" in set(ports["node"])
    assert coll["kind"].tolist() == [CollKind(k).name.lower() for k in run.collectives["kind"]]


def test_node_names_follow_the_topology():
    """A leaf-spine names hosts, then leaves, then spines, each counted within its tier."""
    fabric = leaf_spine(hosts=8, hosts_per_leaf=4, spines=2, host_link_gbps=100, host_link_delay_ns=1000,
                        fabric_link_delay_ns=1000)
    assert node_names(fabric) == [*(f"host{i}" for i in range(8)), "leaf0", "leaf1", "spine0", "spine1"]
