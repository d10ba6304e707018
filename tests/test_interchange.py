"""autotune export / import: round trip, and malformed files refused whole."""

from __future__ import annotations

import copy
import json

import pytest
from typer.testing import CliRunner

from autotune.cli import app
from autotune.errors import InvalidArgument
from autotune.results import interchange
from autotune.results.storage import BestEntry, Database, resolve_url
from autotune.spaces import get_space

from conftest import file_digest


def entry(device="NVIDIA H200", shape="4096x4096x4096", time_ms=3.1, **params) -> BestEntry:
    config = {**get_space("gemm").default_config, **params}
    return BestEntry(
        device_name=device, compute_capability="9.0", kernel="gemm", shape=shape, dtype="float32",
        template_hash="ab" * 32, params=config, time_ms=time_ms, metric=44.3, metric_unit="TFLOP/s",
        default_time_ms=3.5, driver_version="580.159.04", nvcc_version="13.0.88", study_name="s", trial_number=3,
    )  # fmt: skip


@pytest.fixture
def source_db(tmp_path):
    db = Database(resolve_url(tmp_path / "src.db"))
    with_code = entry(shape="1024x1024x1024", time_ms=0.07, BM=64)
    with_code.code_hash = "c0de" * 16
    db.import_entries([entry(), with_code, entry(device="NVIDIA H100 80GB HBM3", time_ms=3.9)], overwrite=True)
    db.close()
    return tmp_path / "src.db"


