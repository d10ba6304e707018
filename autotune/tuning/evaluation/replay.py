"""Replay: answer from GPU measurements recorded earlier, so the search runs without a GPU.

A recording is the exhaustive measurement of a (narrowed) space at one shape on one device — every valid
configuration, its time or its failure — as Kernel Tuner's cache files are. A name ending in ``.gz`` is
read and written gzip-compressed. `benchmarks/record_replay.py` makes
one on a GPU machine; tests drive the search driver, the samplers and the storage through `ReplayEvaluator`.
"""

from __future__ import annotations

import gzip
import json
import time
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from autotune.device import DeviceInfo
from autotune.errors import InvalidArgument
from autotune.spaces.base import ALGO, Config, config_key
from autotune.tuning.evaluation.base import Evaluator, Measurement, Timing, Toolchain

FORMAT = "autotune-replay/1"


@dataclass
class RecordedMeasurements:
    """GPU measurements of a space recorded earlier (a replay file), for `ReplayEvaluator` to answer from. Not to be
    confused with `autotune.record`, which lists the problems a program calls (`autotune.runtime.call_log`)."""

    kernel: str
    shape: tuple[int, ...]
    device: DeviceInfo
    toolchain: Toolchain
    template_hash: str
    domains: dict[str, list[Any]]
    measurements: dict[str, Measurement] = field(default_factory=dict)  # config key → outcome
    configs: dict[str, Config] = field(default_factory=dict)  # config key → config
    dtype: str | None = None  # the problem's dtype; None in files recorded before dtypes: the kernel's first

    def add(self, config: Config, measurement: Measurement) -> None:
        key = config_key(config)
        self.configs[key] = dict(config)
        self.measurements[key] = measurement

    def save(self, path: Path) -> None:
        data = {
            "format": FORMAT,
            "kernel": self.kernel,
            "shape": list(self.shape),
            "device": self.device.to_dict(),
            "toolchain": asdict(self.toolchain),
            "template_hash": self.template_hash,
            "domains": self.domains,
            **({"dtype": self.dtype} if self.dtype is not None else {}),
            "records": [
                {"config": self.configs[k], "measurement": self.measurements[k].to_dict()} for k in self.configs
            ],
        }
        text = json.dumps(data, indent=1).encode()
        Path(path).write_bytes(gzip.compress(text) if str(path).endswith(".gz") else text)

    @classmethod
    def load(cls, path: Path) -> "RecordedMeasurements":
        try:
            raw = Path(path).read_bytes()
            data = json.loads(gzip.decompress(raw) if str(path).endswith(".gz") else raw)
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                got = data.get("format") if isinstance(data, dict) else type(data).__name__
                raise ValueError(f"format {got!r}, expected {FORMAT!r}")
            missing = [k for k in ("kernel", "shape", "device", "toolchain", "template_hash", "domains", "records")
                       if k not in data]  # fmt: skip
            if missing:  # a KeyError would say only "'kernel'"
                raise ValueError(f"it lacks {', '.join(missing)}")
            rec = cls(
                kernel=data["kernel"],
                shape=tuple(data["shape"]),
                device=DeviceInfo.from_dict(data["device"]),
                toolchain=Toolchain(**data["toolchain"]),
                template_hash=data["template_hash"],
                domains=data["domains"],
                dtype=data.get("dtype"),
            )
            legacy = _algorithm_of_legacy(rec.kernel, rec.domains)
            if legacy is not None:  # recorded before the family had algorithms: its first algorithm's
                rec.domains = {ALGO: [legacy], **rec.domains}
            for r in data["records"]:
                config = {ALGO: legacy, **r["config"]} if legacy is not None else r["config"]
                rec.add(_completed(rec.kernel, config, rec.domains), Measurement.from_dict(r["measurement"]))
        except KeyError as exc:  # in a record or the device: name the missing field, not just its quoted name
            raise InvalidArgument(f"cannot read replay recording {path}: a field is missing: {exc}") from None
        except (OSError, EOFError, ValueError, TypeError, AttributeError) as exc:
            raise InvalidArgument(f"cannot read replay recording {path}: {exc}") from None
        return rec


def _completed(kernel: str, config: Config, domains: dict[str, list[Any]]) -> Config:
    """``config`` with the parameters its algorithm gained after it was recorded, at their defaults (e.g.
    SIMT GEMM's SPLIT_K = 1, which is what it ran); ``domains`` is narrowed to those defaults in place, so that
    the search proposes only what was recorded."""
    from autotune.spaces import space_class

    try:
        cls = space_class(kernel)
    except Exception:
        return config
    algo = next((a for a in cls.algorithms if a.name == config.get(ALGO)), None)
    if algo is None:
        return config
    out = dict(config)
    for p in algo.parameters:
        if p.name not in out:
            out[p.name] = algo.default_config[p.name]
            key = f"{algo.name}.{p.name}"
            if p.name not in domains and key not in domains:
                domains[key] = [out[p.name]]
    return out


def _algorithm_of_legacy(kernel: str, domains: dict[str, list[Any]]) -> str | None:
    """The algorithm a recording without ``ALGO`` measured, where its kernel is now a family (else None)."""
    if ALGO in domains:
        return None
    from autotune.spaces import space_class

    try:
        cls = space_class(kernel)
    except Exception:
        return None
    return cls.algorithms[0].name if cls.algorithms else None


class ReplayEvaluator(Evaluator):
    """Answers `submit` from a recording; an unrecorded configuration fails with kind "worker"."""

    def __init__(self, recording: RecordedMeasurements, *, delay_s: float = 0.0) -> None:
        self.recording = recording
        self.device = recording.device
        self.toolchain = recording.toolchain
        self.restarts = 0
        self.delay_s = delay_s  # simulated GPU time per candidate (interruption tests)
        self.unrecorded: list[Config] = []
        self.submitted = 0

    def submit(self, config: Config) -> "Future[Measurement]":
        self.submitted += 1
        if self.delay_s:
            time.sleep(self.delay_s)
        future: Future[Measurement] = Future()
        measurement = self.recording.measurements.get(config_key(config))
        if measurement is None:
            self.unrecorded.append(dict(config))
            measurement = Measurement.failed("worker", "configuration not in the replay recording")
        else:
            measurement = Measurement.from_dict(measurement.to_dict())  # a copy the caller may change
        if measurement.worker_restarted:
            self.restarts += 1
        future.set_result(measurement)
        return future

    def retime(self, configs: Sequence[Config], rounds: int) -> list[Timing | None]:
        out: list[Timing | None] = []
        for config in configs:
            m = self.recording.measurements.get(config_key(config))
            out.append(m.timing if m is not None and m.ok else None)
        return out
