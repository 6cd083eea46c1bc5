"""Where and when a fault acted, for the fault figures (pure numpy on the results tables).

- **Window** (:func:`fault_window`): from the first fault action less ``margin`` of the fault's duration
  (first to last action, e.g. link down to routes converged after it came back up) to the time the run
  recovered plus the same margin. Recovered: the last flow in flight during the fault (started before its
  last action, not finished before its first) has finished — the traffic the fault hit is through,
  retransmission timeouts included.
- **Faulted element** (:func:`faulted_nodes`): the nodes of the links (both ends) and nodes the faults took
  down, degraded, stormed or slowed; the switches that only re-converged their routes are not.
- **Neighbours** (:func:`neighbour_hosts`): the NICs cabled to a faulted switch, or to the switch of a
  faulted NIC: the traffic that shares the faulted element's switch.
- **Throughput** (:func:`host_throughput_gbps`): the results store no per-port counters over time, so a
  NIC's throughput is derived from the flows table: each flow's delivered bytes spread evenly over its
  lifetime (start to finish; an unfinished flow's until the end of the run), summed per NIC and time bin.

Drops, trims and retransmissions carry their times in the ``losses`` table (cosim.losses), which the
neighbours figure bins over the window; a flow that lost packets also finishes late, so its FCT slowdown
against its finish time marks when the losses were repaired.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from cosim.faults import ACTION_CODES

#: fault actions that start a fault's effect on an element (the others restore it or re-converge routes)
ACTING = ("down", "degrade", "storm_start", "slowed")
#: share of the fault's duration shown before its first and after its recovery
MARGIN = 0.1
#: a fault whose actions all fall at one instant is given this share of the run as its duration
INSTANT_SHARE = 0.01


def fault_window(faults: Mapping[str, np.ndarray], flows: Mapping[str, np.ndarray], end_ns: float,
                 margin: float = MARGIN) -> tuple[float, float] | None:
    """(first ns, last ns) of the window around the run's faults (module docstring); None without faults."""
    t = np.asarray(faults.get("time_ns", []), np.float64)
    if not t.size:
        return None
    own = np.asarray(faults.get("fault", np.zeros(t.size)), np.int64) >= 0  # not a mechanism's action
    t = t[own] if own.any() else t
    first, last = float(t.min()), float(t.max())
    duration = last - first if last > first else INSTANT_SHARE * end_ns
    recovered = last
    if flows and np.asarray(flows.get("start_ns", [])).size:
        start = np.asarray(flows["start_ns"], np.float64)
        finish = np.asarray(flows["finish_ns"], np.float64)
        hit = (start <= last) & ~(finish < first)
        if hit.any():
            done = np.where(np.isfinite(finish[hit]), finish[hit], end_ns)
            recovered = max(recovered, float(done.max()))
    return max(0.0, first - margin * duration), min(max(end_ns, last), recovered + margin * duration)


def faulted_nodes(faults: Mapping[str, np.ndarray], links: Mapping[str, np.ndarray]) -> np.ndarray:
    """Node ids the faults acted on: both ends of a faulted link, a faulted node (sorted, unique)."""
    if not faults or not np.asarray(faults.get("time_ns", [])).size:
        return np.empty(0, np.int64)
    action = np.asarray(faults["action"], np.int64)
    acting = np.isin(action, [ACTION_CODES[a] for a in ACTING])
    link = np.asarray(faults["link"], np.int64)[acting]
    node = np.asarray(faults["node"], np.int64)[acting]
    out = [node[node >= 0]]
    if links and link.size and (link >= 0).any():
        a, b = np.asarray(links["a"], np.int64), np.asarray(links["b"], np.int64)
        ok = link[(link >= 0) & (link < a.size)]
        out += [a[ok], b[ok]]
    return np.unique(np.concatenate(out)).astype(np.int64)


def neighbour_hosts(nodes: Mapping[str, np.ndarray], links: Mapping[str, np.ndarray],
                    faulted: np.ndarray) -> np.ndarray:
    """Host node ids cabled to a faulted switch or to the switch of a faulted host (sorted, unique)."""
    if not nodes or not links or not np.asarray(faulted).size:
        return np.empty(0, np.int64)
    is_host = np.asarray(nodes["kind"]) == 0
    a, b = np.asarray(links["a"], np.int64), np.asarray(links["b"], np.int64)
    hit = np.zeros(is_host.size, bool)
    hit[np.asarray(faulted, np.int64)] = True
    switches = hit & ~is_host
    # the switches of faulted hosts count as faulted switches here
    up = np.concatenate([b[hit[a] & is_host[a]], a[hit[b] & is_host[b]]])
    switches[up[~is_host[up]]] = True
    hosts = np.concatenate([a[switches[b] & is_host[a]], b[switches[a] & is_host[b]], np.flatnonzero(hit & is_host)])
    return np.unique(hosts).astype(np.int64)


def host_throughput_gbps(flows: Mapping[str, np.ndarray], hosts: np.ndarray, edges_ns: np.ndarray,
                         end_ns: float, column: str = "src") -> np.ndarray:
    """float64 [hosts, bins]: Gbit/s each host sent (``column="src"``) or received (``"dst"``) in each bin
    [edges[j], edges[j+1]), its flows' delivered bytes spread evenly over their lifetimes."""
    edges = np.asarray(edges_ns, np.float64)
    out = np.zeros((len(hosts), max(edges.size - 1, 0)))
    if not flows or not np.asarray(flows.get("start_ns", [])).size or not out.size:
        return out
    start = np.asarray(flows["start_ns"], np.float64)
    finish = np.asarray(flows["finish_ns"], np.float64)
    finish = np.where(np.isfinite(finish), finish, max(end_ns, float(np.nanmax(start))))
    size = np.asarray(flows.get("delivered_bytes", flows["size_bytes"]), np.float64)
    owner = np.asarray(flows[column], np.int64)
    # a flow of no duration delivers its bytes within one picosecond
    rate = size / np.maximum(finish - start, 1e-3)  # B/ns
    row_of = np.full(max(int(owner.max()), int(np.max(hosts, initial=0))) + 1, -1, np.int64)
    row_of[np.asarray(hosts, np.int64)] = np.arange(len(hosts))
    row = row_of[owner]
    keep = row >= 0
    # bytes by time t: sum over events (start +rate, finish −rate) at or before t of delta · (t − time)
    times = np.concatenate([start[keep], finish[keep]])
    delta = np.concatenate([rate[keep], -rate[keep]])
    rows = np.concatenate([row[keep], row[keep]])
    for r in range(len(hosts)):
        m = rows == r
        order = np.argsort(times[m], kind="stable")
        t, d = times[m][order], delta[m][order]
        at = np.searchsorted(t, edges, side="right")
        cum_d, cum_dt = np.r_[0.0, np.cumsum(d)], np.r_[0.0, np.cumsum(d * t)]
        sent = edges * cum_d[at] - cum_dt[at]  # bytes sent by each edge
        out[r] = np.diff(sent) / np.diff(edges) * 8  # B/ns → Gbit/s
    return out
