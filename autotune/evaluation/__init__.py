"""Evaluators: configurations in, measurements out.

`GpuEvaluator` (autotune.evaluation.gpu) needs pycuda and a GPU, and is imported from its module on demand;
`ReplayEvaluator` answers from recorded measurements.
"""

from autotune.evaluation.base import FAILURE_KINDS, Evaluator, Measurement, Timing, Toolchain
from autotune.evaluation.replay import Recording, ReplayEvaluator

__all__ = ["FAILURE_KINDS", "Evaluator", "Measurement", "Recording", "ReplayEvaluator", "Timing", "Toolchain"]
