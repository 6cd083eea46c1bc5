"""Your own fabric: a JSON (or TOML) document of named nodes and links, read into a
:class:`cosim.network.topology.Fabric` and written back from any built one.

The format (``format = "cosim-fabric/1"``; docs/fabrics.md has a runnable example)::

    {"format": "cosim-fabric/1", "name": "two-leaves",
     "nodes": [{"name": "host0", "kind": "host", "server": 0, "gpu": 0},
               {"name": "leaf0", "kind": "switch", "tier": 1, "radix": 64, "port_gbps": 400}, ...],
     "links": [{"a": "host0", "b": "leaf0", "rate_gbps": 400, "delay_ns": 1000}, ...]}

- ``nodes[].kind`` is ``host`` (a NIC: exactly one link) or ``switch``; names are unique.
- ``server`` and ``gpu`` (hosts, optional) say which chassis a NIC sits in and which local GPU it serves;
  by default every NIC is its own one-GPU server.
- ``tier`` (switches, optional) is 1 for leaves, 2 for spines/aggregation, 3 for cores; by default a
  switch's tier is its hop distance from the nearest host.
- ``radix`` (switches, optional) is checked: the switch's links to switches plus its host links over
  ``floor(port_gbps / host link rate)`` per port (breakout; 1 without ``port_gbps``) must fit.
- ``links[]`` join two named nodes with ``rate_gbps`` (each direction) and ``delay_ns`` (one way);
  parallel links are separate links and separate ECMP members.
- Routes are the shortest paths (ECMP over all of them) unless ``routes`` (optional) says otherwise:
  ``{"switch": S, "to": L, "via": [N1, ...]}`` sends the packets for the hosts of switch ``L`` that are at
  switch ``S`` to its neighbours ``N1, ...`` (every link to them an ECMP member, parallel links included);
  the (switch, to) pairs not listed keep the shortest paths. Routes are per destination switch because
  the simulator's tables are; following them from every switch must reach ``L`` without a loop. Under link
  faults a switch whose ``via`` links are all down falls back to its shortest paths.
- A fabric whose routes make a cycle of buffer dependencies between switches (a ring, a torus, links
  inside a tier: :mod:`cosim.network.cycles`) can deadlock under PFC or credits; it is refused unless the
  document says ``allow_cyclic_routes = true``.

Node ids follow the simulator's order: hosts first (in file order), then switches by tier (in file order
within a tier); links keep file order. A fabric written by :func:`to_document` from a built fabric reads
back to identical arrays. ``Fabric.params["routes"]`` holds the routes as ``[switch, to, [via, ...]]`` node
ids. :func:`from_networkx` reads a networkx graph with the same attributes and the routes as the graph's
``routes`` attribute (networkx is optional). Every check fails with one line naming the file, the entry and
the fix.
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Mapping

import numpy as np

from cosim.errors import CosimInputError
from cosim.h5io import atomic_output
from cosim.network.cycles import dependency_cycle, forwarding_loop
from cosim.network.names import node_names
from cosim.network.topology import HOST, SWITCH, TIER_HOST, Fabric

#: the value of the document's ``format`` key
FORMAT = "cosim-fabric/1"
_KINDS = {"host": HOST, "switch": SWITCH}
_NODE_KEYS = {"name", "kind", "tier", "radix", "port_gbps", "server", "gpu"}
_LINK_KEYS = {"a", "b", "rate_gbps", "delay_ns"}
_ROUTE_KEYS = ("switch", "to", "via")


def to_document(fabric: Fabric) -> dict:
    """``fabric`` as a JSON-able document of the format (node names as cosim.network.names gives them)."""
    names = node_names(fabric)
    radix = fabric.params.get("switch_radix") if isinstance(fabric.params, Mapping) else None
    port = fabric.params.get("switch_port_gbps") if isinstance(fabric.params, Mapping) else None
    nodes = []
    for i, (kind, tier) in enumerate(zip(fabric.node_kind.tolist(), fabric.node_tier.tolist())):
        if kind == HOST:
            nodes.append({"name": names[i], "kind": "host", "server": int(fabric.host_server[i]),
                          "gpu": int(fabric.host_gpu[i])})
        else:
            node = {"name": names[i], "kind": "switch", "tier": int(tier)}
            if radix is not None:
                node |= {"radix": int(radix)} | ({"port_gbps": float(port)} if port is not None else {})
            nodes.append(node)
    links = [{"a": names[a], "b": names[b], "rate_gbps": r / 1e9, "delay_ns": d}
             for a, b, r, d in zip(fabric.link_a.tolist(), fabric.link_b.tolist(), fabric.link_rate_bps.tolist(),
                                   fabric.link_delay_ns.tolist())]
    params = fabric.params if isinstance(fabric.params, Mapping) else {}
    allow = params.get("allow_cyclic_routes") is True
    routes = [{"switch": names[s], "to": names[t], "via": [names[v] for v in via]}
              for s, t, via in params.get("routes", ())]
    return {"format": FORMAT, "name": fabric.name, **({"allow_cyclic_routes": True} if allow else {}),
            "nodes": nodes, "links": links, **({"routes": routes} if routes else {})}


def write(fabric: Fabric, path: str) -> None:
    """Write ``fabric`` to ``path`` as JSON (one node or link per line); nothing half-written on failure."""
    doc = to_document(fabric)
    allow = ' "allow_cyclic_routes": true,' if doc.get("allow_cyclic_routes") else ""
    lines = [f'{{"format": {json.dumps(doc["format"])}, "name": {json.dumps(doc["name"])},{allow}', ' "nodes": [']
    lines += [f"  {json.dumps(n)}," for n in doc["nodes"]]
    lines[-1] = lines[-1].rstrip(",")
    lines += [" ],", ' "links": [']
    lines += [f"  {json.dumps(x)}," for x in doc["links"]]
    lines[-1] = lines[-1].rstrip(",")
    if doc.get("routes"):
        lines += [" ],", ' "routes": [']
        lines += [f"  {json.dumps(x)}," for x in doc["routes"]]
        lines[-1] = lines[-1].rstrip(",")
    lines += [" ]}", ""]
    with atomic_output(path) as tmp:
        tmp.write_text("\n".join(lines), encoding="utf-8")


def read(path: str) -> Fabric:
    """The fabric of the file at ``path`` (``.toml``: TOML, anything else: JSON)."""
    where = str(path)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise CosimInputError("network.topology_file", f"cannot read {where}: {exc.strerror or exc}",
                              "give the path of a fabric file (docs/fabrics.md)") from None
    try:
        if where.endswith(".toml"):
            import tomllib  # noqa: PLC0415

            doc = tomllib.loads(raw.decode("utf-8"))
        else:
            doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CosimInputError(where, f"not a valid {'TOML' if where.endswith('.toml') else 'JSON'} "
                              f"document: {str(exc).splitlines()[0]}") from None
    return from_document(doc, where=where)


def from_networkx(graph, *, name: str = "networkx", allow_cyclic_routes: bool = False) -> Fabric:
    """The fabric of a networkx graph (``Graph`` or ``MultiGraph``): node attributes ``kind`` (required),
    ``tier``, ``radix``, ``port_gbps``, ``server``, ``gpu``; edge attributes ``rate_gbps`` and ``delay_ns``;
    the graph attribute ``routes`` (optional) as the document's. Node keys become node names (``str(key)``)."""
    nodes = [{"name": str(n), **dict(attrs)} for n, attrs in graph.nodes(data=True)]
    links = [{"a": str(a), "b": str(b), **dict(attrs)} for a, b, attrs in graph.edges(data=True)]
    routes = graph.graph.get("routes")
    return from_document({"format": FORMAT, "name": name, "nodes": nodes, "links": links,
                          "allow_cyclic_routes": allow_cyclic_routes} | ({"routes": routes} if routes else {}),
                         where=name)


