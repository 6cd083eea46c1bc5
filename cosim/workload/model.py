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

from cosim.errors import CosimInputError

NORMS = ("rmsnorm", "layernorm")
POSITION_EMBEDDINGS = ("rope", "learned")
ATTENTION_KERNELS = ("flash", "unfused")


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

    def __post_init__(self) -> None:
        for field in ("num_layers", "hidden_size", "num_heads", "num_kv_heads", "ffn_hidden_size",
                      "vocab_size", "seq_length", "num_experts", "top_k"):
            _check_positive_int(f"model.{field}", getattr(self, field))
        for field in ("gated_mlp", "linear_bias", "tied_embeddings", "loss_scaling"):
            if not isinstance(getattr(self, field), bool):
                raise CosimInputError(f"model.{field}", f"must be true or false, got {getattr(self, field)!r}")
        if self.hidden_size % self.num_heads:
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
        """Size of one attention head, h / heads."""
        return self.hidden_size // self.num_heads

    @property
    def kv_size(self) -> int:
        """Width of the K (or V) projection output, kv_heads · head_dim."""
        return self.num_kv_heads * self.head_dim

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
    """Parameters of one attention block (QKV + output projection, biases if any); no norms."""
    qkv_out = m.hidden_size + 2 * m.kv_size  # GQA: K and V project to kv_heads·head_dim only
    weights = m.hidden_size * qkv_out + m.hidden_size * m.hidden_size
    biases = (qkv_out + m.hidden_size) if m.linear_bias else 0
    return weights + biases


def mlp_params(m: ModelSpec) -> int:
    """Parameters of one MLP (one expert for MoE)."""
    n_in = 2 if m.gated_mlp else 1  # gate and up projections for SwiGLU
    weights = (n_in + 1) * m.hidden_size * m.ffn_hidden_size
    biases = (n_in * m.ffn_hidden_size + m.hidden_size) if m.linear_bias else 0
    return weights + biases


def norm_params(m: ModelSpec) -> int:
    """Parameters of one normalisation layer."""
    return 2 * m.hidden_size if m.norm == "layernorm" else m.hidden_size


def router_params(m: ModelSpec) -> int:
    """Parameters of one MoE router (h·E), 0 for dense models."""
    return m.hidden_size * m.num_experts if m.is_moe else 0


def layer_params(m: ModelSpec) -> int:
    """Parameters of one transformer layer (all experts counted)."""
    return attention_params(m) + m.num_experts * mlp_params(m) + router_params(m) + 2 * norm_params(m)


def embedding_params(m: ModelSpec) -> int:
    """Input embedding (V·h) plus learned position embedding (s·h) if any."""
    pos = m.seq_length * m.hidden_size if m.position_embedding == "learned" else 0
    return m.vocab_size * m.hidden_size + pos


def output_params(m: ModelSpec) -> int:
    """Final norm plus output projection (absent when tied to the input embedding)."""
    return norm_params(m) + (0 if m.tied_embeddings else m.vocab_size * m.hidden_size)


def total_params(m: ModelSpec) -> int:
    """Total parameter count P of the model (module docstring formula)."""
    return m.num_layers * layer_params(m) + embedding_params(m) + output_params(m)


def active_params(m: ModelSpec) -> int:
    """Parameters one token uses: like total_params but with top_k experts per layer instead of all."""
    return total_params(m) - m.num_layers * (m.num_experts - m.top_k) * mlp_params(m)


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
