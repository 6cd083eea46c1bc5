"""Stock ns-3 reference: cost of one packet-hop through PointToPointNetDevice + DropTailQueue.

cosim's own benchmarks print their cost per packet-hop beside this figure, measured in the same process
and on the same machine, so the ratio survives a noisy or slower host.

What runs (all of it inside one JIT-compiled C++ function; no Python per packet or per event):

* ``n_senders`` independent chains of ``hops`` PointToPoint links (``hops + 1`` nodes each). Every link
  is a pair of stock ``PointToPointNetDevice`` with a ``DropTailQueue<Packet>`` (large enough never to
  drop) and a ``PointToPointChannel`` with the given delay.
* No Internet stack: each intermediate node forwards every packet it receives out of its next device
  from the device's ``NetDevice::SetReceiveCallback`` (``packet->Copy()`` then ``Send``, as ns-3's own
  ``BridgeNetDevice`` does). Per hop that is stock ns-3's PPP header add/remove, enqueue/dequeue,
  serialization (``TransmitComplete`` event), propagation (channel's ``Receive`` event) and forwarding.
* The first node of a chain keeps its device saturated: it sends a window of packets at t=0, then one
  new packet every time its device starts a transmission (``PhyTxBegin`` trace), so the source queue
  holds a constant small backlog and the link never idles. No extra event is scheduled for this.
* The last node counts packets; the function asserts that every packet arrived and nothing dropped.
* Frames on the wire are ``packet_bytes`` long (payload ``packet_bytes - 2`` + the 2-byte PPP header).
  ns-3's default time resolution (1 ns) and default scheduler (``MapScheduler``) are used.

Only ``Simulator::Run()`` is timed (``std::chrono::steady_clock`` in C++); building the topology and
``Simulator::Destroy()`` are not. Events are ``Simulator::GetEventCount()`` (a handful of them are the
t=0 ``Initialize`` events of nodes and devices).

``noop_event_cost`` times the event floor two ways: ``chained`` (one event at a time, each scheduling the
next 1 ns later: the queue holds one event, the cheapest case) and ``bulk`` (all n scheduled before
``Run`` at increasing times, so the scheduler holds n events; scheduling time reported separately).

Never ``from ns import ns``: only libns3.44-{core,stats,network,point-to-point} are loaded (stats is a
DT_NEEDED of network), by absolute path, with the headers of the wheel and its compile definitions.

    python bench/stock_ns3.py [--packet-hops N] [--repeat R] [--senders K] [--hops H] [--noop N]
"""

from __future__ import annotations

import argparse
import importlib.util
import resource
import time
from pathlib import Path

# In dependency order (readelf -d NEEDED): network needs stats; point-to-point needs network and core.
# point-to-point does not link mpi in the wheel.
NS3_MODULES = ("core", "stats", "network", "point-to-point")

# The wheel's INTERFACE_COMPILE_DEFINITIONS (lib64/cmake/ns3/ns3Targets.cmake), minus the source path.
NS3_DEFINES = ("NS3_BUILD_PROFILE_RELEASE", "NS3_LOG_ENABLE", "NS3_ASSERT_ENABLE",
               "HAVE_GSL", "HAVE_SQLITE3", "HAVE_LIBXML2", "__LINUX__")

