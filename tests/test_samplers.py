"""Samplers on real measurements: the exhaustive H200 recording of a narrowed gemm space (tests/data)."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from autotune.errors import InvalidArgument
from autotune.tuning.evaluation import RecordedMeasurements, ReplayEvaluator
from autotune.tuning.samplers import SAMPLERS, make_sampler
from autotune.tuning.tune import tune

RECORDING = Path(__file__).parent / "data" / "replay_gemm_h200.json"


@pytest.fixture(scope="module")
def recording():
    return RecordedMeasurements.load(RECORDING)


def best_found(recording, sampler, seed, trials, tmp_path):
    evaluator = ReplayEvaluator(recording)
    report = tune(
        "gemm", recording.shape, trials=trials, db=str(tmp_path / f"{sampler}{seed}.db"), sampler=sampler, seed=seed,
        evaluator=evaluator, template_hash=recording.template_hash, domains=recording.domains,
    )  # fmt: skip
    assert not evaluator.unrecorded, "the driver proposed only configurations of the narrowed space"
    return report.best.time_ms


def test_recording_is_exhaustive_and_real(recording):
    assert recording.device.name == "NVIDIA H200"
    assert len(recording.configs) == 424 and all(m.ok for m in recording.measurements.values())
    times = sorted(m.time_ms for m in recording.measurements.values())
    assert times[-1] / times[0] > 3, "a space where the choice matters"


def test_a_gz_recording_round_trips_compressed(recording, tmp_path):
    path = tmp_path / "rec.json.gz"
    recording.save(path)
    assert path.read_bytes()[:2] == b"\x1f\x8b", "gzip"
    again = RecordedMeasurements.load(path)
    assert again.configs == recording.configs and again.domains == recording.domains
    assert {k: m.time_ms for k, m in again.measurements.items()} == {
        k: m.time_ms for k, m in recording.measurements.items()}
    path.write_bytes(b"\x1f\x8bnot gzip")
    with pytest.raises(InvalidArgument, match="cannot read replay recording"):
        RecordedMeasurements.load(path)


@pytest.mark.parametrize("spoil, message", [
    (lambda d: d.pop("kernel"), "replay_gemm_h200.json: it lacks kernel"),
    (lambda d: [d.pop(k) for k in ("kernel", "domains", "records")], "it lacks kernel, domains, records"),
    (lambda d: d["records"][3].pop("measurement"), "a field is missing: 'measurement'"),
    (lambda d: d.update(records=[1]), "cannot read replay recording"),
], ids=["no kernel", "three missing", "record without measurement", "record not an object"])  # fmt: skip
def test_an_incomplete_recording_names_what_it_lacks(tmp_path, spoil, message):
    """Before, a missing field read as `…: 'kernel'` (a KeyError's text)."""
    import json

    data = json.loads(RECORDING.read_text())
    spoil(data)
    path = tmp_path / RECORDING.name
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidArgument, match=message):
        RecordedMeasurements.load(path)


def test_a_recording_of_another_dtype_is_named_as_such(recording, tmp_path):
    """Before: `gemm has no parameter 'BM'` (the fp32 SIMT parameters, unknown to the fp16 algorithms)."""
    with pytest.raises(InvalidArgument, match=r"was recorded for gemm float32, not float16$"):
        tune("gemm", recording.shape, trials=3, dtype="float16", replay=str(RECORDING), db=str(tmp_path / "d.db"))
    fp16 = tmp_path / "fp16.json"
    recording.dtype = "float16"  # as a file recorded at float16 says (the dtype is saved since)
    recording.save(fp16)
    assert RecordedMeasurements.load(fp16).dtype == "float16"
    with pytest.raises(InvalidArgument, match="was recorded for gemm float16, not float32"):
        tune("gemm", recording.shape, trials=3, dtype="float32", replay=str(fp16), db=str(tmp_path / "d.db"))
    with pytest.raises(InvalidArgument, match=r"fp16.json does not fit gemm float16 here: gemm has no parameter"):
        tune("gemm", recording.shape, trials=3, replay=str(fp16), db=str(tmp_path / "d.db"))
    assert not (tmp_path / "d.db").exists()


def test_a_recording_older_than_a_parameter_loads_at_its_default(recording, h200):
    """Recorded before split-K existed: each configuration ran SPLIT_K = 1, and the search proposes only that."""
    from autotune.spaces import get_space

    assert recording.domains["simt.SPLIT_K"] == [1]
    assert all(c["ALGO"] == "simt" and c["SPLIT_K"] == 1 for c in recording.configs.values())
    space = get_space("gemm", recording.domains)
    assert space.domain("simt.SPLIT_K") == (1,)
    assert not [c for c in recording.configs.values() if "missing" in " ".join(space.violations(c, recording.shape, h200))]


def test_tpe_finds_near_optimal_configs_and_beats_random(recording, tmp_path):
    optimum = min(m.time_ms for m in recording.measurements.values())
    tpe = [best_found(recording, "tpe", seed, 60, tmp_path) / optimum for seed in range(5)]
    rnd = [best_found(recording, "random", seed, 60, tmp_path) / optimum for seed in range(5)]
    assert max(tpe) <= 1.05, tpe  # every seed within 5 % of the best of all 424, measuring 60 of them
    assert statistics.median(tpe) <= statistics.median(rnd), (tpe, rnd)


@pytest.mark.parametrize("sampler, needs", [("cmaes", ("cmaes",)), ("gp", ("torch", "scipy"))])
def test_cmaes_and_gp_search_the_real_recording(recording, tmp_path, sampler, needs):
    import importlib.util

    missing = [m for m in needs if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"sampler {sampler} needs {', '.join(missing)}")
    optimum = min(m.time_ms for m in recording.measurements.values())
    # gp models only complete trials: rejected proposals reach it as penalties (else it re-proposes them forever)
    assert best_found(recording, sampler, 0, 30, tmp_path) <= 1.10 * optimum


def test_grid_measures_everything(recording, tmp_path):
    report_time = best_found(recording, "grid", 0, 424, tmp_path)
    assert report_time == min(m.time_ms for m in recording.measurements.values())


def test_sampler_names():
    assert set(SAMPLERS) == {"tpe", "random", "cmaes", "gp", "grid"}
    with pytest.raises(InvalidArgument, match="unknown sampler"):
        make_sampler("bayes")
    for name in ("tpe", "random", "grid"):
        assert make_sampler(name, 0) is not None


@pytest.mark.parametrize("seed", [-1, 2**32, 2**64])
def test_a_seed_numpy_cannot_take_is_refused_before_any_work(seed, tmp_path):
    with pytest.raises(InvalidArgument, match=r"--seed must be between 0 and 4294967295"):
        make_sampler("tpe", seed)
    with pytest.raises(InvalidArgument, match="--seed"):
        tune("gemm", (1024, 1024, 1024), trials=2, seed=seed, replay=str(RECORDING), db=str(tmp_path / "s.db"))
    assert not (tmp_path / "s.db").exists()
    for edge in (0, 2**32 - 1):
        make_sampler("random", edge)
