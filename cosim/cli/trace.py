"""``cosim trace``: build the trace of one training iteration, print its summary, write HDF5 / Chakra.

Only click and the standard library are imported at module level (fast ``--help``); numpy, h5py, protobuf
and the workload modules are imported inside the command.
"""

from __future__ import annotations

import sys

import click

from cosim.cli.options import refuse_empty

MODEL_ALIASES = {"layers": "num_layers", "hidden": "hidden_size", "heads": "num_heads", "kv_heads": "num_kv_heads",
                 "ffn": "ffn_hidden_size", "vocab": "vocab_size", "seq": "seq_length", "seq_len": "seq_length",
                 "experts": "num_experts"}
EPILOG = """\b
Overrides (--set, repeatable, applied after the other options; workload.parallelism.F,
workload.model_overrides.F and workload.hardware_overrides.F, as cosim run --set writes them, work too):
  model.<field>=V        num_layers (alias layers), hidden_size (hidden), num_heads (heads),
                         num_kv_heads (kv_heads), ffn_hidden_size (ffn), vocab_size (vocab),
                         seq_length (seq), num_experts (experts), top_k, gated_mlp, linear_bias,
                         norm, position_embedding, tied_embeddings
  parallelism.<field>=V  any ParallelismSpec field, e.g. dp_bucket_bytes=80000000; uneven
                         pipelines: pipeline_layers=7,8,...,7 (per stage, or per virtual stage),
                         first_stage_layers / last_stage_layers=N (the others share the rest),
                         embedding_in_split / loss_in_split=true (count as a layer each)
  hardware.<field>=V     datasheet: peak_flops_per_s, hbm_bytes, hbm_bytes_per_s, nvlink_bytes_per_s,
                         nic_bytes_per_s, sm_count, gpus_per_host; compute-model coefficients (fitted
                         per preset, docs/models/compute.md): compute_efficiency (GEMM fraction of peak),
                         gemm_memory_efficiency, gemm_small_m/n/k, gemm_wave_weight,
                         gemm_roofline_sharpness, gemm_launch_ns, gemm_tile_m/n, attention_efficiency,
                         attention_bwd_efficiency, memory_efficiency (elementwise ops, optimizer),
                         memory_launch_ns, {norm,rope,activation,embedding}_memory_efficiency and
                         {norm,rope,activation,embedding}_launch_ns; sustained_clock_ratio (SM clock a
                         long run sustains / the profiles' clock: compute-bound time × 1/ratio)
\b
Compute times: every compute op is the sum of its kernels (GEMMs, flash attention, norms, rotary
embedding, activation, residual adds, embedding, cross-entropy) timed by the per-operator model fitted
to measured kernel profiles; --kernels prints them for one layer. --gpu also takes a coefficients file
written by 'cosim calibrate'.
\b
Examples:
  cosim trace --list-models
  cosim trace --model llama2-7b --tp 8 --pp 2 --dp 4 --micro-batch 1 --global-batch 64 --gpu h100 -o x.h5
  cosim trace --model mixtral-8x7b --tp 2 --sp --dp 4 --ep 4 --set model.layers=4 --chakra et/
  cosim trace --model llama2-70b --tp 8 --pp 4 --dp 2 --gpu b200 --kernels
  cosim trace --model llama3-405b --tp 8 --pp 16 --vpp 2 --sp --zero 1 --global-batch 32
      --set parallelism.embedding_in_split=true --set parallelism.loss_in_split=true
"""


class InputError(click.ClickException):
    """A CosimInputError surfaced by this command: one line ``Error: ...`` and exit code 2."""

    exit_code = 2


def _parse_value(field: str, annotation: str, text: str) -> object:
    from cosim.errors import CosimInputError

    ann = annotation.replace(" ", "")
    if ann.endswith("|None") and text.lower() in ("none", "null", ""):
        return None
    base = ann.split("|")[0]
    try:
        if base == "bool":
            low = text.lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
            raise ValueError(text)
        if base == "int":
            return int(float(text)) if "e" in text.lower() and float(text).is_integer() else int(text)
        if base == "float":
            return float(text)
    except ValueError:
        raise CosimInputError(field, f"cannot read {text!r} as {base}") from None
    return text


