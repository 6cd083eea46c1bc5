"""What a PFC pause storm costs a flow that never crosses it, with and without the PFC watchdog.

Four hosts on one 100 Gbit/s switch (1 us links, 2 MB buffer, RoCE without DCQCN). Host 0 sends 4 MB to
host 3 and 10 MB to host 1 (the victim); host 3 keeps pausing priority 0 from 100 us for 1 ms. Without
the watchdog the switch queue towards host 3 fills the buffer, the switch pauses host 0, and the victim
stalls for the storm. With the watchdog (detection 100 us, restoration 200 us) the stalled queue is
disabled, its packets dropped, and the victim moves on; go-back-N resends the dropped packets.

    python bench/pause_storm_victim.py

prints, per setting, the victim's longest stall (delivered bytes sampled every 5 us), both flows'
completion times, and the watchdog's counters.
"""

from __future__ import annotations

import numpy as np

from cosim import engine
from cosim.network import topology
from cosim.network.transport import transport_attributes
from cosim.workload import flows as fl

GRID_NS = 5e3


def run(watchdog: bool):
    fabric = topology.single_switch(hosts=4, link_gbps=100.0, link_delay_ns=1000.0)
    h = fabric.host_ids
    flows = fl.FlowSet.from_arrays([h[0], h[0]], [h[3], h[1]], [4_000_000, 10_000_000])
    storms = engine.PauseStorms(host=np.array([h[3]]), priority=np.array([0]), start_ns=np.array([100e3]),
                                duration_ns=np.array([1e6]))
    attributes = transport_attributes("roce", dcqcn=False) | {"SharedBufferMmu::BufferBytes": "2000000",
                                                              "HostNic::RetransmitTimeout": "100us"}
    if watchdog:
        attributes |= {"PfcWatchdog::Enabled": "true", "PfcWatchdog::DetectionTime": "100us",
                       "PfcWatchdog::RestorationTime": "200us"}
    return engine.simulate(fabric, flows, attributes=attributes, snapshot_ns=np.arange(0.0, 4e6, GRID_NS),
                           max_sim_time_ns=20e6, setup=lambda eng, _: engine.add_pause_storms(eng, storms))


def longest_stall_us(out, flow: int) -> float:
    moved = np.diff(out.delivered_at_bytes[:, flow]) > 0
    longest = stalled = 0
    for m in moved[out.snapshot_ns[1:] <= out.finish_ns[flow]]:
        stalled = 0 if m else stalled + 1
        longest = max(longest, stalled)
    return longest * GRID_NS / 1e3


def main() -> None:
    for watchdog in (False, True):
        out = run(watchdog)
        c = out.counters
        print(f"watchdog {'on ' if watchdog else 'off'}: victim stalled {longest_stall_us(out, 1):.0f} us, "
              f"finished {out.finish_ns[1] / 1e3:.1f} us; flow into the storm finished {out.finish_ns[0] / 1e3:.1f} "
              f"us; watchdog actions {c['pfc_watchdog_actions']}, dropped {c['pfc_watchdog_dropped_packets']}, "
              f"retransmitted {c['retransmitted_packets']}; delivered {out.delivered_bytes.tolist()} B")


if __name__ == "__main__":
    main()
