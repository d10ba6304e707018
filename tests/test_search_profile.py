"""The per-phase profile of a search (--profile)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from autotune.cli import app
from autotune.tuning.evaluation import Measurement
from autotune.tuning.search_profile import Profile

from synthetic import make_recording


def test_phases_add_up_per_candidate():
    profile = Profile(wall_s=10.0)
    profile.add(Measurement(ok=True, compile_s=1.5, compile_cached=False, queue_s=0.25, evaluate_s=0.5, validate_s=0.2))
    profile.add(Measurement(ok=True, compile_s=0.01, compile_cached=True, evaluate_s=0.5))  # older worker: no split
    profile.add(Measurement.failed("compile", "nvcc failed", compile_s=2.0, compile_cached=False))
    assert (profile.measured, profile.compiled, profile.cached) == (3, 2, 1)
    assert profile.compile_s == pytest.approx(3.5) and profile.queue_s == pytest.approx(0.25)
    assert profile.validate_s == pytest.approx(0.7) and profile.time_s == pytest.approx(0.3)
    assert profile.gpu_busy == pytest.approx(0.1)
    with profile.optuna():
        pass
    assert profile.optuna_s >= 0 and len(profile.lines()) == 7


def test_search_prints_its_profile(tmp_path):
    rec = tmp_path / "rec.json"
    make_recording(rec)
    result = CliRunner().invoke(
        app, ["search", "gemm", "--trials", "12", "--replay", str(rec), "--db", str(tmp_path / "p.db"), "--profile"]
    )
    assert result.exit_code == 0, result.output
    assert "profile: 12 candidates" in result.output and "optuna (driver)" in result.output


def test_the_start_up_phases_are_one_line():
    profile = Profile(wall_s=10.0)
    profile.add(Measurement(ok=True, evaluate_s=0.5, validate_s=0.2, raced=True))
    assert profile.raced == 1 and "1 raced (two runs only)" in "\n".join(profile.lines())
    assert not any("start-up" in line for line in profile.lines())  # a replay has none
    profile.startup = {"worker": 1.25, "build": 1.5, "setup": 4.0, "others": 2.0}
    (line,) = [line for line in profile.lines() if "start-up" in line]
    assert "8.8 s" in line and "GPU worker 1.2 s" in line and "inputs and references 4.0 s" in line
    assert "the other GPUs 2.0 s" in line and profile.to_dict()["startup"]["setup"] == 4.0
