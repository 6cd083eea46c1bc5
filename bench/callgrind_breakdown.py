"""Where a callgrind profile of the event loop goes: the event scheduler, the rest of ns-3's simulator
core, and cosim's models, in instructions (self cost of every function, from ``callgrind_annotate``).

    python bench/callgrind_breakdown.py callgrind.out.1234 --hops 52310

The scheduler is every function of a class named ``*Scheduler`` (ns-3's or cosim's TimingWheelScheduler,
their inlined helpers included); the simulator core is the rest of libns3*-core (DefaultSimulatorImpl,
EventId, EventImpl, Simulator::Now, logging checks); cosim is libcosim-ns3 minus its scheduler.
``--hops`` (the data packet-hops callgrind_packet_path.py printed) adds the figures per data packet-hop.
"""

from __future__ import annotations

import argparse
import re
import subprocess

ROW = re.compile(r"^\s*([\d,]+)\s+\([\s\d.]+%\)\s+(.*)$")


def self_costs(profile: str) -> list[tuple[int, str]]:
    """(instructions, 'file:function [object]') per function of ``profile``, all of them."""
    text = subprocess.run(["callgrind_annotate", "--inclusive=no", "--threshold=100", profile],
                          check=True, capture_output=True, text=True).stdout
    rows = []
    for line in text.splitlines():
        m = ROW.match(line)
        if m and "PROGRAM TOTALS" not in m.group(2):
            rows.append((int(m.group(1).replace(",", "")), m.group(2)))
    return rows


def breakdown(profile: str) -> dict[str, int]:
    """Instructions of ``profile`` split into scheduler, simulator core, cosim models and other."""
    parts = {"scheduler": 0, "ns-3 simulator core": 0, "cosim models": 0, "other (libc, ...)": 0}
    for ir, name in self_costs(profile):
        function = name.split(" [", 1)[0]
        if re.search(r"ns3::\w*Scheduler::", function):
            parts["scheduler"] += ir
        elif "libns3" in name and "-core" in name:
            parts["ns-3 simulator core"] += ir
        elif "libcosim-ns3" in name:
            parts["cosim models"] += ir
        else:
            parts["other (libc, ...)"] += ir
    return parts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile", help="callgrind.out file")
    ap.add_argument("--hops", type=int, default=None, help="data packet-hops of the run")
    args = ap.parse_args()
    parts = breakdown(args.profile)
    total = sum(parts.values())
    print(f"{'part':<22} {'instructions':>14} {'share':>7}" + (f" {'per hop':>9}" if args.hops else ""))
    for name, ir in [*parts.items(), ("total", total)]:
        row = f"{name:<22} {ir:>14,} {ir / total:>7.1%}"
        print(row + (f" {ir / args.hops:>9,.1f}" if args.hops else ""))


if __name__ == "__main__":
    main()
