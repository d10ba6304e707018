"""GPU tier: every kernel of the library is correct for ≥ 20 random valid configurations on odd shapes, and
runs through the dispatcher on torch tensors."""

from __future__ import annotations

import random

import numpy as np
import pytest

from autotune.spaces import config_key, get_space
from autotune.spaces.enumeration import random_config

pytestmark = pytest.mark.gpu

# An odd target per kernel; every evaluation also checks the space's ragged validation shapes (one row, rows of
# length 1, lengths no multiple of 4 nor of a block, a row of 65539) where the configuration is valid.
TARGETS = {
    "sgemv": (1000, 3001),
    "sum": (1_000_003,),
    "max": (1_000_003,),
    "softmax": (333, 3001),
    "softmax_backward": (333, 3001),
    "layernorm": (333, 3001),
    "layernorm_backward": (333, 3001),
    "rmsnorm": (333, 3001),
    "rmsnorm_backward": (333, 3001),
    "dot": (1_000_003,),
    "histogram": (1_000_003, 300),
    "add": (1_000_003,),
    "relu": (1_000_003,),
    "sigmoid": (1_000_003,),
    "gelu": (1_000_003,),
}
# Float sums whose order may change between runs (atomics, split reductions): compared with a tolerance.
NONDETERMINISTIC = {"sum", "dot", "sgemv", "layernorm_backward", "rmsnorm_backward"}


@pytest.fixture(scope="module")
def device():
    from autotune.device import query_device

    return query_device()


def random_valid(space, shape, device, n, seed):
    rng = random.Random(seed)
    picked = {config_key(space.default_config): dict(space.default_config)}
    for _ in range(20000):
        config = random_config(space, rng)
        if not space.violations(config, shape, device):
            picked[config_key(config)] = config
        if len(picked) >= n:
            break
    return list(picked.values())


@pytest.mark.parametrize("kernel", sorted(TARGETS))
def test_random_valid_configs_are_correct(kernel, device):
    from autotune.tuning.evaluation.gpu import GpuEvaluator

    space = get_space(kernel)
    shape = TARGETS[kernel]
    configs = random_valid(space, shape, device, 22, seed=11)
    assert len(configs) >= 21
    with GpuEvaluator(space, shape, seed=3, min_time_ms=0.5, max_reps=5) as evaluator:
        results = [f.result() for f in [evaluator.submit(c) for c in configs]]
    wrong = [(c, m.failure, m.reason) for c, m in zip(configs, results) if not m.ok]
    assert not wrong, wrong[:4]


@pytest.mark.parametrize("kernel", sorted(TARGETS))
def test_dispatch_on_torch_tensors(kernel, tmp_path):
    torch = pytest.importorskip("torch")
    import autotune

    space = get_space(kernel)
    shape = TARGETS[kernel]
    tuned = autotune.load(kernel, db=str(tmp_path / "none.db"))  # nothing tuned: the default configuration
    inputs = space.inputs(shape, np.random.default_rng(5))
    refs = space.reference(space.decoded_inputs(inputs, shape), shape)
    tensors = [torch.from_numpy(inputs[n]).cuda() for n in space.input_specs(shape)]
    result = tuned(*tensors)
    results = result if isinstance(result, tuple) else (result,)
    for name, got in zip(space.outputs(shape), results):
        ref = refs[name].reshape(space.outputs(shape)[name].shape)
        err = np.linalg.norm(got.cpu().numpy().astype(np.float64) - ref) / np.linalg.norm(ref)
        assert err <= space.tolerance(name, shape), (kernel, name, err)
    # Later calls on tensors of these shapes take the per-call fast path (every output, allocated or given).
    again = tuned(*tensors)
    again = again if isinstance(again, tuple) else (again,)
    given = tuple(torch.full_like(r, float("nan")) if r.is_floating_point() else torch.full_like(r, -7)
                  for r in results)  # fmt: skip
    into = tuned(*tensors, out=given if len(given) > 1 else given[0])
    into = into if isinstance(into, tuple) else (into,)
    assert all(a is b for a, b in zip(into, given))
    for first, second, third in zip(results, again, given):
        if kernel in NONDETERMINISTIC:
            torch.testing.assert_close(second, first)
            torch.testing.assert_close(third, first)
        else:
            assert torch.equal(second, first) and torch.equal(third, first), kernel


