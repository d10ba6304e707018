"""GPU tier of bias_grad and gelu_bias_grad (column_sum.cu): the template's default and the rule default, every
VEC × WARPS on the vector and the scalar path, and random valid configurations, against float64 on ragged shapes
(one row, N no multiple of any VEC, 50257 columns, row ranges cut short) in every dtype; each evaluation also checks
the space's validation shapes. Through torch: two calls give the same bits (no atomics), the results agree with
torch's ``dC.sum(0)`` and ``gelu_backward(approximate="tanh")``, and unaligned pointers take the scalar path."""

from __future__ import annotations

import random

import pytest

from autotune.spaces import config_key, get_space
from autotune.spaces.enumeration import random_config

from torch_gpu import cuda, rel

pytestmark = pytest.mark.gpu

KERNELS = ["bias_grad", "gelu_bias_grad"]
VARIANTS = [(k, d) for k in KERNELS for d in ("float32", "float16", "bfloat16")]
SHAPES = [(8192, 768), (8193, 1031), (1, 768), (3001, 4096), (129, 50257), (70001, 5)]
RAGGED = [(8193, 1031), (1000, 768), (37, 3), (2049, 4097)]


@pytest.fixture(scope="module")
def device():
    from autotune.device import query_device

    return query_device()


def wrong_answers(space, shape, configs: list[dict], seed: int) -> list:
    """(config, failure, reason) of each configuration the search's evaluator finds wrong (or failing)."""
    from autotune.tuning.evaluation.gpu import GpuEvaluator

    with GpuEvaluator(space, shape, seed=seed, min_time_ms=0.1, max_reps=2) as evaluator:
        results = [f.result() for f in [evaluator.submit(c) for c in configs]]
    return [(c, m.failure, m.reason) for c, m in zip(configs, results) if not m.ok]


@pytest.mark.parametrize("kernel, dtype", VARIANTS)
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{m}x{n}" for m, n in SHAPES])
def test_default_and_rule_default_match_float64(kernel, dtype, shape, device):
    space = get_space(kernel, dtype=dtype)
    configs = {config_key(c): c for c in [dict(space.default_config), space.rule_default(shape, device)]}
    wrong = wrong_answers(space, shape, list(configs.values()), seed=shape[1])
    assert not wrong, wrong


@pytest.mark.parametrize("kernel, dtype", VARIANTS)
def test_every_vec_and_warps_on_both_paths(kernel, dtype, device):
    """Every legal VEC × WARPS, ROWS_PER_BLOCK in turn, over 1001 rows: N = 1024 (vector accesses) and N = 1023
    (no VEC > 1 divides it: the scalar path)."""
    space = get_space(kernel, dtype=dtype)
    rows_per_block = space.domain("ROWS_PER_BLOCK")
    for cols in (1024, 1023):
        configs = []
        for vec in space.domain("VEC"):
            for warps in space.domain("WARPS"):
                config = {"VEC": vec, "WARPS": warps, "ROWS_PER_BLOCK": rows_per_block[len(configs) % 6]}
                if not space.violations(config, (1001, cols), device):
                    configs.append(config)
        assert len(configs) == 3 * (3 if dtype == "float32" else 4)
        wrong = wrong_answers(space, (1001, cols), configs, seed=cols)
        assert not wrong, wrong[:4]


@pytest.mark.parametrize("kernel, dtype", VARIANTS)
@pytest.mark.parametrize("shape", RAGGED, ids=[f"{m}x{n}" for m, n in RAGGED])
def test_random_valid_configs_match_float64(kernel, dtype, shape, device):
    space = get_space(kernel, dtype=dtype)
    rng = random.Random(shape[0])
    picked: dict[str, dict] = {}
    for _ in range(2000):
        config = random_config(space, rng)
        if not space.violations(config, shape, device):
            picked.setdefault(config_key(config), config)
        if len(picked) == 6:
            break
    assert len(picked) == 6
    wrong = wrong_answers(space, shape, list(picked.values()), seed=7)
    assert not wrong, wrong[:4]


# --- through torch ---------------------------------------------------------------------------------------------
TORCH_DTYPES = ["float32", "bfloat16", "float16"]


def _inputs(kernel: str, shape: tuple, dtype, seed: int) -> list:
    """dC, or dy and pre (pre over both signs, |x| up to ~5 and more), as CUDA tensors of ``dtype``."""
    if kernel == "bias_grad":
        return [cuda(*shape, seed=seed).to(dtype)]
    return [cuda(*shape, seed=seed).to(dtype), (2.5 * cuda(*shape, seed=seed + 1)).to(dtype)]


def _expected(kernel: str, tensors: list) -> tuple:
    """torch's answers in fp32: dbias, or (dpre, dbias) with dbias summed over the fp32 dpre."""
    import torch

    if kernel == "bias_grad":
        return (tensors[0].float().sum(0),)
    dpre = torch.ops.aten.gelu_backward(tensors[0].float(), tensors[1].float(), approximate="tanh")
    return dpre, dpre.sum(0)


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
@pytest.mark.parametrize("kernel", KERNELS)
def test_torch_calls_are_deterministic_and_agree_with_torch(kernel, dtype, tmp_path):
    torch = pytest.importorskip("torch")
    import autotune

    space = get_space(kernel, dtype=dtype)
    tuned = autotune.load(kernel, db=str(tmp_path / "none.db"))  # nothing tuned: the rule default
    shape = (8193, 4096)
    tensors = _inputs(kernel, shape, getattr(torch, dtype), seed=1)
    first, second = tuned(*tensors), tuned(*tensors)
    first = first if isinstance(first, tuple) else (first,)
    second = second if isinstance(second, tuple) else (second,)
    assert all(torch.equal(a, b) for a, b in zip(first, second)), "the same bits every call"
    for name, got, want in zip(space.outputs(shape), first, _expected(kernel, tensors)):
        assert str(got.dtype).removeprefix("torch.") == dtype, name
        assert rel(got, want) <= space.tolerance(name, shape), (name, rel(got, want))


@pytest.mark.parametrize("kernel", KERNELS)
def test_unaligned_pointers_take_the_scalar_path(kernel, tmp_path):
    """Rows of 1024 halves (N a multiple of every VEC) starting 2 bytes past a 16-byte boundary: 16-byte loads
    would fault or misread, so the kernel falls back to scalars; the answers still agree with torch."""
    torch = pytest.importorskip("torch")
    import autotune

    space = get_space(kernel, dtype="bfloat16")
    tuned = autotune.load(kernel, db=str(tmp_path / "none.db"))
    shape = (1001, 1024)
    flat = [t.reshape(-1) for t in _inputs(kernel, (shape[0] * shape[1] + 1,), torch.bfloat16, seed=3)]
    tensors = [t[1:].view(*shape) for t in flat]
    assert all(t.data_ptr() % 16 == 2 for t in tensors)
    got = tuned(*tensors)
    got = got if isinstance(got, tuple) else (got,)
    for name, g, want in zip(space.outputs(shape), got, _expected(kernel, tensors)):
        assert rel(g, want) <= space.tolerance(name, shape), (name, rel(g, want))
