"""--devices: parsing, grouping by GPU model, and (GPU tier) one study fed by two GPUs."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from autotune.cli import app
from autotune.errors import DeviceError, InvalidArgument
from autotune.tuning.evaluation.multi import device_groups, parse_devices


def test_parse_devices():
    assert parse_devices("all", 4) == [0, 1, 2, 3]
    assert parse_devices(" 2,0 ", 4) == [2, 0]
    with pytest.raises(InvalidArgument, match="no GPU 7; this machine has GPU 0"):
        parse_devices("7", 1)
    with pytest.raises(InvalidArgument, match="GPU 1 is named twice"):
        parse_devices("1,0,1", 2)
    with pytest.raises(InvalidArgument, match="expected 'all'"):
        parse_devices("0,x", 2)
    with pytest.raises(DeviceError, match="no CUDA GPU"):
        parse_devices("all", 0)


@pytest.mark.parametrize("devices, message", [("abc", "expected 'all' or GPU numbers"), ("0,0", "GPU 0 is named twice"),
                                              ("", "expected 'all'"), ("1,-1", "got '-1'")])  # fmt: skip
def test_a_malformed_devices_list_is_named_before_the_driver_is_asked(tmp_path, monkeypatch, devices, message):
    """Before, `--devices abc` on a machine without a driver said the driver was missing, not what was wrong."""
    from autotune.runtime import cuda_driver

    def no_driver(cls):
        raise DeviceError("the CUDA driver (libcuda.so) is not installed")

    monkeypatch.setattr(cuda_driver.Driver, "get", classmethod(no_driver))
    result = CliRunner().invoke(app, ["search", "gemm", "--devices", devices, "--db", str(tmp_path / "d.db")])
    assert result.exit_code == 2 and result.output.startswith("error:"), result.output
    assert message in result.output and len(result.output.strip().splitlines()) == 1, result.output
    good = CliRunner().invoke(app, ["search", "gemm", "--devices", "0,1", "--db", str(tmp_path / "d.db")])
    assert good.exit_code == 2 and "driver" in good.output, "a well-formed list then needs the driver"
    assert not (tmp_path / "d.db").exists()


def test_devices_and_replay_exclude_each_other(tmp_path):
    """Before, --replay silently ignored --devices."""
    from autotune.tuning.tune import tune

    from conftest import DATA

    replay = str(DATA / "replay_gemm_h200.json")
    result = CliRunner().invoke(app, ["search", "gemm", "--devices", "0,1", "--replay", replay, "--db",
                                      str(tmp_path / "d.db")])  # fmt: skip
    assert result.exit_code == 2 and result.output.startswith("error:"), result.output
    assert "--devices and --replay exclude each other" in result.output
    with pytest.raises(InvalidArgument, match="exclude each other"):
        tune("gemm", trials=5, replay=replay, devices=[0, 1], db=str(tmp_path / "d.db"))
    assert not (tmp_path / "d.db").exists()


def test_gpus_of_one_model_share_a_group():
    names = ["NVIDIA H200", "NVIDIA H100", "NVIDIA H200"]
    assert device_groups([0, 1, 2], names) == [[0, 2], [1]]


class _OneGpu:
    def device_count(self):
        return 1

    def device(self, ordinal):
        return ordinal

    def device_name(self, dev):
        return "NVIDIA H200"


@pytest.mark.parametrize("devices, message", [("7", "no GPU 7"), ("0,0", "named twice"), ("one", "expected 'all'")])
def test_bad_devices_are_one_line(tmp_path, monkeypatch, devices, message):
    from autotune.runtime import cuda_driver

    monkeypatch.setattr(cuda_driver.Driver, "get", classmethod(lambda cls: _OneGpu()))
    result = CliRunner().invoke(app, ["search", "gemm", "--devices", devices, "--db", str(tmp_path / "d.db")])
    assert result.exit_code == 2 and result.output.startswith("error:"), result.output
    assert message in result.output and len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "d.db").exists()


@pytest.mark.gpu
def test_two_gpus_feed_one_study(tmp_path):
    from autotune.runtime import cuda_driver
    from autotune.tuning.tune import tune

    if cuda_driver.Driver.get().device_count() < 2:
        pytest.skip("needs two GPUs (nvidia-h200-x2)")
    report = tune("gemm", "1024x1024x1024", trials=40, db=str(tmp_path / "m.db"), seed=1, devices=[0, 1])
    assert report.measured_now == 40 and report.best is not None
    assert report.profile.validate_s + report.profile.time_s > 0


@pytest.mark.gpu
def test_a_crashing_candidate_restarts_only_its_gpu_worker(tmp_path):
    """Faulty candidates crash or hang one GPU's worker at a time; it is restarted and the search goes on."""
    from autotune.runtime import cuda_driver
    from autotune.tuning.tune import tune

    from faults.space import EXPECTED_FAILURE

    if cuda_driver.Driver.get().device_count() < 2:
        pytest.skip("needs two GPUs (nvidia-h200-x2)")
    report = tune("faults.space:FaultyGemmSpace", trials=40, db=str(tmp_path / "f.db"), sampler="grid",
                  timeout_s=3, seed=1, devices=[0, 1])  # fmt: skip
    assert report.measured_total == 40 and report.best is not None
    assert report.best.config["FAULT"] == "none"
    assert report.restarts >= report.failures.get("crash", 0) + report.failures.get("timeout", 0) > 0
    assert set(report.failures) <= set(EXPECTED_FAILURE.values())
