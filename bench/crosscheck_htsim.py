"""cosim's Ultra Ethernet transport (``--transport uec``) against the UEC reference model in htsim
(the Ultra Ethernet Consortium's htsim, ``htsim_uec``), on the same scenarios and the same fabric.

    python bench/crosscheck_htsim.py [--htsim PATH/htsim_uec] [--seeds N] [--scenario NAME ...]
                                     [--set NAME=VALUE ...] [--htsim-args "ARGS"] [--workdir DIR]

Fabric: a two-tier leaf-spine of 32 hosts, 4 leaves of 8 hosts, 8 spines (one uplink from every leaf to
every spine, so no oversubscription), every link 100 Gbps and 1 us. Scenarios (every flow starts at 0):

- ``one-flow``: host 0 sends 1 MiB to host 8 on an idle fabric (calibrates the two completion points);
- ``incast``: the 15 hosts 8..22 (all on other leaves) each send 1 MiB to host 0;
- ``permutation``: host i sends 2 MiB to host i + 8 (mod 32), every flow off its leaf;
- ``all-to-all``: every host sends 64 KiB to every other host (992 flows).

cosim runs with ``transport_attributes("uec")`` and the overrides of :func:`cosim_attributes`, which make
its framing, thresholds and NSCC constants those htsim uses (each assumption is written beside it). With
``--htsim`` the script writes htsim's topology and connection-matrix files itself (into ``--workdir``, a
temporary folder by default), runs the binary with the matching flags (:func:`htsim_arguments`) and reads
its flow completions. htsim reports a flow finished when its SENDER has the ACK of its last byte; cosim
when the RECEIVER has that byte: the script moves htsim's times to the receiver by the ACK's unloaded
return latency (hops x (link delay + ACK serialization)), which is exact unless the last ACK queued behind
a packet in service (at most one MTU per hop, 1.3 us on a 4-hop path).

To see what a difference comes from, ``--set NAME=VALUE`` (repeatable) changes one of cosim's attributes
after the matched ones, and ``--htsim-args`` appends flags to htsim's command line (a repeated flag
overrides the earlier one, e.g. ``--htsim-args "-sack_threshold 16384"`` for its default SACK coalescing).

Each side runs every scenario with seeds 1..N (``--seeds``, default 10: the seeds move ECN marking in both,
and htsim's trimming choice and REPS exploration) and the table pools the flows of all N runs: median, p99
and max FCT, and the lowest and highest p99 of a single run. Both sides are deterministic for a seed: the
figures repeat exactly. Simulated times only.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass

import numpy as np

from cosim import engine
from cosim.network import topology
from cosim.network.transport import transport_attributes
from cosim.workload.flows import FlowSet

HOSTS, HOSTS_PER_LEAF, SPINES = 32, 8, 8
LINK_GBPS = 100.0
LINK_DELAY_NS = 1000.0
#: payload per full packet, bytes (cosim HostNic::MtuBytes; htsim's MSS)
PAYLOAD_BYTES = 4096
#: htsim's UEC data header, ACK/NACK and trimmed packet are all 64 B on the wire (UecSrc::_hdr_size,
#: UecAckPacket::ACKSIZE, -trimsize 64) and it models no preamble or inter-frame gap; cosim is set to the same
HEADER_BYTES = 64
PACKET_BYTES = PAYLOAD_BYTES + HEADER_BYTES
#: switch egress queue, in full packets: htsim trims above its queue size, cosim above TrimThresholdBytes;
#: 60 packets = 249,600 B, cosim's default of 20 us of the host link (250,000 B) to 0.2 %
QUEUE_PACKETS = 60
#: ECN marking between 15 and 60 packets of queue (62,400 B and 249,600 B: cosim's 5 us and 20 us)
ECN_LOW_PACKETS, ECN_HIGH_PACKETS = 15, 60
#: NSCC target queueing delay, us (cosim's default; htsim's own default is 0.75 of its base RTT)
TARGET_QDELAY_US = 5.0
#: NSCC's reference network of htsim's parameter scaling (and of the specification's): 100 Gbps, 12 us
REFERENCE_BDP_BYTES = 100e9 * 12e-6 / 8
INCAST_SENDERS = np.arange(8, 23)
INCAST_BYTES, PERMUTATION_BYTES, ALL_TO_ALL_BYTES = 1 << 20, 2 << 20, 64 << 10
SCENARIOS = ("one-flow", "incast", "permutation", "all-to-all")


def serialization_ns(wire_bytes: float) -> float:
    return wire_bytes * 8 / LINK_GBPS


def base_rtt_ns() -> float:
    """The unloaded round trip across the fabric's diameter (4 hops each way), as htsim computes it for
    NSCC: 8 link delays, and a data packet and an ACK serialized on each of the 4 hops."""
    return 8 * LINK_DELAY_NS + 4 * (serialization_ns(PACKET_BYTES) + serialization_ns(HEADER_BYTES))


def nscc_gains() -> dict[str, float]:
    """htsim's NSCC constants, scaled to this network as it scales them (by a = BDP / reference BDP and
    b = target / 12 us), in cosim's units: MTUs added per window acknowledged."""
    a = LINK_GBPS * 1e9 * base_rtt_ns() * 1e-9 / 8 / REFERENCE_BDP_BYTES
    b = TARGET_QDELAY_US / 12.0
    return {"alpha_mtus": 4 * a * b, "fair_increase_mtus": 5 * a}


