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
- the layers split over the pp·vpp virtual stages (:func:`virtual_stage_layers`): evenly (pp·vpp divides
  the layers), or as given. vpp > 1 (interleaved 1F1B) needs pp ≥ 2 and micro-batches divisible by pp.
- global batch divisible by micro-batch·dp (micro-batches per iteration m = global/(micro·dp)).
- cp > 1 needs s divisible by 2·cp (load-balanced ring attention cuts the sequence in 2·cp chunks).
- sequence parallelism (tp > 1) needs s/cp divisible by tp.
- MoE: experts divisible by ep; ep divides dp (tp·cp·dp when folded); with tp > 1 sequence parallelism is
  required (Megatron-Core); expert_tp is 1 or tp; the expert FFN divisible by the expert TP degree.
- ``moe_overlap = "forward_backward"`` needs an MoE model, pp = 1, two micro-batches or more and ZeRO stage
  0 or 1.
- ``moe_overlap = "two_microbatch"`` needs an MoE model and cp = 1; with one sequence per micro-batch (the
  halves are then its first and second s/2 tokens) an even s, and s/2 divisible by tp under sequence
  parallelism.

Pipeline split. Virtual stage ``vs = chunk·pp + stage`` holds a contiguous run of layers, in order; the
embedding is computed on virtual stage 0 and the output layer (final norm, logits, loss) on the last. The
layers per virtual stage come from, in this order of precedence (one of them at most):

- ``pipeline_layers``: pp numbers (layers per stage, each split over its vpp chunks as evenly as possible,
  the later chunks taking the extra layers) or pp·vpp numbers (layers per virtual stage, in virtual-stage
  order), e.g. Llama-3-405B's 126 layers on 16 stages ``[7, 8, ..., 8, 7]``;
