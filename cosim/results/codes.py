"""What the integer codes and row numbers of the results tables stand for: the names the figures use.

- **Code tables**: columns holding an enum code (``ops/kind``, ``collectives/group_kind``, ``faults/action``...)
  carry CF-convention attributes, ``flag_values`` (the codes) and ``flag_meanings`` (their names, one word
  each, in the same order), which xarray keeps as attributes and CF-aware tools decode.
- **Node names**: ``nodes/name`` names every node id (``host3``, ``leaf1``, ``spine0``: cosim.network.names),
  so the node-id columns (``flows/src``, ``queues/node``, ``ports/peer``...) can be read as names.
- **Dimension names**: the columns of a table share one HDF5 dimension scale named for what a row is
  (``flow``, ``queue_sample``, ``op``...), marked as a netCDF-4 dimension without a variable, so xarray (the
  h5netcdf engine) and netCDF readers name the dimension instead of inventing ``phony_dim_0``. The scale holds
  no data (HDF5 allocates none for a dataset never written).

:func:`named_table` gives a table with codes and node ids replaced by names (what ``Run.table(...,
names=True)`` returns as a DataFrame).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from cosim.collectives.algorithms import Algorithm
from cosim.faults import ACTIONS, KINDS
from cosim.losses import LossCause
from cosim.results.exposure import MEDIUM_NAMES, NO_GROUP
from cosim.workload.trace import CollKind, GroupKind, OpKind, Phase

#: what one row of each table is: the name of the table's dimension
DIMENSIONS = {"flows": "flow", "queues": "queue_sample", "ports": "egress_port", "pauses": "pause_change",
              "latency": "latency_bucket", "stalls": "stall_change", "ops": "op", "collectives": "collective_call",
              "iterations": "iteration_row", "faults": "fault_action", "pfc_watchdog": "watchdog_action",
              "requests": "request_row", "nodes": "node", "links": "link", "hosts": "host",
              "placement": "placement_row", "losses": "loss"}
#: the NAME a netCDF-4 dimension scale that is not a variable carries (netCDF-C writes this text and the
#: dimension's length; h5netcdf and netCDF-C recognise it by its start)
NOT_A_VARIABLE = "This is a netCDF dimension but not a netCDF variable."
#: columns holding a node id (-1: none), named by ``nodes/name``
NODE_COLUMNS = frozenset({("flows", "src"), ("flows", "dst"), ("queues", "node"), ("ports", "node"), ("ports", "peer"),
                          ("pauses", "node"), ("stalls", "node"), ("faults", "node"), ("pfc_watchdog", "node"),
                          ("links", "a"), ("links", "b"), ("hosts", "node"), ("placement", "host"),
                          ("losses", "node")})


def _enum(e) -> dict[int, str]:
    return {int(m.value): m.name.lower() for m in e}


def _code_tables() -> dict[tuple[str, str], dict[int, str]]:
    kinds = {-1: "mechanism"} | {k.code: name for name, k in sorted(KINDS.items(), key=lambda kv: kv[1].code)}
    return {
        ("ops", "kind"): _enum(OpKind),
        ("ops", "phase"): _enum(Phase),
        ("ops", "group_kind"): _enum(GroupKind) | {NO_GROUP: "none"},
        ("ops", "medium"): dict(MEDIUM_NAMES),
        ("collectives", "kind"): _enum(CollKind),
        ("collectives", "group_kind"): _enum(GroupKind),
        ("collectives", "algorithm"): _enum(Algorithm),
        ("faults", "kind"): kinds,
        ("faults", "action"): dict(enumerate(ACTIONS)),
        ("nodes", "kind"): {0: "host", 1: "switch"},  # cosim.network.topology HOST, SWITCH
        ("losses", "cause"): _enum(LossCause),
    }


#: (table, column) -> {code: name} of every code column
CODE_NAMES: dict[tuple[str, str], dict[int, str]] = _code_tables()


def flag_attributes(group: str, column: str, dtype: np.dtype) -> dict[str, object]:
    """The CF ``flag_values`` / ``flag_meanings`` attributes of a code column (empty for other columns)."""
    names = CODE_NAMES.get((group, column))
    if not names:
        return {}
    return {"flag_values": np.array(list(names), dtype=dtype), "flag_meanings": " ".join(names.values())}


def node_name_column(names) -> np.ndarray:
    """Node names as the object array of str the ``nodes/name`` dataset is written from and read back as."""
    return np.array([str(n) for n in names], dtype=object)


def named_table(group: str, table: Mapping[str, np.ndarray], node_names=None) -> dict[str, np.ndarray]:
    """``table`` with each code column as its names (an unknown code as its number) and, given the run's
    ``node_names`` (``nodes/name``), each node-id column as node names ("" for -1, none)."""
    out = {}
    for col, values in table.items():
        values = np.asarray(values)
        names = CODE_NAMES.get((group, col))
        if names and values.dtype.kind in "iu":
            lookup = {**{int(c): str(int(c)) for c in np.unique(values)}, **names}
            codes = np.unique(values)
            mapped = np.array([lookup[int(c)] for c in codes], dtype=object)
            out[col] = mapped[np.searchsorted(codes, values)] if values.size else values.astype(object)
        elif (group, col) in NODE_COLUMNS and node_names is not None and values.dtype.kind in "iu":
            labels = np.array([*map(str, node_names), ""], dtype=object)  # -1 (none) reads the last: ""
            out[col] = labels[np.where((values < 0) | (values >= len(labels) - 1), len(labels) - 1, values)]
        else:
            out[col] = values
    return out