CPP = r"""
#include "ns3/data-rate.h"
#include "ns3/drop-tail-queue.h"
#include "ns3/mac48-address.h"
#include "ns3/node.h"
#include "ns3/nstime.h"
#include "ns3/packet.h"
#include "ns3/point-to-point-channel.h"
#include "ns3/point-to-point-net-device.h"
#include "ns3/queue-size.h"
#include "ns3/simulator.h"

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace cosim_bench {

struct StockResult {
    uint64_t packets_sent = 0;
    uint64_t packets_delivered = 0;
    uint64_t packet_hops = 0;   // packets delivered x hops
    uint64_t events = 0;        // Simulator::GetEventCount()
    uint64_t drops = 0;         // drops on every queue of every device
    double sim_time_s = 0;      // simulated clock when the last packet arrived
    double wall_s = 0;          // wall time of Simulator::Run() only
};

struct NoopResult {
    uint64_t events = 0;
    double schedule_s = 0;      // wall time spent scheduling before Run (bulk only)
    double wall_s = 0;          // wall time of Simulator::Run() only
};

namespace detail {

// Forwards every packet received on one device out of the next device of the chain.
struct Forwarder {
    ns3::Ptr<ns3::NetDevice> out;
    bool Rx(ns3::Ptr<ns3::NetDevice>, ns3::Ptr<const ns3::Packet> p, uint16_t protocol, const ns3::Address&) {
        out->Send(p->Copy(), out->GetBroadcast(), protocol);
        return true;
    }
};

// The last node of a chain: counts arrivals.
struct Sink {
    uint64_t received = 0;
    int64_t last_ns = 0;
    bool Rx(ns3::Ptr<ns3::NetDevice>, ns3::Ptr<const ns3::Packet>, uint16_t, const ns3::Address&) {
        ++received;
        last_ns = ns3::Simulator::Now().GetNanoSeconds();
        return true;
    }
};

// The first node of a chain: keeps its device saturated, one new packet per transmission start.
struct Source {
    ns3::Ptr<ns3::NetDevice> dev;
    uint64_t quota = 0;
    uint64_t sent = 0;
    uint32_t payload = 0;
    uint32_t window = 0;
    void SendOne() {
        ++sent;
        if (!dev->Send(ns3::Create<ns3::Packet>(payload), dev->GetBroadcast(), 0x0800)) {
            throw std::runtime_error("stock_p2p_run: source device refused a packet");
        }
    }
    void Start() {
        for (uint32_t i = 0; i < window && sent < quota; ++i) SendOne();
    }
    // PhyTxBegin fires inside TransmitStart after the device turned BUSY, so Send() here only enqueues.
    void OnTxBegin(ns3::Ptr<const ns3::Packet>) {
        if (sent < quota) SendOne();
    }
};

} // namespace detail

StockResult stock_p2p_run(uint64_t n_packets, uint32_t packet_bytes, uint32_t hops, double rate_bps,
                          double delay_ns, uint32_t n_senders) {
    using namespace ns3;
    if (hops < 1 || n_senders < 1 || packet_bytes < 3 || packet_bytes > 65535 || n_packets < n_senders) {
        throw std::invalid_argument("stock_p2p_run: need hops>=1, n_senders>=1, 3<=packet_bytes<=65535, "
                                    "n_packets>=n_senders");
    }
    const uint32_t window = 4;  // source backlog: window-1 packets queued behind the one on the wire
    std::vector<detail::Source> sources(n_senders);
    std::vector<detail::Sink> sinks(n_senders);
    std::vector<detail::Forwarder> fwd(size_t(n_senders) * (hops - 1));
    std::vector<Ptr<PointToPointNetDevice>> devices;
    devices.reserve(size_t(n_senders) * hops * 2);
    {
        const DataRate rate{static_cast<uint64_t>(rate_bps + 0.5)};
        const Time delay = NanoSeconds(int64_t(delay_ns + 0.5));
        const QueueSize qsize(QueueSizeUnit::PACKETS, 1000000);
        for (uint32_t c = 0; c < n_senders; ++c) {
            std::vector<Ptr<Node>> nodes(hops + 1);
            for (auto& n : nodes) n = CreateObject<Node>();
            Ptr<PointToPointNetDevice> prev_rx;  // receiving device of the previous link
            for (uint32_t h = 0; h < hops; ++h) {
                Ptr<PointToPointChannel> ch = CreateObject<PointToPointChannel>();
                ch->SetAttribute("Delay", TimeValue(delay));
                Ptr<PointToPointNetDevice> d[2];
                for (int s = 0; s < 2; ++s) {
                    d[s] = CreateObject<PointToPointNetDevice>();
                    d[s]->SetAddress(Mac48Address::Allocate());
                    d[s]->SetDataRate(rate);
                    d[s]->SetMtu(uint16_t(packet_bytes));
                    Ptr<DropTailQueue<Packet>> q = CreateObject<DropTailQueue<Packet>>();
                    q->SetMaxSize(qsize);
                    d[s]->SetQueue(q);
                    nodes[h + s]->AddDevice(d[s]);  // sets the node's own receive callback; replaced below
                    d[s]->Attach(ch);
                    devices.push_back(d[s]);
                }
                if (h == 0) {
                    sources[c].dev = d[0];
                } else {
                    detail::Forwarder& f = fwd[size_t(c) * (hops - 1) + (h - 1)];
                    f.out = d[0];
                    prev_rx->SetReceiveCallback(MakeCallback(&detail::Forwarder::Rx, &f));
                }
                prev_rx = d[1];
            }
            prev_rx->SetReceiveCallback(MakeCallback(&detail::Sink::Rx, &sinks[c]));
            detail::Source& src = sources[c];
            src.quota = n_packets / n_senders + (c < n_packets % n_senders ? 1 : 0);
            src.payload = packet_bytes - 2;  // + PPP header = packet_bytes on the wire
            src.window = window;
            src.dev->TraceConnectWithoutContext("PhyTxBegin", MakeCallback(&detail::Source::OnTxBegin, &src));
            Simulator::ScheduleWithContext(nodes[0]->GetId(), Seconds(0), &detail::Source::Start, &src);
        }
    }
    auto t0 = std::chrono::steady_clock::now();
    Simulator::Run();
    auto t1 = std::chrono::steady_clock::now();

    StockResult r;
    r.wall_s = std::chrono::duration<double>(t1 - t0).count();
    r.events = Simulator::GetEventCount();
    int64_t last_ns = 0;
    for (uint32_t c = 0; c < n_senders; ++c) {
        r.packets_sent += sources[c].sent;
        r.packets_delivered += sinks[c].received;
        if (sinks[c].last_ns > last_ns) last_ns = sinks[c].last_ns;
    }
    for (auto& d : devices) r.drops += d->GetQueue()->GetTotalDroppedPackets();
    r.packet_hops = r.packets_delivered * hops;
    r.sim_time_s = double(last_ns) * 1e-9;
    devices.clear();
    for (auto& s : sources) s.dev = nullptr;
    for (auto& f : fwd) f.out = nullptr;
    Simulator::Destroy();
    if (r.packets_sent != n_packets || r.packets_delivered != n_packets || r.drops != 0) {
        throw std::runtime_error("stock_p2p_run: sent " + std::to_string(r.packets_sent) + ", delivered " +
                                 std::to_string(r.packets_delivered) + " of " + std::to_string(n_packets) +
                                 ", dropped " + std::to_string(r.drops));
    }
    return r;
}

namespace detail {
inline uint64_t g_noop_left = 0;
inline void Noop() {}
inline void Chain() {
    if (--g_noop_left) ns3::Simulator::Schedule(ns3::NanoSeconds(1), &Chain);
}
} // namespace detail

// mode 0 = chained (one pending event at a time), 1 = bulk (all n pending before Run).
NoopResult noop_event_cost_s(uint64_t n, int mode) {
    using namespace ns3;
    if (n < 1) throw std::invalid_argument("noop_event_cost_s: n >= 1");
    NoopResult r;
    auto t0 = std::chrono::steady_clock::now();
    if (mode == 0) {
        detail::g_noop_left = n;
        Simulator::Schedule(NanoSeconds(1), &detail::Chain);
    } else {
        for (uint64_t i = 0; i < n; ++i) Simulator::Schedule(NanoSeconds(int64_t(i) + 1), &detail::Noop);
    }
    auto t1 = std::chrono::steady_clock::now();
    Simulator::Run();
    auto t2 = std::chrono::steady_clock::now();
    r.events = Simulator::GetEventCount();
    r.schedule_s = mode == 0 ? 0.0 : std::chrono::duration<double>(t1 - t0).count();
    r.wall_s = std::chrono::duration<double>(t2 - t1).count();
    Simulator::Destroy();
    return r;
}

} // namespace cosim_bench
"""

