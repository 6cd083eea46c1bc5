"""The kernels inside each compute op of the training trace, from the model and the parallelism.

One rank, one micro-batch, bf16 activations. ``n = b·s/cp`` local tokens, t = tp, ``n_sp = n/t`` with
sequence parallelism (norms and residual adds then run on the sequence shard) else n; h hidden, f FFN,
kv = kv_heads·d, V vocabulary, E experts, k = top_k. Forward GEMMs ``(M, N, K)``::

    qkv     (n, (h + 2·kv)/t, h)      oproj  (n, h, h/t)
    mlp up  (n, g·f/t, h)             down   (n, h, f/t)       g = 2 for SwiGLU (gate and up), else 1
    router  (n_r, E, h)               experts: E/ep grouped GEMMs of n·k·ep/E tokens, up and down as mlp
    logits  (n, V/t, h)

Backward: input gradient ``(M, K, N)`` and weight gradient ``(K, N, M)`` of each (``Gemm.dgrad``,
``Gemm.wgrad``). Attention: causal flash attention of n queries over s keys (CP: s/cp per ring step; the
second token half of a sequence, two-micro-batch overlap with b = 1: its s/2 queries over the first half's
s/2 keys whole and their own s/2 causally).

Memory-bound bytes per element (reads + writes), forward / backward:

=================  ===================  ========  ====================================================
operator           elements             fwd, bwd  kind (fitted efficiency)
=================  ===================  ========  ====================================================
RMSNorm/LayerNorm  n_sp·h               4, 6      norm        (read x, write y / read x, dy, write dx)
rotary embedding   n·(h + kv)/t         4, 4      rope        (Q and K in place)
SwiGLU / GELU      n·f/t                6/4, 10/6 activation  (gate, up → out / gate, up, dy → dgate, dup)
residual add       n_sp·h               6, 6      elementwise (two reads, one write; backward sums grads)
embedding lookup   n·h                  4, 10     embedding   (gather rows / fp32 scatter-add into grads)
cross-entropy      n·V/t                14, 8     elementwise (fp32 vocab-parallel softmax passes)
MoE permutation    n·k·h, ×2 (both)     4, 4      elementwise (dispatch permute and combine unpermute)
Adam step          parameters           32        elementwise (``sizes.OPTIMIZER_BYTES_PER_PARAM``)
gradient norm      parameters           4         elementwise (read the fp32 grads once for clipping)
loss-scale check   parameters           8         elementwise (fp16 only: unscale in place, inf/NaN check)
=================  ===================  ========  ====================================================

The software stack of the model spec (cosim.workload.model) changes some of them:

- rotary embedding only with ``position_embedding = "rope"``; learned positions add their rows to the
  token embedding instead (6 B per n·h element: read both, write the sum);
- ``hidden_dropout`` > 0 turns each residual add into a dropout-add that also writes (forward) and reads
  (backward) a one-byte mask: 7 B per element each way, and adds a dropout to the embedding (5 B);
- ``attention_kernel = "unfused"`` (Megatron-LM 2021) replaces the flash-attention kernel by, per
  sequence and head (count = b·heads/t batched GEMMs, q = s/cp queries, k keys):

  ======================  ==========================================  ==============================
  forward                 backward                                    kind
  ======================  ==========================================  ==============================
  scores Q·Kᵀ (q, k, d)   dQ = dS·K (q, d, k), dK = dSᵀ·Q (k, d, q)   batched GEMM
  scale-mask-softmax      softmax backward                            elementwise, 4 / 6 B per score
  dropout (if > 0)        dropout backward                            elementwise, 5 / 5 B per score
  context P·V (q, d, k)   dP = dO·Vᵀ (q, k, d), dV = Pᵀ·dO (k, d, q)  batched GEMM
  ======================  ==========================================  ==============================

  the b·heads/t·q·k scores are fp16 in HBM and the causal mask saves nothing (the full matrix is computed).

Newer shapes (cosim.workload.model): an explicit head size makes the query q = heads·d wide (qkv GEMM
``(n, (q + 2·kv)/t, h)``, oproj ``(n, h, q/t)``, rotary on n·(q + kv)/t). Multi-head latent attention
replaces the QKV GEMM by its four projections, the down ones replicated over TP (H heads, r_q, r_kv ranks,
d_n, d_r, d_v head sizes)::

    q down  (n, r_q, h)               q up   (n, H·(d_n + d_r)/t, r_q)     + RMSNorm of the n·r_q latent
    kv down (n, r_kv + d_r, h)        kv up  (n, H·(d_n + d_v)/t, r_kv)    + RMSNorm of the n·r_kv latent
    oproj   (n, h, H·d_v/t)           rotary on n·(H·d_r/t + d_r)

with flash attention of head size (d_n + d_r + d_v)/2 (the mean of its Q·Kᵀ and P·V widths). MoE layers
time the routed experts of size f_e = expert FFN, the shared experts as one TP-split MLP of
``shared·f_e`` on all n tokens, and the dense leading layers of an MoE model as its dense MLP.

FP8 training (``gemm_precision`` "fp8-tensor" or "fp8-block"): the GEMMs of the linear layers (QKV or the
MLA projections, output projection, MLP, routed and shared experts; forward, input and weight gradients)
are FP8 GEMMs (cosim.workload.compute); the router, attention, logits and memory-bound operators stay
bf16, as in DeepSeek-V3's recipe (§3.3).

Left out as negligible: biases (fused into GEMM epilogues), the router's softmax/top-k over n·E values,
norm weight gradients.
"""

