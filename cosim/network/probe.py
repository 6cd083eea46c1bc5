"""A small fabric that fails the engine's start-of-run checks exactly when a large one would.

What building a fabric checks (switch buffers against the PFC headroom of their ports, credit input buffers
against the lanes of their links) is per node: a node's port rates and delays, and its buffer. Every
distinct switch ("kind" of switch: the (rate, delay) of each port, in port order, and its buffer) is
therefore built once, with a host at the end of each port, instead of building every node and every route
of the real fabric: a 100,000-host leaf-spine has a few switch kinds, and its check costs milliseconds
instead of gigabytes. The hosts of the probe carry every link rate and delay a host, a leaf or a spine
port has, so the hosts' own input buffers are checked too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cosim.network.topology import HOST, SWITCH, Fabric

#: fabrics of more nodes than this are checked through their probe (smaller ones are built whole: their
#: messages name the real node ids and they cost milliseconds)
PROBE_MIN_NODES = 20_000


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Probe:
    """The probe of a fabric: ``fabric`` (hosts first, then one switch per kind), the buffer of each of its
    nodes (0: the default), and for each of its switches a real switch of that kind (``real_switch``, by
    probe node id; -1 for hosts)."""

    fabric: Fabric
    buffer_bytes: np.ndarray | None
    real_switch: np.ndarray


def probe_fabric(fabric: Fabric, buffer_bytes: np.ndarray | None = None) -> Probe:
    """The probe of ``fabric`` (module docstring); ``buffer_bytes``: the buffer of every real node (as
    cosim.network.buffers.switch_buffer_bytes gives it) or None."""
    kind = np.asarray(fabric.node_kind)
    a, b = np.asarray(fabric.link_a, np.int64), np.asarray(fabric.link_b, np.int64)
    rate = np.asarray(fabric.link_rate_bps, np.float64)
    delay = np.asarray(fabric.link_delay_ns, np.float64)
    # a node's ports are numbered in the order of the links it is an end of
    node = np.concatenate([a, b])
    link = np.concatenate([np.arange(a.size), np.arange(b.size)])
    order = np.lexsort((link, node))
    node, link = node[order], link[order]
    bounds = np.flatnonzero(np.diff(node)) + 1
    starts = np.concatenate([[0], bounds])
    ends = np.concatenate([bounds, [node.size]])
    kinds: dict[tuple, int] = {}
    for s, e in zip(starts.tolist(), ends.tolist()):
        n = int(node[s])
        if kind[n] != SWITCH:
            continue
        ports = link[s:e]
        buffer = 0 if buffer_bytes is None else int(buffer_bytes[n])
        key = (buffer, rate[ports].tobytes(), delay[ports].tobytes())
        kinds.setdefault(key, n)
    reps = list(kinds.values())
    port_links = [link[starts[i]:ends[i]] for i in np.searchsorted(node[starts], reps)]
    n_hosts = sum(p.size for p in port_links)
    first_switch = n_hosts
    link_a, link_b, link_rate, link_delay = [], [], [], []
    host = 0
    for k, ports in enumerate(port_links):
        for li in ports.tolist():
            link_a.append(host)
            link_b.append(first_switch + k)
            link_rate.append(rate[li])
            link_delay.append(delay[li])
            host += 1
    probe = Fabric(name=f"{fabric.name}-probe", node_kind=np.array([HOST] * n_hosts + [SWITCH] * len(reps), np.uint8),
                   link_a=np.array(link_a, np.int64), link_b=np.array(link_b, np.int64),
                   link_rate_bps=np.array(link_rate, np.float64), link_delay_ns=np.array(link_delay, np.float64))
    buffers = None
    if buffer_bytes is not None:
        buffers = np.zeros(probe.n_nodes, np.asarray(buffer_bytes).dtype)
        buffers[first_switch:] = np.asarray(buffer_bytes)[reps]
    real = np.full(probe.n_nodes, -1, np.int64)
    real[first_switch:] = reps
    return Probe(fabric=probe, buffer_bytes=buffers, real_switch=real)
