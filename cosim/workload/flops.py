"""FLOPs of the matmuls of one micro-batch on one rank, and model FLOPs per iteration.

Counted as Megatron does (Narayanan et al. 2021, appendix): 2 FLOPs per multiply-add of the matmuls only
(norms, softmax, activations, the optimizer are left out); the attention score and context matmuls use the
full s×s matrix (no saving from the causal mask). With ``n = b·s/cp`` local tokens, t = tp, per layer::

    qkv     = 2·n·h·(h + 2·kv·d) / t     (Q, K, V projections; GQA makes K and V kv·d wide)
    core    = 4·n·s·h / t                (Q·Kᵀ and softmax·V over all s keys)
    oproj   = 2·n·h·h / t
    mlp     = 2·n·h·f·(3 if gated else 2) / t                       dense models
    router  = 2·n_r·h·E,  n_r = n/t with sequence parallelism else n  MoE models
    experts = 2·n·k·h·f·(3 if gated else 2) / t                      (k = top_k; balanced routing)
    head    = 2·n·h·V / t                (logits, last stage)

Newer shapes (cosim.workload.model): with an explicit head size the query is q = heads·d wide (qkv =
2·n·h·(q + 2·kv)/t, core = 2·n·s·heads·2d/t, oproj = 2·n·q·h/t). Multi-head latent attention (MLA,
DeepSeek-V3; H heads, r_q, r_kv the query and KV ranks, d_n, d_r, d_v the no-rope, rope and value head
sizes; the down projections are replicated over TP, the up projections split)::

    qkv     = 2·n·(h·r_q + h·(r_kv + d_r)) + 2·n·(r_q·H·(d_n + d_r) + r_kv·H·(d_n + d_v)) / t
    core    = 2·n·s·H·(d_n + d_r + d_v) / t
    oproj   = 2·n·H·d_v·h / t

Shared experts run on every token beside the top_k routed ones: experts = 2·n·(k + shared)·h·f_e·3/t with
f_e the expert FFN size. The first ``first_dense_layers`` layers of an MoE model are dense (ffn_hidden_size).

Backward = input gradient (1× forward of each matmul, 2× for the attention core, which has no weights)
plus weight gradient (1× forward of each weight matmul), i.e. 2× forward in total. Summed over all ranks
and micro-batches, forward + backward is ``3·B·F_seq`` where F_seq is the forward of one sequence, which for
GPT (kv = heads, f = 4h, no gating) is Megatron's 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)).

Two totals per iteration, both with the full s×s attention matrix (a causal mask saves nothing here, as in
the paper):

- *model FLOPs* ``3·B·F_seq``: what the model needs, whatever the implementation; MFU divides these.
- *Megatron FLOPs*: the count of Narayanan et al. (SC'21, eq. 3), which adds the recomputed forward of the
  transformer layers under full activation recomputation (4× forward for the layers, 3× for the logits):
  96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) for GPT. Their per-GPU TFLOP/s (Table 1) divide these.
"""

from __future__ import annotations

from dataclasses import dataclass

from cosim.workload.model import ModelSpec
from cosim.workload.parallelism import ParallelismSpec


def _mlp_matrices(m: ModelSpec) -> int:
    return 3 if m.gated_mlp else 2


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerFlops:
    """Forward FLOPs of one transformer layer for one micro-batch on one rank (module docstring)."""

    qkv_flops: int
    core_flops: int
    oproj_flops: int
    mlp_flops: int  #: dense MLP (0 for MoE)
    router_flops: int  #: MoE router (0 for dense)
    experts_flops: int  #: MoE experts (0 for dense)

    @property
    def attention_flops(self) -> int:
        """QKV + core + output projection."""
        return self.qkv_flops + self.core_flops + self.oproj_flops

    @property
    def total_flops(self) -> int:
        """All forward FLOPs of the layer."""
        return self.attention_flops + self.mlp_flops + self.router_flops + self.experts_flops