from __future__ import annotations

from dataclasses import dataclass

from cosim.workload.compute import Attention, Gemm, Kernel, Stream
from cosim.workload.model import ModelSpec
from cosim.workload.parallelism import ParallelismSpec

# bytes moved per element, the table above
NORM_FWD, NORM_BWD = 4, 6
ROPE_FWD = ROPE_BWD = 4
ADD_FWD = ADD_BWD = 6
EMBED_FWD, EMBED_BWD = 4, 10
LOSS_FWD, LOSS_BWD = 14, 8
PERMUTE = 4
DROPOUT_ADD = 7  #: residual add with a dropout mask (one byte per element), each way
POSITION_ADD = 6  #: learned position rows added to the token embedding
DROPOUT = 5  #: standalone dropout: read, write, one-byte mask
SOFTMAX_FWD, SOFTMAX_BWD = 4, 6
GRAD_NORM_BYTES_PER_PARAM = 4  #: one read of the fp32 gradients
LOSS_SCALE_BYTES_PER_PARAM = 8  #: unscale the fp32 gradients in place (read + write)


def _act_bytes(gated: bool, backward: bool) -> int:
    if gated:
        return 10 if backward else 6
    return 6 if backward else 4


@dataclass(frozen=True, slots=True)
class _Shapes:
    n: int  # local tokens b·s/cp
    n_sp: int  # tokens of norms and residual adds (n/t with SP)
    t: int
    h: int
    kv: int
    f: int
    gated: bool
    heads: int  # query heads per TP rank
    d: int  # head size of the attention kernel
    s_keys: int  # keys per attention kernel (s, or s/cp per ring step)
    q: int  # query width heads·d (h for the classic transformer)
    o_in: int  # attention output width entering the output projection
    rope: int  # elements the rotary embedding touches per token on this rank
    precision: str  # of the linear layers' GEMMs
    b: int  # sequences per micro-batch
    m: ModelSpec
    past_keys: int = 0  # keys before the queries' own, seen whole (second token half of a sequence)


def _shapes(m: ModelSpec, par: ParallelismSpec, past_keys: int = 0) -> _Shapes:
    n = par.micro_batch_size * m.seq_length // par.cp
    if m.is_mla:
        d = (m.head_dim + m.v_head_dim) // 2
        rope = m.num_heads * m.qk_rope_head_dim // par.tp + m.qk_rope_head_dim
    else:
        d, rope = m.head_dim, (m.q_size + m.kv_size) // par.tp
    return _Shapes(n=n, n_sp=n // par.tp if par.sp else n, t=par.tp, h=m.hidden_size, kv=m.kv_size,
                   f=m.ffn_hidden_size, gated=m.gated_mlp, heads=m.num_heads // par.tp, d=d,
                   s_keys=m.seq_length // par.cp, b=par.micro_batch_size, m=m, q=m.q_size, o_in=m.attn_out_size,
                   rope=rope, precision=m.gemm_precision, past_keys=past_keys)


