"""--devices: parsing, grouping by GPU model, eight stand-in GPUs fed from one queue (CPU), and (GPU tier) one study
fed by every GPU of the host."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future

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
def test_every_gpu_of_the_host_feeds_one_study(tmp_path):
    from autotune.runtime import cuda_driver
    from autotune.tuning.tune import tune

    count = cuda_driver.Driver.get().device_count()
    if count < 2:
        pytest.skip("needs two GPUs or more (nvidia-h100-x2, -x4, -x8)")
    trials = 20 * count
    report = tune("gemm", "1024x1024x1024", trials=trials, db=str(tmp_path / "m.db"), seed=1,
                  devices=list(range(count)))  # fmt: skip
    assert report.measured_now == trials and report.best is not None
    assert report.profile.validate_s + report.profile.time_s > 0


@pytest.mark.gpu
def test_a_crashing_candidate_restarts_only_its_gpu_worker(tmp_path):
    """Faulty candidates crash or hang one GPU's worker at a time; it is restarted and the search goes on."""
    from autotune.runtime import cuda_driver
    from autotune.tuning.tune import tune

    from faults.space import EXPECTED_FAILURE

    count = cuda_driver.Driver.get().device_count()
    if count < 2:
        pytest.skip("needs two GPUs or more (nvidia-h100-x2, -x4, -x8)")
    report = tune("faults.space:FaultyGemmSpace", trials=40, db=str(tmp_path / "f.db"), sampler="grid",
                  timeout_s=3, seed=1, devices=list(range(count)))  # fmt: skip
    assert report.measured_total == 40 and report.best is not None
    assert report.best.config["FAULT"] == "none"
    assert report.restarts >= report.failures.get("crash", 0) + report.failures.get("timeout", 0) > 0
    assert set(report.failures) <= set(EXPECTED_FAILURE.values())


class StandInWorker:
    """A GPU worker without a GPU (`WorkerProcess`'s interface): set-up takes `SETUP_S`, each candidate
    ``cost`` seconds (a config's ``COST`` times `STEP_S`), and every event is logged per ordinal."""

    SETUP_S = 0.3
    STEP_S = 0.004
    log: list[tuple[str, int, float]] = []
    lock = threading.Lock()

    def __init__(self, device_ordinal: int) -> None:
        self.device_ordinal = device_ordinal
        self.restarts = 0
        self.answered = 0

    def _note(self, what: str) -> None:
        with self.lock:
            self.log.append((what, self.device_ordinal, time.perf_counter()))

    def spawn(self):
        from conftest import H200

        self._note("spawn")
        time.sleep(self.SETUP_S / 3)  # importing, creating the CUDA context
        return H200

    def configure(self, setup) -> None:
        self._note("setup")
        time.sleep(self.SETUP_S)
        self._note("ready")

    def request(self, kind, payload, timeout):
        assert kind == "evaluate"
        time.sleep(payload["config"]["COST"] * self.STEP_S)
        self._note("measured")
        self.answered += 1
        timing = {"median": 1.0, "minimum": 1.0, "q1": 1.0, "q3": 1.0, "maximum": 1.0, "reps": 1}
        return ("measured", {"ok": True, "timing": timing, "evaluate_s": 0.01}, False)

    def stop(self) -> None:
        pass

    kill = stop


class StandInCompiler:
    """Compiles nothing: answers at once with a cubin path that is never read."""

    version = "stand-in"
    flags = ()
    jobs = 8

    def __init__(self, arch: str, **_: object) -> None:
        pass

    def compile(self, template, defines):
        from autotune.runtime.compiler import CompileResult

        return CompileResult(ok=True, key="k", cubin="/nonexistent.cubin")

    def submit(self, template, defines, varying=()) -> Future:
        future: Future = Future()
        future.set_result(self.compile(template, defines))
        return future

    def close(self) -> None:
        pass


def test_eight_gpus_start_side_by_side_and_none_idles_while_work_waits(monkeypatch):
    """Eight stand-in GPUs behind one MultiGpuEvaluator: every worker process starts at once, those after the first
    set up concurrently once it is ready (not one after another), and a queue of uneven candidates is shared so that every GPU measures and each finishes
    close to the others (the first free GPU takes the next candidate)."""
    from autotune.spaces import get_space
    from autotune.tuning.evaluation import gpu, multi
    from autotune.tuning.evaluation.multi import MultiGpuEvaluator

    monkeypatch.setattr(gpu, "WorkerProcess", StandInWorker)
    monkeypatch.setattr(gpu, "parent_device", lambda ordinal: StandInWorker(ordinal).spawn())
    monkeypatch.setattr(multi, "WorkerProcess", StandInWorker)
    monkeypatch.setattr(gpu, "Compiler", StandInCompiler)
    monkeypatch.setattr(StandInWorker, "log", [])
    space = get_space("gemm")
    multi = MultiGpuEvaluator(space, (256, 256, 256), list(range(8)))
    try:
        log = StandInWorker.log
        spawns = {o: t for what, o, t in log if what == "spawn"}
        setups = {o: t for what, o, t in log if what == "setup"}
        readies = {o: t for what, o, t in log if what == "ready"}
        assert sorted(setups) == list(range(8))
        assert max(spawns.values()) < readies[0]  # every worker process started while the first was set up
        assert setups[0] < readies[0] <= min(setups[o] for o in range(1, 8))  # the first alone, then the rest
        assert max(setups[o] for o in range(1, 8)) < min(readies[o] for o in range(1, 8))  # side by side
        assert set(multi.startup) == {"device", "worker", "build", "setup", "others"}  # for --profile
        assert multi.startup["setup"] >= StandInWorker.SETUP_S and multi.startup["others"] >= StandInWorker.SETUP_S
        start = time.perf_counter()
        costs = [1 + (i * 7) % 10 for i in range(160)]  # uneven candidates: 1..10 steps each
        futures = [multi.submit(dict(space.default_config, COST=c)) for c in costs]
        measurements = [f.result(timeout=60) for f in futures]
        wall = time.perf_counter() - start
    finally:
        multi.close()
    assert all(m.ok for m in measurements)
    done = [(o, t) for what, o, t in StandInWorker.log if what == "measured"]
    per_gpu = {o: sum(1 for d, _ in done if d == o) for o in range(8)}
    assert len(done) == 160 and min(per_gpu.values()) >= 8, per_gpu  # every GPU measured, none starved
    last = {o: max(t for d, t in done if d == o) for o in range(8)}
    # Work-conserving: no GPU ends while others still have more than one candidate's worth (10 steps) to do.
    assert max(last.values()) - min(last.values()) <= 10 * StandInWorker.STEP_S + 0.05, last
    ideal = sum(costs) * StandInWorker.STEP_S / 8
    assert wall < 2 * ideal + 0.5, (wall, ideal)