def to_networkx(fabric: Fabric):
    """``fabric`` as a networkx ``MultiGraph`` with the attributes :func:`from_networkx` reads."""
    import networkx as nx  # noqa: PLC0415 (optional dependency)

    doc = to_document(fabric)
    g = nx.MultiGraph(name=doc["name"], **({"routes": doc["routes"]} if "routes" in doc else {}))
    for n in doc["nodes"]:
        g.add_node(n["name"], **{k: x for k, x in n.items() if k != "name"})
    for x in doc["links"]:
        g.add_edge(x["a"], x["b"], rate_gbps=x["rate_gbps"], delay_ns=x["delay_ns"])
    return g


# --- reading and checks -----------------------------------------------------------------------------------

def from_document(doc, *, where: str = "fabric") -> Fabric:
    """The fabric of a parsed document; errors name ``where`` and the entry."""
    if not isinstance(doc, Mapping):
        raise CosimInputError(where, "a fabric document is a table with nodes and links")
    fmt = doc.get("format", FORMAT)
    if fmt != FORMAT:
        raise CosimInputError(f"{where}: format", f"unknown format {fmt!r}", f"use {FORMAT!r}")
    unknown = set(doc) - {"format", "name", "nodes", "links", "routes", "allow_cyclic_routes"}
    if unknown:
        raise CosimInputError(f"{where}: {sorted(unknown)[0]}", "not a key of a fabric document",
                              "keys are format, name, nodes, links, routes, allow_cyclic_routes")
    allow_cycles = doc.get("allow_cyclic_routes", False)
    if not isinstance(allow_cycles, bool):
        raise CosimInputError(f"{where}: allow_cyclic_routes", f"must be true or false, got {allow_cycles!r}")
    nodes, links = doc.get("nodes"), doc.get("links")
    for key, value in (("nodes", nodes), ("links", links)):
        if not isinstance(value, list) or not value:
            raise CosimInputError(f"{where}: {key}", f"must be a non-empty list of {key[:-1]} tables")
    name = doc.get("name", "file")
    if not isinstance(name, str) or not name:
        raise CosimInputError(f"{where}: name", "must be a non-empty string")

    index, kind, tier, radix, port, server, gpu = {}, [], [], [], [], [], []
    for i, n in enumerate(nodes):
        at = f"{where}: nodes[{i}]"
        if not isinstance(n, Mapping):
            raise CosimInputError(at, "must be a table with name and kind")
        extra = set(n) - _NODE_KEYS
        if extra:
            raise CosimInputError(f"{at}.{sorted(extra)[0]}", "not a node key", f"keys are {', '.join(sorted(_NODE_KEYS))}")
        nm = n.get("name")
        if not isinstance(nm, str) or not nm or any(c.isspace() for c in nm):
            raise CosimInputError(f"{at}.name", f"must be a non-empty name without spaces, got {nm!r}")
        if nm in index:
            raise CosimInputError(f"{at}.name", f"{nm!r} is also nodes[{index[nm]}]", "node names are unique")
        index[nm] = i
        k = n.get("kind")
        if k not in _KINDS:
            raise CosimInputError(f"{at}.kind", f"must be 'host' or 'switch', got {k!r}")
        kind.append(_KINDS[k])
        host = k == "host"
        for key in (("tier", "radix", "port_gbps") if host else ("server", "gpu")):
            if key in n:
                raise CosimInputError(f"{at}.{key}", f"is for {'switches' if host else 'hosts'}, {nm!r} is a {k}")
        tier.append(_int(f"{at}.tier", n["tier"], 1) if "tier" in n else -1)
        radix.append(_int(f"{at}.radix", n["radix"], 1) if "radix" in n else -1)
        port.append(_num(f"{at}.port_gbps", n["port_gbps"], positive=True) if "port_gbps" in n else math.nan)
        server.append(_int(f"{at}.server", n["server"], 0) if "server" in n else -1)
        gpu.append(_int(f"{at}.gpu", n["gpu"], 0) if "gpu" in n else 0)

    a, b, rate, delay = [], [], [], []
    for j, x in enumerate(links):
        at = f"{where}: links[{j}]"
        if not isinstance(x, Mapping):
            raise CosimInputError(at, "must be a table with a, b, rate_gbps and delay_ns")
        extra = set(x) - _LINK_KEYS
        if extra:
            raise CosimInputError(f"{at}.{sorted(extra)[0]}", "not a link key", f"keys are {', '.join(sorted(_LINK_KEYS))}")
        for end, out in (("a", a), ("b", b)):
            if end not in x:
                raise CosimInputError(f"{at}.{end}", "missing", "name the node at each end of the link")
            if x[end] not in index:
                raise CosimInputError(f"{at}.{end}", f"unknown node {x[end]!r} (a dangling link)",
                                      "name a node of the nodes list")
            out.append(index[x[end]])
        if a[-1] == b[-1]:
            raise CosimInputError(at, f"joins {x['a']!r} to itself")
        for key in ("rate_gbps", "delay_ns"):
            if key not in x:
                raise CosimInputError(f"{at}.{key}", "missing", "every link has rate_gbps and delay_ns")
        rate.append(_num(f"{at}.rate_gbps", x["rate_gbps"], positive=True) * 1e9)
        delay.append(_num(f"{at}.delay_ns", x["delay_ns"]))

    names = list(index)
    kind_a, a_arr, b_arr = np.array(kind, np.uint8), np.array(a, np.int64), np.array(b, np.int64)
    n_nodes = kind_a.size
    degree = np.bincount(a_arr, minlength=n_nodes) + np.bincount(b_arr, minlength=n_nodes)
    hosts = np.flatnonzero(kind_a == HOST)
    if hosts.size < 2:
        raise CosimInputError(f"{where}: nodes", f"has {hosts.size} host, a fabric needs at least 2")
    bad = hosts[degree[hosts] != 1]
    if bad.size:
        h = int(bad[0])
        raise CosimInputError(f"{where}: nodes[{h}]", f"host {names[h]!r} has {int(degree[h])} links, a NIC has "
                              "exactly 1", "give every host one link to a switch")
    hop = _hops_from(hosts, a_arr, b_arr, n_nodes)
    unreachable = hosts[_component(int(hosts[0]), a_arr, b_arr, n_nodes)[hosts] == 0]
    if unreachable.size:
        h = int(unreachable[0])
        raise CosimInputError(f"{where}: nodes[{h}]", f"host {names[h]!r} cannot reach host {names[int(hosts[0])]!r}",
                              "link its switch to the rest of the fabric")
    tiers = np.array(tier, np.int64)
    switch = kind_a == SWITCH
    stray = np.flatnonzero(switch & (hop < 0))
    if stray.size:
        i = int(stray[0])
        raise CosimInputError(f"{where}: nodes[{i}]", f"switch {names[i]!r} is not connected to the hosts",
                              "link it to the fabric or remove it")
    tiers = np.where(switch & (tiers < 0), np.maximum(hop, 1), tiers)
    tiers = np.where(switch, tiers, TIER_HOST)
    _check_radix(where, names, kind_a, a_arr, b_arr, np.array(rate), np.array(radix), np.array(port))
    routes = _read_routes(where, doc.get("routes", []), index, kind_a, a_arr, b_arr)
    srv, g = np.array(server, np.int64), np.array(gpu, np.int64)

    # simulator order: hosts in file order, then switches by tier (file order within a tier)
    order = np.concatenate([hosts, np.flatnonzero(switch)[np.argsort(tiers[switch], kind="stable")]])
    new_id = np.empty(n_nodes, np.int64)
    new_id[order] = np.arange(n_nodes)
    host_server = srv[hosts]
    unset = host_server < 0
    host_server[unset] = (host_server.max(initial=-1) + 1) + np.arange(int(unset.sum()))
    pairs = host_server * (int(g.max(initial=0)) + 1) + g[hosts]
    _, first = np.unique(pairs, return_index=True)
    if first.size != pairs.size:
        dup = int(hosts[np.setdiff1d(np.arange(pairs.size), first)[0]])
        raise CosimInputError(f"{where}: nodes[{dup}]", f"host {names[dup]!r} has the server and gpu of another host",
                              "each (server, gpu) is one NIC")
    sim_routes = [[int(new_id[s]), int(new_id[t]), new_id[via].tolist()] for s, t, via in routes]
    fabric = Fabric(name=name, node_kind=kind_a[order], node_tier=tiers[order], link_a=new_id[a_arr],
                    link_b=new_id[b_arr], link_rate_bps=np.array(rate), link_delay_ns=np.array(delay),
                    host_server=host_server, host_gpu=g[hosts], node_names=tuple(names[i] for i in order),
                    params={"file": where} | ({"allow_cyclic_routes": True} if allow_cycles else {})
                    | ({"routes": sim_routes} if sim_routes else {}))
    loop = forwarding_loop(fabric) if sim_routes else None
    if loop:
        to, through = loop
        at = next(i for i, (s, t, _) in enumerate(sim_routes) if t == to and s in through)
        raise CosimInputError(f"{where}: routes[{at}]", f"packets for the hosts of {fabric.node_names[to]!r} go "
                              f"round {' -> '.join(fabric.node_names[i] for i in through)}",
                              f"route every switch towards {fabric.node_names[to]!r} without coming back")
    cycle = None if allow_cycles else dependency_cycle(fabric)
    if cycle:
        raise CosimInputError(f"{where}: {'routes' if sim_routes else 'links'}",
                              f"the {'' if sim_routes else 'shortest '}routes through "
                              f"{' -> '.join(fabric.node_names[i] for i in cycle)} wait on each other in a cycle, "
                              "which can deadlock a lossless fabric", "set allow_cyclic_routes = true to run it "
                              "anyway (the deadlock watchdog stops a run that locks)")
    return fabric


