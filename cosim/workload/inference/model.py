"""KV-cache geometry of an inference model: bytes each token leaves in the cache, per layer.

Attention kinds (``e`` = bytes per cached element, 2 for bf16; ``d`` = head dimension)::

    mha  (multi-head)         2 · heads    · d · e      K and V of every query head
    gqa  (grouped-query)      2 · kv_heads · d · e      K and V shared by heads/kv_heads query heads
    mla  (multi-head latent)  (r_kv + d_rope) · e       one compressed latent of rank r_kv plus the
                                                        decoupled rotary key (DeepSeek-V2/V3)

Per token the cache holds ``layers`` times that; a request of ``p`` prompt tokens moves
``p · kv_bytes_per_token`` from a prefill to a decode replica when serving is disaggregated. Under tensor
parallelism the KV heads are split over the TP ranks (an MLA latent is replicated on every TP rank).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from cosim.errors import CosimInputError
from cosim.workload.model import ModelSpec, get_model

ATTENTION_KINDS = ("mha", "gqa", "mla")
KV_ELEMENT_BYTES = 2  #: bf16 KV cache


@dataclass(frozen=True, slots=True, kw_only=True)
class InferenceModel:
    """A ModelSpec (shapes for the compute model) plus how its attention caches keys and values."""

    spec: ModelSpec
    attention: str  #: one of ATTENTION_KINDS
    kv_lora_rank: int = 0  #: MLA: rank r_kv of the compressed KV latent, elements
    rope_head_dim: int = 0  #: MLA: width of the decoupled rotary key, elements
    kv_element_bytes: int = KV_ELEMENT_BYTES  #: bytes per cached element

    def __post_init__(self) -> None:
        if self.attention not in ATTENTION_KINDS:
            raise CosimInputError("model.attention", f"unknown attention kind {self.attention!r}",
                                  f"choose among {', '.join(ATTENTION_KINDS)}")
        m = self.spec
        if self.attention == "mha" and m.num_kv_heads != m.num_heads:
            raise CosimInputError("model.num_kv_heads", f"mha caches every head: {m.num_kv_heads} KV heads "
                                  f"for {m.num_heads} heads", "use attention = \"gqa\", or num_kv_heads = num_heads")
        if self.attention == "gqa" and m.num_kv_heads >= m.num_heads:
            raise CosimInputError("model.num_kv_heads", "gqa needs fewer KV heads than query heads",
                                  "use attention = \"mha\"")
        if self.attention == "mla" and (self.kv_lora_rank < 1 or self.rope_head_dim < 0):
            raise CosimInputError("model.kv_lora_rank", f"mla needs a latent rank >= 1, got {self.kv_lora_rank}",
                                  "set kv_lora_rank (DeepSeek-V3: 512) and rope_head_dim (64)")
        if self.kv_element_bytes < 1:
            raise CosimInputError("model.kv_element_bytes", f"must be >= 1, got {self.kv_element_bytes}")

    @property
    def kv_bytes_per_token_per_layer(self) -> int:
        """Bytes one token adds to one layer's cache (formula in the module docstring)."""
        m, e = self.spec, self.kv_element_bytes
        if self.attention == "mla":
            return (self.kv_lora_rank + self.rope_head_dim) * e
        return 2 * m.num_kv_heads * m.head_dim * e

    @property
    def kv_bytes_per_token(self) -> int:
        """Bytes one token adds to the whole cache, all layers."""
        return self.spec.num_layers * self.kv_bytes_per_token_per_layer

    def kv_bytes_per_token_per_rank(self, tp: int) -> int:
        """Bytes per token one of ``tp`` tensor-parallel ranks caches, all layers (KV heads split over the
        ranks, at least one head each; an MLA latent is replicated)."""
        if tp < 1:
            raise CosimInputError("parallelism.tp", f"must be >= 1, got {tp}")
        if self.attention == "mla":
            return self.kv_bytes_per_token
        heads = max(1, -(-self.spec.num_kv_heads // tp))
        return self.spec.num_layers * 2 * heads * self.spec.head_dim * self.kv_element_bytes

    def with_overrides(self, **fields: object) -> InferenceModel:
        """A copy with ModelSpec fields (e.g. ``num_layers``) replaced, validated again."""
        return dataclasses.replace(self, spec=self.spec.with_overrides(**fields))


# DeepSeek-AI 2024, "DeepSeek-V3 Technical Report": 61 layers, h 7168, 128 heads, MLA with KV rank 512 and
# rotary key 64, 256 routed experts of 2048, top-8, vocabulary 129280. The shared expert and the 3 leading
# dense layers are left out of this "-like" preset (every layer is MoE).
_DEEPSEEK_V3 = ModelSpec(name="deepseek-v3-like", num_layers=61, hidden_size=7168, num_heads=128,
                         num_kv_heads=128, ffn_hidden_size=2048, vocab_size=129280, seq_length=4096,
                         num_experts=256, top_k=8)

PRESETS: dict[str, InferenceModel] = {
    # the training preset (cosim.workload.model): MLA (latent 512, rotary key 64), 3 dense layers, 1 shared +
    # 256 routed experts of 2048, top-8
    "deepseek-v3": InferenceModel(spec=get_model("deepseek-v3"), attention="mla", kv_lora_rank=512, rope_head_dim=64),
    "llama2-7b": InferenceModel(spec=get_model("llama2-7b"), attention="mha"),
    "llama2-13b": InferenceModel(spec=get_model("llama2-13b"), attention="mha"),
    "llama2-70b": InferenceModel(spec=get_model("llama2-70b"), attention="gqa"),
    "mixtral-8x7b": InferenceModel(spec=get_model("mixtral-8x7b"), attention="gqa"),
    "deepseek-v3-like": InferenceModel(spec=_DEEPSEEK_V3, attention="mla", kv_lora_rank=512, rope_head_dim=64),
}


def get_inference_model(name: str, **overrides: object) -> InferenceModel:
    """Serving preset ``name`` (case-insensitive) with ModelSpec field ``overrides``."""
    key = name.lower()
    if key not in PRESETS:
        raise CosimInputError("workload.model", f"unknown inference model {name!r}", f"choose among {', '.join(PRESETS)}")
    model = PRESETS[key]
    return model.with_overrides(**overrides) if overrides else model
