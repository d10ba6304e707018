"""GPU tier: autotune.load runs tuned GEMM correctly on numpy, torch, cupy and pycuda arrays."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import autotune
from autotune.errors import InvalidArgument, InvalidType, NotTuned
from autotune.results.storage import BestEntry, Database, resolve_url
from autotune.runtime.selection import DEFAULT, NEAREST, TUNED
from autotune.spaces import get_space

pytestmark = pytest.mark.gpu

TUNED_SHAPE = "512x384x256"  # (M, N, K): A is 512x256, B is 256x384
TUNED_CONFIG = {"BM": 64, "BN": 128, "BK": 16, "WARPS_M": 2, "WARPS_N": 2, "PIPELINE": "cp.async-3", "GROUP_M": 4}


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    from autotune.device import query_device

    device = query_device()
    space = get_space("gemm")
    config = {**space.default_config, **TUNED_CONFIG}
    assert not space.violations(config, (512, 384, 256), device)
    path = tmp_path_factory.mktemp("dispatch") / "d.db"
    database = Database(resolve_url(path))
    database.save_best(BestEntry(
        device_name=device.name, compute_capability=device.cc, kernel="gemm", shape=TUNED_SHAPE, dtype="float32",
        template_hash=space.template_hash(), params=config, time_ms=0.01, metric=10.0,
        metric_unit="TFLOP/s", default_time_ms=0.02, driver_version=device.driver_version, nvcc_version="test",
        study_name="test", trial_number=0,
    ))  # fmt: skip
    database.close()
    return str(path)


@pytest.fixture(scope="module")
def gemm(db):
    return autotune.load("gemm", db=db)


def rel_error(c, a, b) -> float:
    ref = np.asarray(a, np.float64) @ np.asarray(b, np.float64)
    return float(np.linalg.norm(np.asarray(c, np.float64) - ref) / np.linalg.norm(ref))


def inputs(m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, (m, k)).astype(np.float32), rng.uniform(-1, 1, (k, n)).astype(np.float32)


def test_numpy_on_tuned_and_untuned_shapes(gemm, caplog):
    a, b = inputs(512, 384, 256)
    assert gemm.choice(TUNED_SHAPE).source == TUNED
    c = gemm(a, b)
    assert isinstance(c, np.ndarray) and c.shape == (512, 384) and rel_error(c, a, b) < 1e-5
    a2, b2 = inputs(601, 390, 250, seed=1)  # the tuned shape's class (large M, wide): its configuration
    with caplog.at_level(logging.WARNING, logger="autotune.runtime.dispatch"):
        for _ in range(3):
            c2 = gemm(a2, b2)
    assert rel_error(c2, a2, b2) < 1e-5
    assert gemm.choice("601x390x250").source == NEAREST
    assert gemm.choice("100x70x33").source == DEFAULT  # another class: its rule default
    fallbacks = [r for r in caplog.records if "601x390x250" in r.getMessage()]
    assert len(fallbacks) == 1, "a fallback is logged once per (kernel, shape)"
    out = np.empty((601, 390), np.float32)
    assert gemm(a2, b2, out=out) is out and rel_error(out, a2, b2) < 1e-5


def test_torch_in_place_and_on_the_callers_stream(gemm):
    torch = pytest.importorskip("torch")
    a, b = (torch.rand(512, 256, device="cuda") * 2 - 1), (torch.rand(256, 384, device="cuda") * 2 - 1)
    c = gemm(a, b)
    assert isinstance(c, torch.Tensor) and c.is_cuda and c.shape == (512, 384)
    assert rel_error(c.cpu(), a.cpu(), b.cpu()) < 1e-5
    out = torch.full((512, 384), float("nan"), device="cuda")
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):  # the current stream is the caller's stream
        a2 = a * 2
        result = gemm(a2, b, out=out)
    stream.synchronize()
    assert result is out and rel_error(out.cpu(), a2.cpu(), b.cpu()) < 1e-5
    other = torch.cuda.Stream()
    out2 = torch.empty_like(out)
    gemm(a, b, out=out2, stream=other)
    other.synchronize()
    assert rel_error(out2.cpu(), a.cpu(), b.cpu()) < 1e-5


def test_cupy(gemm):
    cupy = pytest.importorskip("cupy")
    a, b = inputs(300, 200, 100, seed=2)
    c = gemm(cupy.asarray(a), cupy.asarray(b))
    assert isinstance(c, cupy.ndarray) and rel_error(cupy.asnumpy(c), a, b) < 1e-5


def test_pycuda_arrays_and_raw_allocations(gemm):
    import pycuda.autoprimaryctx  # noqa: F401  (pycuda on the primary context, as autotune)
    import pycuda.driver as cuda
    from pycuda import gpuarray

    a, b = inputs(512, 384, 256, seed=3)
    c = gemm(gpuarray.to_gpu(a), gpuarray.to_gpu(b))
    assert isinstance(c, gpuarray.GPUArray) and rel_error(c.get(), a, b) < 1e-5
    raw = cuda.mem_alloc(512 * 384 * 4)
    gemm(gpuarray.to_gpu(a), gpuarray.to_gpu(b), out=raw)
    host = np.empty((512, 384), np.float32)
    cuda.memcpy_dtoh(host, raw)
    assert rel_error(host, a, b) < 1e-5
    with pytest.raises(InvalidArgument, match="holds .* bytes"):
        gemm(gpuarray.to_gpu(a), gpuarray.to_gpu(b), out=cuda.mem_alloc(1000))


def test_strict_and_missing_database(db, tmp_path):
    strict = autotune.load("gemm", db=db, strict=True)
    a, b = inputs(512, 384, 256)
    assert rel_error(strict(a, b), a, b) < 1e-5
    with pytest.raises(NotTuned, match="strict"):
        strict(*inputs(64, 64, 64))
    fresh = autotune.load("gemm", db=str(tmp_path / "none.db"))
    assert fresh.choice(TUNED_SHAPE).source == DEFAULT
    assert rel_error(fresh(a, b), a, b) < 1e-5
    with pytest.raises(NotTuned, match="does not exist"):
        autotune.load("gemm", db=str(tmp_path / "none.db"), strict=True)


def test_bad_arguments_name_themselves(gemm):
    torch = pytest.importorskip("torch")
    a, b = torch.rand(64, 32, device="cuda"), torch.rand(32, 48, device="cuda")
    cases = [
        ((a.double(), b), {}, InvalidType, "A has dtype float64"),
        ((a, b.double()), {}, InvalidType, "B has dtype float64"),
        ((a.t().contiguous().t(), b), {}, InvalidArgument, "A is not C-contiguous"),
        ((a, torch.rand(31, 48, device="cuda")), {}, InvalidArgument, "B has 31 rows but A has 32 columns"),
        ((a.cpu().numpy(), b), {}, InvalidType, r"A on the host \(numpy\) but B on the GPU"),
        ((a.cpu(), b), {}, InvalidType, "A is a torch tensor on cpu"),
        ((a,), {}, InvalidType, "takes 2 arrays"),
        ((a, b), {"out": torch.empty(64, 47, device="cuda")}, InvalidArgument, r"out has shape \(64, 47\)"),
        ((a, b), {"out": np.empty((64, 48), np.float32)}, InvalidType, "out is a numpy array"),
        ((a, b), {"stream": "fast"}, InvalidType, "stream is a str"),
    ]
    for args, kwargs, error, message in cases:
        with pytest.raises(error, match=message):
            gemm(*args, **kwargs)
    assert rel_error(gemm(a, b).cpu(), a.cpu(), b.cpu()) < 1e-5, "still usable after the errors"


def test_many_threads(gemm):
    torch = pytest.importorskip("torch")
    shapes = [(512, 384, 256), (100, 70, 33), (256, 256, 256), (33, 65, 17)]
    data = [(torch.rand(m, k, device="cuda"), torch.rand(k, n, device="cuda")) for m, n, k in shapes]

    def work(i: int) -> float:
        a, b = data[i % len(data)]
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            c = gemm(a, b)
        stream.synchronize()
        return rel_error(c.cpu(), a.cpu(), b.cpu())

    with ThreadPoolExecutor(8) as pool:
        errors = list(pool.map(work, range(64)))
    assert max(errors) < 1e-5


def test_torch_calls_run_in_the_cpp_launcher(gemm):
    """After its first call a key's torch calls run in the C++ launcher (autotune.runtime.torch_native), with
    the same answers, out= and stream= as the Python path."""
    torch = pytest.importorskip("torch")
    from autotune.runtime import torch_native

    assert torch_native.module() is not None, torch_native.unavailable_reason()
    a, b = torch.rand(96, 64, device="cuda") * 2 - 1, torch.rand(64, 80, device="cuda") * 2 - 1
    first = gemm(a, b)  # the Python path, which hands the plan to C++
    assert gemm._torch._native is not None
    again = gemm(a, b)
    out = torch.full_like(first, float("nan"))
    assert gemm(a, b, out=out, stream=0) is out
    torch.cuda.synchronize()
    assert torch.equal(first, again) and torch.equal(first, out)
    assert rel_error(first.cpu(), a.cpu(), b.cpu()) < 1e-5
