"""One packet-path run for callgrind: ``bench_packet_path.scenario()`` simulated once on one transport.

    valgrind --tool=callgrind --collect-atstart=no "--toggle-collect=cosim::Engine::RunUntil*" \
        python bench/callgrind_packet_path.py roce      # or ib

Instructions per data packet-hop = callgrind's total (Ir) / the data packet-hops this script prints.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_packet_path import scenario  # noqa: E402

from cosim import engine  # noqa: E402
from cosim.network.transport import transport_attributes  # noqa: E402


def main(transport: str) -> None:
    fabric, flows = scenario()
    out = engine.simulate(fabric, flows, seed=1, attributes=transport_attributes(transport))
    print(f"{transport}: {out.status}, {out.data_packet_hops} data packet-hops, {out.events} events")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "roce")
