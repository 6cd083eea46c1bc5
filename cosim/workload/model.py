"""Transformer model specs, public presets and parameter counting.

A :class:`ModelSpec` holds the shape of a decoder-only transformer (Megatron's field names). Presets use the
published numbers of each model; every field can be overridden (``get_model("llama2-7b", num_layers=2)``).

Parameter count (exact, the formula the trace uses for gradient and parameter message sizes), with
``h`` hidden, ``d = h/heads`` head size, ``kv`` KV heads, ``f`` FFN size, ``E`` experts, ``V`` vocabulary,
``s`` sequence length, ``l`` layers::

    attention  = h·(h + 2·kv·d)  [Q, K, V projections; grouped-query attention shrinks K and V]
               + h·h             [output projection]
               + (h + 2·kv·d) + h                          if linear_bias
    mlp        = (3 if gated_mlp else 2)·h·f               [SwiGLU has gate, up, down; GELU has up, down]
               + (2 if gated_mlp else 1)·f + h             if linear_bias
    norm       = 2·h (layernorm: weight and bias) or h (rmsnorm: weight)
    layer      = attention + E·mlp + (h·E if E > 1: router) + 2·norm
    embedding  = V·h + (s·h if position_embedding == "learned")
    output     = norm (final) + (0 if tied_embeddings else V·h)
    P          = l·layer + embedding + output

For GPT-3 (biases, layernorm, learned positions, tied embeddings) this is Megatron's
``P = 12·l·h²·(1 + 13/(12h) + (V+s)/(12·l·h))`` plus the final layernorm's 2h.

Software stack. Besides its shape, a spec says how it is run, which sets the kernels of an iteration
(cosim.workload.kernels) but not its parameters or model FLOPs:

- ``attention_kernel``: "flash" (one fused FlashAttention kernel each way) or "unfused" (Megatron-LM 2021:
  batched Q·Kᵀ GEMM, fused scale-mask-softmax, dropout, batched probs·V GEMM, with the s×s matrices in HBM);
- ``attention_dropout`` / ``hidden_dropout``: dropout probabilities (GPT-2/3 era 0.1; LLaMA-style 0);
- ``position_embedding``: "learned" adds position rows to the token embedding, "rope" rotates Q and K;
- ``loss_scaling``: fp16 mixed precision with dynamic loss scaling (an unscale and inf/NaN check pass over
  the gradients before the step); bf16 needs none.

The presets say which stack they assume: ``llama2-*``, ``mixtral-8x7b``: flash, no dropout, rope, bf16;
``gpt3-175b``: GPT-3's architecture on a current stack (flash, no dropout, bf16); ``megatron-gpt-*``: the
GPT configurations of Megatron-LM's Table 1 (Narayanan et al., SC'21) on its 2021 stack (unfused attention,
dropout 0.1, learned positions, fp16 with loss scaling).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from cosim.errors import CosimInputError
from cosim.workload.routing import RoutingSpec

NORMS = ("rmsnorm", "layernorm")
POSITION_EMBEDDINGS = ("rope", "learned")
ATTENTION_KERNELS = ("flash", "unfused")
#: precision of the linear layers' GEMMs: bf16, or FP8 with per-tensor (Transformer Engine delayed scaling)
#: or fine-grained block scaling (DeepSeek-V3: 1×128 activation tiles, 128×128 weight blocks)
GEMM_PRECISIONS = ("bf16", "fp8-tensor", "fp8-block")
DISPATCH_DTYPES = ("bf16", "fp8")
#: how a training trace carries the EP all-to-alls: NCCL-style balanced all-to-all collectives, or DeepEP's
#: routed messages (cosim.workload.moe_expand)
MOE_KERNELS = ("nccl", "deepep-high-throughput", "deepep-low-latency")


#: largest value of a model dimension: far beyond any model built, small enough that parameter, activation
#: and FLOP counts stay exact in int64 (a hidden size of 1e10 would overflow them)
MAX_MODEL_DIM = {"model.hidden_size": 1 << 20, "model.ffn_hidden_size": 1 << 22, "model.vocab_size": 1 << 24,
                 "model.seq_length": 1 << 24}
#: the largest value of any other count (layers, heads, experts, top_k)
MAX_MODEL_COUNT = 1 << 16


def _check_positive_int(field: str, value: object) -> None:
    """Raise CosimInputError unless ``value`` is an int in 1..its maximum (bools are rejected)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise CosimInputError(field, f"must be a positive integer, got {value!r}")
    limit = MAX_MODEL_DIM.get(field, MAX_MODEL_COUNT)
    if value > limit:
        raise CosimInputError(field, f"must be at most {limit}, got {value:.3g}", "no model is that large")


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec:
    """Shape of a decoder-only transformer. Counts are dimensionless; ``seq_length`` is in tokens."""

    #: fields a trace records only when they differ from their default, so that the trace of a model
    #: without them (MLA, shared experts, FP8...) is the same file whether or not the fields exist
    TRACE_OPTIONAL_FIELDS: ClassVar[tuple[str, ...]] = (
        "attention_head_dim", "qk_norm", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
        "v_head_dim", "moe_ffn_hidden_size", "num_shared_experts", "first_dense_layers", "max_routed_nodes",
        "mtp_layers", "gemm_precision", "moe_dispatch_dtype", "moe_kernel", "routing_distribution",
        "routing_zipf_exponent", "routing_expert_load", "routing_seed")

    name: str
    num_layers: int  #: transformer layers l
    hidden_size: int  #: model width h
    num_heads: int  #: attention (query) heads
    num_kv_heads: int  #: key/value heads (= num_heads without grouped-query attention)
    ffn_hidden_size: int  #: FFN inner size f (per expert for MoE)
    vocab_size: int  #: vocabulary V, as used for the embedding and logits (pad it yourself)
    seq_length: int  #: training sequence length s, tokens
    num_experts: int = 1  #: experts per MoE layer E (1 = dense model)
    top_k: int = 1  #: experts each token is routed to
    gated_mlp: bool = True  #: SwiGLU (3 matrices) instead of GELU MLP (2 matrices)
    linear_bias: bool = False  #: linear layers have biases (GPT-3 yes, LLaMA no)
    norm: str = "rmsnorm"  #: "rmsnorm" (h params) or "layernorm" (2h params)
    position_embedding: str = "rope"  #: "rope" (no params) or "learned" (s·h params)
    tied_embeddings: bool = False  #: output layer shares the input embedding matrix
    attention_kernel: str = "flash"  #: "flash" (fused FlashAttention) or "unfused" (s×s scores through HBM)
    attention_dropout: float = 0.0  #: dropout probability on the attention probabilities, [0, 1)
    hidden_dropout: float = 0.0  #: dropout probability after the attention and MLP blocks, [0, 1)
    loss_scaling: bool = False  #: fp16 with dynamic loss scaling (unscale + inf check pass over the grads)
    # fields of newer architectures; their defaults give the classic transformer above
    attention_head_dim: int = 0  #: size of one head when it is not h/heads (Qwen3: 128 with h=4096, 64 heads); 0 = h/heads
    qk_norm: bool = False  #: RMSNorm on each head's query and key (Qwen3), 2·head_dim params per layer
    q_lora_rank: int = 0  #: MLA: rank of the low-rank query projection (0 = full-rank query)
    kv_lora_rank: int = 0  #: MLA: rank of the compressed latent KV (> 0 selects multi-head latent attention)
    qk_nope_head_dim: int = 0  #: MLA: per-head query/key size without rotary position
    qk_rope_head_dim: int = 0  #: MLA: per-head query/key size carrying rotary position (key part shared by heads)
    v_head_dim: int = 0  #: MLA: per-head value size
    moe_ffn_hidden_size: int = 0  #: FFN inner size of one routed (and shared) expert; 0 = ffn_hidden_size
    num_shared_experts: int = 0  #: experts every token goes through beside its top_k routed ones
    first_dense_layers: int = 0  #: leading layers with a dense MLP of ffn_hidden_size in an MoE model
    max_routed_nodes: int = 0  #: node-limited routing: a token's experts lie on at most this many nodes; 0 = any
    mtp_layers: int = 0  #: multi-token prediction modules (DeepSeek-V3: 1), counted in params and FLOPs
    gemm_precision: str = "bf16"  #: linear-layer GEMMs: "bf16", "fp8-tensor" or "fp8-block" (GEMM_PRECISIONS)
    moe_dispatch_dtype: str = "bf16"  #: forward MoE dispatch payload: "bf16" or "fp8" (1 B + a scale per 128)
    moe_kernel: str = "nccl"  #: EP all-to-alls as balanced collectives ("nccl") or DeepEP's routed messages
    routing_distribution: str = "uniform"  #: expert popularity with a DeepEP kernel: uniform, zipf or vector
    routing_zipf_exponent: float = 1.0  #: a of p ∝ 1/rank^a (routing_distribution "zipf")
    routing_expert_load: tuple[float, ...] = ()  #: relative load per expert (routing_distribution "vector")
    routing_seed: int = 0  #: seed of the routing draws (one routing per layer, micro-batch and EP group)

    def __post_init__(self) -> None:
        for field in ("num_layers", "hidden_size", "num_heads", "num_kv_heads", "ffn_hidden_size",
                      "vocab_size", "seq_length", "num_experts", "top_k"):
            _check_positive_int(f"model.{field}", getattr(self, field))
        for field in ("attention_head_dim", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                      "v_head_dim", "moe_ffn_hidden_size", "num_shared_experts", "first_dense_layers",
                      "max_routed_nodes", "mtp_layers"):
            _check_nonnegative_int(f"model.{field}", getattr(self, field))
        for field in ("gated_mlp", "linear_bias", "tied_embeddings", "loss_scaling", "qk_norm"):
            if not isinstance(getattr(self, field), bool):
                raise CosimInputError(f"model.{field}", f"must be true or false, got {getattr(self, field)!r}")
        if self.kv_lora_rank:
            for field in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
                if getattr(self, field) < 1:
                    raise CosimInputError(f"model.{field}", "multi-head latent attention (kv_lora_rank > 0) needs it",
                                          f"set model.{field} (DeepSeek-V3: 128, 64, 128)")
        elif self.q_lora_rank:
            raise CosimInputError("model.q_lora_rank", "a low-rank query needs multi-head latent attention",
                                  "set model.kv_lora_rank too, or q_lora_rank=0")
        if self.first_dense_layers and self.first_dense_layers >= self.num_layers:
            raise CosimInputError("model.first_dense_layers",
                                  f"{self.first_dense_layers} dense layers leave no MoE layer of {self.num_layers}",
                                  f"choose first_dense_layers < num_layers={self.num_layers}")
        if self.hidden_size % self.num_heads and not (self.attention_head_dim or self.kv_lora_rank):
            raise CosimInputError(
                "model.hidden_size",
                f"hidden size {self.hidden_size} is not divisible by {self.num_heads} heads",
                "choose a multiple of num_heads")
        if self.num_heads % self.num_kv_heads:
            raise CosimInputError(
                "model.num_kv_heads",
                f"{self.num_heads} heads are not divisible by {self.num_kv_heads} KV heads",
                f"choose num_kv_heads among {', '.join(map(str, divisors(self.num_heads)))}")
        if self.top_k > self.num_experts:
            raise CosimInputError("model.top_k", f"top_k={self.top_k} exceeds num_experts={self.num_experts}",
                                  "choose top_k <= num_experts")
        try:
            routing = RoutingSpec(distribution=self.routing_distribution, zipf_exponent=self.routing_zipf_exponent,
                                  expert_load=tuple(self.routing_expert_load), seed=self.routing_seed)
        except CosimInputError as exc:
            raise CosimInputError(exc.field.replace("routing.", "model.routing_"), exc.problem, exc.fix) from None
        object.__setattr__(self, "routing_expert_load", routing.expert_load)
        if self.routing_expert_load and len(self.routing_expert_load) != self.num_experts:
            raise CosimInputError("model.routing_expert_load", f"has {len(self.routing_expert_load)} loads for "
                                  f"{self.num_experts} experts", f"give exactly {self.num_experts} values")
        for field, allowed in (("gemm_precision", GEMM_PRECISIONS), ("moe_dispatch_dtype", DISPATCH_DTYPES),
                               ("moe_kernel", MOE_KERNELS)):
            if getattr(self, field) not in allowed:
                raise CosimInputError(f"model.{field}", f"unknown value {getattr(self, field)!r}",
                                      f"choose among {', '.join(allowed)}")
        if self.norm not in NORMS:
            raise CosimInputError("model.norm", f"unknown norm {self.norm!r}", f"choose among {', '.join(NORMS)}")
        if self.position_embedding not in POSITION_EMBEDDINGS:
            raise CosimInputError("model.position_embedding", f"unknown kind {self.position_embedding!r}",
                                  f"choose among {', '.join(POSITION_EMBEDDINGS)}")
        if self.attention_kernel not in ATTENTION_KERNELS:
            raise CosimInputError("model.attention_kernel", f"unknown attention kernel {self.attention_kernel!r}",
                                  f"choose among {', '.join(ATTENTION_KERNELS)}")
        for field in ("attention_dropout", "hidden_dropout"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
                raise CosimInputError(f"model.{field}", f"must be a probability in [0, 1), got {value!r}",
                                      "use 0 for no dropout or e.g. 0.1")

    @property
    def head_dim(self) -> int:
        """Size of one attention head: ``attention_head_dim``, the MLA query/key size, or h / heads."""
        if self.kv_lora_rank:
            return self.qk_nope_head_dim + self.qk_rope_head_dim
        return self.attention_head_dim or self.hidden_size // self.num_heads

    @property
    def kv_size(self) -> int:
        """Width of the K (or V) projection output, kv_heads · head_dim; with MLA the mean of the K and V
        widths over all heads, heads·(qk + v)/2, so that 2·kv_size is what K and V carry."""
        if self.kv_lora_rank:
            return self.num_heads * (self.head_dim + self.v_head_dim) // 2
        return self.num_kv_heads * self.head_dim

    @property
    def q_size(self) -> int:
        """Width of the query projection output, heads · head_dim (= h for the classic transformer)."""
        return self.num_heads * self.head_dim

    @property
    def attn_out_size(self) -> int:
        """Width of the attention output entering the output projection: heads · value head size."""
        return self.num_heads * (self.v_head_dim if self.kv_lora_rank else self.head_dim)

    @property
    def is_mla(self) -> bool:
        """True for multi-head latent attention (DeepSeek-V2/V3)."""
        return self.kv_lora_rank > 0

    @property
    def expert_ffn_size(self) -> int:
        """FFN inner size of one expert (routed or shared)."""
        return self.moe_ffn_hidden_size or self.ffn_hidden_size

    @property
    def num_moe_layers(self) -> int:
        """Layers with an MoE MLP (0 for a dense model)."""
        return self.num_layers - self.first_dense_layers if self.is_moe else 0

    def is_moe_layer(self, layer: int) -> bool:
        """True if layer ``layer`` (0-based) has an MoE MLP."""
        return self.is_moe and layer >= self.first_dense_layers

    @property
    def is_moe(self) -> bool:
        """True for a mixture-of-experts model (more than one expert per layer)."""
        return self.num_experts > 1

    def with_overrides(self, **fields: object) -> ModelSpec:
        """Return a copy with ``fields`` replaced (validated again); unknown names raise CosimInputError."""
        unknown = sorted(set(fields) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise CosimInputError(f"model.{unknown[0]}", "is not a model field",
                                  f"choose among {', '.join(f.name for f in dataclasses.fields(self))}")
        return dataclasses.replace(self, **fields)


def _check_nonnegative_int(field: str, value: object) -> None:
    """Raise CosimInputError unless ``value`` is an int in 0..its maximum (0 = the field's feature is off)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise CosimInputError(field, f"must be a non-negative integer, got {value!r}")
    if value:
        _check_positive_int(field, value)


def divisors(n: int) -> list[int]:
    """All positive divisors of ``n`` in increasing order."""
    return [d for d in range(1, n + 1) if n % d == 0]


# --- presets: public numbers --------------------------------------------------------------------------

PRESETS: dict[str, ModelSpec] = {
    # Touvron et al. 2023, "Llama 2" (Table 1 and the released configs).
    "llama2-7b": ModelSpec(name="llama2-7b", num_layers=32, hidden_size=4096, num_heads=32, num_kv_heads=32,
                           ffn_hidden_size=11008, vocab_size=32000, seq_length=4096),
    "llama2-13b": ModelSpec(name="llama2-13b", num_layers=40, hidden_size=5120, num_heads=40, num_kv_heads=40,
                            ffn_hidden_size=13824, vocab_size=32000, seq_length=4096),
    "llama2-70b": ModelSpec(name="llama2-70b", num_layers=80, hidden_size=8192, num_heads=64, num_kv_heads=8,
                            ffn_hidden_size=28672, vocab_size=32000, seq_length=4096),
    # Brown et al. 2020, GPT-3 175B; vocabulary 50257 padded to 51200 as Megatron does (multiple of 128·tp).
    "gpt3-175b": ModelSpec(name="gpt3-175b", num_layers=96, hidden_size=12288, num_heads=96, num_kv_heads=96,
                           ffn_hidden_size=4 * 12288, vocab_size=51200, seq_length=2048, gated_mlp=False,
                           linear_bias=True, norm="layernorm", position_embedding="learned", tied_embeddings=True),
    # Jiang et al. 2024, "Mixtral of Experts": 8 experts, top-2, SwiGLU experts of 14336; trained at s=4096 here
    # (the model supports 32k context; override seq_length for long-context runs).
    "mixtral-8x7b": ModelSpec(name="mixtral-8x7b", num_layers=32, hidden_size=4096, num_heads=32, num_kv_heads=8,
                              ffn_hidden_size=14336, vocab_size=32000, seq_length=4096, num_experts=8, top_k=2),
}


def _megatron_gpt(name: str, layers: int, hidden: int, heads: int) -> ModelSpec:
    """A GPT of Megatron-LM's Table 1 (Narayanan et al., SC'21) on its 2021 stack: GPT-2/3 architecture
    (GELU MLP of 4h, biases, layernorm, learned positions, tied embeddings), sequence 2048, the GPT-2
    vocabulary padded to 51,200; unfused attention, dropout 0.1, fp16 with dynamic loss scaling."""
    return ModelSpec(name=name, num_layers=layers, hidden_size=hidden, num_heads=heads, num_kv_heads=heads,
                     ffn_hidden_size=4 * hidden, vocab_size=51200, seq_length=2048, gated_mlp=False,
                     linear_bias=True, norm="layernorm", position_embedding="learned", tied_embeddings=True,
                     attention_kernel="unfused", attention_dropout=0.1, hidden_dropout=0.1, loss_scaling=True)


# Narayanan et al. 2021, Table 1: (parameters, attention heads, hidden size, layers)
PRESETS |= {f"megatron-gpt-{size}": _megatron_gpt(f"megatron-gpt-{size}", layers, hidden, heads)
            for size, heads, hidden, layers in (("1.7b", 24, 2304, 24), ("3.6b", 32, 3072, 30),
                                                ("7.5b", 32, 4096, 36), ("18.4b", 48, 6144, 40),
                                                ("39.1b", 64, 8192, 48), ("76.1b", 80, 10240, 60),
                                                ("145.6b", 96, 12288, 80), ("310.1b", 128, 16384, 96),
                                                ("529.6b", 128, 20480, 105), ("1t", 160, 25600, 128))}


# Mixture-of-experts at production shape (the released configs). Trained at s=4096 here (their pre-training
# length before context extension); override seq_length for long-context runs.
PRESETS |= {
    # Mistral AI 2024, Mixtral-8x22B-v0.1 config: 56 layers, h=6144, 48 heads / 8 KV heads, experts of 16384,
    # 8 experts top-2, vocabulary 32768. 141B total / 39B active.
    "mixtral-8x22b": ModelSpec(name="mixtral-8x22b", num_layers=56, hidden_size=6144, num_heads=48, num_kv_heads=8,
                               ffn_hidden_size=16384, vocab_size=32768, seq_length=4096, num_experts=8, top_k=2),
    # Qwen Team 2025, Qwen3-235B-A22B config: 94 layers, h=4096, 64 query / 4 KV heads of 128 (q is 8192
    # wide), QK-norm, 128 experts of 1536, top-8, no shared expert, untied vocabulary of 151936.
    # 235B total / 22B active.
    "qwen3-235b-a22b": ModelSpec(name="qwen3-235b-a22b", num_layers=94, hidden_size=4096, num_heads=64,
                                 num_kv_heads=4, attention_head_dim=128, qk_norm=True, ffn_hidden_size=12288,
                                 moe_ffn_hidden_size=1536, vocab_size=151936, seq_length=4096, num_experts=128,
                                 top_k=8),
    # DeepSeek-AI 2024, "DeepSeek-V3 Technical Report" §2 and §4.2 and the released config: 61 layers, h=7168,
    # MLA with 128 heads (q_lora 1536, kv_lora 512, d_nope 128, d_rope 64, d_v 128), the first 3 layers dense
    # (FFN 18432), then 1 shared + 256 routed experts of 2048, top-8, each token on at most 4 nodes;
    # vocabulary 129280, untied. 671B total / 37B active without the MTP module (mtp_layers=1 adds it:
    # the released checkpoint's 685B also stores copies of the shared embedding and head).
    "deepseek-v3": ModelSpec(name="deepseek-v3", num_layers=61, hidden_size=7168, num_heads=128, num_kv_heads=128,
                             q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
                             v_head_dim=128, ffn_hidden_size=18432, moe_ffn_hidden_size=2048, vocab_size=129280,
                             seq_length=4096, num_experts=256, top_k=8, num_shared_experts=1, first_dense_layers=3,
                             max_routed_nodes=4),
}


def get_model(name: str, **overrides: object) -> ModelSpec:
    """The validated ModelSpec of preset ``name`` (see ``PRESETS``; case-insensitive) with the fields in
    ``overrides`` replaced, e.g. ``num_layers=2``."""
    key = name.lower()
    if key not in PRESETS:
        raise CosimInputError("model", f"unknown model preset {name!r}", f"choose among {', '.join(PRESETS)}")
    spec = PRESETS[key]
    return spec.with_overrides(**overrides) if overrides else spec


# --- parameter counting (formula in the module docstring) ---------------------------------------------

def attention_params(m: ModelSpec) -> int:
    """Parameters of one attention block (QKV + output projection, biases if any); no norms outside it."""
    if m.is_mla:
        return mla_params(m)
    qkv_out = m.q_size + 2 * m.kv_size  # GQA: K and V project to kv_heads·head_dim only
    weights = m.hidden_size * qkv_out + m.q_size * m.hidden_size
    biases = (qkv_out + m.hidden_size) if m.linear_bias else 0
    return weights + biases + (2 * m.head_dim if m.qk_norm else 0)


def mla_params(m: ModelSpec) -> int:
    """Parameters of one multi-head latent attention block (DeepSeek-V2/V3), H heads, r_q = q_lora_rank,
    r_kv = kv_lora_rank, d_n / d_r / d_v the no-rope, rope and value head sizes::

        query   h·r_q + r_q + r_q·H·(d_n + d_r)   (down projection, its RMSNorm, up projection)
                or h·H·(d_n + d_r) without a low-rank query
        key/value  h·(r_kv + d_r) + r_kv + r_kv·H·(d_n + d_v)   (latent + shared rope key, norm, up)
        output  H·d_v·h
    """
    h, heads = m.hidden_size, m.num_heads
    qk = m.qk_nope_head_dim + m.qk_rope_head_dim
    if m.q_lora_rank:
        query = h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * heads * qk
    else:
        query = h * heads * qk
    kv = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank \
        + m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim)
    return query + kv + heads * m.v_head_dim * h


def mlp_params(m: ModelSpec, ffn: int | None = None) -> int:
    """Parameters of one MLP of inner size ``ffn`` (default: one expert's for MoE, else ffn_hidden_size)."""
    f = (m.expert_ffn_size if m.is_moe else m.ffn_hidden_size) if ffn is None else ffn
    n_in = 2 if m.gated_mlp else 1  # gate and up projections for SwiGLU
    weights = (n_in + 1) * m.hidden_size * f
    biases = (n_in * f + m.hidden_size) if m.linear_bias else 0
    return weights + biases


def norm_params(m: ModelSpec) -> int:
    """Parameters of one normalisation layer."""
    return 2 * m.hidden_size if m.norm == "layernorm" else m.hidden_size


def router_params(m: ModelSpec) -> int:
    """Parameters of one MoE router (h·E), 0 for dense models."""
    return m.hidden_size * m.num_experts if m.is_moe else 0


def layer_params(m: ModelSpec, moe: bool | None = None) -> int:
    """Parameters of one transformer layer (all experts counted); ``moe`` picks an MoE or a dense layer of an
    MoE model (default: MoE for MoE models)."""
    moe = m.is_moe if moe is None else moe
    if not moe:
        return attention_params(m) + mlp_params(m, m.ffn_hidden_size) + 2 * norm_params(m)
    experts = (m.num_experts + m.num_shared_experts) * mlp_params(m)
    return attention_params(m) + experts + router_params(m) + 2 * norm_params(m)


def mtp_params(m: ModelSpec) -> int:
    """Parameters of one multi-token prediction module (DeepSeek-V3 §2.2): an MoE layer, the projection of
    the concatenated hidden state and embedding (2h·h) and their two RMSNorms; the embedding and output
    head are shared with the main model and not counted again."""
    return layer_params(m) + 2 * m.hidden_size * m.hidden_size + 2 * norm_params(m)


def embedding_params(m: ModelSpec) -> int:
    """Input embedding (V·h) plus learned position embedding (s·h) if any."""
    pos = m.seq_length * m.hidden_size if m.position_embedding == "learned" else 0
    return m.vocab_size * m.hidden_size + pos


def output_params(m: ModelSpec) -> int:
    """Final norm plus output projection (absent when tied to the input embedding)."""
    return norm_params(m) + (0 if m.tied_embeddings else m.vocab_size * m.hidden_size)


def total_params(m: ModelSpec) -> int:
    """Total parameter count P of the model (module docstring formula), MTP modules included."""
    dense_layers = m.num_layers - m.num_moe_layers
    layers = dense_layers * layer_params(m, moe=False) + m.num_moe_layers * layer_params(m, moe=True)
    return layers + embedding_params(m) + output_params(m) + m.mtp_layers * mtp_params(m)


def active_params(m: ModelSpec) -> int:
    """Parameters one token uses: like total_params but with top_k routed experts per MoE layer instead of
    all of them (shared experts always count)."""
    idle = (m.num_experts - m.top_k) * mlp_params(m) if m.is_moe else 0
    return total_params(m) - (m.num_moe_layers + m.mtp_layers) * idle


# Llama Team, Meta 2024, "The Llama 3 Herd of Models" (Table 3 and the released configs): grouped-query
# attention with 8 KV heads, SwiGLU, RMSNorm, RoPE, untied 128,256-token vocabulary, pre-trained at s=8192.
PRESETS |= {
    "llama3-8b": ModelSpec(name="llama3-8b", num_layers=32, hidden_size=4096, num_heads=32, num_kv_heads=8,
                           ffn_hidden_size=14336, vocab_size=128256, seq_length=8192),
    "llama3-70b": ModelSpec(name="llama3-70b", num_layers=80, hidden_size=8192, num_heads=64, num_kv_heads=8,
                            ffn_hidden_size=28672, vocab_size=128256, seq_length=8192),
    "llama3-405b": ModelSpec(name="llama3-405b", num_layers=126, hidden_size=16384, num_heads=128, num_kv_heads=8,
                             ffn_hidden_size=53248, vocab_size=128256, seq_length=8192),
}
