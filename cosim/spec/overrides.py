"""Overrides: one field of a document set by a shorthand (``hosts``), a dotted path
(``network.link_gbps``, ``workload.iterations``) or an attribute key, as ``cosim run`` options, sweep points
and ``[[variants]]`` give them; and the value kind of any such field."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from cosim import values as v
from cosim.errors import CosimInputError
from cosim.spec.experiment import FAULTS_KEY, SECTIONS, TOP_KEYS, Experiment
from cosim.spec.workloads import TRANSPORT_CHOICES, WORKLOAD_KINDS, WORKLOAD_SPECS
from cosim.workload.hardware import HardwareSpec
from cosim.workload.model import ModelSpec
from cosim.workload.parallelism import ParallelismSpec

#: CLI option / sweep shorthand -> the document path it sets
SHORTHANDS = {
    "transport": "network.transport", "fabric": "network.transport", "topology": "network.topology",
    "hosts": "network.hosts", "gpus_per_server": "network.gpus_per_server",
    "hosts_per_leaf": "network.hosts_per_leaf", "spines": "network.spines",
    "oversubscription": "network.oversubscription", "link_gbps": "network.link_gbps",
    "zone_oversubscription": "network.zone_oversubscription", "switch_radix": "network.switch_radix",
    "switch_port_gbps": "network.switch_port_gbps", "nic_planes": "network.nic_planes", "topology_file": "network.topology_file",
    "link_delay_ns": "network.link_delay_ns", "dcqcn": "network.dcqcn", "ib_cc": "network.ib_cc",
    "telemetry_cc": "network.telemetry_cc", "profile": "network.profile",
    "qps_per_connection": "network.qps_per_connection", "ecmp_hash": "network.ecmp_hash",
    "routing": "network.routing", "admission": "network.admission", "qp_window_bytes": "network.qp_window_bytes",
    "ecn_marking": "network.ecn_marking", "dragonfly_routing": "network.dragonfly_routing", "pfc_watchdog": "network.pfc_watchdog",
    "uec_congestion_control": "network.uec_congestion_control",
    "link_retry": "network.link_retry", "link_flow_control": "network.link_flow_control",
    "collective_timeout_ns": "limits.collective_timeout_ns",
    "pattern": "workload.pattern", "flow_bytes": "workload.flow_bytes", "trace": "workload.trace",
    "iterations": "workload.iterations", "chunk_bytes": "workload.chunk_bytes",
    "algorithm": "workload.algorithm", "queue_sample_interval_ns": "telemetry.queue_sample_interval_ns",
    "op_table": "telemetry.op_table",
    "max_sim_time_ns": "limits.max_sim_time_ns", "decompose": "limits.decompose",
    "fast_forward": "limits.fast_forward", "fast_forward_tolerance": "limits.fast_forward_tolerance",
    "fast_forward_check": "limits.fast_forward_check", "seed": "seed", "name": "name",
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
        len(path) == 3 and path[0] == "workload" and path[1] in _NESTED_SPECS)
    if not ok:
        raise CosimInputError(key, "not an experiment field", _valid_fields_hint(path))
    return path


def _valid_fields_hint(path: list[str]) -> str:
    """What to write instead of an unknown ``path``: the fields of the section it names, else the sections."""
    if path[0] in SECTIONS:
        return f"{path[0]} fields: {', '.join(f.name for f in dataclasses.fields(SECTIONS[path[0]]))}"
    if path[0] == "workload":
        return "workload fields: kind, the fields of its kind (cosim list; docs), model_overrides.<ModelSpec " \
               "field>, parallelism.<ParallelismSpec field>, hardware_overrides.<HardwareSpec field>"
    return (f"use a section path like network.link_gbps or workload.iterations (sections "
            f"{', '.join((*SECTIONS, 'workload'))}), a top-level field ({', '.join((*TOP_KEYS, FAULTS_KEY))}) "
            f"or a shorthand ({', '.join(SHORTHANDS)})")


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
            for k in ("model", "model_overrides", "parallelism", "gpu", "hardware_overrides"):
                node.pop(k, None)
    work = out.get("workload")
    if isinstance(work, Mapping) and "kind" not in work and ("trace" in work or "model" in work):
        work["kind"] = "training"  # a trace or a model is a training workload; anything else defaults to flows
    return out


#: the spec classes whose fields ``workload.<table>.<field>`` set, by table
_NESTED_SPECS = {"model_overrides": ModelSpec, "parallelism": ParallelismSpec, "hardware_overrides": HardwareSpec}
#: annotation of a plain-dataclass field -> the kind that reads it from text
_ANNOTATION_KINDS = {"int": v.Int(), "float": v.Real(), "bool": v.Bool(), "str": v.Text(nonempty=True)}


def _annotation_kind(cls, name: str, where: str) -> v.Kind:
    """The kind of field ``name`` of plain dataclass ``cls`` (ModelSpec, ParallelismSpec), from its annotation."""
    fields = {f.name: str(f.type).replace(" ", "") for f in dataclasses.fields(cls) if f.name != "name"}
    if name not in fields:
        raise CosimInputError(where, f"not a {cls.__name__} field", f"valid fields: {', '.join(fields)}")
    base, _, rest = fields[name].partition("|")
    kind = _ANNOTATION_KINDS.get(base, v.Kind())
    return v.Optional(kind) if rest == "None" else kind


def field_kind(path: str) -> v.Kind:
    """The value kind of document field ``path`` (``network.link_gbps``, ``workload.iterations``, ``seed``,
    ``workload.parallelism.tp``); an unknown field is a CosimInputError listing the valid ones."""
    parts = resolve_path(path)
    if parts[:2] == ["network", "attributes"] or parts == [FAULTS_KEY]:
        return v.Kind()
    if len(parts) == 3:
        return _annotation_kind(_NESTED_SPECS[parts[1]], parts[2], path)
    if len(parts) == 1:
        return v.field_kind(Experiment, parts[0])
    if parts[0] == "workload":
        for cls in WORKLOAD_SPECS.values():
            if parts[1] in {f.name for f in dataclasses.fields(cls)}:
                return v.field_kind(cls, parts[1])
        if parts[1] == "kind":
            return v.Choice(WORKLOAD_KINDS)
        names = dict.fromkeys(f.name for cls in WORKLOAD_SPECS.values() for f in dataclasses.fields(cls))
        raise CosimInputError(path, "not a workload field", f"valid fields: kind, {', '.join(names)}")
    if parts == ["network", "transport"]:
        return v.Choice(TRANSPORT_CHOICES)  # a document's transport may be "both" (one run on each)
    cls = SECTIONS[parts[0]]
    if parts[1] not in {f.name for f in dataclasses.fields(cls)}:
        raise CosimInputError(path, f"not a {parts[0]} field", _valid_fields_hint(parts))
    return v.field_kind(cls, parts[1])
