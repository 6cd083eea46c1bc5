"""Inference workload model (issue #18), pure numpy: KV-cache geometry of model presets and request streams.

- :mod:`.model`: attention kinds (MHA, GQA, MLA), KV-cache bytes per token per layer, serving presets
  (LLaMA-2, Mixtral, a DeepSeek-V3-like MoE with multi-head latent attention).
- :mod:`.requests`: request streams, a seeded Poisson process or a request trace
  (``arrived_at,num_prefill_tokens,num_decode_tokens`` CSV, arrival in seconds).
"""
