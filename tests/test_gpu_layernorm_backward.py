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
    base = {ALGO: "persistent", "VEC": vec, "STREAM": 0, "BPS": 1, "RWARPS": 4, "RVEC": 1, "FUSE": 0}
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


# --- FUSE=1: the finalize in the main kernel's last blocks ---------------------------------------------------------
FUSED_SHAPES = [(1, 768), (7, 1031), (200, 1024), (8193, 768), (8192, 1024), (3001, 4096)]  # fmt: skip


def _tensors(space, shape, seed: int) -> list:
    """The space's inputs at ``shape`` as CUDA tensors (bfloat16 through its bits)."""
    torch = pytest.importorskip("torch")
    inputs = space.inputs(shape, np.random.default_rng(seed))
    specs = space.input_specs(shape)
    out = []
    for name in specs:
        t = torch.from_numpy(np.ascontiguousarray(inputs[name]))
        out.append((t.view(torch.int16).view(torch.bfloat16) if specs[name].dtype == "bfloat16" else t).cuda())
    return out


def _run(kernel: str, config: dict, tensors: list, db: str, calls: int) -> list:
    """``calls`` consecutive calls of ``kernel`` running ``config`` (whatever the store holds) on ``tensors``."""
    import autotune
    from autotune.runtime.selection import TUNED, Choice

    tuned = autotune.load(kernel, db=db)  # an empty store
    tuned.choice = lambda shape, dtype=None: Choice(config, TUNED, "")  # plans are cached per kernel object
    return [tuned(*tensors) for _ in range(calls)]


def _fused_configs(space, shape, device, n: int, seed: int) -> list[dict]:
    """The rule default with FUSE=1, and up to ``n`` random valid FUSE=1 configurations; RWARPS from 1 (one
    segment: the last block sums every partial row) to 32 (more segments than blocks at few rows)."""
    rule = space.algos["persistent"].rule(shape, device)
    picked = {}
    if rule is not None:
        for rwarps in (rule["RWARPS"], 1, 32):
            config = {**rule, "FUSE": 1, "RWARPS": rwarps}
            picked[config_key(config)] = config
    rng = random.Random(seed)
    for _ in range(40000):
        if len(picked) >= n + 3:
            break
        config = {**random_config(space, rng), "FUSE": 1}
        if not space.violations(config, shape, device):
            picked.setdefault(config_key(config), config)
    return list(picked.values())


@pytest.mark.parametrize("kernel, dtype", VARIANTS)
@pytest.mark.parametrize("shape", FUSED_SHAPES, ids=[f"{r}x{c}" for r, c in FUSED_SHAPES])
def test_fused_configs_match_float64(kernel, dtype, shape, device):
    """Against float64, through the search's evaluator: a memset of the tickets, then repeated launches (its
    timing runs reuse one workspace: the counters the last blocks leave at 0 are zeroed again)."""
    from autotune.tuning.evaluation.gpu import GpuEvaluator

    space = get_space(kernel, {ALGO: ["persistent"]}, dtype=dtype)
    configs = _fused_configs(space, shape, device, 3, seed=shape[1])
    assert configs
    with GpuEvaluator(space, shape, seed=5, min_time_ms=0.1, max_reps=3) as evaluator:
        results = [f.result() for f in [evaluator.submit(c) for c in configs]]
    wrong = [(c, m.failure, m.reason) for c, m in zip(configs, results) if not m.ok]
    assert not wrong, wrong[:4]


@pytest.mark.parametrize("kernel, dtype", [("layernorm_backward", "bfloat16"), ("rmsnorm_backward", "bfloat16"),
                                           ("layernorm_backward", "float32")])  # fmt: skip
@pytest.mark.parametrize("shape", [(8193, 768), (8192, 1024), (5, 1031)], ids=["8193x768", "8192x1024", "5x1031"])
def test_fused_sums_have_the_bits_of_the_finalize(kernel, dtype, shape, device, tmp_path):
    """FUSE=1 adds the partial rows in layernorm_backward_finalize's order for the same RWARPS: dweight and dbias
    (and dx) bit for bit those of FUSE=0, on two consecutive calls each (the tickets start at 0 every call)."""
    torch = pytest.importorskip("torch")
    space = get_space(kernel, {ALGO: ["persistent"]}, dtype=dtype)
    tensors = _tensors(space, shape, seed=shape[0])
    for fused in _fused_configs(space, shape, device, 2, seed=7):
        unfused = {**fused, "FUSE": 0}
        first, second = _run(kernel, fused, tensors, str(tmp_path / "fused.db"), 2)
        (reference,) = _run(kernel, unfused, tensors, str(tmp_path / "unfused.db"), 1)
        assert all(torch.equal(a, b) for a, b in zip(first, reference)), fused
        assert all(torch.equal(a, b) for a, b in zip(second, reference)), fused
