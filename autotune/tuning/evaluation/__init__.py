"""Evaluators: configurations in, measurements out.

`GpuEvaluator` (autotune.tuning.evaluation.gpu) needs pycuda and a GPU, and is imported from its module on demand;
`ReplayEvaluator` answers from recorded measurements.
"""

from autotune.tuning.evaluation.base import FAILURE_KINDS, Evaluator, Measurement, Timing, Toolchain
from autotune.tuning.evaluation.replay import RecordedMeasurements, ReplayEvaluator

__all__ = [
    "FAILURE_KINDS",
    "Evaluator",
    "Measurement",
    "RecordedMeasurements",
    "ReplayEvaluator",
    "Timing",
    "Toolchain",
]