def _attention_flops(m: ModelSpec, n: int, t: int) -> tuple[int, int, int]:
    """Forward (qkv, core, oproj) FLOPs of one layer's attention for n local queries over s keys."""
    h, s = m.hidden_size, m.seq_length
    if m.is_mla:
        heads, qk = m.num_heads, m.head_dim
        if m.q_lora_rank:
            down = h * m.q_lora_rank + h * (m.kv_lora_rank + m.qk_rope_head_dim)
            up = m.q_lora_rank * heads * qk
        else:
            down, up = h * (m.kv_lora_rank + m.qk_rope_head_dim), h * heads * qk
        up += m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim)
        qkv = 2 * n * down + 2 * n * up // t
        core = 2 * n * s * heads * (qk + m.v_head_dim) // t
        return qkv, core, 2 * n * m.attn_out_size * h // t
    qkv = 2 * n * h * (m.q_size + 2 * m.kv_size) // t
    core = 2 * n * s * m.num_heads * (2 * m.head_dim) // t  # Q·Kᵀ and softmax·V: 4·n·s·h when q = h
    return qkv, core, 2 * n * m.q_size * h // t


def layer_forward_flops(m: ModelSpec, par: ParallelismSpec, moe: bool | None = None) -> LayerFlops:
    """Forward FLOPs of one layer, one micro-batch, one rank (exact integers; needs check_compatible);
    ``moe`` picks an MoE or a dense layer of an MoE model (default: MoE for MoE models)."""
    t = par.tp
    h = m.hidden_size
    n = par.micro_batch_size * m.seq_length // par.cp  # local query tokens
    qkv, core, oproj = _attention_flops(m, n, t)
    if m.is_moe if moe is None else moe:
        n_router = n // t if par.sp else n  # router runs on the sequence-parallel shard, replicated over TP
        router = 2 * n_router * h * m.num_experts
        experts = 2 * n * (m.top_k + m.num_shared_experts) * h * m.expert_ffn_size * _mlp_matrices(m) // t
        mlp = 0
    else:
        router = experts = 0
        mlp = 2 * n * h * m.ffn_hidden_size * _mlp_matrices(m) // t
    return LayerFlops(qkv_flops=qkv, core_flops=core, oproj_flops=oproj, mlp_flops=mlp, router_flops=router,
                      experts_flops=experts)


def head_forward_flops(m: ModelSpec, par: ParallelismSpec) -> int:
    """Forward FLOPs of the output layer (logits) for one micro-batch on one last-stage rank."""
    n = par.micro_batch_size * m.seq_length // par.cp
    return 2 * n * m.hidden_size * m.vocab_size // par.tp


def sequence_forward_flops(m: ModelSpec) -> int:
    """Forward FLOPs of the whole model for one sequence of s tokens (no parallelism)."""
    s, h = m.seq_length, m.hidden_size
    attn = sum(_attention_flops(m, s, 1))
    dense = 2 * s * h * m.ffn_hidden_size * _mlp_matrices(m)
    if m.is_moe:
        mlp = 2 * s * h * m.num_experts + 2 * s * (m.top_k + m.num_shared_experts) * h * m.expert_ffn_size \
            * _mlp_matrices(m)
    else:
        mlp = dense
    moe_layers = m.num_moe_layers
    # a multi-token prediction module: its MoE layer, the 2h→h projection and the shared output head
    mtp = m.mtp_layers * (attn + mlp + 2 * s * 2 * h * h + 2 * s * h * m.vocab_size)
    return (m.num_layers - moe_layers) * (attn + dense) + moe_layers * (attn + mlp) + 2 * s * h * m.vocab_size + mtp


def model_flops_per_iteration(m: ModelSpec, global_batch_size: int) -> int:
    """Model FLOPs of one iteration: 3 × forward (forward + backward), no recomputation: 3·B·F_seq."""
    return 3 * global_batch_size * sequence_forward_flops(m)


def megatron_flops_per_iteration(m: ModelSpec, global_batch_size: int, recompute: bool) -> int:
    """FLOPs of one iteration as Megatron counts them (module docstring): model FLOPs plus, with full
    activation recomputation, one more forward of the transformer layers (not of the logits)."""
    head = 2 * m.seq_length * m.hidden_size * m.vocab_size
    layers = sequence_forward_flops(m) - head
    return model_flops_per_iteration(m, global_batch_size) + (global_batch_size * layers if recompute else 0)


def gpt_flops_formula(m: ModelSpec, global_batch_size: int) -> float:
    """Megatron's closed form 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)) (valid for GPT-shaped models)."""
    B, s, l, h, V = global_batch_size, m.seq_length, m.num_layers, m.hidden_size, m.vocab_size
    return 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h))


def megatron_gpt_formula(m: ModelSpec, global_batch_size: int) -> float:
    """Megatron's closed form with full recomputation, 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) (SC'21, eq. 3)."""
    B, s, l, h, V = global_batch_size, m.seq_length, m.num_layers, m.hidden_size, m.vocab_size
    return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
