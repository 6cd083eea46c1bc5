"""The analytic reliability model of a training job: failure rates → MTTF → checkpoint interval → ETTR.

Failures of every component are independent Poisson processes, so the job's interruption rate is the sum
of count × rate over the components it spans, and its mean time to failure (MTTF) is the inverse. The job
checkpoints every ``τ`` seconds of work (a write costs ``δ``) and, after each interruption, spends ``R``
seconds restarting and restoring, then redoes the work since the last checkpoint. Daly's complete model
(FGCS 22, 2006) gives the expected wall time per second of work, exact for exponential failures that may
also strike during a checkpoint or a restart::

    T_wall / T_work = (M / τ) · exp(R / M) · (exp((τ + δ) / M) − 1)

ETTR (effective training time ratio) is its inverse. The interval defaults to Daly's higher-order optimum
``sqrt(2δM)·(1 + sqrt(δ/2M)/3 + (δ/2M)/9) − δ`` (``M`` when ``δ ≥ 2M``); Young's first-order
``sqrt(2δM)`` (CACM 17, 1974) is available beside it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from cosim import values as v
from cosim.errors import CosimInputError
from cosim.reliability.components import KINDS, ComponentCounts

HOURS_PER_FIT = 1e9  # a FIT is one failure per 10^9 device-hours
SECONDS_PER_DAY = 86_400.0


@dataclass(frozen=True, slots=True, kw_only=True)
class FailureRates:
    """Interrupting failures per component, in FIT (failures per 10^9 device-hours)."""

    gpu_fit: float = v.spec_field(v.Real(minimum=0.0), 0.0, "per GPU: GPU, HBM, SRAM, GSP, thermal")
    host_fit: float = v.spec_field(v.Real(minimum=0.0), 0.0, "per server: CPU, DRAM, SSD, PSU, chassis, maintenance")
    nic_fit: float = v.spec_field(v.Real(minimum=0.0), 0.0, "per NIC")
    link_fit: float = v.spec_field(v.Real(minimum=0.0), 0.0, "per link: cable and optics")
    switch_fit: float = v.spec_field(v.Real(minimum=0.0), 0.0, "per switch")
    software_fit: float = v.spec_field(v.Real(minimum=0.0), 0.0,
                                       "per GPU: software bugs, collective timeouts, silent data corruption")

    def __post_init__(self) -> None:
        v.check_fields(self, "rates")

    def per_hour(self, counts: ComponentCounts) -> dict[str, float]:
        """Interruptions per hour that each component kind (and ``software``) contributes to a job."""
        rates = {kind: counts.of(kind) * getattr(self, f"{kind}_fit") / HOURS_PER_FIT for kind in KINDS}
        rates["software"] = counts.gpus * self.software_fit / HOURS_PER_FIT
        return rates


def _llama3_preset() -> FailureRates:
    """Rates from the 419 unexpected interruptions of Llama 3 405B pre-training (Meta, 2024: 16,384 H100
    GPUs, 2,048 servers, 54 days). Switch and cable failures (35) are split evenly between switches and
    links counted by :func:`cosim.reliability.components.clos_counts` (radix 64: 1,280 switches, 49,152
    links), an assumption: the source does not break them down."""
    gpus, servers, hours = 16_384, 2_048, 54 * 24
    switches, links = 1_280, 3 * gpus

    def fit(failures: float, count: int) -> float:
        return failures / (count * hours) * HOURS_PER_FIT

    return FailureRates(gpu_fit=fit(148 + 72 + 19 + 17 + 6, gpus),  # GPU, HBM3, SRAM, GSP, thermal interface
                        host_fit=fit(32 + 2 + 2 + 3 + 3 + 2 + 2, servers),  # maintenance, CPU, DRAM, SSD, PSU...
                        nic_fit=fit(7, gpus), link_fit=fit(17.5, links), switch_fit=fit(17.5, switches),
                        software_fit=fit(54 + 7 + 6 + 2, gpus))  # bugs, NCCL watchdog, SDC, dependencies


#: named failure-rate presets (``cosim reliability --preset``)
PRESETS: dict[str, FailureRates] = {"llama3-h100": _llama3_preset(), "none": FailureRates()}


def failure_rates(preset: str, overrides: dict[str, object] | None = None) -> FailureRates:
    """The preset ``preset`` with fields replaced by ``overrides`` (``gpu_fit`` = value, ...)."""
    if preset not in PRESETS:
        raise CosimInputError("preset", f"unknown failure-rate preset {preset!r}", f"use one of {sorted(PRESETS)}")
    base = PRESETS[preset]
    fields = {f.name for f in dataclasses.fields(FailureRates)}
    for key in overrides or {}:
        if key not in fields:
            raise CosimInputError(f"--set {key}", "is not a failure rate", f"use one of {sorted(fields)}")
    return dataclasses.replace(base, **(overrides or {}))


def young_interval_s(checkpoint_write_s: float, mttf_s: float) -> float:
    """Young's first-order optimal checkpoint interval ``sqrt(2 δ M)``, seconds of work."""
    return math.sqrt(2.0 * checkpoint_write_s * mttf_s)


