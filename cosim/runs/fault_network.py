"""How the network fault kinds (link_down, link_flap, link_degrade, switch_down, nic_down) become engine
schedules: arrays of (link, time, state) handed to Engine::ScheduleLinkState / ScheduleLinkRate /
ScheduleLinkBitErrorRate once per run (ns3_scenarios/model/link-fault-model.h does the rest)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cosim.errors import CosimInputError

#: most link-state changes the flapping faults of one run may schedule
MAX_TRANSITIONS = 1_000_000


def _end_ps(r, ctx) -> int:
    """When fault ``r`` ends: its own end, else the run's stop time."""
    return r.until_ps if r.until_ps >= 0 else ctx.stop_ps


def schedule_down_up(resolved: Sequence, ctx) -> None:
    """Every link of every fault down at its start, up at its end (if it ends before the run does)."""
    link, time_ps, up, fault = [], [], [], []
    for r in resolved:
        for li in r.links.tolist():
            link.append(li), time_ps.append(r.at_ps), up.append(0), fault.append(r.index)
            if r.until_ps >= 0:
                link.append(li), time_ps.append(r.until_ps), up.append(1), fault.append(r.index)
    _state(ctx, link, time_ps, up, fault)


def schedule_flaps(resolved: Sequence, ctx) -> None:
    """Down at at + k·period, up down_ns later (default period / 2), while at + k·period is before the end."""
    link, time_ps, up, fault = [], [], [], []
    for r in resolved:
        period_ps = int(round(r.fault.get("period_ns") * 1e3))
        down = r.fault.get("down_ns")
        down_ps = period_ps // 2 if down is None else int(round(down * 1e3))
        starts = np.arange(r.at_ps, _end_ps(r, ctx), max(period_ps, 1), dtype=np.int64)
        if 2 * starts.size * r.links.size + len(link) > MAX_TRANSITIONS:
            raise CosimInputError(f"faults[{r.index}].period_ns", f"{starts.size} flaps are too many",
                                  f"keep the flapping faults of a run under {MAX_TRANSITIONS // 2} periods")
        for li in r.links.tolist():
            for t in starts.tolist():
                link += [li, li]
                time_ps += [t, t + down_ps]
                up += [0, 1]
                fault += [r.index, r.index]
    _state(ctx, link, time_ps, up, fault)


def schedule_degrade(resolved: Sequence, ctx) -> None:
    """Rate and/or bit error rate from the fault's start; the original again at its end."""
    rate_rows: list[tuple[int, int, float, int]] = []
    ber_rows: list[tuple[int, int, float, int, int]] = []
    for r in resolved:
        rate_gbps, ber = r.fault.get("rate_gbps"), r.fault.get("bit_error_rate")
        for li in r.links.tolist():
            if rate_gbps is not None:
                rate_rows.append((li, r.at_ps, rate_gbps * 1e9, r.index))
                if r.until_ps >= 0:
                    rate_rows.append((li, r.until_ps, 0.0, r.index))
            if ber is not None:
                seed = loss_stream_seed(ctx.seed, li, r.index, r.fault.get("ber_seed"))
                ber_rows.append((li, r.at_ps, ber, seed, r.index))
                if r.until_ps >= 0:
                    ber_rows.append((li, r.until_ps, 0.0, seed, r.index))
    if rate_rows:
        li, t, rate, f = zip(*rate_rows)
        ctx.engine.ScheduleLinkRate(np.asarray(li, np.int64), np.asarray(t, np.int64), np.asarray(rate, np.float64),
                                    np.asarray(f, np.int32), len(li))
    if ber_rows:
        li, t, ber, seed, f = zip(*ber_rows)
        ctx.engine.ScheduleLinkBitErrorRate(np.asarray(li, np.int64), np.asarray(t, np.int64),
                                            np.asarray(ber, np.float64), np.asarray(seed, np.uint64),
                                            np.asarray(f, np.int32), len(li))


def loss_stream_seed(run_seed: int, link: int, fault: int, ber_seed: int | None) -> int:
    """The seed of a link's bit-error stream: from ``ber_seed`` if given, else from the run's seed, the
    link and the fault (a numpy SeedSequence: distinct links get independent streams)."""
    entropy = [int(run_seed), int(link)] + ([int(ber_seed)] if ber_seed is not None else [int(fault), 1])
    return int(np.random.SeedSequence(entropy).generate_state(1, np.uint64)[0])


def _state(ctx, link, time_ps, up, fault) -> None:
    if link:
        ctx.engine.ScheduleLinkState(np.asarray(link, np.int64), np.asarray(time_ps, np.int64),
                                     np.asarray(up, np.uint8), np.asarray(fault, np.int32), len(link))
