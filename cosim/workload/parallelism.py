"""Parallelism spec (how one iteration is split over GPUs) and its compatibility rules with a model.

Degrees: ``tp`` tensor, ``cp`` context, ``pp`` pipeline, ``dp`` data parallel; world size = tp·cp·pp·dp.
Expert parallelism (``ep``) does not add GPUs: an EP group is ``ep`` consecutive data-parallel ranks (same
tp, cp and pp coordinates), so ``ep`` must divide ``dp``; the experts are split over it and each expert's
gradients are reduced over the *expert data-parallel* group, the cp·dp/ep ranks holding the same experts.

With ``expert_tp = 1`` and tp·cp > 1 (Megatron-Core's MoE parallel folding) the experts are not split over TP:
the MoE layers regroup a stage's tp·cp·dp ranks into EP groups of ``ep`` consecutive ranks in
(tp, cp, dp) order, tp fastest, so EP spans the TP ranks too (e.g. attention TP8 inside a server and EP64
over 8 servers); ``ep`` must then divide tp·cp·dp, the expert-data-parallel degree is tp·cp·dp/ep, and
the MoE layer has no TP all-gather / reduce-scatter (each rank dispatches its own sequence shard).

Rules (each violation raises CosimInputError naming the numbers):

- tp divides heads, KV heads (Megatron's rule: ``num_query_groups % tp == 0``, KV heads are sharded, never
  replicated, so tp ≤ KV heads), the FFN size and the vocabulary (pad it to a multiple of 128·tp as
  Megatron does).
- pp·vpp divides the layers; vpp > 1 (interleaved 1F1B) needs pp ≥ 2 and micro-batches divisible by pp.
- global batch divisible by micro-batch·dp (micro-batches per iteration m = global/(micro·dp)).
- cp > 1 needs s divisible by 2·cp (load-balanced ring attention cuts the sequence in 2·cp chunks).
- sequence parallelism (tp > 1) needs s/cp divisible by tp.
- MoE: experts divisible by ep; ep divides dp (tp·cp·dp when folded); with tp > 1 sequence parallelism is
  required (Megatron-Core); expert_tp is 1 or tp; the expert FFN divisible by the expert TP degree.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import ClassVar

from cosim.errors import CosimInputError
from cosim.workload.model import ModelSpec, divisors

AXES = ("tp", "cp", "pp", "dp")
ZERO_STAGES = (0, 1, 3)


@dataclass(frozen=True, slots=True, kw_only=True)
class ParallelismSpec:
    """Degrees of parallelism, batch sizes, placement order and memory options of one training job."""

    #: fields a trace records only when not at their default (see ModelSpec.TRACE_OPTIONAL_FIELDS)
    TRACE_OPTIONAL_FIELDS: ClassVar[tuple[str, ...]] = ("expert_tp",)

    tp: int = 1  #: tensor-parallel degree t
    pp: int = 1  #: pipeline-parallel degree p
    dp: int = 1  #: data-parallel degree d
    cp: int = 1  #: context-parallel degree (ring attention)
    ep: int = 1  #: expert-parallel degree (a divisor of dp)
    vpp: int = 1  #: virtual pipeline stages per rank v (> 1 = interleaved 1F1B)
    sequence_parallel: bool = False  #: Megatron sequence parallelism (TP all-reduce → reduce-scatter + all-gather)
    zero_stage: int = 0  #: 0 = all-reduce grads, 1 = distributed optimizer (ZeRO-1), 3 = ZeRO-3/FSDP
    recompute: bool = False  #: full activation recomputation (one extra forward per layer in backward)
    micro_batch_size: int = 1  #: sequences per micro-batch b
    global_batch_size: int | None = None  #: sequences per iteration B (default micro·dp·4·pp)
    order: str = "tp-cp-pp-dp"  #: rank placement, fastest-varying axis first (TP inside a host)
    dp_bucket_bytes: int = 160_000_000  #: gradient bucket size, fp32 bytes (Megatron: 40M params)
    num_gpus: int | None = None  #: world size; must equal tp·cp·pp·dp (default: that product)
    expert_tp: int = 0  #: tensor-parallel degree of the experts: 0 = tp, or 1 (EP folds over the TP ranks)

    def __post_init__(self) -> None:
        for field in ("tp", "pp", "dp", "cp", "ep", "vpp", "micro_batch_size", "dp_bucket_bytes"):
            _positive_int(f"parallelism.{field}", getattr(self, field))
        for field in ("sequence_parallel", "recompute"):
            if not isinstance(getattr(self, field), bool):
                raise CosimInputError(f"parallelism.{field}", f"must be true or false, got {getattr(self, field)!r}")
        if self.zero_stage not in ZERO_STAGES or isinstance(self.zero_stage, bool):
            raise CosimInputError("parallelism.zero_stage", f"unsupported ZeRO stage {self.zero_stage!r}",
                                  "choose 0 (all-reduce), 1 (distributed optimizer) or 3 (ZeRO-3/FSDP)")
        axes = [a for a in str(self.order).lower().replace("_", "-").split("-") if a and a != "ep"]
        if sorted(axes) != sorted(AXES):
            raise CosimInputError("parallelism.order", f"{self.order!r} is not an order of tp, cp, pp, dp",
                                  "write the four axes fastest first, e.g. tp-cp-pp-dp")
        object.__setattr__(self, "order", "-".join(axes))
        world = self.tp * self.cp * self.pp * self.dp
        if self.num_gpus is None:
            object.__setattr__(self, "num_gpus", world)
        else:
            _positive_int("parallelism.num_gpus", self.num_gpus)
            if self.num_gpus != world:
                raise CosimInputError(
                    "parallelism.num_gpus",
                    f"tp·cp·pp·dp = {self.tp}·{self.cp}·{self.pp}·{self.dp} = {world} ≠ {self.num_gpus} GPUs",
                    "make the product of the degrees equal the number of GPUs")
        per_step = self.micro_batch_size * self.dp
        if self.global_batch_size is None:
            object.__setattr__(self, "global_batch_size", per_step * 4 * self.pp)
        _positive_int("parallelism.global_batch_size", self.global_batch_size)
        if self.global_batch_size % per_step:
            raise CosimInputError(
                "parallelism.global_batch_size",
                f"{self.global_batch_size} is not divisible by micro_batch_size·dp = "
                f"{self.micro_batch_size}·{self.dp} = {per_step}",
                f"choose a multiple of {per_step}, e.g. {per_step * max(1, self.global_batch_size // per_step)}")
        if isinstance(self.expert_tp, bool) or self.expert_tp not in (0, 1, self.tp):
            raise CosimInputError("parallelism.expert_tp", f"must be 1 or tp={self.tp}, got {self.expert_tp!r}",
                                  "use 1 to spread experts over the TP and CP ranks too, or leave it out (= tp)")
        if self.folded:
            span = self.tp * self.cp * self.dp
            if span % self.ep:
                raise CosimInputError(
                    "parallelism.ep", f"ep={self.ep} does not divide tp·cp·dp = {span} (expert_tp=1 folds EP over "
                    "the TP, CP and DP ranks of a stage)", f"choose ep among {', '.join(map(str, divisors(span)))}")
        elif self.dp % self.ep:
            raise CosimInputError(
                "parallelism.ep", f"ep={self.ep} does not divide dp={self.dp} (EP groups are carved out of DP)",
                f"choose ep among {', '.join(map(str, divisors(self.dp)))}, or set expert_tp=1 to fold EP over "
                "the TP and CP ranks too")
        if self.vpp > 1:
            if self.pp < 2:
                raise CosimInputError("parallelism.vpp", f"vpp={self.vpp} needs pp >= 2, got pp={self.pp}",
                                      "use vpp=1 without pipeline parallelism")
            if self.num_microbatches % self.pp:
                raise CosimInputError(
                    "parallelism.global_batch_size",
                    f"interleaved 1F1B needs micro-batches divisible by pp: m = {self.num_microbatches}, pp={self.pp}",
                    f"choose global_batch_size as a multiple of {per_step * self.pp}")

    @property
    def world_size(self) -> int:
        """Number of GPUs, tp·cp·pp·dp."""
        return self.tp * self.cp * self.pp * self.dp

    @property
    def num_microbatches(self) -> int:
        """Micro-batches per iteration per data-parallel rank, m = B / (b·dp)."""
        return self.global_batch_size // (self.micro_batch_size * self.dp)

    @property
    def sp(self) -> bool:
        """Sequence parallelism in effect (it is a no-op without tensor parallelism)."""
        return self.sequence_parallel and self.tp > 1

    @property
    def etp(self) -> int:
        """Tensor-parallel degree of the experts (tp unless expert_tp=1)."""
        return self.expert_tp or self.tp

    @property
    def folded(self) -> bool:
        """EP folded over the TP and CP ranks of a stage (expert_tp=1 with tp·cp > 1)."""
        return self.expert_tp == 1 and self.tp * self.cp > 1

    @property
    def edp(self) -> int:
        """Expert data-parallel degree, cp·dp/ep (tp·cp·dp/ep when folded): ranks holding the same experts."""
        return (self.tp if self.folded else 1) * self.cp * self.dp // self.ep

    def with_overrides(self, **fields: object) -> ParallelismSpec:
        """Return a copy with ``fields`` replaced (validated again); unknown names raise CosimInputError."""
        names = [f.name for f in dataclasses.fields(self)]
        unknown = sorted(set(fields) - set(names))
        if unknown:
            raise CosimInputError(f"parallelism.{unknown[0]}", "is not a parallelism field",
                                  f"choose among {', '.join(names)}")
        return dataclasses.replace(self, **fields)


def _positive_int(field: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise CosimInputError(field, f"must be a positive integer, got {value!r}")


def valid_tp(model: ModelSpec) -> list[int]:
    """TP degrees compatible with ``model``: common divisors of heads, KV heads, FFN size and vocabulary."""
    g = math.gcd(model.num_heads, model.num_kv_heads, model.ffn_hidden_size, model.vocab_size)
    return divisors(g)


def check_compatible(model: ModelSpec, par: ParallelismSpec) -> None:
    """Raise CosimInputError if ``par`` cannot run ``model`` (rules in the module docstring)."""
    t = par.tp
    choose_tp = f"choose tp among {', '.join(map(str, valid_tp(model)))}"
    if model.num_heads % t:
        raise CosimInputError("parallelism.tp", f"{model.num_heads} heads are not divisible by tp={t}", choose_tp)
    if model.num_kv_heads % t:
        raise CosimInputError(
            "parallelism.tp",
            f"{model.num_kv_heads} KV heads are not divisible by tp={t} (Megatron shards KV heads over TP)",
            choose_tp)
    if model.is_moe and model.expert_ffn_size % par.etp:
        raise CosimInputError("parallelism.tp", f"expert FFN size {model.expert_ffn_size} is not divisible by the "
                              f"experts' tp={par.etp}", "set parallelism.expert_tp=1 or choose another tp")
    if model.ffn_hidden_size % t:
        raise CosimInputError("parallelism.tp", f"FFN size {model.ffn_hidden_size} is not divisible by tp={t}",
                              choose_tp)
    if model.vocab_size % t:
        padded = -(-model.vocab_size // (128 * t)) * 128 * t
        raise CosimInputError("parallelism.tp", f"vocabulary {model.vocab_size} is not divisible by tp={t}",
                              f"pad it as Megatron does: model.vocab_size={padded}")
    stages = par.pp * par.vpp
    if model.num_layers % stages:
        good = [d for d in divisors(model.num_layers)]
        raise CosimInputError(
            "parallelism.pp",
            f"{model.num_layers} layers are not divisible by pp·vpp = {par.pp}·{par.vpp} = {stages}",
            f"choose pp·vpp among {', '.join(map(str, good))}")
    s = model.seq_length
    if par.cp > 1 and s % (2 * par.cp):
        raise CosimInputError(
            "parallelism.cp",
            f"sequence length {s} is not divisible by 2·cp = {2 * par.cp} (load-balanced ring attention)",
            "choose cp so that 2·cp divides the sequence length")
    if par.sp and (s // par.cp) % t:
        raise CosimInputError(
            "parallelism.sequence_parallel",
            f"local sequence s/cp = {s // par.cp} is not divisible by tp={t}",
            "choose tp dividing s/cp or disable sequence parallelism")
    if par.ep > 1 and not model.is_moe:
        raise CosimInputError("parallelism.ep", f"ep={par.ep} needs a mixture-of-experts model "
                              f"({model.name} has 1 expert)", "use ep=1 for dense models")
    if model.num_experts % par.ep:
        raise CosimInputError(
            "parallelism.ep", f"{model.num_experts} experts are not divisible by ep={par.ep}",
            f"choose ep among {', '.join(str(d) for d in divisors(model.num_experts) if par.dp % d == 0)}")
    if model.is_moe and t > 1 and not par.sequence_parallel:
        raise CosimInputError("parallelism.sequence_parallel",
                              f"a mixture-of-experts model with tp={t} needs sequence parallelism (Megatron-Core)",
                              "enable sequence_parallel or use tp=1")