def _read_routes(where, routes, index, kind, a, b) -> list[tuple[int, int, np.ndarray]]:
    """The document's ``routes`` as (switch, to, via) file indices, each entry checked."""
    if not isinstance(routes, list):
        raise CosimInputError(f"{where}: routes", "must be a list of {switch, to, via} tables")
    names = list(index)
    ends = np.concatenate([a, b])
    peers = np.concatenate([b, a])
    has_host = np.zeros(kind.size, bool)
    has_host[ends[kind[peers] == HOST]] = True
    seen: dict[tuple[int, int], int] = {}
    out = []
    for i, r in enumerate(routes):
        at = f"{where}: routes[{i}]"
        if not isinstance(r, Mapping):
            raise CosimInputError(at, "must be a table with switch, to and via")
        extra = set(r) - set(_ROUTE_KEYS)
        if extra:
            raise CosimInputError(f"{at}.{sorted(extra)[0]}", "not a route key", "keys are switch, to, via")
        for key in _ROUTE_KEYS:
            if key not in r:
                raise CosimInputError(f"{at}.{key}", "missing", "a route names its switch, to and via")
        switch = _switch_named(f"{at}.switch", r["switch"], index, kind)
        to = _switch_named(f"{at}.to", r["to"], index, kind)
        if not has_host[to]:
            raise CosimInputError(f"{at}.to", f"switch {names[to]!r} has no hosts",
                                  "name the switch the destination hosts are linked to")
        if switch == to:
            raise CosimInputError(f"{at}.to", f"is its switch {names[to]!r}, which reaches its hosts by their links",
                                  "route other switches towards it")
        if (switch, to) in seen:
            raise CosimInputError(at, f"routes {names[switch]!r} to {names[to]!r} again (routes[{seen[switch, to]}])",
                                  "list every neighbour in one via")
        seen[switch, to] = i
        via = r["via"]
        if not isinstance(via, list) or not via:
            raise CosimInputError(f"{at}.via", f"must be a non-empty list of neighbour switches, got {via!r}")
        neighbours = set(peers[ends == switch].tolist())
        ids = []
        for j, v in enumerate(via):
            n = _switch_named(f"{at}.via[{j}]", v, index, kind)
            if n not in neighbours:
                raise CosimInputError(f"{at}.via[{j}]", f"{v!r} is not linked to {names[switch]!r}",
                                      f"name neighbours of {names[switch]!r}")
            if n in ids:
                raise CosimInputError(f"{at}.via[{j}]", f"{v!r} is listed twice", "list each neighbour once")
            ids.append(n)
        out.append((switch, to, np.array(ids, np.int64)))
    return out


