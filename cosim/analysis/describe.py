"""What ran, in a few rows: the resolved experiment of a run and the fabric as built, as short text.

``cosim inspect`` and the HTML report show these rows above the numbers; the full experiment is
``cosim inspect --config`` (TOML) or the report's experiment table. Values come from the run's stored
config (``config["experiment"]``, the resolved document; ``config["fabric"]``, the built fabric's
description; ``config["workload"]`` for co-simulated training), so flow and training runs read alike.
"""

from __future__ import annotations

from collections.abc import Mapping

from cosim.analysis.ports import TIER_NAMES
from cosim.results.metrics import format_number

#: parallelism dimensions shown (when above 1), in Megatron's order
_PARALLEL = (("tp", "TP"), ("cp", "CP"), ("pp", "PP"), ("dp", "DP"), ("ep", "EP"), ("vpp", "VPP"))


def _num(x, unit: str = "") -> str:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return "-" if x is None else str(x)
    return format_number(x) + (f" {unit}" if unit else "")


def _transport(net: Mapping) -> str:
    transport = net.get("transport")
    if transport == "roce" and net.get("telemetry_cc"):
        return ("Spectrum-X-like RoCE: " if net.get("profile") == "spectrum-x" else "RoCE, ") + \
            f"PFC, telemetry CC, {net.get('routing', 'ecmp')} routing"
    if transport == "roce":
        return f"RoCE, PFC, DCQCN {'on' if net.get('dcqcn') else 'off'}"
    if transport == "ib":
        return f"InfiniBand, credits, IB CC {'on' if net.get('ib_cc') else 'off'}"
    if transport == "uec":
        return "Ultra Ethernet, no PFC, trimming, NSCC"
    return str(transport)


def _switches(fabric: Mapping) -> str:
    names = TIER_NAMES.get(fabric.get("name"), {})
    params = fabric.get("params")
    planes = params.get("nic_planes", 1) if isinstance(params, Mapping) else 1
    if planes > 1:  # tier 1 is the NICs' port selectors, each plane's switches above them
        names = {1: "NIC port selector"} | {t + 1: name for t, name in names.items()}
    parts = [f"{t['n_switches']} {names.get(t['tier'], 'tier-' + str(t['tier']))}"
             for t in fabric.get("tiers", ()) if t.get("n_switches")]
    text = " + ".join(parts) or _num(fabric.get("n_switches"))
    return text if planes == 1 else f"{text} in {planes} planes"


def _link_rates(fabric: Mapping) -> str:
    """``100 Gbps host, 200 Gbps fabric`` (host links are tier 1; the tiers above are the fabric)."""
    host, above = [], []
    for t in fabric.get("tiers", ()):
        (host if t.get("tier") == 1 else above).extend(t.get("link_rates_gbps", ()))
    if not host and not above:
        return ", ".join(_num(r, "Gbps") for r in fabric.get("link_rates_gbps", ())) or "-"
    text = "/".join(format_number(r) for r in sorted(set(host))) + " Gbps host"
    return text + (", " + "/".join(format_number(r) for r in sorted(set(above))) + " Gbps fabric" if above else "")


def _parallelism(specs: Mapping) -> str:
    p = specs.get("parallelism", {}) if isinstance(specs, Mapping) else {}
    dims = [f"{label}{p[k]}" for k, label in _PARALLEL if isinstance(p.get(k), int) and p[k] > 1]
    split = specs.get("derived", {}).get("layers_per_virtual_stage") if isinstance(specs, Mapping) else None
    pp, vpp = p.get("pp"), p.get("vpp")
    if split and isinstance(pp, int) and isinstance(vpp, int) and len(split) == pp * vpp:  # an uneven split
        per_stage = [sum(split[c * pp + s] for c in range(vpp)) for s in range(pp)]
        dims.append(f"(layers per stage {'/'.join(map(str, per_stage))})")
    return " ".join(dims) or ("none" if p else "-")


