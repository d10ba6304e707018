"""A helper the GPU tests share: the dispatcher running exactly one configuration, pinned by a scratch database."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def pinned(kernel: str, space: Any, shape: tuple, config: dict, device: Any, path: Path) -> Any:
    """The dispatcher running exactly ``config`` at ``shape`` (a scratch database holding that row alone)."""
    import autotune
    from autotune.results.storage import BestEntry, Database, resolve_url

    db = Database(resolve_url(str(path)))
    db.save_best(BestEntry(
        device_name=device.name, compute_capability=device.cc, kernel=kernel, shape=space.format_shape(shape),
        dtype=space.dtype, template_hash=space.template_hash(), params=config, time_ms=1.0, metric=1.0,
        metric_unit="TFLOP/s", default_time_ms=None, driver_version=device.driver_version, nvcc_version="",
        study_name="pinned", trial_number=0,
    ))  # fmt: skip
    db.close()
    return autotune.load(kernel, db=str(path), strict=True)
