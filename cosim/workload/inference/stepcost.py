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

Models with the newer fields (the ``deepseek-v3`` preset) change three things, each absent from the
classic presets: the first ``first_dense_layers`` layers have a dense MLP of ffn_hidden_size, a MoE layer's
experts have ``expert_ffn_size`` and its ``num_shared_experts`` run on every token, and an MLA model
(``ModelSpec.is_mla``) projects through its latents (cosim.workload.kernels' MLA GEMMs, at the model's
``gemm_precision``) and decodes from the latent cache with the key and value up-projections absorbed into
the query and output (FlashMLA): per layer a read of the c cached latents and 2·c·heads·(2·r_kv + d_rope)
FLOPs, whichever takes longer.

Expert parallelism across the GPUs of a replica (ep > tp, which needs tp = pp = 1: DeepSeek's "routed
expert EP, MLA and shared expert DP"): each of the ep GPUs runs attention, the router and the shared expert
for its own share of the batch (:func:`split_prompts`, :func:`split_sequences`) and holds
``expert_slots / ep`` routed experts (slots = experts + redundant copies); the step is the slowest GPU's.
The analytic cost assumes balanced routing (every GPU receives n·k/ep token copies); the step trace
(cosim.workload.inference.dpep) times each GPU's experts for the copies its routing really sends it.
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
    _latent_norms,
    _qkv,
    _rope,
    _Shapes,
)