def _apply_sets(sets: tuple[str, ...]) -> dict[str, dict[str, object]]:
    """Parse ``--set scope.field=value`` items into {scope: {field: value}} using the spec field types."""
    import dataclasses

    from cosim.errors import CosimInputError
    from cosim.workload.hardware import HardwareSpec
    from cosim.workload.model import ModelSpec
    from cosim.workload.parallelism import ParallelismSpec

    classes = {"model": ModelSpec, "parallelism": ParallelismSpec, "hardware": HardwareSpec}
    out: dict[str, dict[str, object]] = {k: {} for k in classes}
    for item in sets:
        if "=" not in item or "." not in item.split("=", 1)[0]:
            raise CosimInputError("--set", f"{item!r} is not SCOPE.FIELD=VALUE", "e.g. --set model.num_layers=8")
        key, value = item.split("=", 1)
        # the experiment's paths of the same fields (cosim run --set workload.parallelism.tp=4) work here too
        key = key.strip()
        for path, scope in (("workload.model_overrides.", "model."), ("workload.parallelism.", "parallelism."),
                            ("workload.hardware_overrides.", "hardware.")):
            key = key.replace(path, scope, 1)
        scope, name = key.split(".", 1)
        scope = scope.lower()
        if scope not in classes:
            raise CosimInputError(f"--set {key}", f"unknown scope {scope!r}", "use model., parallelism. or hardware.")
        if scope == "model":
            name = MODEL_ALIASES.get(name, name)
        fields = {f.name: str(f.type) for f in dataclasses.fields(classes[scope])}
        if name not in fields:
            raise CosimInputError(f"{scope}.{name}", f"is not a {scope} field", f"choose among {', '.join(fields)}")
        out[scope][name] = _parse_value(f"{scope}.{name}", fields[name], value.strip())
    return out


def _list_models() -> str:
    from cosim.workload.model import PRESETS, total_params

    head = f"{'model':<14}{'layers':>7}{'hidden':>7}{'heads':>6}{'kv':>4}{'ffn':>7}{'vocab':>7}{'seq':>6}" \
           f"{'experts':>8}{'top-k':>6}{'params':>10}"
    rows = [head]
    for name, m in PRESETS.items():
        rows.append(f"{name:<14}{m.num_layers:>7}{m.hidden_size:>7}{m.num_heads:>6}{m.num_kv_heads:>4}"
                    f"{m.ffn_hidden_size:>7}{m.vocab_size:>7}{m.seq_length:>6}{m.num_experts:>8}{m.top_k:>6}"
                    f"{total_params(m) / 1e9:>9.2f}B")
    return "\n".join(rows)


def _list_gpus() -> str:
    from cosim.workload.hardware import ALIASES, get_hardware, preset_names

    width = max(len(n) for n in preset_names()) + 1
    rows = [f"{'gpu':<{width}}{'bf16 TFLOP/s':>13}{'HBM GiB':>8}{'HBM TB/s':>9}{'NVLink GB/s/dir':>16}"
            f"{'NVLink GPUs':>12}{'NVLS':>5}{'NIC Gb/s':>9}{'SMs':>5}{'GEMM eff':>9}  coefficients, aliases"]
    for name in preset_names():
        h = get_hardware(name)
        aliases = ", ".join(sorted(a for a, t in ALIASES.items() if t == name))
        rows.append(f"{name:<{width}}{h.peak_flops_per_s / 1e12:>13.0f}{h.hbm_bytes / 2**30:>8.0f}"
                    f"{h.hbm_bytes_per_s / 1e12:>9.2f}{h.nvlink_bytes_per_s / 1e9:>16.0f}"
                    f"{h.gpus_per_host:>12}{'yes' if h.nvls else 'no':>5}{h.nic_bytes_per_s * 8 / 1e9:>9.0f}"
                    f"{h.sm_count:>5}{h.compute_efficiency:>9.3f}"
                    f"  {h.calibration.split(':')[0]}; {aliases}")
    return "\n".join(rows)


