"""Which problems one search tunes: --shape (repeated), --shapes FILE, --shapes-from shapes.json."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from autotune.cli import app
from autotune.errors import InvalidArgument
from autotune.tuning.multishape import Problem, load_calls, plan


def write_calls(path, calls, version=1):
    path.write_text(json.dumps({"version": version, "calls": calls}))
    return path


def test_shapes_from_every_source_in_order_without_duplicates(tmp_path):
    listing = tmp_path / "shapes.txt"
    listing.write_text("# from the profiler\n127,4096,4096\n4096x4096x4096  # again\n\n2048x2048x2047\n")
    calls = write_calls(tmp_path / "shapes.json", [
        {"kernel": "gemm", "shape": [512, 512, 512], "dtype": "float32"},
        {"kernel": "softmax", "shape": [64, 1000], "dtype": "float32"},
    ])  # fmt: skip
    got = plan("gemm", "float32", ["4096,4096,4096", "127x4096x4096"], str(listing), str(calls))
    assert [p.shape for p in got] == [(4096,) * 3, (127, 4096, 4096), (2048, 2048, 2047), (512, 512, 512)]
    everything = plan(None, None, shapes_from=str(calls))
    assert everything == [Problem("gemm", "float32", (512, 512, 512)), Problem("softmax", "float32", (64, 1000))]
    assert plan("gemm", None) == [Problem("gemm", None, None)], "no shape: the kernel's default"


@pytest.mark.parametrize(
    "content, message",
    [
        ("not json", "is not JSON"),
        (json.dumps({"version": 2, "calls": []}), "version: expected 1"),
        (json.dumps({"version": 1, "calls": []}), "holds no calls"),
        (json.dumps({"version": 1, "calls": [{"kernel": "gemm", "shape": [0, 1, 1], "dtype": "float32"}]}), "positive"),
        (json.dumps({"version": 1, "calls": [{"kernel": "gemm", "shape": [8, 8], "dtype": "float32"}]}), "expected 3 integers"),
        (json.dumps({"version": 1, "calls": [{"kernel": "gemm", "shape": [8, 8, 8], "dtype": 3}]}), "dtype"),
        (json.dumps({"version": 1, "calls": ["gemm"]}), r"calls\[0\]"),
    ],
)
def test_a_malformed_shapes_file_is_refused_whole(tmp_path, content, message):
    path = tmp_path / "shapes.json"
    path.write_text(content)
    with pytest.raises(InvalidArgument, match=message):
        load_calls(path)


def test_bad_sources(tmp_path):
    with pytest.raises(InvalidArgument, match="nosuch"):
        load_calls(write_calls(tmp_path / "s.json", [{"kernel": "nosuch", "shape": [1], "dtype": "float32"}]))
    with pytest.raises(InvalidArgument, match="cannot read"):
        load_calls(tmp_path / "missing.json")
    with pytest.raises(InvalidArgument, match="name a KERNEL"):
        plan(None, None)
    bad = tmp_path / "bad.txt"
    bad.write_text("4096x4096x4096\n4096x\n")
    with pytest.raises(InvalidArgument, match="line 2"):
        plan("gemm", None, shapes_file=str(bad))
    calls = write_calls(tmp_path / "rows.json", [{"kernel": "softmax", "shape": [64, 1000], "dtype": "float32"}])
    with pytest.raises(InvalidArgument, match="no gemm calls"):
        plan("gemm", "float32", shapes_from=str(calls))


def test_cli_refuses_a_bad_shapes_file_in_one_line(tmp_path):
    path = tmp_path / "shapes.json"
    path.write_text("{}")
    result = CliRunner().invoke(app, ["search", "--shapes-from", str(path), "--db", str(tmp_path / "x.db")])
    assert result.exit_code == 2 and result.output.startswith("error:") and len(result.output.splitlines()) == 1
    assert not (tmp_path / "x.db").exists()


def test_a_range_is_its_buckets_sharing_one_budget(tmp_path):
    """``--shape 1-8192x4096x4096``: the buckets in bisection order (the ends, then each gap's middle: every
    bucket but the ends starts from tuned neighbours on both sides), each with an even share of --trials (at least
    MIN_BUCKET_TRIALS); a range in a shapes file too; a plain shape keeps the whole budget."""
    from autotune.tuning.multishape import MIN_BUCKET_TRIALS

    problems = plan("gemm", "float16", ["1-8192x4096x4096", "512x512x512"])
    ranged = [p for p in problems if p.range_of]
    assert [p.shape[0].bit_length() - 1 for p in ranged] == [13, 0, 6, 3, 9, 1, 4, 7, 11, 2, 5, 8, 10, 12]
    assert {p.buckets for p in ranged} == {14}
    for i, p in enumerate(ranged[2:], 2):
        done = [q.shape[0] for q in ranged[:i]]
        assert min(done) < p.shape[0] < max(done), "tuned neighbours on both sides"
    assert ranged[0].trials(200) == 14 and ranged[0].trials(20) == MIN_BUCKET_TRIALS
    assert problems[-1].shape == (512, 512, 512) and problems[-1].trials(200) == 200
    listed = tmp_path / "shapes.txt"
    listed.write_text("# a range and a shape\n100-300x64x64\n256x256x256\n")
    assert [p.shape for p in plan("gemm", None, shapes_file=str(listed))] == [
        (300, 64, 64), (100, 64, 64), (128, 64, 64), (256, 64, 64), (256, 256, 256)]  # fmt: skip


def test_the_cli_tunes_a_range_bucket_by_bucket(tmp_path, monkeypatch):
    import autotune.cli as cli

    calls = []

    class Stop(Exception):
        pass

    def first_bucket(kernel, shape, **options):
        calls.append((shape, options["trials"]))
        raise Stop

    monkeypatch.setattr(cli, "tune", first_bucket)
    result = CliRunner().invoke(app, ["search", "gemm", "--shape", "1-4x1024x1024", "--trials", "90",
                                      "--db", str(tmp_path / "r.db")])  # fmt: skip
    assert isinstance(result.exception, Stop), result.output
    assert "range 1-4x1024x1024: 3 buckets" in result.output and "30 trials each" in result.output
    assert calls == [((4, 1024, 1024), 30)], "the largest bucket first"
    replayed = CliRunner().invoke(app, ["search", "gemm", "--shape", "1-4x1024x1024", "--replay", "x.json",
                                        "--db", str(tmp_path / "r.db")])  # fmt: skip
    assert replayed.exit_code == 2 and "range 1-4x1024x1024 has several" in replayed.output
    assert len(replayed.output.strip().splitlines()) == 1