def htsim_min_rto_us() -> float:
    """htsim's retransmission timeout: 15 us plus six full queues' drain time."""
    return 15.0 + QUEUE_PACKETS * PACKET_BYTES * 6 * 8 / (LINK_GBPS * 1e3)


def cosim_attributes() -> dict[str, str]:
    """The uec transport with htsim's framing, queue, ECN marker and NSCC constants."""
    gains = nscc_gains()
    return transport_attributes("uec", link_gbps=LINK_GBPS, link_delay_ns=LINK_DELAY_NS) | {
        "HostNic::HeaderBytes": str(HEADER_BYTES),
        "HostNic::ControlPacketBytes": str(HEADER_BYTES),
        "FabricSwitch::TrimmedPacketBytes": str(HEADER_BYTES),
        "FabricSwitch::TrimThresholdBytes": str(QUEUE_PACKETS * PACKET_BYTES),
        # htsim marks as a packet leaves, with a probability rising linearly from 0 at the low to 1 at the high mark
        "FabricSwitch::EcnKminBytes": str(ECN_LOW_PACKETS * PACKET_BYTES),
        "FabricSwitch::EcnKmaxBytes": str(ECN_HIGH_PACKETS * PACKET_BYTES),
        "FabricSwitch::EcnPmax": "1.0",
        "FabricSwitch::EcnMarkingPoint": "dequeue",
        "NsccWindow::BaseRtt": f"{round(base_rtt_ns())}ns",
        "NsccWindow::TargetQdelay": f"{TARGET_QDELAY_US:g}us",
        "NsccWindow::QuickAdaptThreshold": f"{4 * TARGET_QDELAY_US:g}us",
        "NsccWindow::FastIncreaseThreshold": "1us",
        "NsccWindow::Alpha": f"{gains['alpha_mtus']:.6f}",
        "NsccWindow::FairIncreaseMtus": f"{gains['fair_increase_mtus']:.6f}",
        "NsccWindow::MinWindowBytes": str(PACKET_BYTES),
        "HostNic::UecEntropyCount": "256",
        "HostNic::UecRetransmitTimeout": f"{round(htsim_min_rto_us() * 1e3)}ns",
        "HostNic::UecAckEveryBytes": "1",  # a SACK for every data packet, as htsim's -sack_threshold 0
    }


def htsim_arguments(topo_path: str, matrix_path: str, log_path: str, seed: int) -> list[str]:
    """htsim_uec's flags for the same configuration as :func:`cosim_attributes`."""
    return ["-topo", topo_path, "-tm", matrix_path, "-o", log_path,
            "-mtu", str(PACKET_BYTES), "-q", str(QUEUE_PACKETS),
            "-ecn", str(ECN_LOW_PACKETS), str(ECN_HIGH_PACKETS),
            "-target_q_delay", f"{TARGET_QDELAY_US:g}",
            "-sender_cc_only",  # NSCC alone, as cosim (no RCCC)
            "-load_balancing_algo", "reps", "-paths", "256",
            "-sack_threshold", "0",  # a SACK for every data packet, as cosim
            "-seed", str(seed), "-end", "100000"]


def fabric() -> topology.Fabric:
    return topology.leaf_spine(hosts=HOSTS, hosts_per_leaf=HOSTS_PER_LEAF, spines=SPINES,
                               host_link_gbps=LINK_GBPS, fabric_link_gbps=LINK_GBPS,
                               host_link_delay_ns=LINK_DELAY_NS, fabric_link_delay_ns=LINK_DELAY_NS)


def flows(scenario: str) -> FlowSet:
    if scenario == "one-flow":
        src, dst, size = np.array([0]), np.array([HOSTS_PER_LEAF]), INCAST_BYTES
    elif scenario == "incast":
        src, dst, size = INCAST_SENDERS, np.zeros_like(INCAST_SENDERS), INCAST_BYTES
    elif scenario == "permutation":
        src = np.arange(HOSTS)
        dst, size = (src + HOSTS_PER_LEAF) % HOSTS, PERMUTATION_BYTES
    elif scenario == "all-to-all":
        s, d = np.meshgrid(np.arange(HOSTS), np.arange(HOSTS), indexing="ij")
        off = s != d
        src, dst, size = s[off], d[off], ALL_TO_ALL_BYTES
    else:
        raise ValueError(f"unknown scenario {scenario!r}; choose one of {', '.join(SCENARIOS)}")
    n = src.size
    return FlowSet(src=np.asarray(src, np.int32), dst=np.asarray(dst, np.int32),
                   size_bytes=np.full(n, size, np.int64), start_ns=np.zeros(n), priority=np.zeros(n, np.uint8))