def stage_layers(num_layers: int, pp: int) -> np.ndarray:
    """int64 [pp + 1]: stage s holds layers ``bounds[s]:bounds[s+1]`` (an even split, earlier stages one
    more when pp does not divide the layers)."""
    return np.array([s * num_layers // pp for s in range(pp + 1)], np.int64)


def check_parallelism(model: InferenceModel, tp: int, pp: int, ep: int, where: str, *,
                      redundant_experts: int = 0) -> None:
    """A CosimInputError unless (tp, pp, ep) can run ``model``: tp divides the heads, pp <= layers, ep is 1,
    tp (experts over the TP ranks of a stage) or, with tp = pp = 1, any size dividing the expert slots
    (experts + ``redundant_experts``; attention data-parallel over the ep GPUs), ep > 1 only for a MoE."""
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
    if ep > tp:
        if tp != 1 or pp != 1:
            raise CosimInputError(f"{where}_ep", f"ep={ep} > tp={tp} spreads the experts over GPUs that each "
                                  "serve their own batch (attention data-parallel), which needs tp = 1 and pp = 1",
                                  f"set {where}_tp = 1 and {where}_pp = 1, or ep = 1 or tp")
        slots = m.num_experts + redundant_experts
        if slots % ep:
            raise CosimInputError(f"{where}_ep", f"must divide the {slots} expert slots ({m.num_experts} experts "
                                  f"+ {redundant_experts} redundant), got {ep}",
                                  "choose ep dividing them, or set workload.redundant_experts so that it does")
        return
    if ep not in (1, tp):
        raise CosimInputError(f"{where}_ep", f"experts spread over the TP ranks of a stage: ep is 1 or tp "
                              f"({tp}), got {ep}")
    if m.is_moe and m.num_experts % ep:
        raise CosimInputError(f"{where}_ep", f"must divide the {m.num_experts} experts, got {ep}")


def split_prompts(prompt_tokens, gpus: int) -> np.ndarray:
    """int64 per prompt: the GPU of an attention data-parallel group that prefills it; each prompt in turn
    goes to the GPU holding the fewest prompt tokens so far (ties: the lower GPU)."""
    load = np.zeros(gpus, np.int64)
    out = np.empty(len(prompt_tokens), np.int64)
    for i, p in enumerate(np.asarray(prompt_tokens, np.int64).tolist()):
        g = int(np.argmin(load))
        out[i] = g
        load[g] += p
    return out


def split_sequences(count: int, gpus: int) -> np.ndarray:
    """int64 per sequence of a decode batch: its GPU when the analytic pass spreads ``count`` sequences
    evenly (round robin) over an attention data-parallel group."""
    return np.arange(count, dtype=np.int64) % gpus


@dataclass(frozen=True, slots=True, kw_only=True)
class StepCompute:
    """Compute time in ns per GPU of the parts of a step (module docstring) of one replica's shape."""

    model: InferenceModel
    hardware: HardwareSpec
    tp: int = 1
    pp: int = 1
    ep: int = 1
    redundant_experts: int = 0  #: with ep > tp: redundant routed-expert copies beside the experts

    @property
    def data_parallel(self) -> bool:
        """True when the experts spread over ep > tp GPUs that each serve their own batch."""
        return self.ep > self.tp

    @property
    def local_experts(self) -> int:
        """Routed experts (slots) one GPU holds."""
        m = self.model.spec
        return (m.num_experts + (self.redundant_experts if self.data_parallel else 0)) // self.ep

    def _ns(self, kernels) -> int:
        return max(1, round(sum(kernel_ns(self.hardware, k) for k in kernels)))

    def _mla_shapes(self, n: int) -> _Shapes:
        m, t = self.model.spec, self.tp
        return _Shapes(n=n, n_sp=n, t=t, h=m.hidden_size, kv=m.kv_size, f=m.ffn_hidden_size, gated=m.gated_mlp,
                       heads=m.num_heads // t, d=(m.head_dim + m.v_head_dim) // 2, s_keys=1, q=m.q_size,
                       o_in=m.attn_out_size, precision=m.gemm_precision, b=1, m=m,
                       rope=m.num_heads * m.qk_rope_head_dim // t + m.qk_rope_head_dim)

    def _attention_rest(self, n: int) -> list:
        m, t = self.model.spec, self.tp
        h, kv = m.hidden_size, m.kv_size
        if m.is_mla:
            x = self._mla_shapes(n)
            return [Stream("norm", NORM_FWD * n * h), *_qkv(x), *_latent_norms(x, False), *_rope(x, False),
                    Gemm(n, h, m.attn_out_size // t, 1, m.gemm_precision), Stream("elementwise", ADD_FWD * n * h)]
        return [Stream("norm", NORM_FWD * n * h), Gemm(n, (h + 2 * kv) // t, h),
                Stream("rope", ROPE_FWD * n * (h + kv) // t), Gemm(n, h, h // t),
                Stream("elementwise", ADD_FWD * n * h)]

    def prefill_attention_ns(self, prompt_tokens, cached_tokens=None) -> int:
        """The attention part of one layer for a batch of prompts of ``prompt_tokens`` (sequence of ints);
        ``cached_tokens``: per prompt, keys of earlier tokens of its request whose K and V exist already
        (the second part of a prompt split in two), which its tokens attend to as well."""
        m, hw = self.model.spec, self.hardware
        p = np.asarray(prompt_tokens, np.float64)
        if p.size == 0:
            return 0
        heads = m.num_heads // self.tp
        d = (m.head_dim + m.v_head_dim) / 2 if m.is_mla else m.head_dim
        if cached_tokens is None:
            flops = 4.0 * p * p * heads * d * 0.5  # causal, per prompt (each attends over its own keys)
            keys = p
        else:
            c = np.asarray(cached_tokens, np.float64)
            flops = 4.0 * p * (c + 0.5 * p) * heads * d
            keys = p + c
        core = float(np.sum(flops / attention_efficiency(hw, keys))) * 1e9 / hw.clocked_flops_per_s \
            + hw.gemm_launch_ns
        return max(1, round(core + sum(kernel_ns(hw, k) for k in self._attention_rest(int(p.sum())))))

    def decode_attention_ns(self, sequences: int, context_tokens: int) -> int:
        """The attention part of one layer for a decode batch of ``sequences`` holding ``context_tokens``
        cached tokens in all."""
        if sequences == 0:
            return 0
        m, hw = self.model.spec, self.hardware
        per_token = self.model.kv_bytes_per_token_per_rank(self.tp) // m.num_layers
        read = Stream("elementwise", int(context_tokens) * per_token)
        if not m.is_mla:
            return self._ns([read, *self._attention_rest(int(sequences))])
        # FlashMLA: scores over the latent and the rotary key, values from the latent, for every head
        heads, r = m.num_heads // self.tp, m.kv_lora_rank
        flops = 2.0 * int(context_tokens) * heads * (2 * r + m.qk_rope_head_dim)
        keys = max(1.0, context_tokens / sequences)
        compute = flops * 1e9 / (hw.clocked_flops_per_s * float(attention_efficiency(hw, keys)))
        core = max(kernel_ns(hw, read), compute + hw.gemm_launch_ns)
        absorb = [Gemm(sequences, r, m.qk_nope_head_dim, heads, m.gemm_precision),
                  Gemm(sequences, m.v_head_dim, r, heads, m.gemm_precision)]
        return max(1, round(core + sum(kernel_ns(hw, k) for k in [*absorb, *self._attention_rest(sequences)])))

    def mlp_ns(self, n: int, layer: int | None = None) -> int:
        """The MLP (dense) or router + experts (MoE) part of layer ``layer`` (a MoE layer when None) for
        ``n`` tokens."""
        m = self.model.spec
        if not m.is_moe or (layer is not None and not m.is_moe_layer(layer)):
            return self.dense_mlp_ns(n)
        return self.router_ns(n) + self.experts_ns(n)

    def dense_mlp_ns(self, n: int) -> int:
        """A dense MLP of ffn_hidden_size (over the TP ranks) for ``n`` tokens."""
        if n == 0:
            return 0
        m, t = self.model.spec, self.tp
        h, f = m.hidden_size, m.ffn_hidden_size
        g = 2 if m.gated_mlp else 1
        p = m.gemm_precision
        norm, add = Stream("norm", NORM_FWD * n * h), Stream("elementwise", ADD_FWD * n * h)
        return self._ns([norm, Gemm(n, g * f // t, h, 1, p), Stream("activation", _act_bytes(m.gated_mlp, False)
                                                                    * n * f // t), Gemm(n, h, f // t, 1, p), add])

    def shared_experts_ns(self, n: int) -> int:
        """The shared experts of a MoE layer for ``n`` tokens (0 without them)."""
        m = self.model.spec
        if not m.num_shared_experts or n == 0:
            return 0
        f = m.expert_ffn_size * m.num_shared_experts // (1 if self.data_parallel else self.tp)
        g = 2 if m.gated_mlp else 1
        return self._ns([Gemm(n, g * f, m.hidden_size, 1, m.gemm_precision),
                         Stream("activation", _act_bytes(m.gated_mlp, False) * n * f),
                         Gemm(n, m.hidden_size, f, 1, m.gemm_precision)])

    def routed_experts_ns(self, copies: int, n: int) -> int:
        """With ep > tp: a GPU's routed experts for the ``copies`` token copies dispatched to it (spread evenly
        over its local experts), then the unpermutation and residual add of its own ``n`` tokens."""
        m = self.model.spec
        h, g, f = m.hidden_size, 2 if m.gated_mlp else 1, m.expert_ffn_size
        local, p = self.local_experts, m.gemm_precision
        tail = [Stream("elementwise", PERMUTE * n * m.top_k * h), Stream("elementwise", ADD_FWD * n * h)] if n else []
        if copies == 0:
            return self._ns(tail) if tail else 0
        tokens = -(-copies // local)
        return self._ns([Gemm(tokens, g * f, h, local, p),
                         Stream("activation", _act_bytes(m.gated_mlp, False) * tokens * local * f),
                         Gemm(tokens, h, f, local, p), *tail])

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
        f_rank = m.expert_ffn_size if self.ep > 1 else m.expert_ffn_size // self.tp
        local = m.num_experts // self.ep
        tokens = max(1, -(-n * m.top_k * self.ep // m.num_experts))
        routed = self._ns([Gemm(tokens, g * f_rank, h, local),
                           Stream("activation", _act_bytes(m.gated_mlp, False) * tokens * local * f_rank),
                           Gemm(tokens, h, f_rank, local), Stream("elementwise", PERMUTE * n * m.top_k * h),
                           Stream("elementwise", ADD_FWD * n * h)])
        return routed + self.shared_experts_ns(n)

    def embedding_ns(self, n: int) -> int:
        """Embedding lookup of ``n`` tokens (first stage)."""
        if n == 0:
            return 0
        return self._ns([Stream("embedding", EMBED_FWD * n * self.model.spec.hidden_size)])

    def logits_ns(self, sequences: int) -> int:
        """Final norm and logits of one token per sequence (last stage)."""
        m = self.model.spec
        if sequences == 0:
            return 0
        return self._ns([Stream("norm", NORM_FWD * sequences * m.hidden_size),
                         Gemm(sequences, m.vocab_size // self.tp, m.hidden_size)])

    def prefill_ns(self, prompt_tokens) -> int:
        """Compute of a whole prefill step through every stage, ns (its compute-only critical path)."""
        prompts = tuple(int(x) for x in np.asarray(prompt_tokens).ravel())
        if self.data_parallel:
            gpu = split_prompts(prompts, self.ep)
            return self._dp_step_ns([tuple(p for p, g in zip(prompts, gpu) if g == k) for k in range(self.ep)],
                                    None)
        return _prefill_ns(self, prompts)

    def decode_ns(self, context_tokens) -> int:
        """Compute of a whole decode step through every stage, ns (it depends on the batch size and the
        summed context only)."""
        c = np.asarray(context_tokens, np.int64)
        if self.data_parallel:
            gpu = split_sequences(c.size, self.ep)
            return self._dp_step_ns(None, [(int(np.count_nonzero(gpu == k)), int(c[gpu == k].sum()))
                                           for k in range(self.ep)])
        return _decode_ns(self, int(c.size), int(c.sum()))

    def dp_layer_ns(self, layer: int, attn_ns: int, n: int, copies: int) -> tuple[int, int, int]:
        """With ep > tp, one GPU's layer ``layer`` holding ``n`` tokens of its own and receiving ``copies``
        routed token copies: (attention, the dense MLP or router + shared experts, routed experts) in ns."""
        if not self.model.spec.is_moe_layer(layer):
            return attn_ns, self.dense_mlp_ns(n), 0
        return attn_ns, (self.router_ns(n) if n else 0) + self.shared_experts_ns(n), self.routed_experts_ns(copies, n)

    def _dp_step_ns(self, prompts_of_gpu, decode_of_gpu) -> int:
        """The slowest GPU's step under balanced routing (module docstring)."""
        key = (tuple(prompts_of_gpu) if prompts_of_gpu is not None else None,
               tuple(decode_of_gpu) if decode_of_gpu is not None else None)
        return _dp_step_ns(self, key)


@functools.lru_cache(maxsize=1 << 16)
def _prefill_ns(cost: StepCompute, prompts: tuple[int, ...]) -> int:
    n = sum(prompts)
    m = cost.model.spec
    attn = cost.prefill_attention_ns(prompts)
    dense = m.first_dense_layers if m.is_moe else 0
    layers = (m.num_layers - dense) * (attn + cost.mlp_ns(n))
    if dense:
        layers += dense * (attn + cost.dense_mlp_ns(n))
    return layers + cost.embedding_ns(n) + cost.logits_ns(len(prompts))


@functools.lru_cache(maxsize=1 << 16)
def _decode_ns(cost: StepCompute, sequences: int, context_tokens: int) -> int:
    m = cost.model.spec
    attn = cost.decode_attention_ns(sequences, context_tokens)
    dense = m.first_dense_layers if m.is_moe else 0
    layers = (m.num_layers - dense) * (attn + cost.mlp_ns(sequences))
    if dense:
        layers += dense * (attn + cost.dense_mlp_ns(sequences))
    return layers + cost.embedding_ns(sequences) + cost.logits_ns(sequences)


@functools.lru_cache(maxsize=1 << 14)
def _dp_step_ns(cost: StepCompute, key) -> int:
    prompts_of_gpu, decode_of_gpu = key
    m = cost.model.spec
    if prompts_of_gpu is not None:
        tokens = [sum(p) for p in prompts_of_gpu]
        attn = [cost.prefill_attention_ns(p) for p in prompts_of_gpu]
        seqs = [len(p) for p in prompts_of_gpu]
    else:
        tokens = seqs = [s for s, _ in decode_of_gpu]
        attn = [cost.decode_attention_ns(s, c) for s, c in decode_of_gpu]
    copies = -(-sum(tokens) * m.top_k // cost.ep)  # balanced routing
    total = 0
    for layer in range(m.num_layers):
        total += max(sum(cost.dp_layer_ns(layer, a, n, copies)) for a, n in zip(attn, tokens))
    return total + max(cost.embedding_ns(n) for n in tokens) + max(cost.logits_ns(s) for s in seqs)
