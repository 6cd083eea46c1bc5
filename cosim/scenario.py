"""Built-in network scenarios: a validated spec → fabric + flows → simulation → a RunRecord."""

from __future__ import annotations

import platform
import socket
import sys
from dataclasses import asdict, dataclass, field

import numpy as np

from cosim import __version__
from cosim.errors import CosimInputError

TOPOLOGIES = ("single-switch",)
PATTERNS = ("incast", "permutation")


@dataclass(frozen=True, slots=True, kw_only=True)
class ScenarioSpec:
    """A flow-level network experiment on one fabric (units in the field names)."""

    name: str = "incast"
    topology: str = "single-switch"
    hosts: int = 8
    link_gbps: float = 100.0
    link_delay_ns: float = 1000.0
    pattern: str = "incast"
    flow_bytes: int = 1 << 20
    seed: int = 1
    queue_sample_interval_ns: float = 1000.0
    max_sim_time_ns: float = 1e9
    attributes: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.topology not in TOPOLOGIES:
            raise CosimInputError("topology", f"unknown topology {self.topology!r}", f"choose one of {', '.join(TOPOLOGIES)}")
        if self.pattern not in PATTERNS:
            raise CosimInputError("pattern", f"unknown traffic pattern {self.pattern!r}", f"choose one of {', '.join(PATTERNS)}")
        if self.hosts < 2:
            raise CosimInputError("hosts", f"need at least 2 hosts, got {self.hosts}")
        if not self.link_gbps > 0:
            raise CosimInputError("link_gbps", f"must be positive, got {self.link_gbps}")
        if self.link_delay_ns < 0:
            raise CosimInputError("link_delay_ns", f"must be >= 0, got {self.link_delay_ns}")
        if self.flow_bytes < 0:
            raise CosimInputError("flow_bytes", f"must be >= 0, got {self.flow_bytes}")
        if not self.queue_sample_interval_ns > 0:
            raise CosimInputError("queue_sample_interval_ns", f"must be positive, got {self.queue_sample_interval_ns}")
        if not self.max_sim_time_ns > 0:
            raise CosimInputError("max_sim_time_ns", f"must be positive, got {self.max_sim_time_ns}")

    def to_json(self) -> dict:
        """The spec as a JSON-able dict (stored with the run)."""
        d = asdict(self)
        d["attributes"] = dict(self.attributes)
        return d


def build(spec: ScenarioSpec):
    """Return (fabric, flows) for ``spec``."""
    from cosim import flows as fl, topology  # noqa: PLC0415

    fabric = topology.single_switch(hosts=spec.hosts, link_gbps=spec.link_gbps, link_delay_ns=spec.link_delay_ns)
    hosts = fabric.host_ids
    if spec.pattern == "incast":
        flows = fl.incast(hosts, size_bytes=spec.flow_bytes)
    else:
        flows = fl.permutation(hosts, size_bytes=spec.flow_bytes)
    return fabric, flows


def run(spec: ScenarioSpec, *, progress=None):
    """Simulate ``spec`` and return its RunRecord."""
    from cosim import engine, results  # noqa: PLC0415

    fabric, flows = build(spec)
    out = engine.simulate(
        fabric, flows, seed=spec.seed, attributes=dict(spec.attributes),
        queue_sample_interval_ns=spec.queue_sample_interval_ns, max_sim_time_ns=spec.max_sim_time_ns,
        progress=progress,
    )
    flow_table = {
        "src": flows.src, "dst": flows.dst, "size_bytes": flows.size_bytes, "start_ns": flows.start_ns,
        "finish_ns": out.finish_ns, "delivered_bytes": out.delivered_bytes,
        "fct_ns": out.finish_ns - flows.start_ns,
    }
    queues = {"time_ns": out.queue_time_ns, "node": out.queue_node, "port": out.queue_port, "bytes": out.queue_bytes}
    summary = results.summarize(flow_table, queues, out.ports, sim_time_ns=out.sim_time_ns)
    summary |= {
        "status": out.status, "events": out.events, "packet_hops": out.packet_hops,
        "wall_time_s": out.wall_time_s,
        "packet_hops_per_s": out.packet_hops / out.wall_time_s if out.wall_time_s > 0 else 0.0,
    }
    provenance = {
        "cosim_version": __version__, "ns3_version": engine.ns3_version(), "seed": spec.seed,
        "wall_time_s": out.wall_time_s, "python": sys.version.split()[0], "platform": platform.platform(),
        "host": socket.gethostname(),
    }
    config = {"scenario": spec.to_json(), "fabric": fabric.describe()}
    return results.RunRecord(name=spec.name, config=config, provenance=provenance, summary=summary,
                             flows=flow_table, queues=queues, ports=out.ports)


def ideal_packets(size_bytes: int, mtu_bytes: int) -> np.ndarray:
    """Payload of each packet a flow of ``size_bytes`` is cut into (full MTUs, then the remainder)."""
    full, rest = divmod(int(size_bytes), int(mtu_bytes))
    return np.array([mtu_bytes] * full + ([rest] if rest else []), dtype=np.int64)
