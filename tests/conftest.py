"""Shared fixtures. GPU tests (marker ``gpu``) are skipped, with the reason, where there is no usable GPU;
``nvcc`` tests where nvcc is absent. Everything else runs everywhere."""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from autotune.device import DeviceInfo

DATA = Path(__file__).parent / "data"

# On a host of several GPUs, AUTOTUNE_TEST_GPUS=N spreads pytest-xdist's workers over GPUs 0..N-1 (worker gwK sees
# GPU K mod N alone). Set here, at the conftest's import, before any test initialises CUDA; the GPU worker
# processes of a search inherit it. Tests of several GPUs (tests/test_multi.py) run without it.
if os.environ.get("AUTOTUNE_TEST_GPUS") and os.environ.get("PYTEST_XDIST_WORKER", "").startswith("gw"):
    _worker = int(os.environ["PYTEST_XDIST_WORKER"][2:])
    os.environ["CUDA_VISIBLE_DEVICES"] = str(_worker % int(os.environ["AUTOTUNE_TEST_GPUS"]))

# Limits of an NVIDIA H200 as pycuda reports them (read on the GPU machine), for CPU-side constraint checks.
H200 = DeviceInfo(
    name="NVIDIA H200",
    compute_capability=(9, 0),
    multiprocessors=132,
    l2_bytes=62914560,
    total_memory=150_754_820_096,
    max_threads_per_block=1024,
    smem_per_block=49152,
    smem_per_block_optin=232448,
    smem_per_multiprocessor=233472,
    registers_per_block=65536,
    registers_per_multiprocessor=65536,
    driver_version="580.159.04",
    cuda_driver_api="13.0",
)


@functools.lru_cache(maxsize=None)
def gpu_problem() -> str | None:
    """None when a GPU is usable here, else why not."""
    try:
        import pycuda.driver as cuda
    except ImportError:
        return "pycuda is not installed"
    try:
        cuda.init()
        if cuda.Device.count() < 1:
            return "no CUDA GPU"
    except Exception as exc:
        return f"no usable CUDA GPU: {exc}"
    return None


def nvcc_problem() -> str | None:
    if os.environ.get("AUTOTUNE_NVCC") or shutil.which("nvcc") or os.path.exists("/usr/local/cuda/bin/nvcc"):
        return None
    return "nvcc is not installed"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "gpu" in item.keywords and gpu_problem():
            item.add_marker(pytest.mark.skip(reason=f"GPU test: {gpu_problem()}"))
        elif "nvcc" in item.keywords and nvcc_problem():
            item.add_marker(pytest.mark.skip(reason=f"nvcc test: {nvcc_problem()}"))


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One compile cache for the whole session (compiles are the slow part of the CPU tests)."""
    return tmp_path_factory.mktemp("autotune-cache")


@pytest.fixture(autouse=True)
def _isolate(monkeypatch: pytest.MonkeyPatch, cache_dir: Path, tmp_path: Path) -> None:
    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(cache_dir))
    monkeypatch.delenv("AUTOTUNE_DB", raising=False)
    monkeypatch.chdir(tmp_path)  # the default database studies/autotune.db lands in the test's own folder


@pytest.fixture
def h200() -> DeviceInfo:
    return H200


def file_digest(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def att() -> Any:
    """autotune.torch for the GPU tests of the torch integration (skipped where torch sees no CUDA device)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    import autotune.torch as att

    return att


def has_gpu() -> bool:
    return bool(os.environ.get("AUTOTUNE_TEST_HAS_GPU")) or gpu_problem() is None


# What a search run as printed may stop for on a machine without a GPU (or nvcc): the environment, never the
# command line (an unknown kernel, a bad option or shape).
LACK_OF_GPU = ("GPU", "CUDA", "pycuda", "nvcc", "NVCC")


def assert_stopped_only_for_lack_of_gpu(result: Any) -> None:
    """A CliRunner result of a search on a machine without a GPU: it resolved its kernel, shapes and options
    and stopped where it needed the GPU, with one error line and exit status 2."""
    text = result.output.strip()
    assert result.exit_code == 2, (result.exit_code, text)
    assert text.startswith("error:") and len(text.splitlines()) == 1, text
    assert any(word in text for word in LACK_OF_GPU), text
    assert "unknown kernel" not in text and "cannot load kernel space" not in text, text