def _norm(x: _Shapes, backward: bool) -> Stream:
    return Stream("norm", (NORM_BWD if backward else NORM_FWD) * x.n_sp * x.h)


def _add(x: _Shapes) -> Stream:
    per_element = DROPOUT_ADD if x.m.hidden_dropout > 0 else ADD_FWD
    return Stream("elementwise", per_element * x.n_sp * x.h)


def _rope(x: _Shapes, backward: bool) -> tuple[Kernel, ...]:
    if x.m.position_embedding != "rope":
        return ()
    elems = x.n * x.rope if x.m.is_mla else x.n * (x.q + x.kv) // x.t
    return (Stream("rope", (ROPE_BWD if backward else ROPE_FWD) * elems),)


def _qkv(x: _Shapes) -> tuple[Gemm, ...]:
    """The projections producing Q, K and V (one fused GEMM, or MLA's down and up projections)."""
    m = x.m
    p = x.precision
    if not m.is_mla:
        return (Gemm(x.n, (x.q + 2 * x.kv) // x.t, x.h, 1, p),)
    up_kv = Gemm(x.n, m.num_heads * (m.qk_nope_head_dim + m.v_head_dim) // x.t, m.kv_lora_rank, 1, p)
    down_kv = Gemm(x.n, m.kv_lora_rank + m.qk_rope_head_dim, x.h, 1, p)
    if not m.q_lora_rank:
        return (Gemm(x.n, m.num_heads * m.head_dim // x.t, x.h, 1, p), down_kv, up_kv)
    return (Gemm(x.n, m.q_lora_rank, x.h, 1, p), Gemm(x.n, m.num_heads * m.head_dim // x.t, m.q_lora_rank, 1, p),
            down_kv, up_kv)


def _latent_norms(x: _Shapes, backward: bool) -> tuple[Kernel, ...]:
    """MLA's RMSNorms of the query and KV latents (nothing for other attention)."""
    if not x.m.is_mla:
        return ()
    per = NORM_BWD if backward else NORM_FWD
    return (Stream("norm", per * x.n * (x.m.q_lora_rank + x.m.kv_lora_rank)),)


def _oproj(x: _Shapes) -> Gemm:
    return Gemm(x.n, x.h, x.o_in // x.t, 1, x.precision)


def _attention(x: _Shapes, *, backward: bool) -> tuple[Kernel, ...]:
    if x.m.attention_kernel == "flash":
        return (Attention(queries=x.n, keys=x.s_keys, heads=x.heads, head_dim=x.d, causal=True,
                          backward=backward, past_keys=x.past_keys),)
    q, k, d, count = x.n // x.b, x.s_keys + x.past_keys, x.d, x.b * x.heads
    scores = count * q * k
    dropout = (Stream("elementwise", DROPOUT * scores),) if x.m.attention_dropout > 0 else ()
    if not backward:
        return (Gemm(q, k, d, count), Stream("elementwise", SOFTMAX_FWD * scores), *dropout, Gemm(q, d, k, count))
    return (Gemm(q, k, d, count), Gemm(k, d, q, count), *dropout, Stream("elementwise", SOFTMAX_BWD * scores),
            Gemm(q, d, k, count), Gemm(k, d, q, count))


def _mlp_gemms(x: _Shapes, tokens: int, count: int = 1, f: int | None = None,
               t: int | None = None) -> tuple[Gemm, Gemm]:
    f = x.f if f is None else f
    t = x.t if t is None else t
    up = Gemm(tokens, (2 if x.gated else 1) * f // t, x.h, count, x.precision)
    down = Gemm(tokens, x.h, f // t, count, x.precision)
    return up, down


def block_kernels(m: ModelSpec, par: ParallelismSpec, past_keys: int = 0) -> dict[str, tuple[Kernel, ...]]:
    """Kernels of each kind of compute op the builder emits, keyed by op kind (the label's last part);
    ``past_keys``: keys before each sequence's own s that its queries also see whole (the second token half
    of a sequence under two-micro-batch overlap, ``m`` then holding that half's s/2 tokens).

    Keys: ``attn``, ``attn_dgrad``, ``attn_wgrad`` (cp = 1); ``qkv``, ``attn_core_chunk``, ``oproj``,
    ``oproj_dgrad``, ``attn_core_bwd_chunk``, ``qkv_dgrad`` (ring attention, cp > 1); ``mlp``, ``mlp_dgrad``,
    ``mlp_wgrad`` (dense); ``router``, ``experts``, ``experts_dgrad``, ``router_bwd``, ``experts_wgrad``
    (MoE); ``lookup``, ``lookup_wgrad`` (embedding); ``logits``, ``logits_dgrad``, ``logits_wgrad``.
    """
    x = _shapes(m, par, past_keys)
    qkv, oproj = _qkv(x), _oproj(x)
    qkv_dgrad = tuple(g.dgrad() for g in reversed(qkv))
    lat_f, lat_b = _latent_norms(x, False), _latent_norms(x, True)
    out: dict[str, tuple[Kernel, ...]] = {}
    out["attn"] = (_norm(x, False), *qkv, *lat_f, *_rope(x, False), *_attention(x, backward=False), oproj,
                   _add(x))
    out["attn_dgrad"] = (_add(x), oproj.dgrad(), *_attention(x, backward=True), *_rope(x, True), *lat_b,
                         *qkv_dgrad, _norm(x, True))
    out["attn_wgrad"] = (*(g.wgrad() for g in qkv), oproj.wgrad())
    # ring attention (cp > 1): the same kernels split around the K,V exchange
    out["qkv"] = (_norm(x, False), *qkv, *lat_f, *_rope(x, False))
    out["attn_core_chunk"] = _attention(x, backward=False)
    out["oproj"] = (oproj, _add(x))
    out["oproj_dgrad"] = (_add(x), oproj.dgrad())
    out["attn_core_bwd_chunk"] = _attention(x, backward=True)
    out["qkv_dgrad"] = (*_rope(x, True), *lat_b, *qkv_dgrad, _norm(x, True))

    act_elems = x.n * x.f // x.t
    if m.is_moe:
        fe = m.expert_ffn_size
        n_r = x.n // x.t if par.sp else x.n  # the router runs on the sequence shard with SP
        router = Gemm(n_r, m.num_experts, x.h)
        local = m.num_experts // par.ep
        # the tokens the experts see: the TP-gathered n, or with EP folded over TP each rank's own shard
        n_e = x.n_sp if par.folded else x.n
        up, down = _mlp_gemms(x, n_e * m.top_k * par.ep // m.num_experts, local, fe, par.etp)
        permute = Stream("elementwise", PERMUTE * n_e * m.top_k * x.h)
        moe_act = n_e * m.top_k * fe // par.etp
        shared_fwd: tuple[Kernel, ...] = ()
        shared_dgrad: tuple[Kernel, ...] = ()
        shared_wgrad: tuple[Kernel, ...] = ()
        if m.num_shared_experts:  # shared experts: one TP-split MLP of shared·f_e on every local token
            fs = m.num_shared_experts * fe
            s_up, s_down = _mlp_gemms(x, x.n, 1, fs)
            s_act = x.n * fs // x.t
            shared_fwd = (s_up, Stream("activation", _act_bytes(x.gated, False) * s_act), s_down)
            shared_dgrad = (s_down.dgrad(), Stream("activation", _act_bytes(x.gated, True) * s_act), s_up.dgrad())
            shared_wgrad = (s_down.wgrad(), s_up.wgrad())
        out["router"] = (_norm(x, False), router, permute)
        out["experts"] = (up, Stream("activation", _act_bytes(x.gated, False) * moe_act), down, *shared_fwd,
                          permute, _add(x))
        out["experts_dgrad"] = (_add(x), permute, down.dgrad(),
                                Stream("activation", _act_bytes(x.gated, True) * moe_act), up.dgrad(), *shared_dgrad)
        out["router_bwd"] = (permute, router.dgrad(), router.wgrad(), _norm(x, True))
        out["experts_wgrad"] = (down.wgrad(), up.wgrad(), *shared_wgrad)
    if not m.is_moe or m.first_dense_layers:
        up, down = _mlp_gemms(x, x.n)
        out["mlp"] = (_norm(x, False), up, Stream("activation", _act_bytes(x.gated, False) * act_elems), down,
                      _add(x))
        out["mlp_dgrad"] = (_add(x), down.dgrad(), Stream("activation", _act_bytes(x.gated, True) * act_elems),
                            up.dgrad(), _norm(x, True))
        out["mlp_wgrad"] = (down.wgrad(), up.wgrad())

    position = (Stream("elementwise", POSITION_ADD * x.n * x.h),) if m.position_embedding == "learned" else ()
    embed_dropout = (Stream("elementwise", DROPOUT * x.n * x.h),) if m.hidden_dropout > 0 else ()
    out["lookup"] = (Stream("embedding", EMBED_FWD * x.n * x.h), *position, *embed_dropout)
    out["lookup_wgrad"] = (*embed_dropout, Stream("embedding", EMBED_BWD * x.n * x.h))
    logits = Gemm(x.n, m.vocab_size // x.t, x.h)
    loss_elems = x.n * m.vocab_size // x.t
    out["logits"] = (_norm(x, False), logits, Stream("elementwise", LOSS_FWD * loss_elems))
    out["logits_dgrad"] = (Stream("elementwise", LOSS_BWD * loss_elems), logits.dgrad(), _norm(x, True))
    out["logits_wgrad"] = (logits.wgrad(),)
    return out


def optimizer_kernels(params: int, bytes_per_param: int, *, loss_scaling: bool = False) -> tuple[Kernel, ...]:
    """The optimizer step over ``params`` parameters: with fp16 ``loss_scaling`` an unscale and inf/NaN check
    pass, then the gradient norm (clipping), then the Adam update of ``bytes_per_param`` per parameter; each
    one memory-bound pass over the parameters."""
    if params <= 0:
        return ()
    unscale = (Stream("elementwise", LOSS_SCALE_BYTES_PER_PARAM * params),) if loss_scaling else ()
    return (*unscale, Stream("elementwise", GRAD_NORM_BYTES_PER_PARAM * params),
            Stream("elementwise", bytes_per_param * params))


#: the compute ops (label's last part) that hold routed experts' kernels, and the pass each is
ROUTED_EXPERT_BLOCKS = ("experts", "recompute_experts", "experts_dgrad", "experts_wgrad")


def routed_expert_kernels(m: ModelSpec, par: ParallelismSpec, tokens_per_expert: int) -> dict[str, tuple[Kernel, ...]]:
    """The routed experts' own kernels (grouped up and down GEMMs and their activation; not the shared experts,
    permutations or adds) of each of ROUTED_EXPERT_BLOCKS when each of the rank's E/ep experts receives
    ``tokens_per_expert`` tokens: what a skewed routing lengthens or shortens on a rank."""
    x = _shapes(m, par)
    fe, local = m.expert_ffn_size, m.num_experts // par.ep
    up, down = _mlp_gemms(x, tokens_per_expert, local, fe, par.etp)
    act = tokens_per_expert * local * fe // par.etp
    fwd = (up, Stream("activation", _act_bytes(x.gated, False) * act), down)
    return {"experts": fwd, "recompute_experts": fwd,
            "experts_dgrad": (down.dgrad(), Stream("activation", _act_bytes(x.gated, True) * act), up.dgrad()),
            "experts_wgrad": (down.wgrad(), up.wgrad())}
