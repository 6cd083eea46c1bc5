"""The example traces shipped in ``traces/``: ``python -m cosim.workload.examples [OUT_DIR]``.

Each example is small (2 layers, 8 GPUs, short global batch) so the files stay well under 200 KB, and is
regenerated bit for bit (deterministic builder, no timestamps in the HDF5 files).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from cosim.workload.builder import build_trace
from cosim.workload.hardware import get_hardware
from cosim.workload.model import get_model
from cosim.workload.parallelism import ParallelismSpec
from cosim.workload.trace import Trace, write_trace


@dataclass(frozen=True, slots=True, kw_only=True)
class Example:
    """One shipped trace: file name, the equivalent ``cosim trace`` arguments and the specs."""

    filename: str
    cli_args: str
    model: str
    model_overrides: dict
    parallelism: dict
    gpu: str = "h100"

    def build(self) -> Trace:
        """Build this example's trace."""
        return build_trace(get_model(self.model, **self.model_overrides), ParallelismSpec(**self.parallelism),
                           get_hardware(self.gpu))


EXAMPLES = (
    Example(filename="llama2-7b-2l_tp2-pp2-dp2.h5",
            cli_args="--model llama2-7b --set model.num_layers=2 --tp 2 --pp 2 --dp 2 --micro-batch 1 "
                     "--global-batch 8 --gpu h100",
            model="llama2-7b", model_overrides={"num_layers": 2},
            parallelism=dict(tp=2, pp=2, dp=2, micro_batch_size=1, global_batch_size=8)),
    Example(filename="llama2-7b-2l_dp8-zero1.h5",
            cli_args="--model llama2-7b --set model.num_layers=2 --dp 8 --zero 1 --micro-batch 1 "
                     "--global-batch 16 --gpu h100",
            model="llama2-7b", model_overrides={"num_layers": 2},
            parallelism=dict(dp=8, zero_stage=1, micro_batch_size=1, global_batch_size=16)),
    Example(filename="llama2-13b-2l_tp4-sp-cp2.h5",
            cli_args="--model llama2-13b --set model.num_layers=2 --tp 4 --sp --cp 2 --micro-batch 1 "
                     "--global-batch 2 --gpu h100",
            model="llama2-13b", model_overrides={"num_layers": 2},
            parallelism=dict(tp=4, sequence_parallel=True, cp=2, micro_batch_size=1, global_batch_size=2)),
    Example(filename="mixtral-8x7b-2l_tp2-sp-dp4-ep4.h5",
            cli_args="--model mixtral-8x7b --set model.num_layers=2 --tp 2 --sp --dp 4 --ep 4 --zero 1 "
                     "--micro-batch 1 --global-batch 8 --gpu h100",
            model="mixtral-8x7b", model_overrides={"num_layers": 2},
            parallelism=dict(tp=2, sequence_parallel=True, dp=4, ep=4, zero_stage=1, micro_batch_size=1,
                             global_batch_size=8)),
)


def regenerate(out_dir: str | Path = "traces") -> list[Path]:
    """Write every example trace into ``out_dir``; return the paths."""
    out = Path(out_dir)
    paths = []
    for ex in EXAMPLES:
        path = out / ex.filename
        write_trace(path, ex.build())
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    """Entry point: regenerate the examples into argv[0] (default ``traces``)."""
    args = sys.argv[1:] if argv is None else argv
    for p in regenerate(args[0] if args else "traces"):
        print(f"wrote {p} ({p.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