def _kernel_table(model, par, hw) -> str:
    """Predicted kernels of one layer's (and the head's) compute ops, for --kernels."""
    from cosim.workload.compute import Attention, Gemm, kernel_ns, kernels_ns
    from cosim.workload.kernels import block_kernels

    wanted = (["attn", "attn_dgrad", "attn_wgrad"] if par.cp == 1 else
              ["qkv", "attn_core_chunk", "oproj", "oproj_dgrad", "attn_core_bwd_chunk", "qkv_dgrad", "attn_wgrad"])
    wanted += (["router", "experts", "experts_dgrad", "router_bwd", "experts_wgrad"] if model.is_moe else
               ["mlp", "mlp_dgrad", "mlp_wgrad"])
    wanted += ["lookup", "lookup_wgrad", "logits", "logits_dgrad", "logits_wgrad"]
    blocks = block_kernels(model, par)
    rows = [f"kernels per micro-batch on one rank ({hw.name}; {hw.calibration.split(':')[0]}):",
            f"  {'op':<21}{'kernel':<46}{'time us':>10}"]
    for name in wanted:
        for i, k in enumerate(blocks[name]):
            if isinstance(k, Gemm):
                what = f"GEMM {k.m}x{k.n}x{k.k}" + (f" x{k.count}" if k.count > 1 else "")
            elif isinstance(k, Attention):
                what = f"flash attention {'bwd' if k.backward else 'fwd'} {k.queries}x{k.keys} {k.heads}h"
            else:
                what = f"{k.kind} {k.nbytes / 1e6:.1f} MB"
            rows.append(f"  {name if i == 0 else '':<21}{what:<46}{kernel_ns(hw, k) / 1e3:>10.1f}")
        rows.append(f"  {'':<21}{'= total':<46}{kernels_ns(hw, blocks[name]) / 1e3:>10.1f}")
    return "\n".join(rows)


@click.command("trace", epilog=EPILOG, context_settings={"max_content_width": 110})
@click.option("--model", "model_name", default="llama2-7b", show_default=True, callback=refuse_empty,
              help="Model preset (--list-models).")
@click.option("--gpu", "gpu_name", default="h100", show_default=True, callback=refuse_empty,
              help="GPU preset (--list-gpus), or a coefficients file from 'cosim calibrate'.")
@click.option("--tp", type=int, default=1, show_default=True, help="Tensor-parallel degree.")
@click.option("--pp", type=int, default=1, show_default=True, help="Pipeline-parallel degree.")
@click.option("--dp", type=int, default=1, show_default=True, help="Data-parallel degree.")
@click.option("--cp", type=int, default=1, show_default=True, help="Context-parallel degree (ring attention).")
@click.option("--ep", type=int, default=1, show_default=True, help="Expert-parallel degree (divides dp).")
@click.option("--vpp", type=int, default=1, show_default=True,
              help="Virtual stages per rank (> 1: interleaved 1F1B).")
@click.option("--sp/--no-sp", default=False, show_default=True, help="Megatron sequence parallelism.")
@click.option("--zero", type=click.Choice(["0", "1", "3"]), default="0", show_default=True,
              help="0: all-reduce grads, 1: distributed optimizer, 3: ZeRO-3/FSDP.")
@click.option("--recompute/--no-recompute", default=False, show_default=True, help="Full activation recomputation.")
@click.option("--micro-batch", type=int, default=1, show_default=True, help="Sequences per micro-batch.")
@click.option("--global-batch", type=int, default=None, help="Sequences per iteration [default: micro·dp·4·pp].")
@click.option("--gpus", type=int, default=None, help="Number of GPUs; checked against tp·cp·pp·dp.")
@click.option("--order", default="tp-cp-pp-dp", show_default=True, callback=refuse_empty,
              help="Rank placement, fastest axis first.")
@click.option("--efficiency", type=float, default=None,
              help="GEMM FLOP/s as a fraction of peak (hardware.compute_efficiency) [preset: fitted].")
@click.option("--set", "sets", multiple=True, metavar="SCOPE.FIELD=VALUE", help="Override a spec field (below).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None, callback=refuse_empty,
              help="Write the HDF5 trace here.")
