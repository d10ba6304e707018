"""GPU tier of the persistent algorithm of LayerNorm's and RMSNorm's backward: its rule defaults and random valid
configurations against float64, on ragged shapes (one row, odd widths, 8193 rows, the hidden sizes 768 to 8192,
rows long enough for the shared-memory cache), in every dtype and with fp32 weights (the _mixed kernels). Each
evaluation also checks the space's validation shapes where the configuration holds their rows."""

from __future__ import annotations

import random

import numpy as np
import pytest

from autotune.spaces import ALGO, config_key, get_space
from autotune.spaces.enumeration import random_config

pytestmark = pytest.mark.gpu

SHAPES = [(1, 768), (8193, 768), (8193, 1031), (3001, 2048), (8193, 3001), (1025, 4096), (2049, 8192),
          (257, 12289), (129, 16384)]  # fmt: skip
VARIANTS = [("layernorm_backward", "float32"), ("layernorm_backward", "bfloat16"), ("layernorm_backward", "float16"),
            ("rmsnorm_backward", "float32"), ("rmsnorm_backward", "bfloat16"),
            ("layernorm_backward_mixed", "bfloat16"), ("rmsnorm_backward_mixed", "float16")]  # fmt: skip


@pytest.fixture(scope="module")
def device():
    from autotune.device import query_device

    return query_device()


def persistent_configs(space, shape, device, n: int, seed: int) -> list[dict]:
    """The rule default of persistent alone, and up to ``n`` random valid configurations of it."""
    rule = space.algos["persistent"].rule(shape, device)
    picked = {config_key(rule): rule} if rule is not None else {}
    rng = random.Random(seed)
    for _ in range(40000):
        if len(picked) > n:
            break
        config = random_config(space, rng)
        if not space.violations(config, shape, device):
            picked.setdefault(config_key(config), config)
    return list(picked.values())


@pytest.mark.parametrize("kernel, dtype", VARIANTS)
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{r}x{c}" for r, c in SHAPES])
def test_persistent_configs_match_float64(kernel, dtype, shape, device):
    from autotune.tuning.evaluation.gpu import GpuEvaluator

    space = get_space(kernel, {ALGO: ["persistent"]}, dtype=dtype)
    configs = persistent_configs(space, shape, device, 4, seed=shape[1])
    if not configs:  # fp32 LayerNorm rows of 16384 (tests/test_spaces_layernorm_backward.py)
        pytest.skip(f"no persistent configuration of {kernel} {dtype} holds rows of {shape[1]}")
    with GpuEvaluator(space, shape, seed=9, min_time_ms=0.1, max_reps=2) as evaluator:
        results = [f.result() for f in [evaluator.submit(c) for c in configs]]
    wrong = [(c, m.failure, m.reason) for c, m in zip(configs, results) if not m.ok]
    assert not wrong, wrong[:4]


@pytest.mark.parametrize("kernel, dtype", VARIANTS)
def test_every_thread_mapping_and_cache(kernel, dtype, device):
    """A warp per row, several warps per row (several groups per block: named barriers, sums added in shared
    memory), the whole block per row; rows in registers and in shared memory; one row or two per group at a time;
    the scalar path (odd width) and the vector path; 1001 rows."""
    from autotune.tuning.evaluation.gpu import GpuEvaluator

    space = get_space(kernel, {ALGO: ["persistent"]}, dtype=dtype)
    vec = 16 // space.itemsize
    base = {ALGO: "persistent", "VEC": vec, "STREAM": 0, "BPS": 1, "RWARPS": 4, "RVEC": 1}
    configs = []
    for cols in (1024, 1023):
        v = vec if cols % vec == 0 else 1
        for block, tpr, rows, cache in [(256, 32, 1, 1), (512, 64, 2, 1), (512, 128, 2, 2), (256, 256, 1, 2),
                                        (1024, 1024, 1, 1), (128, 32, 2, 2), (512, 256, 1, 1)]:  # fmt: skip
            items = -(-cols // (tpr * v))
            config = {**base, "VEC": v, "BLOCK": block, "TPR": tpr, "ROWS": rows, "CACHE": cache, "ITEMS": items}
            if v * space.itemsize < 4 and cache == 2:
                config["CACHE"] = 1
            if config["ITEMS"] in space.domain("ITEMS") and not space.violations(config, (1001, cols), device):
                configs.append((cols, config))
    assert len(configs) >= 8
    for cols in (1024, 1023):
        chosen = [c for w, c in configs if w == cols]
        with GpuEvaluator(space, (1001, cols), seed=4, min_time_ms=0.1, max_reps=2) as evaluator:
            results = [f.result() for f in [evaluator.submit(c) for c in chosen]]
        wrong = [(c, m.failure, m.reason) for c, m in zip(chosen, results) if not m.ok]
        assert not wrong, wrong[:4]


@pytest.mark.parametrize("kernel", ["layernorm_backward", "rmsnorm_backward"])
def test_persistent_is_deterministic(kernel, tmp_path):
    """Every sum runs in a fixed order (each thread's rows in turn, groups and warps in index order): two calls
    give the very same bits."""
    torch = pytest.importorskip("torch")
    import autotune

    space = get_space(kernel, dtype="bfloat16")
    shape = (8193, 4096)
    tuned = autotune.load(kernel, db=str(tmp_path / "none.db"))
    inputs = space.inputs(shape, np.random.default_rng(2))
    specs = space.input_specs(shape)
    tensors = []
    for name in specs:
        t = torch.from_numpy(np.ascontiguousarray(inputs[name]))
        tensors.append((t.view(torch.int16).view(torch.bfloat16) if specs[name].dtype == "bfloat16" else t).cuda())
    assert tuned.choice(shape, "bfloat16").config[ALGO] == "persistent"
    first, second = tuned(*tensors), tuned(*tensors)
    assert all(torch.equal(a, b) for a, b in zip(first, second))
