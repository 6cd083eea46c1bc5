"""Built-in network scenarios: a validated spec → fabric + flows → simulation → a RunRecord."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from cosim.errors import CosimInputError
from cosim.network.transport import FABRICS, check_attributes, run_attributes

PATTERNS = ("incast", "permutation")


@dataclass(frozen=True, slots=True, kw_only=True)
class ScenarioSpec:
    """A flow-level network experiment on one fabric (units in the field names)."""

    name: str = "incast"
    fabric: str = "roce"
    topology: str = "single-switch"
    hosts: int = 8
    hosts_per_leaf: int = 4
    spines: int = 2
    oversubscription: float = 1.0
    gpus_per_server: int = 8
    dcqcn: bool = True
    ib_cc: bool = False
    link_gbps: float = 100.0
    link_delay_ns: float = 1000.0
    pattern: str = "incast"
    flow_bytes: int = 1 << 20
    seed: int = 1
    queue_sample_interval_ns: float = 1000.0
    max_sim_time_ns: float = 1e9
    attributes: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        from cosim.network.topology import TOPOLOGIES  # noqa: PLC0415

        if self.fabric not in FABRICS:
            raise CosimInputError("fabric", f"unknown fabric {self.fabric!r}", f"choose one of {', '.join(FABRICS)}")
        if self.topology not in TOPOLOGIES:
            raise CosimInputError("topology", f"unknown topology {self.topology!r}", f"choose one of {', '.join(TOPOLOGIES)}")
        if self.oversubscription < 1:
            raise CosimInputError("oversubscription", f"must be >= 1, got {self.oversubscription}")
        check_attributes(self.fabric, self.attributes)
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
    from cosim.workload import flows as fl  # noqa: PLC0415
    from cosim.network import topology  # noqa: PLC0415

    if spec.topology == "single-switch":
        fabric = topology.single_switch(hosts=spec.hosts, link_gbps=spec.link_gbps, link_delay_ns=spec.link_delay_ns)
    elif spec.topology == "fat-tree":
        k = round((4 * spec.hosts) ** (1 / 3))
        if k ** 3 // 4 != spec.hosts:
            raise CosimInputError("hosts", f"a k-ary fat tree has k^3/4 hosts; {spec.hosts} is not one of them",
                                  "use 16 (k=4), 54 (k=6), 128 (k=8), ...")
        fabric = topology.fat_tree(k=k, link_gbps=spec.link_gbps, link_delay_ns=spec.link_delay_ns)
    elif spec.topology == "leaf-spine":
        fabric = topology.leaf_spine(hosts=spec.hosts, hosts_per_leaf=spec.hosts_per_leaf, spines=spec.spines,
                                     oversubscription=spec.oversubscription, host_link_gbps=spec.link_gbps,
                                     host_link_delay_ns=spec.link_delay_ns, fabric_link_delay_ns=spec.link_delay_ns)
    else:
        if spec.hosts % spec.gpus_per_server:
            raise CosimInputError("hosts", f"{spec.hosts} NICs do not fill servers of {spec.gpus_per_server} GPUs")
        fabric = topology.rail_optimized(servers=spec.hosts // spec.gpus_per_server, gpus_per_server=spec.gpus_per_server,
                                         spines=spec.spines, oversubscription=spec.oversubscription,
                                         host_link_gbps=spec.link_gbps, host_link_delay_ns=spec.link_delay_ns,
                                         fabric_link_delay_ns=spec.link_delay_ns)
    hosts = fabric.host_ids
    if spec.pattern == "incast":
        flows = fl.incast(hosts, size_bytes=spec.flow_bytes)
    else:
        flows = fl.permutation(hosts, size_bytes=spec.flow_bytes)
    return fabric, flows


def preflight(spec: ScenarioSpec) -> None:
    """Check that ``spec``'s fabric and attributes can start (engine.check_fabric), without simulating."""
    from cosim import engine  # noqa: PLC0415

    engine.check_fabric(build(spec)[0], run_attributes(spec))


def run(spec: ScenarioSpec, *, progress=None):
    """Simulate ``spec`` and return its RunRecord."""
    from cosim import engine, results  # noqa: PLC0415
    from cosim.network import telemetry  # noqa: PLC0415

    fabric, flows = build(spec)
    attributes = run_attributes(spec)
    out = engine.simulate(
        fabric, flows, seed=spec.seed, attributes=attributes,
        queue_sample_interval_ns=spec.queue_sample_interval_ns, max_sim_time_ns=spec.max_sim_time_ns,
        progress=progress,
    )
    tables = telemetry.network_tables(fabric, out, src=flows.src, dst=flows.dst, size_bytes=flows.size_bytes,
                                      start_ns=flows.start_ns)
    summary = telemetry.network_summary(fabric, out, tables, queue_sample_interval_ns=spec.queue_sample_interval_ns)
    provenance = telemetry.provenance(seed=spec.seed, wall_time_s=out.wall_time_s)
    config = {"scenario": spec.to_json(), "fabric": fabric.describe()}
    return results.RunRecord(name=spec.name, config=config, provenance=provenance, summary=summary, **tables)

