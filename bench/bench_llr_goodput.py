"""Goodput of one flow over a link with bit errors: RoCE (go-back-N) and UEC (selective retransmission), each
without and with link-level retry (LLR, ``network.link_retry = "llr"``), beside LLR's closed form; then
InfiniBand's credit link, whose own link-level resend repeats each corrupted packet, beside C·(1 − p).

    python bench/bench_llr_goodput.py [flow_mib] [bit_error_rates]

One flow of ``flow_mib`` MiB (16) from host1 to host0 through one switch, 100 Gbps and 1 us links; the
sender's link (both directions) corrupts bits at each rate of the comma-separated ``bit_error_rates``
(1e-8,1e-7,1e-6,1e-5). RoCE's go-back-N timer is 100 us (HostNic::RetransmitTimeout; the default 4 ms leaves
BER 1e-5 unfinished), UEC's its default 200 us. A run still going after 1 s of simulated time is reported
unfinished. Goodput = payload / finish time of the flow.

Closed form of LLR (docs/models/uec.md): C·(1 − p)/(1 + p·k), C the link's payload rate at the transport's
framing, p = 1 − (1 − BER)^(frame bits) the probability a full frame is corrupted, k = ceil(2d/T) the frames
sent between a corrupted frame and its NACK's return (d link delay, T frame time; ≈ 2d/T). "at r" is the same
form at the fraction of frames the run corrupted, r/(N + r) for N frames and r replays. InfiniBand's link
resend sends each corrupted packet again (its serialization charged, the original held in order at the
receiver), so while the credits cover the wait a busy link delivers C·(1 − p). The figures are simulated, so
they repeat exactly.
"""

from __future__ import annotations

import math
import sys

from cosim import engine
from cosim import faults as fs
from cosim.network import topology
from cosim.network.link_layer import link_layer_attributes
from cosim.network.transport import transport_attributes
from cosim.workload.flows import FlowSet

LINK_GBPS, DELAY_NS, MTU = 100.0, 1000.0, 4096
HEADERS = {"roce": 82, "uec": 122, "ib": 26}
STOP_NS = 1e9


def run(transport: str, llr: bool, ber: float, size: int):
    fabric = topology.single_switch(hosts=2, link_gbps=LINK_GBPS, link_delay_ns=DELAY_NS)
    fault = fs.Fault(kind="link_degrade", element="host1-switch0", at_ns=0.0, params=(("bit_error_rate", ber),))
    plan = fs.FaultPlan(resolved=fs.resolve([fault], fabric, max_sim_time_ns=STOP_NS), fabric=fabric, seed=1,
                        stop_ps=int(STOP_NS * 1e3))
    attrs = transport_attributes(transport) | link_layer_attributes(link_retry="llr" if llr else "off")
    if transport == "roce":
        attrs["HostNic::RetransmitTimeout"] = "100us"
    return engine.simulate(fabric, FlowSet.from_arrays([1], [0], size), seed=1, attributes=attrs,
                           max_sim_time_ns=STOP_NS, setup=plan.setup)


def closed_form(transport: str, ber: float) -> tuple[float, float, int]:
    """(C Gbit/s, p, k) of full frames of ``transport``."""
    wire = MTU + HEADERS[transport]
    frame_ns = wire * 8 / LINK_GBPS
    return LINK_GBPS * MTU / wire, 1 - (1 - ber) ** (wire * 8), math.ceil(2 * DELAY_NS / frame_ns)


def main() -> None:
    size = int(float(sys.argv[1]) * (1 << 20)) if len(sys.argv) > 1 else 16 << 20
    bers = [float(x) for x in sys.argv[2].split(",")] if len(sys.argv) > 2 else [1e-8, 1e-7, 1e-6, 1e-5]
    frames = -(-size // MTU)
    print(f"one flow of {size / (1 << 20):g} MiB, {LINK_GBPS:g} Gbps, {DELAY_NS:g} ns links; goodput in Gbit/s")
    print("| BER | RoCE | RoCE + LLR | closed form | at r | UEC | UEC + LLR | closed form | at r "
          "| LLR replays r (RoCE, UEC) | RoCE lost / resent | UEC lost / resent |")
    print("|---" * 12 + "|")
    for ber in bers:
        cells, replays, lost = [], [], []
        for transport in ("roce", "uec"):
            c_gbps, p, k = closed_form(transport, ber)
            plain, llr = (run(transport, x, ber, size) for x in (False, True))
            r = llr.counters.get("llr_retries", 0)
            cells += [goodput(plain, size), goodput(llr, size), f"{c_gbps * (1 - p) / (1 + p * k):.2f}",
                      f"{c_gbps * frames / (frames + r * (1 + k)):.2f}"]
            replays.append(f"{r:,}")
            lost.append(f"{plain.counters.get('ber_drops', 0):,} / {plain.counters.get('retransmitted_packets', 0):,}")
        print(f"| {ber:g} | {' | '.join(cells)} | {', '.join(replays)} | {' | '.join(lost)} |", flush=True)
    print("\n| BER | InfiniBand (link resend) | C·(1 − p) | resends | InfiniBand + LLR | LLR closed form |")
    print("|---" * 6 + "|")
    for ber in bers:
        c_gbps, p, k = closed_form("ib", ber)
        plain, llr = (run("ib", x, ber, size) for x in (False, True))
        print(f"| {ber:g} | {goodput(plain, size)} | {c_gbps * (1 - p):.2f} | "
              f"{plain.counters.get('link_retransmissions', 0):,} | {goodput(llr, size)} | "
              f"{c_gbps * (1 - p) / (1 + p * k):.2f} |", flush=True)


def goodput(out, size: int) -> str:
    """Payload / finish time of the flow, Gbit/s, or the time limit it did not finish by."""
    if out.status != "complete":
        return f"unfinished at {STOP_NS / 1e9:g} s"
    return f"{size * 8 / float(out.finish_ns.max()):.2f}"


if __name__ == "__main__":
    main()
