"""Tests of the vector_add example: the space without a GPU, the kernel on one (``-m gpu``).

    python -m pytest examples/vector_add -q
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import autotune
from autotune.device import nominal_device
from autotune.runtime.compiler import Compiler
from autotune.spaces import get_space
from autotune.spaces.enumeration import configs, size

SPACE = f"{Path(__file__).with_name('my_space.py')}:MySpace"
H100 = nominal_device("NVIDIA H100", (9, 0))


def test_the_space_loads_with_its_template_beside_it():
    space = get_space(SPACE)
    assert space.template_for(space.default_config) == Path(__file__).with_name("vector_add.cu")
    assert space.ref() == SPACE
    assert size(space) == 5 * 3 * 4
    assert space.constraints(space.default_config, (100,), H100) == []


def test_configurations_compile_without_spills(tmp_path):
    try:
        compiler = Compiler("sm_90a", cache_dir=tmp_path)
    except autotune.ToolchainError as exc:
        pytest.skip(str(exc))
    space = get_space(SPACE)
    for config in [c for c in configs(space) if c["BLOCK"] in (64, 1024) and c["UNROLL"] in (1, 8)]:
        result = compiler.compile(space.template_for(config), space.compile_defines(config, (1000,)))
        assert result.ok, (config, result.error)
        assert result.spill_bytes == 0


@pytest.mark.gpu
def test_the_kernel_adds_on_the_gpu():
    try:
        add = autotune.load(SPACE)  # nothing tuned stored: the default, with a warning
    except autotune.DeviceError as exc:
        pytest.skip(str(exc))
    rng = np.random.default_rng(0)
    for n in (1, 7, 1_000_003):
        a, b = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
        assert np.array_equal(add(a, b), a + b)


@pytest.mark.gpu
def test_search_stores_what_load_then_runs(tmp_path):
    """`autotune search ./my_space.py:MySpace` end to end: the GPU worker loads the space by its file."""
    from autotune.runtime.selection import TUNED

    db = str(tmp_path / "v.db")
    try:
        report = autotune.tune(SPACE, "1000003", trials=6, db=db, seed=0)
    except autotune.DeviceError as exc:
        pytest.skip(str(exc))
    assert report.best is not None and not report.failures, report.failure_examples
    add = autotune.load(SPACE, db=db)
    assert add.choice((1_000_003,)).source == TUNED
    a = np.arange(1_000_003, dtype=np.float32)
    assert np.array_equal(add(a, a), a + a)