- ``first_stage_layers`` / ``last_stage_layers`` (Megatron's decoder_first/last_pipeline_num_layers): the
  first and/or last stage hold that many layers, the others share the rest evenly;
- ``embedding_in_split`` / ``loss_in_split`` (Megatron's account_for_embedding/loss_in_pipeline_split): the
  embedding and/or the output layer count as one layer each, and the layers plus those split evenly over
  the virtual stages, so the first and/or last virtual stage holds one layer fewer;
- otherwise pp·vpp must divide the layers.

Every virtual stage holds at least one layer, but the first and the last may hold none (only the
embedding, only the output layer).
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
MOE_OVERLAPS = ("none", "two_microbatch", "forward_backward")  #: values of ParallelismSpec.moe_overlap
#: the fields that give an uneven pipeline split (all at their defaults: pp·vpp splits the layers evenly)
SPLIT_FIELDS = ("pipeline_layers", "first_stage_layers", "last_stage_layers", "embedding_in_split", "loss_in_split")


@dataclass(frozen=True, slots=True, kw_only=True)
class ParallelismSpec:
    """Degrees of parallelism, batch sizes, placement order and memory options of one training job."""

    #: fields a trace records only when not at their default (see ModelSpec.TRACE_OPTIONAL_FIELDS)
    TRACE_OPTIONAL_FIELDS: ClassVar[tuple[str, ...]] = ("expert_tp", "moe_overlap")

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
    #: layers per stage (pp numbers) or per virtual stage (pp·vpp numbers); () = split evenly
    pipeline_layers: tuple[int, ...] = ()
    first_stage_layers: int | None = None  #: layers on the first stage, the rest split evenly (Megatron)
    last_stage_layers: int | None = None  #: layers on the last stage, the rest split evenly (Megatron)
    embedding_in_split: bool = False  #: the embedding counts as a layer when splitting (first stage lighter)
    loss_in_split: bool = False  #: the output layer counts as a layer when splitting (last stage lighter)
    #: MoE layers' schedule: "none" (each all-to-all waits for the compute before it and holds up the compute
    #: after it), "two_microbatch" (the micro-batch's sequences, or with one sequence its tokens, in two
    #: halves whose all-to-alls overlap the other half's compute, as DeepSeek-V3's and SGLang's two-batch
    #: overlap) or "forward_backward" (pp = 1: the forward of micro-batch i + 1 interleaved with the backward
    #: of micro-batch i, DeepSeek-V3's DualPipe chunk pairing without its bidirectional pipeline;
    #: cosim.workload.builder)
    moe_overlap: str = "none"

    def __post_init__(self) -> None:
        for field in ("tp", "pp", "dp", "cp", "ep", "vpp", "micro_batch_size", "dp_bucket_bytes"):
            _positive_int(f"parallelism.{field}", getattr(self, field))
        object.__setattr__(self, "pipeline_layers", _layer_counts(self.pipeline_layers))
        for field in ("sequence_parallel", "recompute", "embedding_in_split", "loss_in_split"):
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

        self._check_split()
        self._check_moe_overlap()

    def _check_moe_overlap(self) -> None:
        if self.moe_overlap not in MOE_OVERLAPS:
            raise CosimInputError("parallelism.moe_overlap", f"unknown schedule {self.moe_overlap!r}",
                                  f"choose among {', '.join(MOE_OVERLAPS)}")
        if self.moe_overlap == "none":
            return
        if self.moe_overlap == "forward_backward":
            for problem, fix, bad in (
                    (f"pp={self.pp}: the bidirectional pipeline DualPipe pairs its passes with is not modelled",
                     "use pp=1", self.pp > 1),
                    (f"{self.num_microbatches} micro-batch per iteration has no other micro-batch to pair with",
                     "raise global_batch_size to at least two micro-batches", self.num_microbatches < 2),
                    ("ZeRO-3's one-layer-ahead gathers follow one pass, not two interleaved ones",
                     "use zero_stage 0 or 1", self.zero_stage == 3)):
                if bad:
                    raise CosimInputError("parallelism.moe_overlap", f"forward_backward: {problem}", fix)
            return
        if self.cp > 1:
            raise CosimInputError("parallelism.moe_overlap", f"two_microbatch is not modelled with cp={self.cp} "
                                  "(ring attention)", "use cp=1 or moe_overlap=\"none\"")

    def _check_split(self) -> None:
        """The pipeline-split fields agree with each other and with pp and vpp (the layers are checked
        against the model by :func:`virtual_stage_layers`)."""
        given = [f for f in ("pipeline_layers", "first_stage_layers", "last_stage_layers")
                 if getattr(self, f) not in ((), None)]
        given += [f for f in ("embedding_in_split", "loss_in_split") if getattr(self, f)]
        explicit = [f for f in given if f in ("pipeline_layers", "first_stage_layers", "last_stage_layers")]
        if self.pipeline_layers and len(given) > 1 or explicit and len(explicit) < len(given):
            raise CosimInputError(f"parallelism.{given[1]}", f"cannot be combined with parallelism.{given[0]}",
                                  "give the layers per stage one way")
        if self.pipeline_layers and len(self.pipeline_layers) not in (self.pp, self.pp * self.vpp):
            want = str(self.pp) if self.vpp == 1 else f"{self.pp} (per stage) or {self.pp * self.vpp} (per virtual stage)"
            raise CosimInputError("parallelism.pipeline_layers",
                                  f"has {len(self.pipeline_layers)} numbers for pp={self.pp}, vpp={self.vpp}",
                                  f"give {want} numbers")
        for f in ("first_stage_layers", "last_stage_layers"):
            value = getattr(self, f)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise CosimInputError(f"parallelism.{f}", f"must be a whole number of layers, got {value!r}")
            if self.pp < 2:
                raise CosimInputError(f"parallelism.{f}", f"needs pp >= 2, got pp={self.pp}",
                                      "remove it without pipeline parallelism")

    @property
    def uneven_split(self) -> bool:
        """True when a pipeline-split field is given (the layers need not divide evenly)."""
        return bool(self.pipeline_layers or self.first_stage_layers is not None
                    or self.last_stage_layers is not None or self.embedding_in_split or self.loss_in_split)

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


def _layer_counts(value: object) -> tuple[int, ...]:
    """``pipeline_layers`` as a tuple of layer counts (from a sequence, or text such as "7,8,8,7")."""
    if isinstance(value, str):
        text = value.strip().removeprefix("[").removesuffix("]").strip()
        parts = [p.strip() for p in text.split(",")] if text else []
        try:
            value = [int(p) for p in parts]
        except ValueError:
            raise CosimInputError("parallelism.pipeline_layers", f"cannot read {value!r} as layer counts",
                                  "write them as e.g. [7, 8, 8, 7]") from None
    try:
        counts = tuple(value)
    except TypeError:
        raise CosimInputError("parallelism.pipeline_layers", f"must be a list of layer counts, got {value!r}",
                              "write them as e.g. [7, 8, 8, 7]") from None
    for c in counts:
        if isinstance(c, bool) or not isinstance(c, int) or c < 0:
            raise CosimInputError("parallelism.pipeline_layers", f"must hold whole numbers of layers, got {c!r}",
                                  "write them as e.g. [7, 8, 8, 7]")
    return counts


def _split_evenly(n: int, parts: int) -> list[int]:
    """``n`` layers over ``parts`` chunks as evenly as possible, the later chunks taking the extra ones."""
    return [n * (c + 1) // parts - n * c // parts for c in range(parts)]


def virtual_stage_layers(num_layers: int, par: ParallelismSpec) -> tuple[int, ...]:
    """Layers of each of the pp·vpp virtual stages (index chunk·pp + stage), by the rules of the module
    docstring; CosimInputError when they cannot hold ``num_layers``."""
    p, v = par.pp, par.vpp
    n_vs = p * v
    if par.pipeline_layers:
        counts = list(par.pipeline_layers)
        if sum(counts) != num_layers:
            raise CosimInputError("parallelism.pipeline_layers",
                                  f"holds {sum(counts)} layers, the model has {num_layers}",
                                  "make the numbers sum to model.num_layers")
        if len(counts) == n_vs:
            per_vs = counts
        else:
            per_vs = [0] * n_vs
            for stage, n in enumerate(counts):
                for chunk, k in enumerate(_split_evenly(n, v)):
                    per_vs[chunk * p + stage] = k
        where = "parallelism.pipeline_layers"
    elif par.first_stage_layers is not None or par.last_stage_layers is not None:
        first, last = par.first_stage_layers, par.last_stage_layers
        fixed = {s: n for s, n in ((0, first), (p - 1, last)) if n is not None}
        rest = num_layers - sum(fixed.values())
        middle = p - len(fixed)
        name = "first_stage_layers" if first is not None else "last_stage_layers"
        if rest < 0 or (middle == 0 and rest) or (middle and rest % middle):
            raise CosimInputError(
                f"parallelism.{name}",
                f"leaves {rest} of {num_layers} layers for {middle} other stage{'s' * (middle != 1)}",
                "choose it so that the other stages share the rest evenly" if middle else
                "make first_stage_layers + last_stage_layers equal model.num_layers")
        per_stage = [fixed.get(s, rest // middle if middle else 0) for s in range(p)]
        per_vs = [0] * n_vs
        for stage, n in enumerate(per_stage):
            for chunk, k in enumerate(_split_evenly(n, v)):
                per_vs[chunk * p + stage] = k
        where = f"parallelism.{name}"
    elif par.embedding_in_split or par.loss_in_split:
        extra = int(par.embedding_in_split) + int(par.loss_in_split)
        units = num_layers + extra
        if units % n_vs:
            raise CosimInputError(
                "parallelism.pp",
                f"{num_layers} layers + {extra} (embedding/output counted as layers) = {units} are not divisible "
                f"by pp·vpp = {p}·{v} = {n_vs}",
                f"choose pp·vpp among {', '.join(map(str, divisors(units)))} or give parallelism.pipeline_layers")
        per_vs = [units // n_vs] * n_vs
        per_vs[0] -= int(par.embedding_in_split)
        per_vs[-1] -= int(par.loss_in_split)
        where = "parallelism.pp"
    else:
        if num_layers % n_vs:
            raise CosimInputError(
                "parallelism.pp",
                f"{num_layers} layers are not divisible by pp·vpp = {p}·{v} = {n_vs}",
                f"choose pp·vpp among {', '.join(map(str, divisors(num_layers)))}, or split unevenly with "
                "parallelism.pipeline_layers, first_stage_layers or embedding_in_split")
        return (num_layers // n_vs,) * n_vs
    empty = [vs for vs in range(1, n_vs - 1) if per_vs[vs] < 1]
    if empty:
        vs = empty[0]
        raise CosimInputError(where, f"leaves virtual stage {vs} (stage {vs % p}, chunk {vs // p}) without a layer",
                              "give every stage at least vpp layers; only the first and the last virtual stage "
                              "may hold only the embedding or the output layer")
    return tuple(per_vs)


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
    virtual_stage_layers(model.num_layers, par)
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
    if par.moe_overlap != "none" and not model.is_moe:
        raise CosimInputError("parallelism.moe_overlap", f"overlaps MoE all-to-alls; {model.name} has no MoE layer",
                              "leave moe_overlap at \"none\" for dense models")
    if par.moe_overlap == "two_microbatch" and par.micro_batch_size == 1 and (s % 2 or par.sp and (s // 2) % t):
        raise CosimInputError("parallelism.moe_overlap", f"two_microbatch splits a micro-batch of one sequence into "
                              f"its two token halves; s = {s} does not split into two halves"
                              + (f" divisible by tp={t} (sequence parallelism)" if par.sp else ""),
                              f"choose model.seq_length divisible by {2 * t if par.sp else 2}")
    if model.is_moe and t > 1 and not par.sequence_parallel:
        raise CosimInputError("parallelism.sequence_parallel",
                              f"a mixture-of-experts model with tp={t} needs sequence parallelism (Megatron-Core)",
                              "enable sequence_parallel or use tp=1")