class RetimingStandIn(StandInWorker):
    """A stand-in worker that re-times: each item ``rounds`` samples of its ``COST`` ms; keeps the rounds each GPU
    was asked for; with ``fail_second``, the second request to arrive fails as a whole (its worker crashed)."""

    SETUP_S = 0.0
    asked: dict[int, list[int]] = {}
    fail_second = False
    received = 0

    def request(self, kind, payload, timeout):
        assert kind == "retime"
        with self.lock:
            type(self).received += 1
            failing = self.fail_second and self.received == 2
            self.asked.setdefault(self.device_ordinal, []).append(payload["rounds"])
        time.sleep(0.1)  # long enough that every free GPU takes a share
        if failing:
            return ("retimed", [None for _ in payload["items"]], False)
        return ("retimed", [[float(c["COST"])] * payload["rounds"] for c, _ in payload["items"]], False)


@pytest.mark.parametrize("fail_second", [False, True])
def test_the_leaders_are_retimed_on_every_gpu_with_the_rounds_split(monkeypatch, fail_second):
    """Four stand-in GPUs: 20 rounds are four requests of 5, taken by the free GPUs, every configuration in each,
    and each configuration's samples pooled; a request that fails as a whole leaves the others' rounds standing."""
    from autotune.spaces import get_space
    from autotune.tuning.evaluation import gpu, multi
    from autotune.tuning.evaluation.multi import MultiGpuEvaluator

    monkeypatch.setattr(gpu, "WorkerProcess", RetimingStandIn)
    monkeypatch.setattr(gpu, "parent_device", lambda ordinal: RetimingStandIn(ordinal).spawn())
    monkeypatch.setattr(multi, "WorkerProcess", RetimingStandIn)
    monkeypatch.setattr(gpu, "Compiler", StandInCompiler)
    monkeypatch.setattr(RetimingStandIn, "log", [])
    monkeypatch.setattr(RetimingStandIn, "asked", {})
    monkeypatch.setattr(RetimingStandIn, "received", 0)
    monkeypatch.setattr(RetimingStandIn, "fail_second", fail_second)
    space = get_space("gemm")
    evaluator = MultiGpuEvaluator(space, (256, 256, 256), list(range(4)))
    try:
        configs = [dict(space.default_config, COST=c) for c in (2, 3, 5)]
        timings = evaluator.retime(configs, 20)
    finally:
        evaluator.close()
    assert sorted(r for rounds in RetimingStandIn.asked.values() for r in rounds) == [5, 5, 5, 5]
    assert len(RetimingStandIn.asked) >= 2, RetimingStandIn.asked  # shared by the free GPUs, side by side
    assert [t.median for t in timings] == [2.0, 3.0, 5.0]
    assert {t.reps for t in timings} == ({15} if fail_second else {20})


def test_a_gpu_that_cannot_be_set_up_stops_the_start_and_leaves_no_feeder(monkeypatch):
    """Four stand-in GPUs, the third refusing its set-up: the evaluator raises that GPU's `DeviceError`, every
    worker is stopped, and no feeder thread stays behind on the shared queue (a feeder starts only once its
    worker is up)."""
    from autotune.spaces import get_space
    from autotune.tuning.evaluation import gpu, multi
    from autotune.tuning.evaluation.multi import MultiGpuEvaluator

    class Refusing(StandInWorker):
        SETUP_S = 0.05

        def configure(self, setup) -> None:
            if self.device_ordinal == 2:
                raise DeviceError("GPU worker setup failed: out of memory")
            super().configure(setup)

    monkeypatch.setattr(gpu, "WorkerProcess", Refusing)
    monkeypatch.setattr(multi, "WorkerProcess", Refusing)
    monkeypatch.setattr(gpu, "parent_device", lambda ordinal: Refusing(ordinal).spawn())
    monkeypatch.setattr(gpu, "Compiler", StandInCompiler)
    monkeypatch.setattr(StandInWorker, "log", [])
    before = {t for t in threading.enumerate() if t.name == "gpu-feeder"}
    with pytest.raises(DeviceError, match="out of memory"):
        MultiGpuEvaluator(get_space("gemm"), (256, 256, 256), [0, 1, 2, 3])
    left = {t for t in threading.enumerate() if t.name == "gpu-feeder" and t.is_alive()} - before
    assert not left, left
