"""``cosim calibrate``: fit the compute model's coefficients to measured kernel profiles.

Only click and the standard library are imported at module level (fast ``--help``).
"""

from __future__ import annotations

import click

from cosim.cli.options import refuse_empty

EPILOG = """\b
Profiles: CSV files in the format of Vidur's mlp.csv (microsoft/vidur, data/ folder): one row per
(num_tokens, num_tensor_parallel_workers) point with the model shape (n_head, n_kv_head, n_embd,
n_expanded_embd, vocab_size, use_gated_mlp) and forward kernel times in milliseconds,
time_stats.<op>.median for op in attn_pre_proj, attn_post_proj, mlp_up_proj, mlp_down_proj (GEMMs),
input_layernorm, post_attention_layernorm, attn_rope, mlp_act, add, emb (memory-bound). Ops absent
from the files keep the base GPU's coefficients.
\b
The fit: GEMM time = smooth max of FLOPs/(peak·eff) with wave-quantization and small-dimension
penalties and operand bytes/(HBM·eff), plus a launch time; memory-bound op time = bytes/(HBM·eff) +
launch, one (eff, launch) per kind. Least squares on log(predicted/measured); the in-sample error
per operator is printed and stored in the file's [provenance.error] tables.
\b
Examples:
  cosim calibrate profiles/h100 --gpu h100 -o h100-mine.toml
  cosim calibrate my-gpu.csv --gpu h100 --set hbm_bytes_per_s=4e12 -o my-gpu.toml
  cosim trace --gpu h100-mine.toml --dp 8        # use the fitted coefficients
"""


class InputError(click.ClickException):
    """A CosimInputError surfaced by this command: one line ``Error: ...`` and exit code 2."""

    exit_code = 2


def _guess_gpu(source: str) -> str | None:
    from pathlib import Path

    from cosim.workload.hardware import ALIASES, preset_names

    names = set(preset_names()) | set(ALIASES)
    for part in reversed(Path(source).resolve().parts):
        if part.lower() in names:
            return ALIASES.get(part.lower(), part.lower())
    return None


def _parse_sets(sets: tuple[str, ...]) -> dict[str, object]:
    import dataclasses

    from cosim.errors import CosimInputError
    from cosim.workload.coefficients import DATASHEET_FIELDS
    from cosim.workload.hardware import HardwareSpec

    allowed = (*DATASHEET_FIELDS, "attention_efficiency", "attention_bwd_efficiency", "gemm_tile_m", "gemm_tile_n")
    types = {f.name: str(f.type) for f in dataclasses.fields(HardwareSpec)}
    out: dict[str, object] = {}
    for item in sets:
        name, sep, text = item.partition("=")
        name = name.strip().removeprefix("hardware.")
        if not sep or name not in allowed:
            raise CosimInputError(f"--set {item}", "is not FIELD=VALUE of a datasheet or unfitted field",
                                  f"choose among {', '.join(allowed)}")
        try:
            value = float(text)
        except ValueError:
            raise CosimInputError(f"--set {name}", f"cannot read {text!r} as a number") from None
        out[name] = int(value) if types[name] == "int" and value.is_integer() else value
    return out


@click.command("calibrate", epilog=EPILOG, context_settings={"max_content_width": 110})
@click.argument("profile_dir", type=click.Path(exists=True))
@click.option("-o", "--output", callback=refuse_empty, type=click.Path(dir_okay=False), required=True,
              help="Coefficients file to write (TOML, atomically).")
@click.option("--gpu", "gpu_name", default=None,
              help="GPU preset giving the datasheet numbers (peak FLOP/s, HBM bandwidth, SMs) the fit divides "
                   "by [default: a preset named in PROFILE_DIR's path].")
@click.option("--set", "sets", multiple=True, metavar="FIELD=VALUE",
              help="Override a datasheet field of the base GPU (e.g. hbm_bytes_per_s=4e12), or an unfitted one "
                   "(attention_efficiency, attention_bwd_efficiency, gemm_tile_m, gemm_tile_n).")
@click.option("--source", default=None, help="Where the profiles come from, recorded in the provenance "
              "[default: the profile paths].")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing on success.")
def calibrate(profile_dir: str, output: str, gpu_name: str | None, sets: tuple[str, ...], source: str | None,
              quiet: bool) -> None:
    """Fit compute-model coefficients to the kernel profiles in PROFILE_DIR (a CSV file, or every *.csv
    below a directory) and write them to a coefficients file that --gpu accepts (cosim trace, experiment
    workload.gpu)."""
    from cosim.errors import CosimInputError

    try:
        _run(profile_dir, output, gpu_name, sets, source, quiet)
    except CosimInputError as exc:
        raise InputError(str(exc)) from None


def _run(profile_dir: str, output: str, gpu_name: str | None, sets: tuple[str, ...], source: str | None,
         quiet: bool) -> None:
    from pathlib import Path

    from cosim.errors import CosimInputError
    from cosim.h5io import atomic_output
    from cosim.workload import calibrate as cal
    from cosim.workload.coefficients import DATASHEET_FIELDS, format_coefficients
    from cosim.workload.hardware import get_hardware

    gpu = gpu_name or _guess_gpu(profile_dir)
    if gpu is None:
        raise CosimInputError("--gpu", "no GPU preset named in the profile path", "give --gpu, e.g. --gpu h100")
    overrides = _parse_sets(sets)
    base = get_hardware(gpu, **overrides)
    files = cal.find_profiles(profile_dir)
    profiles = cal.read_profiles(files)
    fit = cal.fit_profiles(profiles, base)
    datasheet = {k: v for k, v in overrides.items() if k in DATASHEET_FIELDS}
    text = format_coefficients(
        gpu=base.name, datasheet=datasheet, coefficients=cal.coefficient_table(fit.hardware),
        provenance=cal.provenance(fit, profiles, source=source or ", ".join(map(str, files)), gpu=base.name),
        header="Compute-model coefficients for cosim, written by `cosim calibrate` (see docs/models/compute.md).")
    with atomic_output(output) as tmp:
        Path(tmp).write_text(text)
    if not quiet:
        click.echo(f"fitted {len(files)} profile file(s), {profiles.n_rows} rows, on {base.name} datasheet numbers")
        click.echo("in-sample |predicted/measured - 1|:")
        click.echo(cal.format_errors(fit.errors))
        click.echo(f"wrote {output}")