#: every row run_facts can give, in the order tables show them (flow and training runs side by side)
FACT_ORDER = ("experiment", "workload", "pattern", "trace", "model", "parallelism", "ranks", "iterations",
              "collectives", "serving", "requests", "topology", "transport", "hosts", "switches", "link rate",
              "link delay", "oversubscription", "attributes", "seed")


def run_facts(config: Mapping) -> dict[str, str]:
    """Ordered rows (label → text) saying what a run was: workload, fabric, transport, rates, seed."""
    exp = config.get("experiment") if isinstance(config, Mapping) else None
    if not isinstance(exp, Mapping):
        return {"experiment": "not stored (written by an older cosim)"}
    net, work = exp.get("network", {}), exp.get("workload", {})
    fabric = config.get("fabric") if isinstance(config.get("fabric"), Mapping) else {}
    facts = {"workload": str(work.get("kind", "-"))}
    if work.get("kind") == "training":
        built = config.get("workload", {}) if isinstance(config.get("workload"), Mapping) else {}
        specs = built.get("specs", {})
        model = specs.get("model", {}).get("name") if isinstance(specs.get("model"), Mapping) else None
        facts["trace"] = str(work.get("trace") or (f"generated from {work.get('model')}" if work.get("model")
                                                    else "in memory"))
        facts["model"] = str(model or work.get("model") or "-")
        facts["parallelism"] = _parallelism(specs)
        facts["ranks"] = _num(built.get("n_ranks"))
        facts["iterations"] = _num(work.get("iterations"))
        facts["collectives"] = f"{work.get('algorithm', '-')}, chunks of {_num(work.get('chunk_bytes'), 'B')}"
    elif work.get("kind") == "inference":
        built = config.get("workload", {}) if isinstance(config.get("workload"), Mapping) else {}
        facts["model"] = str(work.get("model", "-"))
        def shape(side: str) -> str:
            dims = [f"{d.upper()}{work[f'{side}_{d}']}" for d in ("tp", "pp", "ep")
                    if isinstance(work.get(f"{side}_{d}"), int) and work[f"{side}_{d}"] > 1]
            return "x".join(dims) or "1 GPU"

        facts["serving"] = (f"{work.get('prefill_replicas', '-')} prefill ({shape('prefill')}) + "
                            f"{work.get('decode_replicas', '-')} decode ({shape('decode')}), "
                            f"KV {work.get('kv_transfer', '-')}, {work.get('policy', '-')}")
        facts["ranks"] = _num(built.get("n_ranks"))
        source = work.get("request_trace") or f"Poisson {_num(work.get('rate_per_s'))}/s"
        facts["requests"] = f"{_num(built.get('requests'))} from {source}"
    else:
        facts["pattern"] = f"{work.get('pattern', '-')} of {_num(work.get('flow_bytes'), 'B')} flows"
    facts["topology"] = str(fabric.get("name") or net.get("topology", "-"))
    facts["transport"] = _transport(net)
    hosts = fabric.get("n_hosts", net.get("hosts"))
    servers = fabric.get("n_servers")
    facts["hosts"] = _num(hosts) + (f" NICs on {servers} servers" if servers not in (None, hosts) else " NICs")
    if fabric:
        facts["switches"] = _switches(fabric)
        facts["link rate"] = _link_rates(fabric)
    else:
        facts["link rate"] = _num(net.get("link_gbps"), "Gbps")
    facts["link delay"] = ", ".join(_num(d, "ns") for d in fabric.get("link_delays_ns", ())) or \
        _num(net.get("link_delay_ns"), "ns")
    if net.get("topology") in ("leaf-spine", "rail-optimized") and "oversubscription" in net:
        facts["oversubscription"] = _num(net.get("oversubscription"))
    attributes = net.get("attributes") or {}
    if attributes:
        facts["attributes"] = ", ".join(f"{k}={v}" for k, v in sorted(attributes.items()))
    facts["seed"] = _num(exp.get("seed"))
    return facts