_ns = None  # cppyy's cosim_bench namespace once loaded
_load_info: dict = {}


def ns3_dir() -> Path:
    """The installed ``ns3`` wheel's package directory (``include/``, ``lib64/``)."""
    spec = importlib.util.find_spec("ns3")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the ns3 package is not installed (pip install ns3==3.44.post0)")
    return Path(next(iter(spec.submodule_search_locations)))


def ns3_libraries() -> list[Path]:
    """The absolute paths of the ns-3 libraries this bench loads, in load order."""
    lib64 = ns3_dir() / "lib64"
    libs = []
    for module in NS3_MODULES:
        matches = sorted(lib64.glob(f"libns3.*-{module}.so"))
        if not matches:
            raise RuntimeError(f"no libns3.*-{module}.so in {lib64}")
        libs.append(matches[0])
    return libs


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def load():
    """Load the four ns-3 libraries, the wheel's headers and JIT the scenario once; return the namespace."""
    global _ns
    if _ns is not None:
        return _ns
    t0 = time.perf_counter()
    import cppyy  # noqa: PLC0415 - lazy, so that importing this module is free

    t_import = time.perf_counter()
    libs = ns3_libraries()
    for lib in libs:
        cppyy.load_library(str(lib))
    t_libs = time.perf_counter()
    cppyy.add_include_path(str(ns3_dir() / "include"))
    # optimized as ns-3 itself is, whatever cosim.plugin set for its call wrappers (".O 0") if it loaded first
    cppyy.gbl.gInterpreter.ProcessLine(".O 2")
    cppyy.cppdef("".join(f"#define {d} 1\n" for d in NS3_DEFINES))
    cppyy.cppdef(CPP)
    ns = cppyy.gbl.cosim_bench
    # Force the JIT of both entry points now, so that load time holds all of it and no run pays it.
    ns.stock_p2p_run, ns.noop_event_cost_s  # noqa: B018
    t_jit = time.perf_counter()
    _load_info.update(libraries=[str(p) for p in libs], import_cppyy_s=t_import - t0,
                      load_libraries_s=t_libs - t_import, jit_s=t_jit - t_libs, load_s=t_jit - t0,
                      rss_after_load_mb=_rss_mb())
    _ns = ns
    return ns


