"""Warm starts: a new study measures first the leaders of related studies (replayed, no GPU needed)."""

from __future__ import annotations

import dataclasses

import optuna
import pytest

from autotune.errors import InvalidArgument
from autotune.results import studies
from autotune.results.storage import resolve_url
from autotune.spaces import config_key, get_space
from autotune.spaces.optuna_mapping import config_of
from autotune.tuning import warmstart
from autotune.tuning.tune import tune

from synthetic import make_recording

OTHER_SHAPE = (2048, 1024, 1024)


def trials_of(db, name):
    return optuna.load_study(study_name=name, storage=resolve_url(db)).trials


def leaders_of(db, name, count):
    done = [t for t in trials_of(db, name) if studies.is_measured(t) and t.value is not None]
    return [config_key(t.params) for t in sorted(done, key=lambda t: t.value)[:count]]


def test_shape_distance():
    assert warmstart.shape_distance((4096, 4096, 4096), (4096, 4096, 4096)) == 0
    near = warmstart.shape_distance((2048, 2048, 2047), (2048, 2048, 2048))
    far = warmstart.shape_distance((2048, 2048, 2047), (4096, 4096, 4096))
    assert near < far


def test_a_new_shape_starts_from_the_leaders_of_the_nearest_tuned_shape(tmp_path):
    db = str(tmp_path / "s.db")
    first_rec, second_rec = tmp_path / "a.json", tmp_path / "b.json"
    make_recording(first_rec)
    make_recording(second_rec, shape=OTHER_SHAPE)
    first = tune("gemm", trials=30, db=db, replay=str(first_rec), seed=1)
    second = tune("gemm", trials=20, db=db, replay=str(second_rec), seed=2)
    assert second.seeds and all(s.startswith(first.study_name + "#") for s in second.seeds)
    trials = trials_of(db, second.study_name)
    seeded = [t for t in trials if t.user_attrs.get(studies.ROLE) == studies.SEED]
    assert len(seeded) == len(second.seeds) <= 20 * warmstart.MAX_FRACTION
    assert all(studies.is_measured(t) for t in seeded), "seeds are measured trials and count toward --trials"
    assert sum(studies.is_measured(t) for t in trials) == 20
    first_trial = min(trials, key=lambda t: t.number)
    assert first_trial.user_attrs.get(studies.ROLE) == "default", "the default stays first"
    # The seeds are the first study's leaders, fastest first, each saying where it came from.
    space = get_space("gemm")
    by_number = {t.number: t for t in trials_of(db, first.study_name)}
    for t in seeded:
        origin = by_number[int(t.user_attrs[studies.SEED_FROM].rsplit("#", 1)[1])]
        assert config_of(space, origin.params) == config_of(space, t.params)
    assert [config_key(t.params) for t in sorted(seeded, key=lambda t: t.number)] == [
        k for k in leaders_of(db, first.study_name, len(seeded) + 1) if k != config_key(space.default_config)
    ][: len(seeded)]


def test_resumed_and_unrelated_studies_get_no_seeds(tmp_path):
    db = str(tmp_path / "s.db")
    rec = tmp_path / "a.json"
    make_recording(rec)
    first = tune("gemm", trials=10, db=db, replay=str(rec), seed=1)
    assert first.seeds == [], "nothing related in an empty database"
    again = tune("gemm", trials=20, db=db, replay=str(rec), seed=1)
    assert again.seeds == [], "a resumed study is not seeded again"
    other = tmp_path / "b.json"
    make_recording(other, shape=OTHER_SHAPE)
    cold = tune("gemm", trials=10, db=db, replay=str(other), seed=1, warm_start=False)
    assert cold.seeds == []


def test_leaders_of_another_gpu_of_the_same_architecture_and_from_study(tmp_path):
    db = str(tmp_path / "s.db")
    h100 = tmp_path / "h100.json"
    rec = make_recording(h100)
    rec.device = dataclasses.replace(rec.device, name="NVIDIA H100 80GB HBM3")
    rec.save(h100)
    on_h100 = tune("gemm", trials=20, db=db, replay=str(h100), seed=1)
    h200 = tmp_path / "h200.json"
    make_recording(h200)
    on_h200 = tune("gemm", trials=20, db=db, replay=str(h200), seed=1)
    assert on_h200.seeds and all(s.startswith(on_h100.study_name) for s in on_h200.seeds)
    other = tmp_path / "b.json"
    make_recording(other, shape=OTHER_SHAPE)
    explicit = tune("gemm", trials=40, db=db, replay=str(other), seed=1, from_study=on_h100.study_name[:-4])
    assert explicit.seeds[0].startswith(on_h100.study_name), "--from comes first"
    with pytest.raises(InvalidArgument, match="2 studies start with it"):
        tune("gemm", trials=40, db=db, replay=str(other), seed=1, from_study="gemm-1024x")
    with pytest.raises(InvalidArgument, match="no such study"):
        tune("gemm", trials=40, db=db, replay=str(other), seed=1, from_study="nosuch")