@click.option("--chakra", type=click.Path(file_okay=False), default=None, callback=refuse_empty,
              help="Also export Chakra ET files (<DIR>/cosim.<rank>.et + comm_group.json).")
@click.option("--list-models", is_flag=True, help="List model presets and exit.")
@click.option("--list-gpus", is_flag=True, help="List GPU presets and exit.")
@click.option("--kernels", "show_kernels", is_flag=True, help="Also print the predicted kernels of one layer.")
def trace(model_name: str, gpu_name: str, tp: int, pp: int, dp: int, cp: int, ep: int, vpp: int, sp: bool,
          zero: str, recompute: bool, micro_batch: int, global_batch: int | None, gpus: int | None, order: str,
          efficiency: float | None, sets: tuple[str, ...], output: str | None, chakra: str | None,
          list_models: bool, list_gpus: bool, show_kernels: bool) -> None:
    """Build the per-rank trace of one training iteration and print its summary.

    The trace (compute, collectives, pipeline and context-parallel sends) is validated: matching sends and
    receives, complete collectives, no deadlock. Without -o/--chakra nothing is written.
    """
    if list_models or list_gpus:
        if list_models:
            click.echo(_list_models())
        if list_gpus:
            click.echo(_list_gpus())
        return
    from cosim.errors import CosimInputError

    try:
        _run(model_name, gpu_name, dict(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, vpp=vpp, sequence_parallel=sp,
                                        zero_stage=int(zero), recompute=recompute, micro_batch_size=micro_batch,
                                        global_batch_size=global_batch, num_gpus=gpus, order=order),
             efficiency, sets, output, chakra, show_kernels)
    except CosimInputError as exc:
        raise InputError(str(exc)) from None


def _run(model_name: str, gpu_name: str, par_fields: dict, efficiency: float | None, sets: tuple[str, ...],
         output: str | None, chakra: str | None, show_kernels: bool = False) -> None:
    from cosim.workload.builder import build_trace
    from cosim.workload.hardware import get_hardware
    from cosim.workload.model import get_model
    from cosim.workload.parallelism import ParallelismSpec
    from cosim.workload.summary import format_summary, summarize
    from cosim.workload.validate import check_collectives, check_p2p

    over = _apply_sets(sets)
    model = get_model(model_name, **over["model"])
    hw_over = dict(over["hardware"])
    if efficiency is not None:
        hw_over.setdefault("compute_efficiency", efficiency)
    hw = get_hardware(gpu_name, **hw_over)
    par = ParallelismSpec(**{**par_fields, **over["parallelism"]})
    tr = build_trace(model, par, hw)
    check_p2p(tr)
    check_collectives(tr)
    summary = summarize(tr)  # its timeline also proves the trace deadlock-free
    click.echo(f"{model.name} on {par.world_size} × {hw.name}: tp={par.tp} cp={par.cp} pp={par.pp} dp={par.dp} "
               f"ep={par.ep} vpp={par.vpp} sp={par.sp} zero={par.zero_stage} recompute={par.recompute} "
               f"b={par.micro_batch_size} B={par.global_batch_size} m={par.num_microbatches}")
    if par.uneven_split:
        split = tr.spec_dict()["derived"]["layers_per_virtual_stage"]
        per_stage = [sum(split[c * par.pp + st] for c in range(par.vpp)) for st in range(par.pp)]
        chunks = f"; per virtual stage (chunk·pp + stage): {', '.join(map(str, split))}" if par.vpp > 1 else ""
        click.echo(f"layers per stage: {', '.join(map(str, per_stage))}{chunks}")
    click.echo(format_summary(summary))
    if show_kernels:
        click.echo(_kernel_table(model, par, hw))
    if par.tp > hw.gpus_per_host:
        click.echo(f"note: tp={par.tp} spans hosts ({hw.gpus_per_host} GPUs per host)", err=True)
    if output:
        from cosim.workload.trace import write_trace

        write_trace(output, tr)
        click.echo(f"wrote {output}")
    if chakra:
        from cosim.workload.chakra import write_chakra

        files = write_chakra(tr, chakra)
        click.echo(f"wrote {len(files) - 1} Chakra ET files and {files[-1].name} to {chakra}")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(trace())
