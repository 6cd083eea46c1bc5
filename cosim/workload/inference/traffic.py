"""Bytes one inference step puts on the wire, per collective call (nccl-tests convention, bf16 activations).

For a step of ``n`` tokens on a replica (prefill: the prompt tokens of the batch; decode: one token per
running sequence), hidden size h, ``e = 2`` bytes per activation element:

- TP all-reduce, two per layer (after the attention output projection and after the MLP): S = n·h·e, the
  full activation every TP rank holds. At decode n is the batch size, so these are small and
  latency-bound (LLaMA-2-70B, 32 sequences: 512 KiB).
- PP activations between consecutive stages: n·h·e per stage boundary per step.
- EP dispatch and combine all-to-all per MoE layer, tokens split over the ``ep`` ranks: every rank sends
  each of its ceil(n/ep) tokens to its top-k experts, S = ceil(n/ep)·k·h·e per rank (itself included),
  the combine returns as much. With ep > 1 the MoE combine replaces the MLP's TP all-reduce.
- KV cache of a request of p prompt tokens, from each prefill TP rank to its decode peer:
  p·kv_bytes_per_token_per_rank, or that divided by the layers when moved layer by layer.
"""

from __future__ import annotations

from cosim.errors import CosimInputError
from cosim.workload.inference.model import InferenceModel

ACTIVATION_BYTES = 2  #: bf16 activations


def _tokens(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise CosimInputError("tokens", f"must be an integer >= 1, got {n!r}")
    return n


def tp_allreduce_bytes(model: InferenceModel, tokens: int) -> int:
    """S of each of the two TP all-reduces per layer of a step of ``tokens`` tokens."""
    return _tokens(tokens) * model.spec.hidden_size * ACTIVATION_BYTES


def tp_allreduces_per_layer(model: InferenceModel, ep: int) -> int:
    """TP all-reduces per layer: 2, or 1 for a MoE layer whose experts are spread over ep > 1 ranks."""
    return 1 if model.spec.is_moe and ep > 1 else 2


def pp_activation_bytes(model: InferenceModel, tokens: int) -> int:
    """Activation bytes sent across one pipeline-stage boundary per step."""
    return _tokens(tokens) * model.spec.hidden_size * ACTIVATION_BYTES


def ep_dispatch_bytes(model: InferenceModel, tokens: int, ep: int) -> int:
    """S of the dispatch (and of the combine) all-to-all of one MoE layer, per rank."""
    if not model.spec.is_moe:
        raise CosimInputError("model", f"{model.spec.name} has no experts to dispatch to")
    if isinstance(ep, bool) or not isinstance(ep, int) or ep < 1 or model.spec.num_experts % ep:
        raise CosimInputError("parallelism.ep", f"must divide the {model.spec.num_experts} experts, got {ep!r}")
    local = -(-_tokens(tokens) // ep)
    return local * model.spec.top_k * model.spec.hidden_size * ACTIVATION_BYTES


def kv_transfer_bytes(model: InferenceModel, prompt_tokens: int, tp: int, *, layer_by_layer: bool = False) -> int:
    """KV bytes one prefill TP rank sends its decode peer for a request (per layer if ``layer_by_layer``)."""
    total = _tokens(prompt_tokens) * model.kv_bytes_per_token_per_rank(tp)
    return total // model.spec.num_layers if layer_by_layer else total
