"""Compute time of one serving step on one GPU, from the calibrated per-operator model (cosim.workload.compute).

A replica runs a model with tensor parallelism t, pipeline parallelism p (the layers split evenly over the
stages) and expert parallelism e (1, or t: the experts of a MoE layer spread over the TP ranks of a stage).
A step processes ``n`` tokens on every GPU of a stage: a prefill step the prompt tokens of its batch, a
decode step one token per running sequence. Per layer and GPU, bf16 (h hidden, f FFN, kv = kv_heads·d,
g = 2 for SwiGLU, V vocabulary, E experts, k top-k), the kernels are those of the training model's forward
(cosim.workload.kernels) except attention::

    attn  RMSNorm(n·h) · QKV GEMM (n, (h+2kv)/t, h) · rotary(n·(h+kv)/t) · attention · O-proj GEMM
          (n, h, h/t) · residual add(n·h)
    mlp   RMSNorm · up GEMM (n, g·f/t, h) · SwiGLU(n·f/t) · down GEMM (n, h, f/t) · residual add
    moe   RMSNorm · router GEMM (n, E, h) · permute(n·k·h) · E/e grouped GEMMs of n·k·e/E tokens (up,
          SwiGLU, down) · unpermute · residual add

    prefill attention: causal flash attention of each request's p_i queries over its own p_i keys
                       (heads/t heads), summed over the batch: FLOPs ∝ Σ p_i²
    decode attention:  memory-bound (FlashDecoding): one HBM read of every running sequence's cached KV
                       on the GPU, Σ c_i · (KV bytes per token per layer per rank), c_i its context

The first stage adds the embedding lookup (n·h), the last the final norm and the logits GEMM of one token
per sequence (b, V/t, h): only the last position's logits sample the next token. A step of a stage takes
layers_per_stage × (attn + mlp or moe) plus those; the weights read by the small-M GEMMs of decode are in
the GEMM model's memory roofline. Time per op in whole ns (cosim.workload.compute.kernels_ns).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from cosim.errors import CosimInputError
from cosim.workload.compute import Gemm, Stream, attention_efficiency, kernel_ns
from cosim.workload.hardware import HardwareSpec
from cosim.workload.inference.model import InferenceModel
from cosim.workload.kernels import (
    ADD_FWD,
    EMBED_FWD,
    NORM_FWD,
    PERMUTE,
    ROPE_FWD,
    _act_bytes,
)


def stage_layers(num_layers: int, pp: int) -> np.ndarray:
    """int64 [pp + 1]: stage s holds layers ``bounds[s]:bounds[s+1]`` (an even split, earlier stages one
    more when pp does not divide the layers)."""
    return np.array([s * num_layers // pp for s in range(pp + 1)], np.int64)


def check_parallelism(model: InferenceModel, tp: int, pp: int, ep: int, where: str) -> None:
    """A CosimInputError unless (tp, pp, ep) can run ``model``: tp divides the heads, pp <= layers, ep is 1
    or tp (experts over the TP ranks of a stage) and divides the experts, ep > 1 only for a MoE."""
    m = model.spec
    for name, value in (("tp", tp), ("pp", pp), ("ep", ep)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise CosimInputError(f"{where}_{name}", f"must be an integer >= 1, got {value!r}")
    if m.num_heads % tp:
        raise CosimInputError(f"{where}_tp", f"must divide the {m.num_heads} attention heads, got {tp}")
    if model.attention != "mla" and m.num_kv_heads % tp and tp % m.num_kv_heads:
        raise CosimInputError(f"{where}_tp", f"must divide the {m.num_kv_heads} KV heads or be a multiple of "
                              f"them, got {tp}")
    if pp > m.num_layers:
        raise CosimInputError(f"{where}_pp", f"{pp} stages for {m.num_layers} layers", "use pp <= num_layers")
    if ep > 1 and not m.is_moe:
        raise CosimInputError(f"{where}_ep", f"{m.name} is dense, it has no experts to spread", "use ep = 1")
    if ep not in (1, tp):
        raise CosimInputError(f"{where}_ep", f"experts spread over the TP ranks of a stage: ep is 1 or tp "
                              f"({tp}), got {ep}")
    if m.is_moe and m.num_experts % ep:
        raise CosimInputError(f"{where}_ep", f"must divide the {m.num_experts} experts, got {ep}")


@dataclass(frozen=True, slots=True, kw_only=True)
class StepCompute:
    """Compute time in ns per GPU of the parts of a step (module docstring) of one replica's shape."""

    model: InferenceModel
    hardware: HardwareSpec
    tp: int = 1
    pp: int = 1
    ep: int = 1

    def _ns(self, kernels) -> int:
        return max(1, round(sum(kernel_ns(self.hardware, k) for k in kernels)))

    def _attention_rest(self, n: int) -> list:
        m, t = self.model.spec, self.tp
        h, kv = m.hidden_size, m.kv_size
        return [Stream("norm", NORM_FWD * n * h), Gemm(n, (h + 2 * kv) // t, h),
                Stream("rope", ROPE_FWD * n * (h + kv) // t), Gemm(n, h, h // t),
                Stream("elementwise", ADD_FWD * n * h)]

    def prefill_attention_ns(self, prompt_tokens) -> int:
        """The attention part of one layer for a batch of prompts of ``prompt_tokens`` (sequence of ints)."""
        m, hw = self.model.spec, self.hardware
        p = np.asarray(prompt_tokens, np.float64)
        heads = m.num_heads // self.tp
        flops = 4.0 * p * p * heads * m.head_dim * 0.5  # causal, per prompt (each attends over its own keys)
        core = float(np.sum(flops / attention_efficiency(hw, p))) * 1e9 / hw.clocked_flops_per_s + hw.gemm_launch_ns
        return max(1, round(core + sum(kernel_ns(hw, k) for k in self._attention_rest(int(p.sum())))))

    def decode_attention_ns(self, sequences: int, context_tokens: int) -> int:
        """The attention part of one layer for a decode batch of ``sequences`` holding ``context_tokens``
        cached tokens in all."""
        per_token = self.model.kv_bytes_per_token_per_rank(self.tp) // self.model.spec.num_layers
        read = Stream("elementwise", int(context_tokens) * per_token)
        return self._ns([read, *self._attention_rest(int(sequences))])

    def mlp_ns(self, n: int) -> int:
        """The MLP (dense) or router + experts (MoE) part of one layer for ``n`` tokens."""
        m, t = self.model.spec, self.tp
        h, f = m.hidden_size, m.ffn_hidden_size
        g = 2 if m.gated_mlp else 1
        norm, add = Stream("norm", NORM_FWD * n * h), Stream("elementwise", ADD_FWD * n * h)
        if not m.is_moe:
            return self._ns([norm, Gemm(n, g * f // t, h), Stream("activation", _act_bytes(m.gated_mlp, False)
                                                                   * n * f // t), Gemm(n, h, f // t), add])
        return self.router_ns(n) + self.experts_ns(n)

    def router_ns(self, n: int) -> int:
        """MoE: the norm, router GEMM and dispatch permutation of ``n`` tokens (before the EP dispatch)."""
        m = self.model.spec
        h = m.hidden_size
        return self._ns([Stream("norm", NORM_FWD * n * h), Gemm(n, m.num_experts, h),
                         Stream("elementwise", PERMUTE * n * m.top_k * h)])

    def experts_ns(self, n: int) -> int:
        """MoE: the local experts' grouped GEMMs, activation, unpermutation and residual add (after the
        dispatch). With ep > 1 a rank holds E/ep whole experts and gets n·k·ep/E tokens for each (tokens
        balanced); without EP every rank holds a 1/tp slice of every expert."""
        m = self.model.spec
        h, g = m.hidden_size, 2 if m.gated_mlp else 1
        f_rank = m.ffn_hidden_size if self.ep > 1 else m.ffn_hidden_size // self.tp
        local = m.num_experts // self.ep
        tokens = max(1, -(-n * m.top_k * self.ep // m.num_experts))
        return self._ns([Gemm(tokens, g * f_rank, h, local),
                         Stream("activation", _act_bytes(m.gated_mlp, False) * tokens * local * f_rank),
                         Gemm(tokens, h, f_rank, local), Stream("elementwise", PERMUTE * n * m.top_k * h),
                         Stream("elementwise", ADD_FWD * n * h)])

    def embedding_ns(self, n: int) -> int:
        """Embedding lookup of ``n`` tokens (first stage)."""
        return self._ns([Stream("embedding", EMBED_FWD * n * self.model.spec.hidden_size)])

    def logits_ns(self, sequences: int) -> int:
        """Final norm and logits of one token per sequence (last stage)."""
        m = self.model.spec
        return self._ns([Stream("norm", NORM_FWD * sequences * m.hidden_size),
                         Gemm(sequences, m.vocab_size // self.tp, m.hidden_size)])

    def prefill_ns(self, prompt_tokens) -> int:
        """Compute of a whole prefill step through every stage, ns (its compute-only critical path)."""
        return _prefill_ns(self, tuple(int(x) for x in np.asarray(prompt_tokens).ravel()))

    def decode_ns(self, context_tokens) -> int:
        """Compute of a whole decode step through every stage, ns (it depends on the batch size and the
        summed context only)."""
        c = np.asarray(context_tokens, np.int64)
        return _decode_ns(self, int(c.size), int(c.sum()))


@functools.lru_cache(maxsize=1 << 16)
def _prefill_ns(cost: StepCompute, prompts: tuple[int, ...]) -> int:
    n = sum(prompts)
    per_layer = cost.prefill_attention_ns(prompts) + cost.mlp_ns(n)
    return cost.model.spec.num_layers * per_layer + cost.embedding_ns(n) + cost.logits_ns(len(prompts))


@functools.lru_cache(maxsize=1 << 16)
def _decode_ns(cost: StepCompute, sequences: int, context_tokens: int) -> int:
    per_layer = cost.decode_attention_ns(sequences, context_tokens) + cost.mlp_ns(sequences)
    return cost.model.spec.num_layers * per_layer + cost.embedding_ns(sequences) + cost.logits_ns(sequences)