def load_info() -> dict:
    """Timings (s) and peak RSS (MB) of ``load()``, and the libraries it loaded."""
    load()
    return dict(_load_info)


def stock_packet_hop_cost(n_packet_hops: int = 2_000_000, packet_bytes: int = 4178, hops: int = 4,
                          rate_gbps: float = 400.0, delay_ns: float = 1000.0, n_senders: int = 8,
                          repeat: int = 1) -> dict:
    """Run the stock PointToPoint chains; return the wall cost of one packet-hop and events per packet-hop.

    ``n_packet_hops`` is rounded up to a whole number of packets (``ceil(n_packet_hops / hops)``, at least
    one per sender). With ``repeat > 1`` the scenario runs that many times and the run with the median
    wall time is returned (``wall_s_all`` lists every run).
    """
    if hops < 1 or n_senders < 1 or n_packet_hops < 1:
        raise ValueError(f"need hops, n_senders, n_packet_hops >= 1, got {hops}, {n_senders}, {n_packet_hops}")
    ns = load()
    n_packets = max(n_senders, -(-int(n_packet_hops) // hops))
    runs = [ns.stock_p2p_run(n_packets, int(packet_bytes), int(hops), float(rate_gbps) * 1e9, float(delay_ns),
                             int(n_senders)) for _ in range(max(1, int(repeat)))]
    walls = [float(r.wall_s) for r in runs]
    r = sorted(runs, key=lambda x: float(x.wall_s))[len(runs) // 2]
    ph = int(r.packet_hops)
    return dict(packet_hops=ph, packets=int(r.packets_delivered), wall_s=float(r.wall_s), wall_s_all=walls,
                s_per_packet_hop=float(r.wall_s) / ph, events=int(r.events),
                events_per_packet_hop=int(r.events) / ph, s_per_event=float(r.wall_s) / int(r.events),
                sim_time_s=float(r.sim_time_s), packet_bytes=packet_bytes, hops=hops, rate_gbps=rate_gbps,
                delay_ns=delay_ns, n_senders=n_senders, peak_rss_mb=_rss_mb())


def noop_event_cost(n: int = 5_000_000, mode: str = "chained") -> dict:
    """Wall cost of one no-op ns-3 event: ``chained`` (1 pending event) or ``bulk`` (n pending).

    ``bulk`` holds all n events in the scheduler at once: about 95 bytes each, so 1e6 events ~ 95 MB.
    """
    if mode not in ("chained", "bulk"):
        raise ValueError(f"mode must be 'chained' or 'bulk', got {mode!r}")
    r = load().noop_event_cost_s(int(n), 0 if mode == "chained" else 1)
    ev = int(r.events)
    return dict(mode=mode, events=ev, wall_s=float(r.wall_s), s_per_event=float(r.wall_s) / ev,
                schedule_s=float(r.schedule_s), peak_rss_mb=_rss_mb())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packet-hops", type=int, default=2_000_000, help="packet-hops per run")
    ap.add_argument("--repeat", type=int, default=3, help="runs of the packet scenario (median reported)")
    ap.add_argument("--hops", type=int, default=4)
    ap.add_argument("--senders", type=int, default=8)
    ap.add_argument("--packet-bytes", type=int, default=4178)
    ap.add_argument("--rate-gbps", type=float, default=400.0)
    ap.add_argument("--delay-ns", type=float, default=1000.0)
    ap.add_argument("--noop", type=int, default=10_000_000, help="events of the chained no-op run")
    ap.add_argument("--noop-bulk", type=int, default=1_000_000, help="events of the bulk no-op run")
    args = ap.parse_args(argv)

    t_start = time.perf_counter()
    info = load_info()
    print("ns-3 libraries loaded (plain cppyy, by absolute path):")
    for lib in info["libraries"]:
        print(f"  {lib}")
    print(f"load: {info['load_s']:.2f} s (import cppyy {info['import_cppyy_s']:.2f}, libraries "
          f"{info['load_libraries_s']:.2f}, headers + JIT {info['jit_s']:.2f}); "
          f"peak RSS after load {info['rss_after_load_mb']:.0f} MB")
    print()
    p = stock_packet_hop_cost(args.packet_hops, args.packet_bytes, args.hops, args.rate_gbps, args.delay_ns,
                              args.senders, args.repeat)
    rss_packets = _rss_mb()
    chained = noop_event_cost(args.noop, "chained")
    bulk = noop_event_cost(args.noop_bulk, "bulk")
    print(f"stock PointToPoint + DropTail: {p['n_senders']} chains x {p['hops']} hops, "
          f"{p['packet_bytes']} B frames, {p['rate_gbps']:g} Gbps, {p['delay_ns']:g} ns; "
          f"median of {len(p['wall_s_all'])} runs")
    print(f"{'bench':24s} {'units':>10s} {'Run s':>7s} {'us/unit':>8s} {'ev/unit':>8s} {'us/event':>9s}")
    print(f"{'packet-hop (stock p2p)':24s} {p['packet_hops']:10d} {p['wall_s']:7.3f} "
          f"{p['s_per_packet_hop'] * 1e6:8.3f} {p['events_per_packet_hop']:8.3f} {p['s_per_event'] * 1e6:9.3f}")
    for e in (chained, bulk):
        print(f"{'no-op event (' + e['mode'] + ')':24s} {e['events']:10d} {e['wall_s']:7.3f} "
              f"{e['s_per_event'] * 1e6:8.3f} {1:8.3f} {e['s_per_event'] * 1e6:9.3f}"
              + (f"  (+{e['schedule_s']:.3f} s to schedule)" if e["mode"] == "bulk" else ""))
    print(f"packet runs: {', '.join(f'{w:.3f}' for w in p['wall_s_all'])} s; simulated "
          f"{p['sim_time_s'] * 1e3:.3f} ms each")
    print(f"peak RSS: {info['rss_after_load_mb']:.0f} MB after load, {rss_packets:.0f} MB after the packet "
          f"runs, {_rss_mb():.0f} MB at the end (bulk no-op); total {time.perf_counter() - t_start:.1f} s")


if __name__ == "__main__":
    main()
