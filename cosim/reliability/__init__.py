"""What failures cost a training job of N GPUs: component counts, failure rates, MTTF, checkpoint interval
(Young/Daly), effective training time ratio (ETTR) and tokens per day (the model: cosim/reliability/model.py)."""

from cosim.reliability.components import ComponentCounts, clos_counts, fabric_counts
from cosim.reliability.model import (
    PRESETS,
    FailureRates,
    JobReliability,
    daly_interval_s,
    ettr,
    evaluate,
    failure_rates,
    young_interval_s,
)

__all__ = ["PRESETS", "ComponentCounts", "FailureRates", "JobReliability", "clos_counts", "daly_interval_s",
           "ettr", "evaluate", "fabric_counts", "failure_rates", "young_interval_s"]