def test_vector_paths_fall_back_on_unaligned_pointers(tmp_path):
    torch = pytest.importorskip("torch")
    import autotune

    relu = autotune.load("relu", db=str(tmp_path / "none.db"))
    x = torch.randn(1_000_004, device="cuda")
    view = x[1:]  # 4 bytes past a 16-byte boundary: float4 loads would fault or misread
    torch.testing.assert_close(relu(view), torch.relu(view))
    softmax = autotune.load("softmax", db=str(tmp_path / "none.db"))
    m = torch.randn(64 * 1024 + 1, device="cuda")[1:].view(64, 1024)  # rows a multiple of 4, pointer not
    torch.testing.assert_close(softmax(m), torch.softmax(m, dim=1))


# --- dtypes ---------------------------------------------------------------------------------------------------
HALF = ("float16", "bfloat16")
HALF_TARGETS = {**{k: v for k, v in TARGETS.items() if k != "histogram"}, "layernorm_mixed": (333, 3001), "rmsnorm_mixed": (333, 3001),
                "layernorm_backward_mixed": (333, 3001), "rmsnorm_backward_mixed": (333, 3001)}  # fmt: skip


def to_torch(array: np.ndarray, dtype: str, torch):
    """A host array of autotune's encoding (bfloat16: uint16 bits) as a CUDA tensor of ``dtype``."""
    t = torch.from_numpy(np.ascontiguousarray(array))
    if dtype == "bfloat16":
        t = t.view(torch.int16).view(torch.bfloat16)
    return t.cuda()


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("kernel", sorted(HALF_TARGETS))
def test_half_configs_are_correct(kernel, dtype, device):
    """The rule default and a few random valid configurations per half dtype (fp32 weights in the _mixed
    kernels): each is checked on the target and the ragged validation shapes, against the half tolerance."""
    from autotune.tuning.evaluation.gpu import GpuEvaluator

    space = get_space(kernel, dtype=dtype)
    shape = HALF_TARGETS[kernel]
    configs = {config_key(c): c for c in [space.rule_default(shape, device), *random_valid(space, shape, device, 3, 17)]}
    with GpuEvaluator(space, shape, seed=5, min_time_ms=0.2, max_reps=3) as evaluator:
        results = [f.result() for f in [evaluator.submit(c) for c in configs.values()]]
    wrong = [(c, m.failure, m.reason) for c, m in zip(configs.values(), results) if not m.ok]
    assert not wrong, wrong[:4]


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("kernel", ["softmax", "layernorm", "rmsnorm_mixed", "rmsnorm_backward", "add", "sum",
                                    "sgemv", "dot"])
def test_dispatch_picks_the_dtype_of_torch_tensors(kernel, dtype, tmp_path):
    torch = pytest.importorskip("torch")
    import autotune

    space = get_space(kernel, dtype=dtype)
    shape = HALF_TARGETS[kernel]
    tuned = autotune.load(kernel, db=str(tmp_path / "none.db"))
    specs = space.input_specs(shape)
    inputs = space.inputs(shape, np.random.default_rng(6))
    refs = space.reference(space.decoded_inputs(inputs, shape), shape)
    result = tuned(*[to_torch(inputs[n], specs[n].dtype, torch) for n in specs])
    results = result if isinstance(result, tuple) else (result,)
    for (name, spec), got in zip(space.outputs(shape).items(), results):
        assert str(got.dtype).removeprefix("torch.") == spec.dtype, (name, got.dtype)
        ref = refs[name].reshape(spec.shape)
        err = np.linalg.norm(got.float().cpu().numpy().astype(np.float64) - ref) / np.linalg.norm(ref)
        assert err <= space.tolerance(name, shape), (kernel, name, err)


def test_mixed_dtypes_get_one_line_naming_the_argument(tmp_path):
    torch = pytest.importorskip("torch")
    import autotune
    from autotune.errors import InvalidType

    layernorm = autotune.load("layernorm", db=str(tmp_path / "none.db"))
    x = torch.randn(8, 64, device="cuda", dtype=torch.float16)
    w = torch.ones(64, device="cuda")
    with pytest.raises(InvalidType, match="weight has dtype float32.*layernorm_mixed"):
        layernorm(x, w, torch.zeros(64, device="cuda"))
    mixed = autotune.load("layernorm_mixed", db=str(tmp_path / "none.db"))
    y, mean, rstd = mixed(x, w, torch.zeros(64, device="cuda"))
    torch.testing.assert_close(y, torch.nn.functional.layer_norm(x.float(), [64]).half(), atol=2e-3, rtol=2e-3)
    assert mean.dtype == torch.float32 and y.dtype == torch.float16


