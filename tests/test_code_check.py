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


@pytest.mark.gpu
def test_a_tuned_row_survives_a_comment_edit_but_not_a_code_edit(tmp_path):
    """End to end on a GPU: a kernel of one's own is tuned; a comment added to its template leaves the row in use
    (the same cubin), a change of its code makes it stale (the tests run in tmp_path)."""
    from typer.testing import CliRunner

    import autotune
    from autotune.cli import app
    from autotune.runtime.selection import DEFAULT, TUNED
    from autotune.tuning.tune import tune

    assert CliRunner().invoke(app, ["new-kernel", "my_add"]).exit_code == 0
    ref, db = "./my_add_space.py:MyAddSpace", str(tmp_path / "t.db")
    report = tune(ref, "100000", trials=6, db=db, seed=1, warm_start=False)
    assert report.best is not None
    template = tmp_path / "my_add.cu"
    template.write_text("// an edit that changes no machine code\n" + template.read_text())
    kept = autotune.load(ref, db=db).choice((100000,))
    assert kept.source == TUNED and kept.config == report.best.config
    template.write_text(template.read_text() + "\n__device__ int autotune_code_probe;  // new machine code\n")
    stale = autotune.load(ref, db=db).choice((100000,))
    assert stale.source == DEFAULT and "1 stale" in stale.reason
