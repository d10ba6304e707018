"""Several configurations in one nvcc front end (autotune/runtime/compile_batch.py and `Compiler`'s ``batch``): what
a template allows, and that a batched compile writes the cubins nvcc writes for each configuration alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune.runtime import compile_batch
from autotune.runtime.compiler import Compiler
from autotune.spaces import ALGO, get_space
from autotune.templates import template_path

TEMPLATE = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] = V + W; }\n'


def layout(name: str) -> compile_batch.TemplateLayout:
    return compile_batch.layout_of(Path(template_path(name)))


def test_the_gemm_templates_batch_over_their_tunables():
    for kernel, dtype, algo in [("gemm", "bfloat16", "wgmma_tma"), ("gemm_tn", "bfloat16", "wgmma_tma_streamk"),
                                ("linear", "float32", "wgmma_tf32x3"), ("gemm", "float32", "simt"),
                                ("linear_swiglu", "bfloat16", "wgmma_tma")]:  # fmt: skip
        space = get_space(kernel, dtype=dtype)
        config = {ALGO: algo, **space.algos[algo].default_config}
        defines = space.compile_defines(config, space.default_shape)
        varying = space.tunable_names(config)
        assert "DTYPE" not in varying and varying, (kernel, algo)
        assert layout(space.template_for(config)).batchable(varying, defines), (kernel, algo)
    wgmma_tma = layout("gemm_wgmma_tma.cu")
    assert wgmma_tma.kernels == ("gemm_wgmma_tma",)
    assert {"STREAM_K", "GEMM_BIAS", "GEMM_SWIGLU", "DTYPE"} <= wgmma_tma.include_guards, (
        "TF32X3 is DTYPE's: derived macros too")


def test_a_template_whose_headers_read_its_tunables_or_its_own_macros_is_not_batched(tmp_path):
    space = get_space("layernorm", dtype="bfloat16")  # row_groups.cuh reads BLOCK, TPR, VEC
    assert not layout(space.template_for(space.default_config)).batchable(
        space.tunable_names(space.default_config), space.compile_defines(space.default_config, (8, 768)))
    (tmp_path / "reads.cuh").write_text("#pragma once\n__device__ int chosen() { return MODE; }\n")
    (tmp_path / "t.cu").write_text('#define MODE 2\n#include "reads.cuh"\n' + TEMPLATE)
    own = compile_batch.layout_of(tmp_path / "t.cu")
    assert own.defined_for_headers == {"MODE"} and not own.batchable(["V"], ["V", "W"])
    assert own.batchable(["V"], ["V", "W", "MODE"]), "given by the defines, the header sees the same MODE"


def test_a_tunable_that_shapes_dynamic_shared_memory_keeps_its_configurations_apart(tmp_path):
    """nvcc merges a unit's block-scope `extern __shared__` arrays into one symbol, with the first one's alignment."""
    (tmp_path / "t.cu").write_text('extern "C" __global__ void k(float* x) {\n'
                                   "  extern __shared__ __align__(AL) float tile[];\n"
                                   "  tile[threadIdx.x] = V; x[threadIdx.x] = tile[0];\n}\n")  # fmt: skip
    shared = compile_batch.layout_of(tmp_path / "t.cu")
    assert not shared.batchable(["AL", "V"], ["AL", "V"]) and shared.batchable(["V"], ["AL", "V"])


def test_split_keeps_the_headers_kernels_and_renames_its_own_back():
    ptx = ("//\n.version 9.0\n.target sm_90a\n"
           ".visible .entry k__batch0(\n.param .u64 a\n)\n{\nret;\n}\n"
           ".visible .entry reduce(\n)\n{\nret;\n}\n"
           ".visible .entry k__batch1(\n.param .u64 b\n)\n{\nmov k__batch1;\n}\n")  # fmt: skip
    one = compile_batch.split_ptx(ptx, 1, ["k"])
    assert ".entry k(\n.param .u64 b" in one and "mov k;" in one and ".entry reduce(" in one
    assert "k__batch0" not in one and ".target sm_90a" in one


def test_header_list_keeps_the_templates_own_headers_in_order(tmp_path):
    rule = f"t.o: {tmp_path}/t.cu \\\n /usr/include/cuda_runtime.h {tmp_path}/b.cuh \\\n {tmp_path}/a.cuh\n"
    assert compile_batch.header_list(rule, tmp_path) == ["b.cuh", "a.cuh"]


@pytest.mark.nvcc
def test_configurations_waiting_together_share_a_front_end_and_get_nvccs_own_cubins(tmp_path):
    space = get_space("gemm", dtype="bfloat16")
    base = {ALGO: "wgmma_tma", **space.algos["wgmma_tma"].default_config}
    configs = [{**base, **c} for c in ({}, {"BN": 128}, {"PINGPONG": 1, "BN": 128}, {"STAGES": 3})]
    jobs = [(space.template_for(c), space.compile_defines(c, (4096, 4096, 4096)), space.tunable_names(c))
            for c in configs]  # fmt: skip
    alone = Compiler("sm_90a", cache_dir=tmp_path / "alone", jobs=2)
    together = Compiler("sm_90a", cache_dir=tmp_path / "together", jobs=1, batch=4)
    units = []
    original = together.units._unit
    together.units._unit = lambda group, waiting: units.append(len(waiting)) or original(group, waiting)
    futures = [together.submit(template, defines, varying) for template, defines, varying in jobs]  # one thread
    try:
        batched = [f.result() for f in futures]
        reference = [alone.submit(template, defines).result() for template, defines, _ in jobs]
    finally:
        alone.close()
        together.close()
    assert all(r.ok for r in batched + reference)
    assert units and max(units) > 1, "the configurations that waited went into one unit"
    for mine, theirs in zip(batched, reference):
        assert mine.key == theirs.key
        assert Path(mine.cubin).read_bytes() == Path(theirs.cubin).read_bytes()
        assert mine.kernels == theirs.kernels
    again = Compiler("sm_90a", cache_dir=tmp_path / "together", batch=4)
    assert all(again.submit(t, d, v).result().cached for t, d, v in jobs)
    again.close()


@pytest.mark.nvcc
def test_a_configuration_that_does_not_compile_fails_alone(tmp_path):
    (tmp_path / "t.cu").write_text(TEMPLATE + "static_assert(V != 3, \"V = 3 is refused\");\n")
    compiler = Compiler("sm_90", cache_dir=tmp_path / "cache", jobs=1, batch=8)
    futures = [compiler.submit(tmp_path / "t.cu", {"V": v, "W": 1}, ["V"]) for v in (1, 2, 3, 4)]
    results = [f.result() for f in futures]
    compiler.close()
    assert [r.ok for r in results] == [True, True, False, True]
    assert "V = 3 is refused" in results[2].error


@pytest.mark.nvcc
def test_a_template_with_code_outside_its_kernels_is_compiled_alone_and_right(tmp_path):
    """A device function kept out of line lands in the unit's namespace: the split module would not give the
    configuration's own cubin, so the compiler compiles that template alone (the same cubins as without batches)."""
    source = ("__device__ __noinline__ float twice(float v) { return 2 * v; }\n"
              'extern "C" __global__ void k(float* x) { x[threadIdx.x] = twice(x[threadIdx.x]) + V; }\n')  # fmt: skip
    (tmp_path / "t.cu").write_text(source)
    together = Compiler("sm_90", cache_dir=tmp_path / "together", jobs=1, batch=4)
    alone = Compiler("sm_90", cache_dir=tmp_path / "alone")
    futures = [together.submit(tmp_path / "t.cu", {"V": v}, ["V"]) for v in (1, 2, 3)]
    results = [f.result() for f in futures]
    assert all(r.ok for r in results) and together.units.alone, "the group is remembered as one to compile alone"
    for v, result in zip((1, 2, 3), results):
        assert Path(result.cubin).read_bytes() == Path(alone.compile(tmp_path / "t.cu", {"V": v}).cubin).read_bytes()
    assert together.units.group(tmp_path / "t.cu", {"V": 4}, ["V"]) is None
    together.close()


