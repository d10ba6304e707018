"""The race line (autotune/tuning/evaluation/racing.py) and how the evaluators hand it to the GPU workers; the
worker's side (two runs over the line end the timing) is in tests/test_gpu_search.py."""

from __future__ import annotations

import pytest
from test_multi import StandInCompiler, StandInWorker

from autotune.tuning.evaluation.base import Measurement, Timing
from autotune.tuning.evaluation.racing import RaceLine


def measured(ms: float, *, ok: bool = True, raced: bool = False) -> Measurement:
    return Measurement(ok=ok, timing=Timing.of([ms]), raced=raced)


def test_the_line_is_twice_the_fastest_full_measurement():
    line = RaceLine()
    assert line.threshold_ms() is None
    line.offer(measured(3.0))
    assert line.threshold_ms() == 6.0
    line.offer(measured(5.0))
    line.offer(measured(1.0, raced=True))  # a raced time never lowers the line (it cannot be a leader)
    line.offer(Measurement.failed("wrong", "too far from float64"))
    line.offer(Measurement(ok=True, timing=None))
    assert line.threshold_ms() == 6.0
    line.offer(measured(2.0))
    assert line.threshold_ms() == 4.0
    assert RaceLine(factor=1.5).threshold_ms() is None
    with pytest.raises(ValueError, match="over 1"):
        RaceLine(factor=1.0)


class TimedStandIn(StandInWorker):
    """A stand-in worker whose candidates take ``COST`` ms, and which keeps the race line each request carried."""

    SETUP_S = 0.0
    lines: list[float | None] = []

    def request(self, kind, payload, timeout):
        self.lines.append(payload["race_ms"])
        ms = float(payload["config"]["COST"])
        timing = {"median": ms, "minimum": ms, "q1": ms, "q3": ms, "maximum": ms, "reps": 5}
        return ("measured", {"ok": True, "timing": timing, "evaluate_s": 0.01}, False)


@pytest.mark.parametrize("racing", [True, False])
def test_every_gpu_of_a_search_races_against_one_line(monkeypatch, racing):
    """Four stand-in GPUs: the line a candidate is sent with is twice the fastest measured on any GPU before it
    (none before the first measurement), and no line at all without racing."""
    from autotune.spaces import get_space
    from autotune.tuning.evaluation import gpu, multi
    from autotune.tuning.evaluation.multi import MultiGpuEvaluator

    monkeypatch.setattr(gpu, "WorkerProcess", TimedStandIn)
    monkeypatch.setattr(multi, "WorkerProcess", TimedStandIn)
    monkeypatch.setattr(gpu, "Compiler", StandInCompiler)
    monkeypatch.setattr(gpu, "parent_device", lambda ordinal: TimedStandIn(ordinal).spawn())
    monkeypatch.setattr(TimedStandIn, "log", [])
    monkeypatch.setattr(TimedStandIn, "lines", [])
    space = get_space("gemm")
    evaluator = MultiGpuEvaluator(space, (256, 256, 256), list(range(4)), racing=racing)
    try:
        lines = {id(e.race_line) for e in evaluator.evaluators}
        assert len(lines) == 1
        first = evaluator.submit(dict(space.default_config, COST=8)).result(timeout=30)
        assert first.ok and TimedStandIn.lines == [None]
        for cost in (5, 9, 3, 7):
            evaluator.submit(dict(space.default_config, COST=cost)).result(timeout=30)
    finally:
        evaluator.close()
    if racing:
        assert TimedStandIn.lines == [None, 16.0, 10.0, 10.0, 6.0]
    else:
        assert TimedStandIn.lines == [None] * 5 and evaluator.evaluators[0].race_line is None
