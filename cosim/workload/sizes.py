"""Message sizes (bytes, nccl-tests convention: S = full buffer) and the parameters each rank holds.

Data types follow Megatron's mixed precision: bf16 activations and parameters (2 B), fp32 gradients
(``main_grad``, 4 B). b = micro-batch, s = sequence, h = hidden, t = tp; with context parallelism the local
sequence is s/cp in every activation size.

=========================  ======================================  ==========================================
message                    size S                                  where
=========================  ======================================  ==========================================
TP all-reduce              2·b·(s/cp)·h                            2 per layer forward, 2 backward
TP reduce-scatter / all-   2·b·(s/cp)·h (full tensor)              sequence parallelism: each all-reduce
gather (SP)                                                        becomes RS + AG of the same tensor
PP send/recv               2·b·(s/cp)·h/t (each TP rank's slice)   per stage boundary, micro-batch, direction
PP all-gather (no SP)      2·b·(s/cp)·h (full tensor)              TP group of the receiving stage rebuilds it
CP ring send/recv          2·2·b·(s/cp)·kv·d/t forward (K and V);  cp-1 steps per layer per pass
                           twice that backward (K, V, dK, dV)
MoE all-to-all             2·b·(s/cp)/t·k·h (k = top_k)            dispatch + combine, forward and backward
MoE TP all-gather / RS     2·b·(s/cp)·k·h                          around the TP-sharded experts (tp > 1)
DP gradients               4·P_bucket (all-reduce or RS)           Σ over buckets = 4·P_local ≈ 4·P/(t·p)
distributed optimizer AG   2·P_bucket                              after the optimizer step
ZeRO-3 / FSDP              AG 2·P_layer_local, RS 4·P_layer_local  per layer, per micro-batch
tied embedding all-reduce  4·V·h/t                                 first + last stage (pp > 1)
SP replicated-grad AR      4·(norms + row biases + router) local   TP group, once per iteration
=========================  ======================================  ==========================================

P_local is what one (tp, pp) rank holds (``stage_params``): TP-sharded matrices count 1/t, TP-replicated
ones (norms, row-parallel biases, router, learned positions) count fully, experts count E/ep of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from cosim.workload.model import ModelSpec, norm_params
from cosim.workload.parallelism import ParallelismSpec

ACT_BYTES = 2  #: bf16 activation element
FP8_BYTES = 1  #: FP8 (e4m3) element
FP8_SCALE_BYTES = 4  #: fp32 scale of one block of FP8 elements
FP8_SCALE_BLOCK = 128  #: elements sharing one scale (DeepEP dispatch, DeepSeek-V3 1×128 activation tiles)
PARAM_BYTES = 2  #: bf16 parameter element
GRAD_BYTES = 4  #: fp32 gradient element (Megatron main_grad)
OPTIMIZER_BYTES_PER_PARAM = 32  #: HBM traffic of one Adam update: fp32 master, m, v read+write, fp32 grad
#: read, bf16 param write (24 + 4 + 2 = 30, rounded up for the scale/unscale passes)


def tp_activation_bytes(m: ModelSpec, par: ParallelismSpec) -> int:
    """TP all-reduce (or SP reduce-scatter/all-gather full tensor): 2·b·(s/cp)·h (Megatron)."""
    return ACT_BYTES * par.micro_batch_size * (m.seq_length // par.cp) * m.hidden_size


def pp_activation_bytes(m: ModelSpec, par: ParallelismSpec) -> int:
    """PP send/recv per boundary per micro-batch and TP rank: 2·b·(s/cp)·h/t. With SP the activation is
    sequence-sharded; without, Megatron's scatter/gather sends each rank's 1/t slice and all-gathers the
    full tensor over TP on the receiving stage (that all-gather is :func:`tp_activation_bytes`)."""
    return tp_activation_bytes(m, par) // par.tp


def cp_kv_bytes(m: ModelSpec, par: ParallelismSpec) -> int:
    """One forward ring-attention step: the local K and V chunks, 2·2·b·(s/cp)·kv_heads·d/t bytes."""
    return 2 * ACT_BYTES * par.micro_batch_size * (m.seq_length // par.cp) * m.kv_size // par.tp


def cp_kv_grad_bytes(m: ModelSpec, par: ParallelismSpec) -> int:
    """One backward ring-attention step: K, V and the partial dK, dV, twice the forward chunk."""
    return 2 * cp_kv_bytes(m, par)


def moe_token_bytes(m: ModelSpec, fp8: bool = False) -> int:
    """Bytes of one routed token copy: h bf16 elements, or h FP8 elements plus one fp32 scale per
    FP8_SCALE_BLOCK channels (DeepEP's FP8 dispatch: 1·h + 4·ceil(h/128))."""
    if not fp8:
        return ACT_BYTES * m.hidden_size
    return FP8_BYTES * m.hidden_size + FP8_SCALE_BYTES * -(-m.hidden_size // FP8_SCALE_BLOCK)


def moe_dispatch_bytes(m: ModelSpec, par: ParallelismSpec, forward_dispatch: bool = False) -> int:
    """MoE all-to-all per rank: routed copies of the local tokens, 2·b·(s/cp)/t·k·h (balanced routing).
    ``forward_dispatch``: the forward dispatch, in FP8 when ``m.moe_dispatch_dtype`` is "fp8" (combine and
    the backward all-to-alls stay bf16)."""
    tokens = par.micro_batch_size * (m.seq_length // par.cp) // (par.tp if par.sp else 1)
    fp8 = forward_dispatch and m.moe_dispatch_dtype == "fp8"
    return tokens * m.top_k * moe_token_bytes(m, fp8)


def moe_tp_bytes(m: ModelSpec, par: ParallelismSpec) -> int:
    """MoE all-gather / reduce-scatter over TP of the dispatched tokens (full buffer): 2·b·(s/cp)·k·h; none
    when EP is folded over TP (the experts are not TP-split)."""
    if par.folded:
        return 0
    return ACT_BYTES * par.micro_batch_size * (m.seq_length // par.cp) * m.top_k * m.hidden_size


def grad_bytes(params: int) -> int:
    """fp32 gradient buffer of ``params`` parameters: 4·params (DP all-reduce / reduce-scatter S)."""
    return GRAD_BYTES * params


def param_bytes(params: int) -> int:
    """bf16 parameter buffer of ``params`` parameters: 2·params (distributed-optimizer / ZeRO-3 all-gather S)."""
    return PARAM_BYTES * params


@dataclass(frozen=True, slots=True, kw_only=True)
class UnitParams:
    """Parameters one TP rank holds for one unit (layer, embedding or output head)."""

    sharded: int = 0  #: TP-sharded dense parameters (gradients reduced over the DP group)
    replicated: int = 0  #: TP-replicated dense parameters (DP group; all-reduced over TP with SP)
    expert: int = 0  #: expert parameters of the E/ep local experts (expert-DP group)

    @property
    def dense(self) -> int:
        """sharded + replicated: everything reduced over the DP group."""
        return self.sharded + self.replicated

    @property
    def total(self) -> int:
        """All parameters of the unit on this rank."""
        return self.sharded + self.replicated + self.expert

    def __add__(self, other: UnitParams) -> UnitParams:
        return UnitParams(sharded=self.sharded + other.sharded, replicated=self.replicated + other.replicated,
                          expert=self.expert + other.expert)


def _attention_unit_params(m: ModelSpec, t: int) -> tuple[int, int]:
    """(TP-sharded, TP-replicated) parameters of one attention block on one rank. MLA (Megatron-Core):
    the down projections and the latent norms are replicated, the up and output projections split."""
    h = m.hidden_size
    if m.is_mla:
        heads, qk = m.num_heads, m.head_dim
        down = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank
        up = m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim) + m.attn_out_size * h
        if m.q_lora_rank:
            down += h * m.q_lora_rank + m.q_lora_rank
            up += m.q_lora_rank * heads * qk
        else:
            up += h * heads * qk
        return up // t, down
    qkv_out = m.q_size + 2 * m.kv_size
    sharded = (h * qkv_out + m.q_size * h + (qkv_out if m.linear_bias else 0)) // t
    return sharded, (2 * m.head_dim if m.qk_norm else 0)


def layer_unit_params(m: ModelSpec, par: ParallelismSpec, moe: bool | None = None) -> UnitParams:
    """Parameters of one layer on one rank: QKV/fc1 column-parallel and o/fc2 row-parallel matrices are
    split over TP; row-parallel biases, norms and the router are replicated (Megatron). Shared experts are
    split over TP like a dense MLP and reduced over DP; routed experts count E/ep. ``moe`` picks an MoE or
    a dense layer of an MoE model (default: MoE for MoE models)."""
    t, h = par.tp, m.hidden_size
    moe = m.is_moe if moe is None else moe
    f = m.expert_ffn_size if moe else m.ffn_hidden_size
    n_in = 2 if m.gated_mlp else 1
    attn_sharded, attn_replicated = _attention_unit_params(m, t)
    mlp_full = (n_in + 1) * h * f + (n_in * f if m.linear_bias else 0)
    mlp_sharded = mlp_full // t
    mlp_replicated = h if m.linear_bias else 0  # fc2 bias
    replicated = 2 * norm_params(m) + (h if m.linear_bias else 0) + attn_replicated  # norms, attn output bias
    if moe:
        local_experts = m.num_experts // par.ep
        shared = m.num_shared_experts
        return UnitParams(sharded=attn_sharded + shared * mlp_sharded,
                          replicated=replicated + h * m.num_experts + shared * mlp_replicated,
                          expert=local_experts * (mlp_full // par.etp + mlp_replicated))
    return UnitParams(sharded=attn_sharded + mlp_sharded, replicated=replicated + mlp_replicated)


def embedding_unit_params(m: ModelSpec, par: ParallelismSpec) -> UnitParams:
    """Vocabulary-parallel input embedding V·h/t, plus learned positions s·h (replicated)."""
    pos = m.seq_length * m.hidden_size if m.position_embedding == "learned" else 0
    return UnitParams(sharded=m.vocab_size * m.hidden_size // par.tp, replicated=pos)


def head_unit_params(m: ModelSpec, par: ParallelismSpec) -> UnitParams:
    """Final norm plus the output projection V·h/t; with tied embeddings the projection is the embedding
    itself on a single stage, and a copy (kept in sync over the EMBD group) on the last stage when pp > 1."""
    own = (not m.tied_embeddings) or par.pp > 1
    return UnitParams(sharded=m.vocab_size * m.hidden_size // par.tp if own else 0, replicated=norm_params(m))
