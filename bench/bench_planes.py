"""Single-plane against dual-plane rail-optimized fabrics (docs/fabrics.md, "Multi-plane fabrics"): finish
time of a cross-leaf permutation as a multiple of the ideal, per transport.

    python bench/bench_planes.py [servers] [gpus_per_server] [messages] [nic_gbps]

Defaults: 1,024 GPUs (128 servers x 8) with 800 Gbit/s NICs, rail-optimized, no oversubscription, both
fabrics built from the same 51.2 Tbit/s switch: single plane, 64 ports of 800G; dual plane, each NIC's two
400G ports on two planes of 128 x 400G switches. NIC g of server s sends ``messages`` (16) concurrent 64 KiB
messages to NIC g of server s + servers / 2, on another leaf of its rail in both fabrics (a rail is 4 leaves
of 32 NICs in one, 2 of 64 in the other), so every flow crosses a spine. Ideal: one NIC's bytes on the wire
at the NIC rate. Simulated times are deterministic; the wall column is one run on a shared machine (noisy).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from cosim import engine
from cosim.network import clos, planes
from cosim.network.transport import mechanism_attributes, transport_attributes
from cosim.workload.flows import FlowSet

MESSAGE_BYTES, MTU = 64 * 1024, 4096
#: per-packet header on the wire of each transport (HostNic::HeaderBytes), bytes
HEADER = {"roce": 82, "uec": 122}
#: the switch silicon both fabrics use: Tbit/s
SWITCH_TBPS = 51.2

RUNS = {
    "RoCE, 5-tuple ECMP": ("roce", {"ecmp_hash": "five-tuple"}),
    "RoCE, per-flow hash": ("roce", {}),
    "UEC (spraying)": ("uec", {}),
}


def fabric(servers: int, gps: int, nic_gbps: float, n_planes: int):
    """The rail-optimized fabric of ``n_planes`` planes, each of SWITCH_TBPS switches at the port speed."""
    port = nic_gbps / n_planes
    base = clos.rail_clos(servers=servers, gpus_per_server=gps, switch_radix=round(SWITCH_TBPS * 1e3 / port),
                          host_link_gbps=port, host_link_delay_ns=1000.0, fabric_link_delay_ns=1000.0)
    return base, planes.multi_plane(base, n_planes, nic_link_gbps=nic_gbps)


def main(servers: int, gps: int, messages: int, nic_gbps: float) -> None:
    shift = servers // 2
    host = np.arange(servers * gps)
    dst_host = ((host // gps + shift) % servers) * gps + host % gps
    src = np.repeat(host, messages).astype(np.int32)
    flows = FlowSet.from_arrays(src, np.repeat(dst_host, messages), MESSAGE_BYTES)
    print(f"{host.size} GPUs ({servers} servers x {gps}), {nic_gbps:g}G NICs, {messages} x 64 KiB to the GPU "
          f"{shift} servers along its rail")
    print(f"{'fabric':44} {'run':22} {'finish (us)':>11} {'/ideal':>7} {'p50 FCT':>8} {'wall s':>7}")
    for n_planes in (1, 2):
        base, fab = fabric(servers, gps, nic_gbps, n_planes)
        p = base.params
        shape = (f"{n_planes} plane{'s' if n_planes > 1 else ''}, {p['switch_radix']} x {p['switch_port_gbps']:g}G: "
                 f"{p['leaves_per_rail']} leaves/rail, {p['spines']} spines")
        for run, (transport, options) in RUNS.items():
            ideal_ns = messages * -(-MESSAGE_BYTES // MTU) * (MTU + HEADER[transport]) * 8 / nic_gbps
            attrs = (transport_attributes(transport, dcqcn=False, link_gbps=nic_gbps / n_planes)
                     | mechanism_attributes(**options))
            wall = time.perf_counter()
            out = engine.simulate(fab, flows, seed=1, attributes=attrs, max_sim_time_ns=1e9)
            wall = time.perf_counter() - wall
            assert out.status == "complete" and (out.delivered_bytes == MESSAGE_BYTES).all()
            finish = float(out.finish_ns.max())
            fct = float(np.median(out.finish_ns - flows.start_ns))
            print(f"{shape:44} {run:22} {finish / 1e3:>11.2f} {finish / ideal_ns:>7.2f} {fct / 1e3:>8.2f} "
                  f"{wall:>7.1f}")


if __name__ == "__main__":
    args = [float(a) for a in sys.argv[1:]]
    defaults = [128, 8, 16, 800.0]
    servers, gps, messages, nic = (args + defaults[len(args):])[:4]
    main(int(servers), int(gps), int(messages), nic)
