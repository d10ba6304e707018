"""Racing: a candidate clearly slower than the search's fastest is not timed to the full count.

The GPU worker times a candidate once (warm, L2 flushed) to choose its repetitions. Where that run is over the
race line (``factor`` times the fastest median measured so far in this search), it is timed once more, and if
that run is over the line too, the two runs are its measurement (`Measurement.raced`): it cannot be among the
leaders, and the sampler learns from the two runs what it would learn from twenty. A candidate under the line is
timed as always, and the leaders are re-timed side by side at the end of the search whatever happened here.

At 8192³ fp32 a slow candidate ran 454 ms a launch: five more runs were 2.3 s of a GPU that four others waited on
(issue 24); issue 23 asks for less GPU time per candidate without losing fidelity.
"""

from __future__ import annotations

import threading

from autotune.tuning.evaluation.base import Measurement

RACE_FACTOR = 2.0  # "clearly slower": twice the fastest median; one flushed run varies by a few percent


class RaceLine:
    """The fastest fully timed median of a search, shared by the evaluators of its GPUs; thread-safe."""

    def __init__(self, factor: float = RACE_FACTOR) -> None:
        if not factor > 1.0:
            raise ValueError(f"a race factor must be over 1, got {factor}")
        self.factor = factor
        self._fastest_ms: float | None = None
        self._lock = threading.Lock()

    def offer(self, measurement: Measurement) -> None:
        """A measurement of the search: a fully timed, correct one may lower the line."""
        ms = measurement.time_ms
        if not measurement.ok or measurement.raced or ms is None or ms <= 0:
            return
        with self._lock:
            if self._fastest_ms is None or ms < self._fastest_ms:
                self._fastest_ms = ms

    def threshold_ms(self) -> float | None:
        """The time past which a run is clearly slower (None before any full measurement)."""
        with self._lock:
            return None if self._fastest_ms is None else self.factor * self._fastest_ms
