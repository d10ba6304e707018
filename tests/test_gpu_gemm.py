"""GPU tier: every GEMM algorithm, at every dtype it answers, is correct for random valid configurations at large
and ragged shapes (odd M, N, K; K no multiple of any mma K; unaligned rows), wide-range inputs and K = 16384
included (the family's validation cases run before each target shape)."""

from __future__ import annotations

import random

import pytest

from autotune.spaces import ALGO, config_key, get_space
from autotune.spaces.enumeration import random_config
from autotune.spaces.gemm_simt import PIPELINES

pytestmark = pytest.mark.gpu

SHAPES = [(1000, 1000, 1000), (127, 4096, 4096), (33, 65, 17), (1, 4096, 4096), (1001, 1, 4099)]
PER_ALGORITHM = 10  # random valid configurations per (dtype, algorithm), besides its default
CASES = [(d, a) for d in get_space("gemm").supported_dtypes() for a in get_space("gemm", dtype=d).domain(ALGO)]


@pytest.fixture(scope="module")
def device():
    from autotune.device import query_device

    return query_device()


def pick(dtype: str, algo: str, device, count: int, seed: int, shape=(4096, 4096, 4096)) -> list[dict]:
    """The algorithm's default (where valid) and ``count`` random valid configurations of it at ``shape``."""
    space = get_space("gemm", {ALGO: [algo]}, dtype=dtype)
    rng = random.Random(seed)
    picked: dict[str, dict] = {}
    default = {ALGO: algo, **space.algos[algo].default_config}
    if not space.violations(default, shape, device):
        picked[config_key(default)] = default
    wanted_pipelines = set(PIPELINES) if algo == "simt" else set()
    for _ in range(20000):
        if len(picked) > count and not wanted_pipelines:
            break
        config = random_config(space, rng)
        if space.violations(config, shape, device):
            continue
        if len(picked) > count and config.get("PIPELINE") not in wanted_pipelines:
            continue
        wanted_pipelines.discard(config.get("PIPELINE"))
        picked[config_key(config)] = config
    return list(picked.values())


@pytest.mark.parametrize("dtype, algo", CASES, ids=[f"{d}-{a}" for d, a in CASES])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_random_valid_configs_are_correct(shape, dtype, algo, device):
    from autotune.tuning.evaluation.gpu import GpuEvaluator

    space = get_space("gemm", dtype=dtype)
    configs = pick(dtype, algo, device, PER_ALGORITHM, 2026, shape)
    if not configs:
        pytest.skip(f"no configuration of {algo} fits {shape}")
    with GpuEvaluator(space, shape, seed=7, min_time_ms=1.0, max_reps=5) as evaluator:
        results = [f.result() for f in [evaluator.submit(c) for c in configs]]
    wrong = [(space.describe(c), m.failure, m.reason) for c, m in zip(configs, results) if not m.ok]
    assert not wrong, wrong
    # Racing (on by default): a candidate twice over the fastest of the batch is timed by two runs only.
    assert all(m.timing.median > 0 and (m.timing.reps >= 5 or (m.raced and m.timing.reps == 2)) for m in results)
    assert all(m.registers and m.registers > 0 for m in results)


# 192 accumulators per consumer thread: the consumers take 240 registers from the producer (setmaxnreg). A split
# beyond the block's launch allocation waits in setmaxnreg forever, which random picks rarely reach.
WIDE_CONSUMERS = [
    {"PINGPONG": 1, "BN": 192, "STAGES": 5},
    {"PINGPONG": 1, "BN": 192, "STAGES": 5, "CLUSTER_M": 2},
    {"BM": 256, "BN": 192, "STAGES": 4, "CLUSTER_M": 2},
    {"BM": 256, "BN": 192, "STAGES": 4, "SPLIT_K": 2},
]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_tma_tiles_of_192_accumulators_per_consumer(dtype, device):
    from autotune.tuning.evaluation.gpu import GpuEvaluator

    space = get_space("gemm", dtype=dtype)
    base = {ALGO: "wgmma_tma", **space.algos["wgmma_tma"].default_config}
    shape = (1000, 1000, 1000)
    configs = [{**base, **change} for change in WIDE_CONSUMERS]
    assert all(space.algos["wgmma_tma"].geometry(space.algos["wgmma_tma"].local(c))["accumulators"] == 192
               for c in configs)  # fmt: skip
    assert not [space.describe(c) for c in configs if space.violations(c, shape, device)]
    with GpuEvaluator(space, shape, seed=7, min_time_ms=0.5, max_reps=3) as evaluator:
        results = [f.result() for f in [evaluator.submit(c) for c in configs]]
    wrong = [(space.describe(c), m.failure, m.reason) for c, m in zip(configs, results) if not m.ok]
    assert not wrong, wrong