def daly_interval_s(checkpoint_write_s: float, mttf_s: float) -> float:
    """Daly's higher-order optimal checkpoint interval, seconds of work (``M`` when ``δ ≥ 2M``)."""
    d, m = checkpoint_write_s, mttf_s
    if math.isinf(m):
        return math.inf
    if d >= 2.0 * m:
        return m
    x = d / (2.0 * m)
    return math.sqrt(2.0 * d * m) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - d


def ettr(*, interval_s: float, checkpoint_write_s: float, restart_s: float, mttf_s: float) -> float:
    """Effective training time ratio: seconds of work kept per wall-clock second (Daly's complete model)."""
    tau, d, r, m = interval_s, checkpoint_write_s, restart_s, mttf_s
    if not tau > 0:
        raise CosimInputError("interval_s", f"must be > 0, got {tau}")
    if math.isinf(m):
        return 1.0 if math.isinf(tau) else tau / (tau + d)
    if math.isinf(tau):
        return 0.0
    return tau / (m * math.exp(r / m) * math.expm1((tau + d) / m))


@dataclass(frozen=True, slots=True, kw_only=True)
class JobReliability:
    """The model's answer for one job size (units in the names)."""

    counts: ComponentCounts
    interruptions_per_day: float
    mttf_h: float
    checkpoint_interval_s: float
    ettr: float
    tokens_per_day: float  # 0 when no iteration time was given


def evaluate(counts: ComponentCounts, rates: FailureRates, *, checkpoint_write_s: float, restart_s: float,
             interval_s: float | None = None, iteration_s: float | None = None,
             tokens_per_gpu_iteration: float = 0.0) -> JobReliability:
    """MTTF, checkpoint interval (Daly's optimum unless ``interval_s``), ETTR and tokens per day of a job.

    Tokens per day assume weak scaling: every GPU processes ``tokens_per_gpu_iteration`` tokens per
    iteration of ``iteration_s`` seconds (a simulated iteration time) whatever the job size.
    """
    for name, value in (("checkpoint_write_s", checkpoint_write_s), ("restart_s", restart_s)):
        if not (value >= 0 and math.isfinite(value)):
            raise CosimInputError(name, f"must be a finite number >= 0, got {value}")
    per_hour = sum(rates.per_hour(counts).values())
    mttf_s = math.inf if per_hour == 0 else 3600.0 / per_hour
    tau = daly_interval_s(checkpoint_write_s, mttf_s) if interval_s is None else interval_s
    if math.isinf(tau):  # no failures: never checkpoint
        ratio = 1.0
    else:
        ratio = ettr(interval_s=tau, checkpoint_write_s=checkpoint_write_s, restart_s=restart_s, mttf_s=mttf_s)
    tokens = 0.0
    if iteration_s:
        tokens = ratio * SECONDS_PER_DAY / iteration_s * tokens_per_gpu_iteration * counts.gpus
    return JobReliability(counts=counts, interruptions_per_day=per_hour * 24.0, mttf_h=mttf_s / 3600.0,
                          checkpoint_interval_s=tau, ettr=ratio, tokens_per_day=tokens)
