import pytest

from autotune.errors import ToolchainError
from autotune.runtime.compiler import Compiler, find_nvcc, parse_ptxas

PTXAS_LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'sgemm' for 'sm_90'
ptxas info    : Function properties for sgemm
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 128 registers, used 1 barriers, 8 bytes cumulative stack size
ptxas info    : Compiling entry function 'reduce_pass2' for 'sm_90'
ptxas info    : Function properties for reduce_pass2
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 4096 bytes smem, 380 bytes cmem[0]
"""


def test_parse_ptxas_report():
    kernels = parse_ptxas(PTXAS_LOG)
    assert set(kernels) == {"sgemm", "reduce_pass2"}
    assert kernels["sgemm"].registers == 128
    assert (kernels["sgemm"].stack_bytes, kernels["sgemm"].spill_stores, kernels["sgemm"].spill_loads) == (8, 4, 12)
    assert kernels["reduce_pass2"].shared_static == 4096
    assert kernels["reduce_pass2"].registers == 32


def test_missing_nvcc_is_one_clear_error(monkeypatch):
    monkeypatch.setenv("AUTOTUNE_NVCC", "/nonexistent/nvcc")
    with pytest.raises(ToolchainError, match="AUTOTUNE_NVCC"):
        find_nvcc()
    monkeypatch.delenv("AUTOTUNE_NVCC")
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr("os.path.isfile", lambda p: False)
    with pytest.raises(ToolchainError, match="nvcc not found"):
        find_nvcc()


@pytest.mark.nvcc
def test_cache_hit_and_key(tmp_path):
    source = tmp_path / "k.cu"
    source.write_text('extern "C" __global__ void k(float* x) { x[threadIdx.x] = V; }\n#ifndef V\n#error V\n#endif\n')
    compiler = Compiler("sm_90", cache_dir=tmp_path / "cache")
    first = compiler.compile(source, {"V": 1})
    again = compiler.compile(source, {"V": 1})
    other = compiler.compile(source, {"V": 2})
    assert first.ok and not first.cached and first.seconds > 0
    assert again.ok and again.cached and again.cubin == first.cubin
    assert other.key != first.key and not other.cached
    assert first.kernels["k"].registers > 0


@pytest.mark.nvcc
def test_failure_is_reported_and_cached(tmp_path):
    source = tmp_path / "bad.cu"
    source.write_text('#error "deliberately broken"\n')
    compiler = Compiler("sm_90", cache_dir=tmp_path / "cache")
    result = compiler.compile(source, {})
    assert not result.ok and "deliberately broken" in result.error
    assert compiler.compile(source, {}).cached


@pytest.mark.nvcc
def test_template_edit_changes_the_key(tmp_path):
    source = tmp_path / "k.cu"
    header = tmp_path / "common.cuh"
    header.write_text("#define V 1\n")
    source.write_text('#include "common.cuh"\nextern "C" __global__ void k(float* x) { x[0] = V; }\n')
    compiler = Compiler("sm_90", cache_dir=tmp_path / "cache")
    before = compiler.key(source, {})
    header.write_text("#define V 2\n")
    assert compiler.key(source, {}) != before, "an edit of an included header invalidates the cache"
