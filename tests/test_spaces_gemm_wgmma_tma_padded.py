"""The TMA GEMM for rows TMA cannot stride: the padding copies its plan puts first (only for the operands whose rows
are not whole 16 bytes), the tensor maps over the padded workspaces, where it is offered, and its compiles."""

from __future__ import annotations

import shutil

import numpy as np

import pytest

from autotune.spaces import ALGO, get_space
from autotune.spaces.base import Launch
from autotune.spaces.gemm_wgmma_tma_padded import padded

from space_checks import compile_all, sample_valid

ALGORITHM = "wgmma_tma_padded"


@pytest.fixture(params=["float16", "bfloat16"])
def space(request):
    return get_space("gemm", {ALGO: [ALGORITHM]}, dtype=request.param)


def default(space, **change):
    return {ALGO: ALGORITHM, **space.algos[ALGORITHM].default_config, **change}


def test_offered_only_where_rows_need_padding(h200):
    assert ALGORITHM not in get_space("gemm", dtype="float32").domain(ALGO)
    algo = get_space("gemm", dtype="bfloat16").algos[ALGORITHM]
    assert "wgmma_tma runs this shape as it is" in algo.unfit((4095, 4096, 1024), h200)
    assert algo.unfit((4096, 4096, 1023), h200) is None and algo.unfit((4096, 4097, 1024), h200) is None
    assert algo.unfit((33, 65, 17), h200) is None and algo.unfit((1, 1, 3), h200) is None


@pytest.mark.parametrize(
    "shape, copied",
    [((4095, 4097, 1023), {"A": (4095, 1023), "B": (1023, 4097)}), ((512, 1024, 1001), {"A": (512, 1001)}),
     ((512, 1001, 1024), {"B": (1024, 1001)})],
)
def test_copies_the_unaligned_operands_first_then_the_tma_kernel_reads_the_copies(space, h200, shape, copied):
    m, n, k = shape
    config = default(space)
    assert space.violations(config, shape, h200) == []
    steps = space.launches(config, shape, h200)
    pads = [s for s in steps if isinstance(s, Launch) and s.kernel == "gemm_pad_rows"]
    assert steps[: len(pads)] == pads, "the copies run before the product"
    assert {p.args[0]: (int(p.args[2]), int(p.args[3])) for p in pads} == copied
    for p in pads:
        rows, cols, ld = (int(a) for a in p.args[2:])
        assert ld == padded(cols) and ld % 8 == 0 and ld - cols < 8
        assert p.grid[0] * 256 * 8 >= ld and p.grid[1] == min(rows, 65535)
    (gemm,) = [s for s in steps if isinstance(s, Launch) and s.kernel == "gemm_wgmma_tma"]
    a_map, b_map = gemm.args[:2]
    assert (a_map.buffer, a_map.dims) == (("a_padded", (padded(k), m)) if "A" in copied else ("A", (k, m)))
    assert (b_map.buffer, b_map.dims) == (("b_padded", (padded(n), k)) if "B" in copied else ("B", (n, k)))
    assert a_map.problems() == [] and b_map.problems() == [], "every row the copy engine strides is whole 16 bytes"
    assert tuple(int(x) for x in gemm.args[3:6]) == (m, n, k), "the kernel stops at the true N and K"
    workspace = space.workspace(config, shape)
    assert {name: w.shape for name, w in workspace.items()} == {
        {"A": "a_padded", "B": "b_padded"}[name]: (rows, padded(cols)) for name, (rows, cols) in copied.items()}
    assert space.describe(config).startswith("wgmma+tma padded 128x256x64")


def test_split_k_keeps_its_partials_and_reduce(space, h200):
    shape = (256, 260, 4099)
    config = default(space, BM=128, BN=128, STAGES=6, SPLIT_K=4)
    assert space.violations(config, shape, h200) == []
    kernels = [s.kernel for s in space.launches(config, shape, h200) if isinstance(s, Launch)]
    assert kernels[:2] == ["gemm_pad_rows", "gemm_pad_rows"] and kernels[2] == "gemm_wgmma_tma" and len(kernels) == 4
    assert {"a_padded", "b_padded"} < set(space.workspace(config, shape))


