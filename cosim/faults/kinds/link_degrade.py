"""``link_degrade``: a link runs slower and/or corrupts packets, and is restored at the fault's end."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cosim import values as v
from cosim.errors import CosimInputError
from cosim.faults.registry import FaultKind, Param, register


@register
class LinkDegrade(FaultKind):
    name = "link_degrade"
    code = 3
    elements = ("link",)
    params = {"rate_gbps": Param(v.Optional(v.Real(minimum=1e-3, maximum=1e6)), None,
                                 "line rate of the degraded link, Gbit/s (1 Mbit/s to 1 Pbit/s)"),
              "bit_error_rate": Param(v.Optional(v.Real(minimum=0.0, maximum=1e-2)), None,
                                      "bit errors per bit: a packet of b bits is lost with "
                                      "probability 1 - (1 - BER)^b"),
              "ber_seed": Param(v.Optional(v.Int(minimum=0, maximum=2**31 - 1)), None,
                                "seed of the link's loss stream [derived from the run's seed]")}
    doc = ("The link runs slower (rate_gbps) and/or corrupts packets (bit_error_rate; RoCE and UEC drop them, "
           "IB resends them on the link, network.link_retry = \"llr\" replays them on the link); the original "
           "again at its end")

    def check(self, fault) -> None:
        if fault.get("rate_gbps") is None and fault.get("bit_error_rate") is None:
            raise CosimInputError("faults.rate_gbps", "a link_degrade fault needs rate_gbps or bit_error_rate",
                                  "e.g. rate_gbps=25 or bit_error_rate=1e-7")

    def apply(self, resolved: Sequence, ctx) -> None:
        """Rate and/or bit error rate from the fault's start to its end, composed with the link's other
        degrades (the lowest rate and the highest bit error rate of the ones active hold)."""
        for r in resolved:
            rate_gbps, ber = r.fault.get("rate_gbps"), r.fault.get("bit_error_rate")
            for li in r.links.tolist():
                if rate_gbps is not None:
                    ctx.set_link_rate(li, r.at_ps, rate_gbps * 1e9, r.index)
                    if r.until_ps >= 0:
                        ctx.set_link_rate(li, r.until_ps, None, r.index)
                if ber is not None:
                    ctx.set_link_ber(li, r.at_ps, (ber, loss_stream_seed(ctx.seed, li, r.index,
                                                                         r.fault.get("ber_seed"))), r.index)
                    if r.until_ps >= 0:
                        ctx.set_link_ber(li, r.until_ps, None, r.index)


def loss_stream_seed(run_seed: int, link: int, fault: int, ber_seed: int | None) -> int:
    """The seed of a link's bit-error stream: from ``ber_seed`` if given, else from the run's seed, the
    link and the fault (a numpy SeedSequence: distinct links get independent streams)."""
    entropy = [int(run_seed), int(link)] + ([int(ber_seed)] if ber_seed is not None else [int(fault), 1])
    return int(np.random.SeedSequence(entropy).generate_state(1, np.uint64)[0])
