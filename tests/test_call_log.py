"""autotune.record and load_shapes: what reaches the dispatcher is listed once per problem; a hand-edited file
is checked like an import (refused whole, one line naming where)."""

from __future__ import annotations

import copy
import json
import threading

import pytest

import autotune
from autotune.errors import InvalidArgument
from autotune.runtime import call_log
from autotune.runtime.launch_plan import LaunchPlan
from autotune.runtime.problem_plan import ProblemPlan
from autotune.runtime.selection import Choice


def test_record_lists_each_problem_once_in_order(tmp_path):
    assert call_log.ACTIVE is None
    with autotune.record() as outer:
        call_log.note("gemm", (64, 64, 64), "float32")
        with autotune.record(tmp_path / "inner.json") as inner:
            call_log.note("softmax", (8, 128), "float32")
            call_log.note("gemm", (64, 64, 64), "float32")
        call_log.note("layernorm", (8, 128), "float32")
    assert call_log.ACTIVE is None, "nothing records once the blocks are left"
    call_log.note("gemm", (1, 1, 1), "float32")
    assert outer.calls == [("gemm", (64, 64, 64), "float32"), ("softmax", (8, 128), "float32"),
                           ("layernorm", (8, 128), "float32")]  # fmt: skip
    assert outer.count(("gemm", (64, 64, 64), "float32")) == 2
    assert inner.calls == [("softmax", (8, 128), "float32"), ("gemm", (64, 64, 64), "float32")]
    data = json.loads((tmp_path / "inner.json").read_text())
    assert data == {"version": 1, "calls": [{"kernel": "softmax", "shape": [8, 128], "dtype": "float32"},
                                            {"kernel": "gemm", "shape": [64, 64, 64], "dtype": "float32"}]}  # fmt: skip
    assert autotune.load_shapes(tmp_path / "inner.json") == inner.calls


def test_calls_from_other_threads_are_recorded():
    with autotune.record() as calls:
        worker = threading.Thread(target=call_log.note, args=("softmax", (2, 2), "float32"))
        worker.start()
        worker.join()
    assert calls.calls == [("softmax", (2, 2), "float32")]


def test_the_dispatchers_plans_note_each_call():
    """Both ways into a plan (pointers by name, and in order: the torch path) tell the recorder."""
    launches = LaunchPlan(None, [], lambda kernel, shared: 0, (), {})  # type: ignore[arg-type]
    plan = ProblemPlan((8, 128), "float32", Choice.__new__(Choice), launches, {}, {}, kernel="softmax")
    with autotune.record() as calls:
        plan.run(None, {}, 0)  # type: ignore[arg-type]
        plan.launch(None, [], 0)  # type: ignore[arg-type]
    assert calls.calls == [("softmax", (8, 128), "float32")], "each problem once"
    with autotune.record() as calls:
        plan.launch(None, [], 0)  # type: ignore[arg-type]
    assert calls.calls == [("softmax", (8, 128), "float32")]


def good() -> dict:
    return {"version": 1, "calls": [{"kernel": "gemm", "shape": [128, 256, 64], "dtype": "float32"},
                                    {"kernel": "softmax", "shape": [8, 1000], "dtype": "float32"}]}  # fmt: skip


def _second(d: dict) -> dict:
    return d["calls"][1]


MUTATIONS = [
    ("version", lambda d: d.update(version=2), "version: expected 1"),
    ("no calls", lambda d: d.pop("calls"), "calls: missing"),
    ("calls not a list", lambda d: d.update(calls={}), "calls: expected a list"),
    ("entry not an object", lambda d: d["calls"].append(3), "calls[2]: expected an object"),
    ("unknown kernel", lambda d: _second(d).update(kernel="fft"), "calls[1]: unknown kernel 'fft'"),
    ("unsupported dtype", lambda d: _second(d).update(dtype="float64"), "calls[1]: softmax does not support"),
    ("dims", lambda d: _second(d).update(shape=[8]), "calls[1].shape: expected 2 integers [rows, cols]"),
    ("string dim", lambda d: _second(d).update(shape=[8, "1000"]), "calls[1].shape: expected 2 integers"),
    ("float dim", lambda d: _second(d).update(shape=[8, 1000.0]), "calls[1].shape: expected 2 integers"),
    ("zero dim", lambda d: _second(d).update(shape=[0, 1000]), "calls[1].shape: shape '0x1000': rows must be"),
    ("missing dtype", lambda d: _second(d).pop("dtype"), "calls[1].dtype: missing"),
    ("extra field", lambda d: _second(d).update(count=3), "calls[1]: unknown field 'count'"),
]


@pytest.mark.parametrize("name, mutate, message", MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_hand_edited_files_are_refused_with_one_line(tmp_path, name, mutate, message):
    path = tmp_path / "shapes.json"
    path.write_text(json.dumps(good()))
    assert len(autotune.load_shapes(path)) == 2  # unmutated, the file is fine
    data = copy.deepcopy(good())
    mutate(data)
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidArgument) as err:
        autotune.load_shapes(path)
    text = str(err.value)
    assert text.startswith(f"{path}: ") and message in text and "\n" not in text, text


def test_unreadable_files(tmp_path):
    with pytest.raises(InvalidArgument, match="cannot read"):
        autotune.load_shapes(tmp_path / "missing.json")
    (tmp_path / "x.json").write_text("{oops")
    with pytest.raises(InvalidArgument, match="is not JSON"):
        autotune.load_shapes(tmp_path / "x.json")