def test_round_trip_through_the_cli(tmp_path, source_db):
    runner = CliRunner()
    out = tmp_path / "configs.json"
    result = runner.invoke(app, ["export", "--out", str(out), "--db", str(source_db)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["format"] == interchange.FORMAT and len(data["devices"]) == 2
    target = tmp_path / "dst.db"
    result = runner.invoke(app, ["import", str(out), "--db", str(target)])
    assert result.exit_code == 0 and "3 added" in result.output
    src = {(r.device_name, r.shape): r.to_dict() for r in Database(resolve_url(source_db), create=False).best()}
    dst = {(r.device_name, r.shape): r.to_dict() for r in Database(resolve_url(target), create=False).best()}
    for key in src:
        for field in ("params", "time_ms", "metric", "template_hash", "nvcc_version", "driver_version"):
            assert src[key][field] == dst[key][field]
    assert src.keys() == dst.keys()
    reader = Database(resolve_url(target), create=False)
    codes = {(r.device_name, r.shape): reader.code_hashes().get(r.id) for r in reader.best()}
    assert codes == {("NVIDIA H200", "1024x1024x1024"): "c0de" * 16, ("NVIDIA H200", "4096x4096x4096"): None,
                     ("NVIDIA H100 80GB HBM3", "4096x4096x4096"): None}  # the machine-code identity travels along
    # Importing again keeps what is stored unless asked to overwrite.
    again = runner.invoke(app, ["import", str(out), "--db", str(target)])
    assert "3 already stored and kept" in again.output
    assert "3 replaced" in runner.invoke(app, ["import", str(out), "--db", str(target), "--overwrite"]).output


def test_export_one_device(tmp_path, source_db):
    out = tmp_path / "h100.json"
    CliRunner().invoke(app, ["export", "--out", str(out), "--device", "NVIDIA H100 80GB HBM3", "--db", str(source_db)])
    data = json.loads(out.read_text())
    assert [d["device_name"] for d in data["devices"]] == ["NVIDIA H100 80GB HBM3"]


def config_of(e: BestEntry) -> dict:
    data = dict(vars(e))
    del data["device_name"], data["compute_capability"]
    return data


def valid_file() -> dict:
    """Two good entries; the mutations below spoil the second, so a good one precedes the bad one."""
    configs = [config_of(entry(shape="2048x2048x2048")), config_of(entry())]
    return {"format": interchange.FORMAT,
            "devices": [{"device_name": "NVIDIA H200", "compute_capability": "9.0", "configs": configs}]}  # fmt: skip


def second(d: dict) -> dict:
    return d["devices"][0]["configs"][1]


MUTATIONS = [
    ("format", lambda d: d.update(format="autotune-configs/9"), "file.format"),
    ("devices not a list", lambda d: d.update(devices={}), "file.devices: expected list"),
    ("no device name", lambda d: d["devices"][0].pop("device_name"), "device_name: missing"),
    ("bad cc", lambda d: d["devices"][0].update(compute_capability="nine"), "compute_capability"),
    ("cc 99.9", lambda d: d["devices"][0].update(compute_capability="99.9"), "99.9 is no CUDA GPU's"),
    ("cc 0.1", lambda d: d["devices"][0].update(compute_capability="0.1"), "0.1 is no CUDA GPU's"),
    ("cc 09.0", lambda d: d["devices"][0].update(compute_capability="09.0"), "write '9.0', not '09.0'"),
    ("one model, two ccs", lambda d: d["devices"].append(dict(d["devices"][0], compute_capability="8.9")),
     "devices[1].compute_capability: NVIDIA H200 has compute capability 9.0 elsewhere in the file, not 8.9"),
    ("unknown kernel", lambda d: second(d).update(kernel="fft"), "unknown kernel 'fft'"),
    ("bad shape", lambda d: second(d).update(shape="4096x"), "malformed shape"),
    ("zero dim", lambda d: second(d).update(shape="0x1x1"), "positive integer"),
    ("dtype", lambda d: second(d).update(dtype="float64"), "dtype"),
    ("hash", lambda d: second(d).update(template_hash="xyz"), "template_hash"),
    ("unknown param", lambda d: second(d)["params"].update(XX=1), "no parameter 'XX'"),
    ("param value", lambda d: second(d)["params"].update(BM=96), "params.BM"),
    ("missing param", lambda d: second(d)["params"].pop("BK"), "missing BK"),
    ("negative time", lambda d: second(d).update(time_ms=-1), "time_ms"),
    ("nan metric", lambda d: second(d).update(metric=float("nan")), "metric"),
    ("string time", lambda d: second(d).update(time_ms="3"), "time_ms: expected"),
    ("unit", lambda d: second(d).update(metric_unit="flops"), "metric_unit"),
    ("trial", lambda d: second(d).update(trial_number=True), "trial_number"),
    ("code hash", lambda d: second(d).update(code_hash="cafe"), "code_hash: expected 64 hex digits"),
    # Every value in its domain, but the warp tile 8x16 cannot hold 32 threads of 8x4: the dispatcher would fail.
    ("constraints", lambda d: second(d)["params"].update(BM=32, BN=64, WARPS_M=4, WARPS_N=4, TM=8, TN=4),
     "params: not valid for gemm 4096x4096x4096 on NVIDIA H200 (cc 9.0): warp tile 8x16"),
    # 66560 B of shared memory: fine on a 9.0 device, beyond a 7.5 one's 64 KiB.
    ("device limits", lambda d: (d["devices"][0].update(compute_capability="7.5"), second(d)["params"].update(BK=32)),
     "on NVIDIA H200 (cc 7.5): 66560 B of shared memory"),
]


@pytest.mark.parametrize("name, mutate, message", MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_malformed_files_are_refused_whole(tmp_path, source_db, name, mutate, message):
    data = valid_file()
    assert len(interchange.parse(copy.deepcopy(data))) == 2  # unmutated, the file is fine
    mutate(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    before = file_digest(source_db)
    result = CliRunner().invoke(app, ["import", str(path), "--db", str(source_db)])
    assert result.exit_code == 2, result.output
    assert message in result.output and result.output.startswith("error:"), result.output
    assert len(result.output.strip().splitlines()) == 1
    assert file_digest(source_db) == before, "nothing written, not even the good first entry"


def test_overwrite_refuses_a_config_the_space_forbids(tmp_path, source_db):
    """--overwrite replaces stored rows, but only with configurations that can run: one bad entry refuses all."""
    data = valid_file()
    data["devices"][0]["configs"][0]["shape"] = "1024x1024x1024"  # both keys are stored in source_db
    second(data)["params"].update(BM=32, BN=64, WARPS_M=4, WARPS_N=4, TM=8, TN=4)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    before = file_digest(source_db)
    result = CliRunner().invoke(app, ["import", str(path), "--overwrite", "--db", str(source_db)])
    assert result.exit_code == 2 and "not valid for gemm" in result.output, result.output
    assert file_digest(source_db) == before
    second(data)["params"].update(BK=32, BM=128, BN=128, WARPS_M=2, WARPS_N=4, TM=4, TN=4)  # valid on cc 9.0
    path.write_text(json.dumps(data))
    result = CliRunner().invoke(app, ["import", str(path), "--overwrite", "--db", str(source_db)])
    assert result.exit_code == 0 and "2 replaced" in result.output, result.output


def test_not_json(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("{not json")
    with pytest.raises(InvalidArgument, match="is not JSON"):
        interchange.read(path)
    with pytest.raises(InvalidArgument, match="cannot read"):
        interchange.read(tmp_path / "missing.json")


@pytest.mark.parametrize("content, message", [
    (b"\x7fELF\x02\x01\x01\x00\xff\xfe", "is not JSON: byte 8 is not UTF-8 text"),  # a cubin given by mistake
    (b"SQLite format 3\x00\x10\x00\x02\x02\x00\x40\x20\x20\x00\x00\x00\x8d", "is not UTF-8 text"),
    (b"[" * 100_000 + b"]" * 100_000, "not a file autotune export writes"),
], ids=["cubin", "sqlite", "deep nesting"])  # fmt: skip
def test_a_binary_or_hostile_file_is_one_line(tmp_path, source_db, content, message):
    path = tmp_path / "configs.json"
    path.write_bytes(content)
    with pytest.raises(InvalidArgument, match=message):
        interchange.read(path)
    before = file_digest(source_db)
    result = CliRunner().invoke(app, ["import", str(path), "--db", str(source_db)])
    assert result.exit_code == 2 and result.output.startswith("error:") and message in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1 and file_digest(source_db) == before


def test_a_device_stored_with_another_compute_capability_is_refused(tmp_path, source_db):
    """source_db holds NVIDIA H200 rows at 9.0: a file calling it 8.9 (a real capability, and the configurations
    fit it) would add a second H200 beside the real one, whose rows no device ever matches."""
    data = valid_file()
    data["devices"][0]["compute_capability"] = "8.9"
    path = tmp_path / "other.json"
    path.write_text(json.dumps(data))
    assert len(interchange.read(path)) == 2, "the file alone is fine"
    before = file_digest(source_db)
    result = CliRunner().invoke(app, ["import", str(path), "--db", str(source_db)])
    assert result.exit_code == 2 and result.output.startswith("error:"), result.output
    assert "NVIDIA H200 is stored with compute capability 9.0, and the file says 8.9" in result.output
    assert file_digest(source_db) == before
    fresh = CliRunner().invoke(app, ["import", str(path), "--db", str(tmp_path / "fresh.db")])
    assert fresh.exit_code == 0 and "2 added" in fresh.output, "where nothing contradicts it, it is imported"
