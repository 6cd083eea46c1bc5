"""Overrides: one field of a document set by a shorthand (``hosts``), a dotted path
(``network.link_gbps``, ``workload.iterations``) or an attribute key, as ``cosim run`` options, sweep points
and ``[[variants]]`` give them; and the value kind of any such field."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from cosim import values as v
from cosim.errors import CosimInputError
from cosim.spec.experiment import FAULTS_KEY, SECTIONS, TOP_KEYS, Experiment
from cosim.spec.workloads import WORKLOAD_KINDS, WORKLOAD_SPECS

#: CLI option / sweep shorthand -> the document path it sets
SHORTHANDS = {
    "transport": "network.transport", "fabric": "network.transport", "topology": "network.topology",
    "hosts": "network.hosts", "gpus_per_server": "network.gpus_per_server",
    "hosts_per_leaf": "network.hosts_per_leaf", "spines": "network.spines",
    "oversubscription": "network.oversubscription", "link_gbps": "network.link_gbps",
    "zone_oversubscription": "network.zone_oversubscription", "switch_radix": "network.switch_radix",
    "switch_port_gbps": "network.switch_port_gbps", "topology_file": "network.topology_file",
    "link_delay_ns": "network.link_delay_ns", "dcqcn": "network.dcqcn", "ib_cc": "network.ib_cc",
    "qps_per_connection": "network.qps_per_connection", "ecmp_hash": "network.ecmp_hash",
    "routing": "network.routing", "admission": "network.admission", "qp_window_bytes": "network.qp_window_bytes",
    "ecn_marking": "network.ecn_marking", "pfc_watchdog": "network.pfc_watchdog",
    "collective_timeout_ns": "limits.collective_timeout_ns",
    "pattern": "workload.pattern", "flow_bytes": "workload.flow_bytes", "trace": "workload.trace",
    "iterations": "workload.iterations", "chunk_bytes": "workload.chunk_bytes",
    "algorithm": "workload.algorithm", "queue_sample_interval_ns": "telemetry.queue_sample_interval_ns",
    "max_sim_time_ns": "limits.max_sim_time_ns", "decompose": "limits.decompose", "seed": "seed", "name": "name",
    "description": "description", "baseline": "baseline", "faults": "faults",
}


def resolve_path(key: str) -> list[str]:
    """A shorthand (``hosts``), a dotted path (``network.link_gbps``) or an attribute key
    (``attributes.Type::Attribute``) → the path of document keys it sets."""
    if key.startswith("attributes."):
        return ["network", "attributes", key.removeprefix("attributes.")]
    if key.startswith("network.attributes."):
        return ["network", "attributes", key.removeprefix("network.attributes.")]
    path = SHORTHANDS.get(key, key).split(".")
    ok = (len(path) == 1 and path[0] in (*TOP_KEYS, FAULTS_KEY)) or (len(path) == 2 and path[0] in (*SECTIONS, "workload")) or (
        len(path) == 3 and path[0] == "workload" and path[1] in ("model_overrides", "parallelism"))
    if not ok:
        raise CosimInputError(key, "not an experiment field",
                              "use a section path like network.link_gbps or workload.iterations, "
                              f"or one of {', '.join(SHORTHANDS)}")
    return path


def with_overrides(doc: Mapping, overrides: Mapping[str, object]) -> dict:
    """A copy of ``doc`` with ``overrides`` (key → value, keys as :func:`resolve_path` reads them) set.

    Giving a trace file replaces a generated trace's model fields; a workload with a trace or a model and
    no kind is a training workload. ``faults`` (a list of fault tables) adds to the document's faults. A field the workload's kind does not have is an error when the
    document is read, never dropped.
    """
    out = {k: (dict(x) if isinstance(x, Mapping) else x) for k, x in doc.items()}
    for key, value in overrides.items():
        path = resolve_path(key)
        if path == [FAULTS_KEY]:
            value = [*(out.get(FAULTS_KEY) or []), *(value if isinstance(value, (list, tuple)) else [value])]
        node = out
        for part in path[:-1]:
            child = node.get(part)
            node[part] = dict(child) if isinstance(child, Mapping) else {}
            node = node[part]
        node[path[-1]] = value
        if path == ["workload", "trace"]:
            for k in ("model", "model_overrides", "parallelism", "gpu"):
                node.pop(k, None)
    work = out.get("workload")
    if isinstance(work, Mapping) and "kind" not in work and ("trace" in work or "model" in work):
        work["kind"] = "training"  # a trace or a model is a training workload; anything else defaults to flows
    return out


def field_kind(path: str) -> v.Kind:
    """The value kind of document field ``path`` (``network.link_gbps``, ``workload.iterations``, ``seed``)."""
    parts = resolve_path(path)
    if parts[:2] == ["network", "attributes"] or parts[1:2] in (["model_overrides"], ["parallelism"]):
        return v.Kind()
    if len(parts) == 1:
        return v.field_kind(Experiment, parts[0])
    if parts[0] == "workload":
        for cls in WORKLOAD_SPECS.values():
            if parts[1] in {f.name for f in dataclasses.fields(cls)}:
                return v.field_kind(cls, parts[1])
        if parts[1] == "kind":
            return v.Choice(WORKLOAD_KINDS)
        raise CosimInputError(path, "not a workload field")
    cls = SECTIONS[parts[0]]
    if parts[1] not in {f.name for f in dataclasses.fields(cls)}:
        raise CosimInputError(path, f"not a {parts[0]} field")
    return v.field_kind(cls, parts[1])
