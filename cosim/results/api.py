"""Notebook API: a results file as a mapping of run name -> Run, with tables as pandas DataFrames.

    >>> import cosim.results
    >>> res = cosim.results.open("results.h5")
    >>> res.summary_frame()[["fct_p99_ns", "max_queue_bytes"]]
    >>> res["incast"].flows.fct_ns.describe()
    >>> res["incast"].table("queues", as_frame=False)["bytes"]   # numpy arrays, no pandas needed
    >>> res["incast"].table("queues", names=True).node           # leaf0, leaf1 instead of node ids

pandas is optional (the ``analysis`` extra); without it ``as_frame=False`` still works.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np

from cosim.results.codes import named_table
from cosim.results.collectives import collective_stats
from cosim.results.compare import compare_runs, sweep_order
from cosim.results.metrics import ordered_keys
from cosim.results.schema import DATASETS, GROUPS, RunRecord
from cosim.results.store import read_results

_PANDAS_HINT = ("pandas is needed for DataFrames: pip install 'cosim[analysis]' "
                "(or pass as_frame=False for a dict of numpy arrays)")


def _pandas():
    try:
        import pandas  # noqa: PLC0415
    except ImportError as exc:
        raise ImportError(_PANDAS_HINT) from exc
    return pandas


def _columns(group: str) -> list[str]:
    return [name for g, name in DATASETS if g == group]


def flat_fields(doc: Mapping) -> dict:
    """A document as flat ``section.field`` keys (attributes as ``attr:Type::Name``), run name left out: the
    columns in which runs of a sweep or a comparison differ."""
    out = {}
    for key, value in doc.items():
        if key == "name":
            continue
        if not isinstance(value, Mapping):
            out[key] = value
            continue
        for k, x in value.items():
            if k == "attributes":
                out |= {f"attr:{a}": y for a, y in sorted(x.items())}
            elif isinstance(x, Mapping):
                out |= {f"{key}.{k}.{a}": y for a, y in x.items()}
            else:
                out[f"{key}.{k}"] = x
    return out


class Run:
    """One run of a results file: summary, config, provenance, and its tables."""

    def __init__(self, record: RunRecord):
        self.record = record

    def __repr__(self) -> str:
        groups = [g for g in GROUPS if self.record.table(g)]
        return f"<Run {self.name!r}: {', '.join(groups) or 'summary only'}>"

    @property
    def name(self) -> str:
        """The run name inside the file."""
        return self.record.name

    @property
    def summary(self) -> dict:
        """Summary scalars (units in the key names, e.g. fct_p99_ns)."""
        return self.record.summary

    @property
    def config(self) -> dict:
        """Run configuration: config["experiment"] (the resolved Experiment document), config["fabric"], ..."""
        return self.record.config

    @property
    def provenance(self) -> dict:
        """cosim and ns-3 versions, seed, wall time, host."""
        return self.record.provenance

    @property
    def experiment(self) -> dict:
        """The Experiment document the run was made from (empty if not stored)."""
        return self.record.config.get("experiment", {})

    def groups(self) -> list[str]:
        """Names of the tables this run stores."""
        return [g for g in GROUPS if self.record.table(g)]

    def table(self, group: str, as_frame: bool = True, names: bool = False):
        """Table ``group`` (one of GROUPS) as a DataFrame, or a dict of numpy arrays with as_frame=False.
        A table the run does not have is empty, but the ops table of a run made with telemetry.op_table =
        "none" is a CosimInputError saying so (with "collectives" it holds only the collective, send and recv
        rows).

        ``names``: code columns (``ops.kind``, ``collectives.group_kind``, ``faults.action``...) as their names
        and node-id columns (``flows.src``, ``queues.node``, ``ports.peer``...) as node names (``leaf1``), as
        the figures show them (cosim.results.codes)."""
        if group not in GROUPS:
            raise KeyError(f"no table {group!r}; tables are {', '.join(GROUPS)}")
        data = self.record.table(group)
        if group == "ops" and (why := self.record.missing_ops()) is not None:
            raise why
        if names:
            data = named_table(group, data, self.record.table("nodes").get("name"))
        if not as_frame:
            return dict(data)
        pd = _pandas()
        if not data:
            return pd.DataFrame({c: np.empty(0) for c in _columns(group)})
        return pd.DataFrame({k: np.asarray(v) for k, v in data.items()})

    def collective_stats(self, as_frame: bool = True):
        """Collectives in nccl-tests' terms, one row per (group kind, collective kind): calls, ranks, median
        size, time p50/p99/max, algbw and busbw p50 (GB/s); steady-state iterations (all but the first) when
        the run has several. See cosim.results.collectives."""
        its = self.record.table("iterations")
        first = 1 if len(its) and np.asarray(its["iteration"]).size > 1 else 0
        rows = collective_stats(self.record.table("collectives"), first_iteration=first)
        if not as_frame:
            return rows
        pd = _pandas()
        columns = ["group", "kind", "calls", "ranks", "bytes_p50", "time_p50_ns", "time_p99_ns", "time_max_ns",
                   "algbw_p50_gbyte_per_s", "busbw_p50_gbyte_per_s"]
        return pd.DataFrame(rows, columns=columns)

    flows = property(lambda self: self.table("flows"), doc="flows table as a DataFrame (one row per flow).")
    queues = property(lambda self: self.table("queues"), doc="queue-depth change samples as a DataFrame.")
    ports = property(lambda self: self.table("ports"), doc="per-egress-port counters as a DataFrame.")
    pauses = property(lambda self: self.table("pauses"), doc="PFC pause/resume events as a DataFrame.")
    latency = property(lambda self: self.table("latency"), doc="latency histogram buckets as a DataFrame.")
    stalls = property(lambda self: self.table("stalls"), doc="credit-stall events as a DataFrame (IB).")
    ops = property(lambda self: self.table("ops"), doc="co-simulation op timeline as a DataFrame.")
    collectives = property(lambda self: self.table("collectives"), doc="collective calls as a DataFrame.")
    iterations = property(lambda self: self.table("iterations"), doc="iterations as a DataFrame.")


class Results(Mapping):
    """The runs of a results file by name (read-only mapping of name -> Run)."""

    def __init__(self, path: str | Path, runs: Mapping[str, RunRecord]):
        self.path = Path(path)
        self._runs = {name: Run(r) for name, r in runs.items()}

    def __getitem__(self, name: str) -> Run:
        try:
            return self._runs[name]
        except KeyError:
            raise KeyError(f"no run {name!r} in {self.path}; runs are {', '.join(self._runs)}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._runs)

    def __len__(self) -> int:
        return len(self._runs)

    def __repr__(self) -> str:
        return f"<Results {str(self.path)!r}: {len(self)} run(s): {', '.join(self._runs)}>"

    def summary_frame(self):
        """One row per run (index: run name), one column per summary key (known metrics first)."""
        pd = _pandas()
        summaries = [r.summary for r in self._runs.values()]
        cols = ordered_keys(summaries)
        frame = pd.DataFrame([{k: s.get(k) for k in cols} for s in summaries], index=list(self._runs),
                             columns=cols)
        frame.index.name = "run"
        return frame

    def experiment_frame(self, varying_only: bool = True):
        """One row per run of its experiment fields (``network.link_gbps``, ``attr:Type::Name``, ...), only
        those that differ between runs unless ``varying_only`` is False; join it with summary_frame()."""
        pd = _pandas()
        frame = pd.DataFrame([flat_fields(r.experiment) for r in self._runs.values()], index=list(self._runs))
        frame.index.name = "run"
        if varying_only and len(frame) > 1:
            frame = frame[[c for c in frame.columns if frame[c].astype(str).nunique(dropna=False) > 1]]
        return frame

    def compare(self, baseline: str | None = None):
        """The CompareTable of these runs (see cosim.results.compare); print(.to_text()) to read it."""
        return compare_runs({n: r.record for n, r in self._runs.items()}, baseline=baseline)


def open_results(path: str | Path) -> Results:
    """Read a results file (validated; CosimInputError if it is not one) as a Results mapping."""
    return Results(path, sweep_order(read_results(path)))
