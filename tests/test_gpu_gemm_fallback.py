"""GPU tier: the dispatcher with only 4096³ tuned answers other shape classes correctly with their rule default
(GEMV for one row or one column, a small SIMT tile with split-K for 16 rows, FP32-accurate 3xTF32 with split-K for
a tall-skinny output), not with the square winner."""

from __future__ import annotations

import numpy as np
import pytest

import autotune
from autotune.results.storage import BestEntry, Database, resolve_url
from autotune.runtime.selection import DEFAULT, TUNED
from autotune.spaces import get_space

pytestmark = pytest.mark.gpu

SQUARE = (4096, 4096, 4096)
WINNER = {"BM": 128, "BN": 128, "BK": 16, "WARPS_M": 2, "WARPS_N": 4, "PIPELINE": "cp.async-3"}
# (M, N, K) → the algorithm the rule picks; ragged sizes so that every edge path runs.
CASES = [
    ((1, 4096, 4096), "gemv"),
    ((1, 1001, 3001), "gemv"),
    ((4096, 1, 4096), "gemv"),
    ((777, 1, 1025), "gemv"),
    ((1, 1, 4097), "gemv"),
    ((16, 4096, 4096), "simt"),
    ((13, 1000, 2049), "simt"),
    ((16384, 128, 16384), "tf32x3"),
    ((4001, 100, 8191), "tf32x3"),
    ((512, 512, 8191), "wgmma_tf32x3"),  # deep: split along K; K padded to 8192 in the pre-pass's workspaces
]


@pytest.fixture(scope="module")
def gemm(tmp_path_factory):
    from autotune.device import query_device

    device = query_device()
    space = get_space("gemm")
    config = {**space.default_config, **WINNER}
    assert not space.violations(config, SQUARE, device)
    path = tmp_path_factory.mktemp("fallback") / "f.db"
    database = Database(resolve_url(path))
    database.save_best(BestEntry(
        device_name=device.name, compute_capability=device.cc, kernel="gemm", shape="4096x4096x4096",
        dtype="float32", template_hash=space.template_hash(), params=config, time_ms=2.0, metric=60.0,
        metric_unit="TFLOP/s", default_time_ms=3.0, driver_version=device.driver_version, nvcc_version="test",
        study_name="test", trial_number=0,
    ))  # fmt: skip
    database.close()
    return autotune.load("gemm", db=str(path))


def rel_error(c, a, b) -> float:
    ref = np.asarray(a, np.float64) @ np.asarray(b, np.float64)
    return float(np.linalg.norm(np.asarray(c, np.float64) - ref) / np.linalg.norm(ref))


@pytest.mark.parametrize("shape, algo", CASES, ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else v)
def test_other_classes_run_their_rule_default_correctly(gemm, shape, algo):
    assert gemm.choice(SQUARE).source == TUNED
    choice = gemm.choice(shape)
    if algo.startswith("wgmma") and gemm.device.compute_capability < (9, 0):
        algo = algo.removeprefix("wgmma_")
    assert choice.source == DEFAULT and choice.config["ALGO"] == algo, choice
    m, n, k = shape
    rng = np.random.default_rng(m + n + k)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    c = gemm(a, b)
    assert c.shape == (m, n) and np.isfinite(c).all()
    assert rel_error(c, a, b) < 1e-5
    c2 = gemm(a, b)
    assert np.array_equal(c, c2), "split-K sums its slices in a fixed order: the same answer every call"


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize(
    "shape, algo",
    [((1, 4096, 4096), "wgmma_skinny"),  # one row of a B stored K×N: 8-row tiles read B's rows as stored
     ((4096, 1, 4096), "gemv"), ((1, 333, 4099), "gemv")],  # a column; K no multiple of 8 (no TMA)  # fmt: skip
    ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else v,
)
def test_half_precision_rows_and_columns_run_the_vector_rules(gemm, dtype, shape, algo):
    torch = pytest.importorskip("torch")
    m, n, k = shape
    gen = torch.Generator(device="cuda").manual_seed(k)
    a = (torch.rand(m, k, device="cuda", generator=gen) * 2 - 1).to(getattr(torch, dtype))
    b = (torch.rand(k, n, device="cuda", generator=gen) * 2 - 1).to(getattr(torch, dtype))
    assert gemm.choice(shape, dtype).config["ALGO"] == algo
    c = gemm(a, b)
    assert c.dtype == a.dtype and c.shape == (m, n)
    ref = a.double() @ b.double()
    err = float((c.double() - ref).norm() / ref.norm())
    assert err < {"float16": 1e-3, "bfloat16": 8e-3}[dtype], err


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize(
    "shape, algo",
    [((1000, 1000, 1000), "wgmma_tma"), ((127, 4096, 4096), "wgmma_skinny"), ((16384, 128, 4096), "wgmma_tma"),
     ((200, 4096, 4096), "wgmma_tma"), ((128, 28672, 4096), "wgmma_skinny"),
     ((256, 256, 16384), "wgmma_tma"), ((4000, 64, 4000), "wgmma_tma"),  # split along K
     ((16, 4096, 4096), "wgmma_skinny"), ((13, 1000, 2049), "mma"), ((333, 264, 104), "mma")],  # fmt: skip
    ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else v,
)
def test_half_precision_rule_defaults_are_correct(gemm, dtype, shape, algo):
    """Half precision with nothing tuned for it: TMA tiles where they fill the GPU (on Hopper), split along K where
    they are too few, the transposed few-row product at 2 to 128 rows (on Hopper), mma tiles where rows are too few
    for TMA or cannot be strided by it."""
    torch = pytest.importorskip("torch")
    from autotune.device import query_device

    if query_device().compute_capability != (9, 0) and algo.startswith("wgmma"):
        algo = "mma"
    m, n, k = shape
    gen = torch.Generator(device="cuda").manual_seed(k)
    a = (torch.rand(m, k, device="cuda", generator=gen) * 2 - 1).to(getattr(torch, dtype))
    b = (torch.rand(k, n, device="cuda", generator=gen) * 2 - 1).to(getattr(torch, dtype))
    choice = gemm.choice(shape, dtype)
    assert choice.source == DEFAULT and choice.config["ALGO"] == algo, choice
    c = gemm(a, b)
    ref = a.double() @ b.double()
    err = float((c.double() - ref).norm() / ref.norm())
    assert err < {"float16": 1e-3, "bfloat16": 8e-3}[dtype], err
