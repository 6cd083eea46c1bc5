"""Pipeline schedules: the order in which one pipeline stage runs forward and backward passes.

1F1B (PipeDream-Flush, Megatron's default): stage i of p runs ``min(p-i-1, m)`` warm-up forwards, then
alternates one forward and one backward (steady state), then the remaining backwards (cool-down).
Idle time per stage is (p-1)·(t_f+t_b), so the bubble fraction is (p-1)/m.

Interleaved 1F1B (Narayanan et al. 2021, Megatron ``forward_backward_pipelining_with_interleaving``):
each rank holds v model chunks; chunk c of stage i is virtual stage c·p + i. Forward micro-step k runs
chunk ``(k mod p·v) div p`` on micro-batch ``(k div p·v)·p + k mod p``; backward micro-step k runs chunk
``v-1-(k mod p·v) div p`` on the same micro-batch mapping. Warm-up is ``(p-i-1)·2 + (v-1)·p`` forward
micro-steps (all m·v when m = p), capped at m·v. Requires m divisible by p. Bubble (p-1)/(v·m).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Step:
    """One pass of one micro-batch through one model chunk of a stage."""

    forward: bool  #: True for a forward pass, False for a backward pass
    microbatch: int  #: micro-batch index, 0 ≤ mb < m
    chunk: int  #: model chunk on this rank, 0 ≤ chunk < v (virtual stage chunk·p + stage)


def one_f_one_b(stage: int, pp: int, m: int) -> list[Step]:
    """Non-interleaved 1F1B order of stage ``stage`` (0-based) of ``pp`` with ``m`` micro-batches."""
    warmup = min(pp - stage - 1, m)
    steps = [Step(True, k, 0) for k in range(warmup)]
    for j in range(m - warmup):
        steps.append(Step(True, warmup + j, 0))
        steps.append(Step(False, j, 0))
    steps.extend(Step(False, k, 0) for k in range(m - warmup, m))
    return steps


def interleaved_one_f_one_b(stage: int, pp: int, m: int, v: int) -> list[Step]:
    """Interleaved 1F1B order (Megatron) of stage ``stage`` with ``v`` chunks per rank; needs m % pp == 0."""
    if m % pp:
        raise ValueError(f"interleaved 1F1B needs m divisible by pp (m={m}, pp={pp})")
    total = m * v
    group = pp * v

    def mb(k: int) -> int:
        return (k // group) * pp + k % pp

    def chunk(k: int, forward: bool) -> int:
        c = (k % group) // pp
        return c if forward else v - 1 - c

    warmup = total if m == pp else min((pp - stage - 1) * 2 + (v - 1) * pp, total)
    steps = [Step(True, mb(k), chunk(k, True)) for k in range(warmup)]
    for j in range(total - warmup):
        k = warmup + j
        steps.append(Step(True, mb(k), chunk(k, True)))
        steps.append(Step(False, mb(j), chunk(j, False)))
    steps.extend(Step(False, mb(k), chunk(k, False)) for k in range(total - warmup, total))
    return steps


def pipeline_schedule(stage: int, pp: int, m: int, v: int = 1) -> list[Step]:
    """The schedule of ``stage``: 1F1B if v == 1, interleaved 1F1B otherwise."""
    return one_f_one_b(stage, pp, m) if v == 1 else interleaved_one_f_one_b(stage, pp, m, v)


def bubble_fraction(pp: int, m: int, v: int = 1) -> float:
    """Ideal pipeline bubble / ideal compute time: (p-1)/(v·m)."""
    return (pp - 1) / (v * m)
