import time
from pathlib import Path

import pytest

from autotune.errors import ToolchainError
from autotune.runtime.compiler import COMPILE_TIMEOUT_S, CompileDeadline, Compiler, find_nvcc, parse_ptxas

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


def _slow_nvcc(tmp_path, seconds: float):
    """A stand-in nvcc that prints a version, and otherwise starts a child that sleeps (as nvcc starts cicc and
    ptxas) and waits for it; the child's pid goes to a file."""
    script = tmp_path / "nvcc"
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "--version" ]; then echo "Cuda compilation tools, release 13.0, V13.0.88"; exit 0; fi\n'
        f"sleep {seconds} &\n"
        f"echo $! > {tmp_path / 'child.pid'}\n"
        "wait\n"
    )
    script.chmod(0o755)
    return str(script)


def test_deadline_follows_the_median_of_finished_compiles():
    deadline = CompileDeadline(factor=5.0, floor_s=10.0, warmup=3)
    assert deadline.limit() == COMPILE_TIMEOUT_S  # no median yet
    for seconds in (1.0, 3.0):
        deadline.record(seconds)
    assert deadline.limit() == COMPILE_TIMEOUT_S
    deadline.record(4.0)
    assert deadline.limit() == 15.0  # 5 x the median 3.0
    assert CompileDeadline(factor=2.0, floor_s=10.0, warmup=1).limit() == COMPILE_TIMEOUT_S
    short = CompileDeadline(factor=2.0, floor_s=10.0, warmup=1)
    short.record(1.0)
    assert short.limit() == 10.0  # the floor
    assert "stopped, not measured" in short.reason(12.0) and "1.00 s" in short.reason(12.0)


def test_a_compile_past_its_deadline_is_stopped_whole_and_not_cached(tmp_path):
    source = tmp_path / "k.cu"
    source.write_text("// any source\n")
    deadline = CompileDeadline(factor=2.0, floor_s=0.5, warmup=1)
    deadline.record(0.1)  # the median of the search's compiles: the limit is the floor, 0.5 s
    compiler = Compiler("sm_90", cache_dir=tmp_path / "cache", nvcc=_slow_nvcc(tmp_path, 30), deadline=deadline)
    start = time.perf_counter()
    result = compiler.compile(source, {})
    assert time.perf_counter() - start < 10
    assert not result.ok and "stopped, not measured" in result.error and result.seconds >= 0.5
    child = int((tmp_path / "child.pid").read_text())
    for _ in range(50):  # the sleeping child (nvcc's cicc or ptxas) went with its process group
        if not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]:
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the compile's child process survived the stop")
    (tmp_path / "child.pid").unlink()
    again = compiler.compile(source, {})
    assert not again.cached and (tmp_path / "child.pid").exists(), "a stopped compile is compiled again"


def test_a_first_wave_compile_is_stopped_once_the_median_exists(tmp_path):
    """A compile started before any compile of the search finished (no median: the 300 s limit) is stopped soon
    after the median appears (issue 24's straggler was proposed at 0.5 s, in the first wave)."""
    import threading

    source = tmp_path / "k.cu"
    source.write_text("// any source\n")
    deadline = CompileDeadline(factor=2.0, floor_s=0.5, warmup=2, poll_s=0.05)
    compiler = Compiler("sm_90", cache_dir=tmp_path / "cache", nvcc=_slow_nvcc(tmp_path, 30), deadline=deadline)
    threading.Timer(0.3, lambda: [deadline.record(0.1) for _ in range(2)]).start()
    start = time.perf_counter()
    result = compiler.compile(source, {})
    assert 0.5 <= time.perf_counter() - start < 5
    assert not result.ok and "0.10 s" in result.error
    assert not deadline._running and not deadline._stopped  # nothing left behind


@pytest.mark.nvcc
def test_the_code_hash_ignores_a_comment_but_not_the_code(tmp_path):
    """The premise of a tuned row's machine-code identity (`CodeHash`): nvcc writes the same cubin bytes after a
    comment edit of the template or of a header it includes (the template hash changes), and other bytes after a
    change of the code."""
    source = tmp_path / "k.cu"
    header = tmp_path / "common.cuh"
    header.write_text("#define SCALE 2.0f\n")
    source.write_text('#include "common.cuh"\nextern "C" __global__ void k(float* x) { x[threadIdx.x] *= SCALE * V; }\n')
    compiler = Compiler("sm_90", cache_dir=tmp_path / "cache")
    before = compiler.code_hash(source, {"V": 3})
    header.write_text("// the scale of every element\n#define SCALE 2.0f\n")
    source.write_text("// a comment\n" + source.read_text())
    assert compiler.code_hash(source, {"V": 3}) == before
    assert compiler.code_hash(source, {"V": 4}) != before
    header.write_text("#define SCALE 3.0f\n")
    assert compiler.code_hash(source, {"V": 3}) != before


def test_closing_a_searchs_compiler_stops_its_running_compiles(tmp_path):
    """At a search's end its compile threads still hold candidates asked ahead of need: closing its compiler (one
    with a deadline) stops them, not waits for them (a range's buckets each waited up to an nvcc at their end),
    and nothing of them is cached."""
    source = tmp_path / "k.cu"
    source.write_text("// any source\n")
    compiler = Compiler("sm_90", cache_dir=tmp_path / "cache", nvcc=_slow_nvcc(tmp_path, 30),
                        deadline=CompileDeadline(), jobs=2)  # fmt: skip
    running = [compiler.submit(source, {"V": v}) for v in (1, 2)]
    for _ in range(100):  # both nvcc started
        if len(compiler.deadline._running) == 2:
            break
        time.sleep(0.05)
    compiler.close()
    results = [future.result(timeout=10) for future in running]
    assert all(not r.ok and "the search had ended" in r.error for r in results), results
    assert not list((tmp_path / "cache").rglob("*.json")), "a stopped compile is not cached"