def test_histogram_matches_bincount_and_drops_bad_values(tmp_path):
    torch = pytest.importorskip("torch")
    import autotune

    histogram = autotune.load("histogram", db=str(tmp_path / "none.db"))
    values = torch.randint(-50, 300, (1_000_001,), device="cuda", dtype=torch.int32)
    values[::997] = 2**31 - 1
    values[1::991] = -(2**31)
    counts = histogram(values, torch.zeros(256, device="cuda", dtype=torch.int32))
    kept = values[(values >= 0) & (values < 256)].long()
    assert torch.equal(counts.long(), torch.bincount(kept, minlength=256))


def test_tune_missing_searches_an_untuned_shape_once_stores_and_logs(tmp_path, caplog):
    torch = pytest.importorskip("torch")
    import logging

    import autotune

    db = str(tmp_path / "tuned.db")
    softmax = autotune.load("softmax", db=db, tune_missing=3)
    x = torch.randn(64, 1000, device="cuda", dtype=torch.float16)
    with caplog.at_level(logging.WARNING):
        y = softmax(x)
    assert "searching 3 trials now (tune_missing)" in caplog.text
    assert softmax.choice((64, 1000), "float16").source == "tuned"
    assert autotune.load("softmax", db=db, strict=True).choice((64, 1000), "float16").source == "tuned"  # stored
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), dim=1), atol=1e-3, rtol=1e-2)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        softmax(x)
    assert "tune_missing" not in caplog.text  # once per shape and dtype


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("kernel", ["softmax", "layernorm", "rmsnorm"])
def test_rows_split_over_a_cluster_are_correct(kernel, dtype, device):
    """MAPPING=cluster (sm_90): partial statistics exchanged through distributed shared memory, the row cached in
    registers across the cluster, at three cluster sizes."""
    from autotune.tuning.evaluation.gpu import GpuEvaluator

    if tuple(device.compute_capability) < (9, 0):
        pytest.skip("thread-block clusters need sm_90")
    space = get_space(kernel, dtype=dtype)
    shape = (37, 65536)
    vec = 16 // space.itemsize
    base = {**space.default_config, "MAPPING": "cluster", "CLUSTER": 4, "BLOCK": 1024, "VEC": vec, "CACHE": 1,
            "ITEMS": shape[1] // (1024 * 4 * vec)}  # fmt: skip
    base.update(space.rule_extra(base, shape))
    configs = [base] + [{**base, "CLUSTER": c, "BLOCK": 512, "ITEMS": shape[1] // (512 * c * vec)} for c in (2, 8)]
    assert all(not space.violations(c, shape, device) for c in configs)
    with GpuEvaluator(space, shape, seed=7, min_time_ms=0.2, max_reps=3) as evaluator:
        results = [f.result() for f in [evaluator.submit(c) for c in configs]]
    wrong = [(c, m.failure, m.reason) for c, m in zip(configs, results) if not m.ok]
    assert not wrong, wrong[:4]


# --- few long rows: a row split over blocks in two launches (MAPPING=split) --------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("kernel", ["softmax", "layernorm", "rmsnorm", "softmax_backward"])
def test_rows_split_over_blocks_are_correct(kernel, dtype, device):
    """MAPPING=split at 2 to 256 blocks per row, each part in registers, in shared memory or read again, on a
    ragged target and the validation shapes (rows of 1 and 7 leave most of a row's blocks without an element: their
    partial statistics must merge as nothing); both of layernorm's one-pass statistics."""
    from autotune.tuning.evaluation.gpu import GpuEvaluator

    space = get_space(kernel, dtype=dtype)
    shape = (3, 200003)
    vec = 16 // space.itemsize
    base = {**space.default_config, "MAPPING": "split", "VEC": vec}
    base.update(space.rule_extra({**base, "CACHE": 0}, shape))
    configs = [
        {**base, "SPLIT": 2, "BLOCK": 1024, "CACHE": 0},
        {**base, "SPLIT": 64, "BLOCK": 256, "CACHE": 0, "VEC": 1},
        {**base, "SPLIT": 256, "BLOCK": 128, "CACHE": 0},
        space.rule_default(shape, device),
    ]
    for split, block in ((16, 512), (128, 128)):  # the fewest chunks per thread that hold the row, both caches
        items = 1
        while items * block * split * vec < space.span(shape[1], vec):
            items *= 2
        configs += [{**base, "SPLIT": split, "BLOCK": block, "CACHE": cache, "ITEMS": items}
                    for cache in (1, 2) if cache in space.domain("CACHE")]  # fmt: skip
    if kernel == "layernorm":
        configs += [{**c, "STATS": "welford"} for c in configs[:3]]
    assert configs[3]["MAPPING"] == "split"
    assert all(space.violations(c, shape, device) == [] for c in configs), [space.violations(c, shape, device) for c in configs]
    with GpuEvaluator(space, shape, seed=5, min_time_ms=0.2, max_reps=3) as evaluator:
        results = [f.result() for f in [evaluator.submit(c) for c in configs]]
    wrong = [(c, m.failure, m.reason) for c, m in zip(configs, results) if not m.ok]
    assert not wrong, wrong[:4]


@pytest.mark.parametrize("kernel", ["softmax", "layernorm", "rmsnorm", "softmax_backward"])
def test_few_long_rows_dispatch_split_on_torch_tensors(kernel, tmp_path):
    """The rule default for 4 rows of 131072 is the split mapping; through the dispatcher on torch tensors its
    workspace comes from torch's allocator, and the answer matches torch's op, call after call."""
    torch = pytest.importorskip("torch")
    import autotune
    from autotune.device import query_device

    shape = (4, 131072)
    space = get_space(kernel, dtype="bfloat16")
    assert space.rule_default(shape, query_device())["MAPPING"] == "split"
    op = autotune.load(kernel, db=str(tmp_path / "none.db"))
    x = torch.randn(shape, device="cuda", dtype=torch.bfloat16) * 3 + 1
    w = torch.rand(shape[1], device="cuda", dtype=torch.bfloat16) + 0.5
    b = torch.randn(shape[1], device="cuda", dtype=torch.bfloat16)
    if kernel == "softmax":
        args, expected = (x,), torch.softmax(x.float(), dim=1)
    elif kernel == "softmax_backward":
        y = torch.softmax(x.float(), dim=1).to(torch.bfloat16)
        dy = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
        args = (y, dy)
        expected = torch._softmax_backward_data(dy.float(), y.float(), 1, torch.float32)
    elif kernel == "layernorm":
        args, expected = (x, w, b), torch.nn.functional.layer_norm(x.float(), (shape[1],), w.float(), b.float())
    else:
        args = (x, w)
        expected = torch.nn.functional.rms_norm(x.float(), (shape[1],), w.float(), eps=1e-6)
    for _ in range(3):
        got = op(*args)
        y = got[0] if isinstance(got, tuple) else got
        err = ((y.float() - expected).norm() / expected.norm()).item()
        assert err < space.tolerance(next(iter(space.outputs(shape))), shape), (kernel, err)


# --- rows cached in shared memory (CACHE=2) --------------------------------------------------------------------
@pytest.mark.parametrize("kernel", ["softmax", "layernorm", "rmsnorm"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_rows_cached_in_shared_memory_are_correct(kernel, dtype, device):
    """Every mapping and vector width with the row in shared memory, on a ragged target and the validation shapes
    (rows of 1, 7, 1031 and 65539 where the cache holds them), unaligned chunk starts included."""
    from autotune.tuning.evaluation.gpu import GpuEvaluator

    space = get_space(kernel, dtype=dtype)
    shape = (77, 3001)
    vec = 8 if dtype == "float16" else 4
    configs = [
        {**space.default_config, "MAPPING": "block", "BLOCK": 128, "VEC": vec},
        {**space.default_config, "MAPPING": "block", "BLOCK": 512, "VEC": 2},
        {**space.default_config, "MAPPING": "warp", "BLOCK": 128, "VEC": vec},
        {**space.default_config, "MAPPING": "cluster", "CLUSTER": 2, "BLOCK": 256, "VEC": vec},
    ]
    for c in configs:  # the fewest chunks per thread (a power of 2, at most 32) that hold a row of 65539
        items = 1
        while items < 32 and items * space.threads_per_row(c) * c["VEC"] < space.span(65539, c["VEC"]):
            items *= 2
        c.update(CACHE=2, ITEMS=items, **space.rule_extra({**c, "CACHE": 2}, shape))
    assert all(space.violations(c, shape, device) == [] for c in configs), [space.violations(c, shape, device) for c in configs]
    with GpuEvaluator(space, shape, seed=3, min_time_ms=0.5, max_reps=5) as evaluator:
        results = [f.result() for f in [evaluator.submit(c) for c in configs]]
    wrong = [(c, m.failure, m.reason) for c, m in zip(configs, results) if not m.ok]
    assert not wrong, wrong[:4]