def _switch_named(field: str, name, index, kind) -> int:
    """The file index of the switch called ``name``."""
    if not isinstance(name, str) or name not in index:
        raise CosimInputError(field, f"unknown node {name!r}", "name a switch of the nodes list")
    if kind[index[name]] != SWITCH:
        raise CosimInputError(field, f"{name!r} is a host, routes go between switches", "name a switch")
    return index[name]


def _check_radix(where, names, kind, a, b, rate, radix, port) -> None:
    """A switch's ports (links to switches, host links over their breakout) must fit its radix."""
    ports = np.zeros(kind.size)
    for end, other in ((a, b), (b, a)):
        to_host = kind[other] == HOST
        per_port = np.ones(end.size)
        with np.errstate(invalid="ignore"):
            brk = np.floor(port[end] / (rate / 1e9) * (1 + 1e-12))
        per_port = np.where(to_host & np.isfinite(brk) & (brk >= 1), brk, per_port)
        np.add.at(ports, end, 1.0 / per_port)
    over = np.flatnonzero((radix > 0) & (np.ceil(ports - 1e-9) > radix))
    if over.size:
        i = int(over[0])
        raise CosimInputError(f"{where}: nodes[{i}].radix", f"switch {names[i]!r} uses {math.ceil(ports[i] - 1e-9)} "
                              f"ports, its radix is {int(radix[i])}", "raise radix or move links to another switch")