def store_tuned(space, shape, config, device, path):
    """A database at ``path`` holding ``config`` as the tuned bf16 row of ``shape`` on ``device``."""
    from autotune.results.storage import BestEntry, Database, resolve_url

    database = Database(resolve_url(path))
    database.save_best(BestEntry(
        device_name=device.name, compute_capability=device.cc, kernel=space.name, shape="x".join(map(str, shape)),
        dtype=space.dtype, template_hash=space.template_hash(), params=config, time_ms=0.01, metric=10.0,
        metric_unit="TFLOP/s", default_time_ms=0.02, driver_version=device.driver_version, nvcc_version="test",
        study_name="test", trial_number=0,
    ))  # fmt: skip
    database.close()
    return path


def test_tma_algorithm_through_the_dispatcher(device, tmp_path):
    """A tuned wgmma_tma row runs through `autotune.load` on torch tensors: boxes past the edges of ragged M, N,
    K; an array at an address TMA cannot take is one clear error, not a crash; shapes whose rows TMA cannot
    stride (K = 1, odd N) get another algorithm."""
    torch = pytest.importorskip("torch")
    import autotune
    from autotune.errors import InvalidArgument

    space = get_space("gemm", dtype="bfloat16")
    config = {ALGO: "wgmma_tma", **space.algos["wgmma_tma"].default_config, "BN": 128, "CLUSTER_M": 2}
    assert not space.violations(config, (1000, 264, 104), device)
    gemm = autotune.load("gemm", db=str(store_tuned(space, (1000, 264, 104), config, device, tmp_path / "tma.db")))
    assert gemm.choice((1000, 264, 104), "bfloat16").config == config

    def check(m, n, k, a=None):
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16) if a is None else a
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        c = gemm(a, b)
        ref = a.double() @ b.double()
        error = ((c.double() - ref).norm() / ref.norm()).item()
        assert error < 8e-3, (m, n, k, error)

    check(1000, 264, 104)
    for _ in range(3):  # again, with new pointers: the tensor maps are encoded again
        check(1000, 264, 104)
    buffer = torch.randn(1000 * 104 + 1, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(InvalidArgument, match="not 16-byte aligned"):
        gemm(buffer[1:].view(1000, 104), torch.randn(104, 264, device="cuda", dtype=torch.bfloat16))
    check(1000, 264, 104)  # still usable
    for shape in [(1000, 264, 1), (1000, 263, 104), (7, 9, 5)]:
        assert gemm.choice(shape, "bfloat16").config[ALGO] != "wgmma_tma"
        check(*shape)


STREAM_K_CASES = [
    ({}, (768, 768, 8192)),  # a weight gradient: 36 tiles, each in pieces over about four blocks
    ({"PINGPONG": 0, "BN": 256, "STAGES": 4}, (1000, 264, 4104)),  # cooperative, ragged edges, ragged K
    ({"BN": 192, "STAGES": 5}, (333, 1000, 2048)),  # 192 accumulators per consumer
    ({"PINGPONG": 0, "BM": 64, "WG": 1, "BN": 64, "STAGES": 7}, (67, 136, 40)),  # fewer k-tiles than blocks
    ({"PINGPONG": 0, "BM": 128, "WG": 2, "BN": 128, "STAGES": 6}, (4096, 4096, 512)),  # more tiles than blocks
]


@pytest.mark.parametrize("change, shape", STREAM_K_CASES, ids=[str(i) for i in range(len(STREAM_K_CASES))])
def test_stream_k_pieces_meet_in_a_fixed_order(change, shape, device, tmp_path):
    """Stream-K through `autotune.load` on torch tensors: right at edge cases of its partition (a block inside one
    tile, blocks with nothing to do, more tiles than blocks), and the same bits on every call (a tile's pieces are
    added in a fixed order), which split-K's atomics-free reduce also gives."""
    torch = pytest.importorskip("torch")
    import autotune

    space = get_space("gemm", dtype="bfloat16")
    config = {ALGO: "wgmma_tma_streamk", **space.algos["wgmma_tma_streamk"].default_config, **change}
    assert not space.violations(config, shape, device)
    gemm = autotune.load("gemm", db=str(store_tuned(space, shape, config, device, tmp_path / "sk.db")))
    assert gemm.choice(shape, "bfloat16").config == config
    m, n, k = shape
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    first = gemm(a, b)
    ref = a.double() @ b.double()
    assert ((first.double() - ref).norm() / ref.norm()).item() < 8e-3
    for _ in range(5):
        assert torch.equal(gemm(a, b), first)
