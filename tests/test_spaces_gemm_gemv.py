"""The gemv algorithm of the GEMM family: valid only for one row or one column, every dtype, split-K by launch."""

from __future__ import annotations

import random

import pytest

from autotune.runtime.compiler import Compiler
from autotune.spaces import get_space
from autotune.spaces.enumeration import random_config
from autotune.spaces.gemm_gemv import applies
from space_checks import sample_valid, template_defaults

DTYPES = ("float32", "float16", "bfloat16")
ROW = (1, 4096, 4096)  # batch-1 inference: x·W
COL = (4096, 1, 4096)  # W·x


def space_for(dtype: str, **domains):
    return get_space("gemm", {"ALGO": ["gemv"], **domains}, dtype=dtype)


def gemv(space, **change) -> dict:
    return {"ALGO": "gemv", **space.algos["gemv"].default_config, **change}


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_offers_gemv_and_its_default_is_the_templates(dtype):
    space = get_space("gemm", dtype=dtype)
    assert "gemv" in space.domain("ALGO")
    rendered = space.defines(gemv(space))
    defaults = template_defaults("gemm_gemv.cu")
    assert {k: v for k, v in rendered.items() if k != "DTYPE"} == defaults
    assert "SPLIT_K" not in rendered, "split-K is a launch choice: no recompilation"


def test_only_one_row_or_one_column(h200):
    space = space_for("float32")
    for shape in (ROW, COL, (1, 1, 7), (1, 131, 33), (67, 1, 33)):
        assert applies(shape) and space.violations(gemv(space), shape, h200) == []
    for shape in ((2, 4096, 4096), (4096, 4096, 4096), (16, 2, 3)):
        assert not applies(shape)
        assert "M = 1 or N = 1" in space.violations(gemv(space), shape, h200)[0]


def test_a_load_is_at_most_16_bytes(h200):
    assert "16-byte" in space_for("float32").violations(gemv(space_for("float32"), VEC=8), ROW, h200)[0]
    for dtype in ("float16", "bfloat16"):
        assert space_for(dtype).violations(gemv(space_for(dtype), VEC=8), ROW, h200) == []


def test_threads_per_output_fit_the_block(h200):
    space = space_for("float32")
    assert "do not fit" in space.violations(gemv(space, BLOCK=64, KTHREADS=128), ROW, h200)[0]


def test_one_column_runs_rows_and_one_row_runs_columns(h200):
    space = space_for("float32")
    (rows,) = space.launches(gemv(space, BLOCK=256, KTHREADS=32), COL, h200)
    assert rows.kernel == "gemv_rows" and rows.grid == (4096 // 8, 1, 1) and rows.block == (256, 1, 1)
    assert rows.args[:4] == ("A", "B", "C", "C")
    assert [int(a) for a in rows.args[4:]] == [4096, 1, 4096]
    (cols,) = space.launches(gemv(space, BLOCK=256, KTHREADS=8, VEC=4), ROW, h200)
    assert cols.kernel == "gemv_cols" and cols.grid == (4096 // (32 * 4), 1, 1)
    (dot,) = space.launches(gemv(space), (1, 1, 100), h200)
    assert dot.kernel == "gemv_rows", "a dot product reads the row of A contiguously"


@pytest.mark.parametrize("dtype", DTYPES)
def test_split_k_slices_the_grid_into_an_fp32_workspace(h200, dtype):
    space = space_for(dtype)
    config = gemv(space, SPLIT_K=8)
    main, reduce = space.launches(config, ROW, h200)
    assert main.grid[1] == 8 and main.args[3] == "partial"
    assert reduce.kernel == "gemm_splitk_reduce" and reduce.args[:2] == ("partial", "C")
    assert int(reduce.args[2]) == 4096 and int(reduce.args[3]) == 8
    (spec,) = space.workspace(config, ROW).values()
    assert spec.shape == (8, 1, 4096) and spec.dtype == "float32"
    assert space.workspace(gemv(space), ROW) == {}


def test_validation_covers_one_row_and_one_column():
    cases = [s for s, _ in get_space("gemm").validation_cases((1, 4096, 4096))]
    assert any(m == 1 and n > 1 for m, n, _ in cases) and any(n == 1 and m > 1 for m, n, _ in cases)
    assert any(m == 1 and k % 8 for m, _, k in cases), "K ragged against every vector width"


def test_a_search_at_a_square_shape_never_measures_gemv(h200):
    space = get_space("gemm")
    rng = random.Random(0)
    draws = [random_config(space, rng) for _ in range(500)]
    assert not [c for c in draws if c["ALGO"] == "gemv" and not space.violations(c, (4096,) * 3, h200)]


@pytest.mark.nvcc
def test_sampled_configs_compile_and_the_template_rejects_what_the_space_rejects(h200, cache_dir):
    jobs = []
    for dtype in DTYPES:
        space = space_for(dtype)
        for config in sample_valid(space, h200, ROW, 6, seed=len(dtype)):
            jobs.append((space, config, True))
    f32 = space_for("float32")
    jobs += [(f32, gemv(f32, VEC=8), False), (f32, gemv(f32, BLOCK=64, KTHREADS=128), False)]
    compiler = Compiler("sm_90a", cache_dir=cache_dir)
    try:
        futures = [compiler.submit(s.template_for(c), s.defines(c)) for s, c, _ in jobs]
        results = [f.result() for f in futures]
    finally:
        compiler.close()
    for (space, config, valid), r in zip(jobs, results):
        if valid:
            assert r.ok, (space.dtype, config, r.error)
            assert {"gemv_rows", "gemv_cols", "gemm_splitk_reduce"} <= set(r.kernels)
            assert all(k.spill_stores == 0 for k in r.kernels.values()), config
        else:
            assert not r.ok and "static assertion" in (r.error or ""), config