def test_the_layout_families_copy_the_stored_operand_then_pad(h200):
    space = get_space("linear", dtype="bfloat16")
    shape = (4095, 4097, 1023)
    config = default(space)
    steps = space.launches(config, shape, h200)
    kernels = [s.kernel for s in steps]
    assert kernels == ["gemm_transpose", "gemm_pad_rows", "gemm_pad_rows", "gemm_wgmma_tma", "gemm_bias_add"]
    assert steps[2].args[:2] == ("BT", "b_padded"), "B stored N×K is transposed, then its rows padded"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_sampled_valid_configs_compile_without_spills(space, h200, cache_dir):
    configs = [default(space), *sample_valid(space, h200, (4095, 4097, 1023), 2, seed=5)]
    for result in compile_all(space, configs, cache_dir):
        assert result.ok and result.spill_bytes == 0, result
        assert {"gemm_pad_rows", "gemm_wgmma_tma"} <= set(result.kernels), "the copy is in the product's module"


def test_in_the_layout_families_offered_exactly_where_wgmma_tma_cannot_read_the_stored_rows(h200):
    """gemm_tn at M = 50257 (a weight gradient over GPT-2's vocabulary): A stored K×M has rows TMA cannot stride,
    so its transposed copy (rows of K) feeds the TMA kernel with nothing left to pad; gemm_nt at N odd, K aligned
    reads B stored N×K natively, and the padded form is not offered."""
    tn = get_space("gemm_tn", dtype="bfloat16")
    shape = (50257, 768, 8192)
    assert tn.algos["wgmma_tma"].unfit(shape, h200) is not None
    config = default(tn)
    assert tn.violations(config, shape, h200) == []
    steps = tn.launches(config, shape, h200)
    assert [s.kernel for s in steps] == ["gemm_transpose", "gemm_wgmma_tma"]
    assert steps[1].args[0].buffer == "AT" and set(tn.workspace(config, shape)) == {"AT"}
    assert tn.rule_default(shape, h200)["ALGO"] == ALGORITHM
    nt = get_space("gemm_nt", dtype="bfloat16")
    assert "wgmma_tma reads them" in nt.algos[ALGORITHM].unfit((4096, 4097, 4096), h200)
    assert nt.algos[ALGORITHM].unfit((4096, 4096, 4097), h200) is None


REFERENCE = {
    "gemm": lambda i: i["A"] @ i["B"],
    "gemm_nt": lambda i: i["A"] @ i["B"].T,
    "gemm_tn": lambda i: i["A"].T @ i["B"],
    "linear": lambda i: i["A"] @ i["B"].T + i["bias"],
}


@pytest.mark.parametrize("family", sorted(REFERENCE))
@pytest.mark.parametrize("shape", [(300, 261, 263), (257, 264, 1001), (261, 300, 264), (50257 // 97, 264, 520)])
@pytest.mark.parametrize("change", [{}, {"SPLIT_K": 2}], ids=["whole", "split2"])
def test_the_plans_compute_the_product_when_emulated(h200, family, shape, change):
    """Each step emulated in numpy on the buffers it names (`plan_emulation`; workspaces start as NaN, so a
    padding column no step wrote would poison C): the padding copies, the transposed copies, the tensor maps'
    extents, the bias and the split-K reduce give the product, for each family at shapes with odd rows."""
    from plan_emulation import emulate

    space = get_space(family, dtype="bfloat16")
    algorithm = space.algos[ALGORITHM]
    if algorithm.unfit(shape, h200) is not None:
        pytest.skip(algorithm.unfit(shape, h200))
    config = default(space, BM=128, BN=128, STAGES=6, **change)
    assert space.violations(config, shape, h200) == []
    rng = np.random.default_rng(1)
    inputs = {name: rng.standard_normal(spec.shape) for name, spec in space.input_specs(shape).items()}
    c = emulate(space, config, shape, h200, inputs)
    assert np.allclose(c, REFERENCE[family](inputs), rtol=1e-10, atol=1e-9)