def hops(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Links on a shortest path: 2 within a leaf, 4 across the spines."""
    return np.where(src // HOSTS_PER_LEAF == dst // HOSTS_PER_LEAF, 2, 4)


def wire_ns(size_bytes: np.ndarray) -> np.ndarray:
    """A flow's own wire time on its host link (payload plus a header per packet)."""
    packets = -(-size_bytes // PAYLOAD_BYTES)
    return serialization_ns(size_bytes + packets * HEADER_BYTES)


@dataclass(frozen=True)
class Side:
    """One simulator's flow completion times (ns, receiver side, flows in FlowSet order) and counters."""

    fct_ns: np.ndarray
    counters: dict[str, int]


def run_cosim(scenario: str, seed: int, overrides: dict[str, str]) -> Side:
    fs = flows(scenario)
    out = engine.simulate(fabric(), fs, attributes=cosim_attributes() | overrides, seed=seed, max_sim_time_ns=1e8)
    if out.status != "complete":
        raise RuntimeError(f"cosim {scenario}: {out.status}")
    c = out.counters
    return Side(fct_ns=np.asarray(out.finish_ns) - fs.start_ns,
                counters={"trimmed": c.get("trimmed_packets", 0), "retransmitted": c["retransmitted_packets"],
                          "timeouts": c.get("timeouts", 0)})


def write_topology(path: str) -> None:
    """htsim's fat-tree description of :func:`fabric` (its documented .topo format: tier 0 are the leaves,
    tier 1 the spines; one pod holds every host)."""
    delay = round(LINK_DELAY_NS)
    rate = round(LINK_GBPS)
    leaves = HOSTS // HOSTS_PER_LEAF
    with open(path, "w") as f:
        f.write(f"Nodes {HOSTS}\nTiers 2\nPodsize {HOSTS}\n\n"
                f"Tier 0\nDownlink_speed_Gbps {rate}\nRadix_Down {HOSTS_PER_LEAF}\nRadix_Up {SPINES}\n"
                f"Downlink_Latency_ns {delay}\nSwitch_Latency_ns 0\n\n"
                f"Tier 1\nDownlink_speed_Gbps {rate}\nRadix_Down {leaves}\n"
                f"Downlink_Latency_ns {delay}\nSwitch_Latency_ns 0\n")


def write_connection_matrix(path: str, fs: FlowSet) -> None:
    """htsim's connection matrix: a header, then one ``src->dst id N start T size B`` line per flow (ids from
    1; T in microseconds)."""
    with open(path, "w") as f:
        f.write(f"Nodes {HOSTS}\nConnections {fs.n_flows}\n")
        for i in range(fs.n_flows):
            f.write(f"{fs.src[i]}->{fs.dst[i]} id {i + 1} start {fs.start_ns[i] / 1e3:g} size {fs.size_bytes[i]}\n")


FINISHED = re.compile(r"Flow \S+ flowId (\d+) .*? finished at ([0-9.eE+-]+)")
TOTALS = re.compile(r"New: (\d+) Rtx: (\d+) .* NACKs: (\d+)")


def run_htsim(binary: str, scenario: str, seed: int, workdir: str, extra: list[str]) -> Side:
    fs = flows(scenario)
    topo, matrix, log = (os.path.join(workdir, f"{scenario}.{ext}") for ext in ("topo", "cm", "log"))
    write_topology(topo)
    write_connection_matrix(matrix, fs)
    proc = subprocess.run([binary, *htsim_arguments(topo, matrix, log, seed), *extra], capture_output=True, text=True,
                          cwd=workdir, check=False)
    with open(os.path.join(workdir, f"{scenario}-seed{seed}.out"), "w") as f:
        f.write(proc.stdout)
    finish_us = np.full(fs.n_flows, np.nan)
    counters = {}
    for line in proc.stdout.splitlines():
        if m := FINISHED.search(line):
            finish_us[int(m.group(1)) - 1] = float(m.group(2))
        elif m := TOTALS.search(line):
            counters = {"retransmitted": int(m.group(2)), "trimmed": int(m.group(3))}
    if np.isnan(finish_us).any():
        raise RuntimeError(f"htsim {scenario}: {int(np.isnan(finish_us).sum())} flows did not finish "
                           f"(exit {proc.returncode}; its output is in {workdir})")
    ack_return_ns = hops(fs.src, fs.dst) * (LINK_DELAY_NS + serialization_ns(HEADER_BYTES))
    return Side(fct_ns=finish_us * 1e3 - ack_return_ns - fs.start_ns, counters=counters)


def summary(fct_ns: np.ndarray) -> tuple[float, float, float]:
    """(median, p99, max) in microseconds."""
    return (float(np.percentile(fct_ns, 50)) / 1e3, float(np.percentile(fct_ns, 99)) / 1e3,
            float(np.max(fct_ns)) / 1e3)


def pooled(runs: list[Side]) -> tuple[np.ndarray, tuple[float, float], dict[str, float]]:
    """The flows of every run in one array, the lowest and highest p99 of one run (us), and the counters
    averaged over the runs."""
    p99 = [summary(r.fct_ns)[1] for r in runs]
    keys = runs[0].counters.keys()
    return (np.concatenate([r.fct_ns for r in runs]), (min(p99), max(p99)),
            {k: float(np.mean([r.counters[k] for r in runs])) for k in keys})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--htsim", metavar="PATH", help="a built htsim_uec binary (bench/README.md says how)")
    parser.add_argument("--seeds", type=int, default=10, metavar="N", help="runs per scenario and side, "
                        "seeds 1..N, flows pooled (default 10)")
    parser.add_argument("--workdir", metavar="DIR", help="where htsim's input and output files go "
                        "(default: a temporary folder, removed afterwards)")
    parser.add_argument("--scenario", action="append", choices=SCENARIOS, help="run only these (repeatable)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="change a cosim attribute after the matched ones (repeatable)")
    parser.add_argument("--htsim-args", default="", metavar="ARGS", help="flags appended to htsim's command line")
    args = parser.parse_args(argv)
    overrides = {}
    for item in args.set:
        name, eq, value = item.partition("=")
        if not eq or not name or not value:
            parser.error(f"--set {item!r}: expected NAME=VALUE, e.g. NsccWindow::Gamma=0.5")
        overrides[name] = value
    if args.htsim and not os.access(args.htsim, os.X_OK):
        parser.error(f"--htsim {args.htsim}: not an executable file")
    if args.seeds < 1:
        parser.error(f"--seeds {args.seeds}: at least 1")
    scenarios = args.scenario or list(SCENARIOS)
    seeds = range(1, args.seeds + 1)

    print(f"{HOSTS} hosts, {HOSTS // HOSTS_PER_LEAF} leaves of {HOSTS_PER_LEAF}, {SPINES} spines, "
          f"{LINK_GBPS:g} Gbps, {LINK_DELAY_NS / 1e3:g} us links; {PAYLOAD_BYTES} B payload + {HEADER_BYTES} B "
          f"header; trim at {QUEUE_PACKETS * PACKET_BYTES} B; base RTT {base_rtt_ns() / 1e3:.3f} us; "
          f"seeds 1..{args.seeds}")
    print("FCT in us at the receiver, flows of all seeds pooled; ratio = cosim / htsim; trimmed and "
          "retransmitted packets per run")
    print(f"{'scenario':<12} {'side':<6} {'flows':>6} {'median':>8} {'p99':>8} {'max':>8} {'p99 of a run':>15} "
          f"{'own wire':>8} {'trimmed':>8} {'retx':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.workdir or tmp
        os.makedirs(workdir, exist_ok=True)
        for scenario in scenarios:
            wire = float(np.median(wire_ns(flows(scenario).size_bytes))) / 1e3
            sides = {"cosim": pooled([run_cosim(scenario, s, overrides) for s in seeds])}
            if args.htsim:
                binary = os.path.abspath(args.htsim)
                extra = shlex.split(args.htsim_args)
                sides["htsim"] = pooled([run_htsim(binary, scenario, s, workdir, extra) for s in seeds])
            for name, (fct, (lo, hi), counters) in sides.items():
                med, p99, mx = summary(fct)
                print(f"{scenario:<12} {name:<6} {fct.size:>6} {med:>8.1f} {p99:>8.1f} {mx:>8.1f} "
                      f"{f'{lo:.1f}-{hi:.1f}':>15} {wire:>8.1f} {counters['trimmed']:>8.0f} "
                      f"{counters['retransmitted']:>6.0f}")
            if args.htsim:
                r = np.array(summary(sides["cosim"][0])) / np.array(summary(sides["htsim"][0]))
                print(f"{scenario:<12} {'ratio':<6} {'':>6} {r[0]:>8.3f} {r[1]:>8.3f} {r[2]:>8.3f}")
    if not args.htsim:
        print("htsim's side: build htsim_uec (bench/README.md, 'crosscheck_htsim.py') and pass --htsim PATH")


if __name__ == "__main__":
    main(sys.argv[1:])