@pytest.mark.nvcc
def test_a_group_whose_unit_changes_the_code_is_compiled_alone(tmp_path, monkeypatch):
    """The first unit's cubin is checked against nvcc alone; where they differ, the group compiles alone from then
    on, and every cubin is nvcc's own. cicc scheduled the Hopper attention backward otherwise inside a larger unit
    until that template's 2026-11-29e edits; now they agree, so the check is told they differ."""
    from autotune.runtime import compile_units

    checked = []

    def differs(units: object, job: object, cubin: Path) -> bool:
        checked.append(job)
        return False

    monkeypatch.setattr(compile_units.UnitCompiles, "_same_alone", differs)
    space = get_space("attention_backward", {ALGO: ["fa3"]}, dtype="bfloat16")
    shape = space.default_shape
    tiles = ((3, 1), (2, 2), (2, 1))
    configs = [{ALGO: "fa3", "BM": 64, "Q_STAGES": q, "DO_STAGES": do, "DQ_MODE": 0} for q, do in tiles]
    jobs = [(space.template_for(c), space.compile_defines(c, shape), space.tunable_names(c)) for c in configs]
    together = Compiler("sm_90a", cache_dir=tmp_path / "together", jobs=1, batch=3)
    results = [f.result() for f in [together.submit(*job) for job in jobs]]  # the second and third wait together
    together.close()
    assert all(r.ok for r in results) and together.units.alone and len(checked) == 1
    alone = Compiler("sm_90a", cache_dir=tmp_path / "alone")
    for (template, defines, _), result in zip(jobs, results):
        assert Path(result.cubin).read_bytes() == Path(alone.compile(template, defines).cubin).read_bytes()
