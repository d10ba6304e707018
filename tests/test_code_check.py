"""A stale row whose machine code is unchanged (autotune/runtime/code_check.py): compiled by nvcc on the CPU."""

from __future__ import annotations

import types

import pytest

from autotune.runtime.code_check import CodeCheck
from autotune.runtime.compiler import Compiler
from autotune.spaces import get_space

pytestmark = pytest.mark.nvcc


def row(space, row_id: int, **change) -> types.SimpleNamespace:
    config = {**space.default_config, **change}
    return types.SimpleNamespace(id=row_id, kernel=space.name, dtype=space.dtype, shape="512x512x512", config=config)


def test_a_row_is_kept_only_where_its_cubin_is_the_same(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(tmp_path / "cache"))
    space = get_space("gemm")
    tuned = row(space, 1)
    config, shape = tuned.config, (512, 512, 512)
    stored = Compiler("sm_90").code_hash(space.template_for(config), space.compile_defines(config, shape))
    assert stored is not None and len(stored) == 64
    check = CodeCheck({1: stored, 2: "0" * 64}, "sm_90", lambda dtype: get_space("gemm", dtype=dtype))
    assert check(tuned)  # the same cubin now: the row is used
    assert not check(row(space, 2))  # another cubin was tuned: stale
    assert not check(row(space, 3))  # no stored hash (tuned before schema 3): stale
    compiled = []
    check.space_for = lambda dtype: compiled.append(dtype) or get_space("gemm", dtype=dtype)
    assert check(tuned) and not compiled, "each row is checked once"
    monkeypatch.setenv("AUTOTUNE_NVCC", "/nonexistent/nvcc")
    without_nvcc = CodeCheck({1: stored}, "sm_90", lambda dtype: get_space("gemm", dtype=dtype))
    assert not without_nvcc(tuned), "no nvcc: cannot tell, so stale"