def _neighbours(a, b, n):
    """CSR adjacency (both directions)."""
    src, dst = np.concatenate([a, b]), np.concatenate([b, a])
    order = np.argsort(src, kind="stable")
    ptr = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=n))])
    return ptr, dst[order]


def _hops_from(sources, a, b, n) -> np.ndarray:
    """Hop distance of every node from the nearest of ``sources`` (-1: unreachable), frontier by frontier."""
    ptr, adj = _neighbours(a, b, n)
    dist = np.full(n, -1, np.int64)
    dist[sources] = 0
    frontier, d = np.asarray(sources, np.int64), 0
    while frontier.size:
        d += 1
        counts = ptr[frontier + 1] - ptr[frontier]
        first = np.repeat(ptr[frontier] - (np.cumsum(counts) - counts), counts)
        nxt = adj[first + np.arange(int(counts.sum()))]
        nxt = np.unique(nxt[dist[nxt] < 0])
        dist[nxt] = d
        frontier = nxt
    return dist


def _component(start: int, a, b, n) -> np.ndarray:
    """1 for the nodes connected to ``start``, 0 for the rest."""
    return (_hops_from(np.array([start]), a, b, n) >= 0).astype(np.int8)


def _int(field: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise CosimInputError(field, f"must be a whole number >= {minimum}, got {value!r}")
    return int(value)


def _num(field: str, value, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise CosimInputError(field, f"must be a finite number, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise CosimInputError(field, f"must be {'positive' if positive else '>= 0'}, got {value!r}")
    return float(value)
