"""The row families' split mapping (autotune.spaces._rows, MAPPING=split) and softmax's backward, without a GPU:
constraints, the rule that picks the split for few long rows, its two launches and workspace, nvcc compiles of both
kernels."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from autotune.errors import InvalidArgument

from autotune.runtime.compiler import Compiler
from autotune.spaces import Launch, get_space
from autotune.spaces._rows import SPLIT_STATE

ROWS = ("softmax", "layernorm", "rmsnorm", "softmax_backward")
FEW_LONG = [(1, 131072), (4, 131072), (4, 262144), (2, 1 << 20), (4, 1 << 20), (32, 32768)]


def split_config(space, **changes):
    config = {**space.default_config, "MAPPING": "split", "SPLIT": 16, "BLOCK": 256, "CACHE": 0}
    config.update(space.rule_extra(config, (4, 131072)))
    return {**config, **changes}


@pytest.mark.parametrize("kernel", ROWS)
def test_split_launches_a_stats_kernel_then_the_kernel_with_the_partials(kernel, h200):
    space = get_space(kernel)
    config = split_config(space)
    assert space.violations(config, (5, 100003), h200) == []
    stats, main = space.launches(config, (5, 100003), h200)
    assert (stats.kernel, main.kernel) == (f"{kernel}_split_stats", kernel)
    assert stats.grid == main.grid == (5 * 16, 1, 1) and stats.block == main.block == (256, 1, 1)
    inputs = ("y", "dy") if kernel == "softmax_backward" else ("x",)
    assert stats.args[:-2] == (*inputs, "partials") and [int(a) for a in stats.args[-2:]] == [5, 100003]
    assert main.args[-1] == "partials"
    (unsplit,) = space.launches({**config, "MAPPING": "block", "SPLIT": 2}, (5, 100003), h200)
    assert main.args[:-1] == unsplit.args  # the same arguments, the partials appended
    workspace = space.workspace(config, (5, 100003))
    assert list(workspace) == ["partials"] and workspace["partials"].shape == (5, 16, SPLIT_STATE)
    assert workspace["partials"].dtype == "float32"
    assert space.workspace({**config, "MAPPING": "block", "SPLIT": 2}, (5, 100003)) == {}


def test_split_needs_statistics_from_one_pass(h200):
    softmax, layernorm = get_space("softmax"), get_space("layernorm")
    assert "ONLINE=1" in softmax.violations(split_config(softmax, ONLINE=0), (4, 131072), h200)[0]
    assert softmax.violations(split_config(softmax, ONLINE=1), (4, 131072), h200) == []
    assert "STATS" in layernorm.violations(split_config(layernorm, STATS="two_pass"), (4, 131072), h200)[0]
    for stats in ("welford", "shifted_sumsq"):
        assert layernorm.violations(split_config(layernorm, STATS=stats), (4, 131072), h200) == []
    rms = get_space("rmsnorm")
    assert "SPLIT only matters" in rms.violations({**rms.default_config, "SPLIT": 8}, (8, 64), h200)[0]


def test_split_grids_stay_small_and_column_indices_in_int32(h200):
    space = get_space("softmax")
    config = split_config(space, SPLIT=256)
    assert space.violations(config, (4096, 64), h200) == []  # 2^20 blocks
    assert "exceed 1048576" in space.violations(config, (4097, 64), h200)[0]
    big = split_config(space, SPLIT=256, BLOCK=1024)  # 2^18 threads x 4 per stride
    assert space.violations(big, (1, (1 << 31) - (1 << 20) - 4), h200) == []
    assert "int32 column index" in space.violations(big, (1, (1 << 31) - (1 << 20)), h200)[0]


def test_split_rows_share_the_register_cache_over_their_blocks(h200):
    space = get_space("rmsnorm")
    config = split_config(space, SPLIT=64, BLOCK=512, CACHE=1, ITEMS=2)  # 64 x 512 threads x 2 x float4
    assert space.violations(config, (4, 262144), h200) == []
    assert "register cache" in space.violations(config, (4, 262145), h200)[0]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("kernel", ROWS)
def test_few_long_rows_are_split_by_the_rule(kernel, dtype, h200):
    space = get_space(kernel, dtype=dtype)
    for shape in FEW_LONG:
        rule = space.rule_default(shape, h200)
        assert rule["MAPPING"] == "split", (shape, rule)
        assert space.violations(rule, shape, h200) == [], (shape, rule)
        blocks = shape[0] * rule["SPLIT"]
        assert h200.multiprocessors // 2 < blocks <= 2 * h200.multiprocessors, (shape, rule)  # ≤ 2 per SM
        assert space.shape_class(shape) == ("few_long_rows",)
    # many rows, or short ones: a block (or warp) per row fills the SMs without a second launch
    for shape in [(33, 32768), (8192, 768), (4, 8192), (1, 12288), (1024, 65536)]:
        assert space.rule_default(shape, h200)["MAPPING"] != "split", shape
    small = dataclasses.replace(h200, multiprocessors=4)
    assert space.rule_default((4, 131072), small)["MAPPING"] != "split"  # a block per row takes every SM
    a100 = dataclasses.replace(h200, multiprocessors=108)
    assert space.rule_default((32, 131072), a100)["MAPPING"] == "split"  # the class's rows split on any GPU


def test_the_split_rule_keeps_each_part_on_chip_where_it_fits(h200):
    f32, f16 = get_space("softmax"), get_space("softmax", dtype="float16")
    assert f32.rule_default((4, 1 << 20), h200)["CACHE"] == 1  # 64 blocks x 512 threads x 8 float4 per row
    assert f16.rule_default((1, 1 << 24), h200)["CACHE"] == 2  # 16 chunks of 8 halves per thread: shared memory
    huge = f32.rule_default((1, 1 << 26), h200)
    assert (huge["MAPPING"], huge["CACHE"], huge["SPLIT"]) == ("split", 0, 256)  # read again
    assert f32.rule_default((1, 131072), h200)["BLOCK"] < 512  # smaller blocks, so that every SM gets one


def test_tuned_rows_of_the_other_class_are_not_borrowed(h200):
    from autotune.runtime.selection import DEFAULT, choose

    space = get_space("softmax")
    many = {**space.default_config, "MAPPING": "block", "BLOCK": 512, "CACHE": 0, "ONLINE": 1}

    @dataclasses.dataclass
    class Row:
        shape: str
        config: dict
        device_name: str = h200.name
        compute_capability: str = h200.cc
        dtype: str = "float32"
        template_hash: str = "h"

    choice = choose(space, (4, 131072), h200, [Row("64x131072", many)], "h")
    assert choice.source == DEFAULT and choice.config["MAPPING"] == "split"
    split = split_config(space, SPLIT=64)
    choice = choose(space, (256, 131072), h200, [Row("4x131072", split)], "h")
    assert choice.source == DEFAULT and choice.config["MAPPING"] != "split"


@pytest.mark.nvcc
def test_split_kernels_compile_without_spills(h200, cache_dir):
    compiler = Compiler(h200.compile_arch, cache_dir=cache_dir)
    jobs = []
    try:
        for kernel in ROWS:
            for dtype in ("float32", "bfloat16"):
                space = get_space(kernel, dtype=dtype)
                configs = [space.rule_default(shape, h200) for shape in [(4, 131072), (1, 1 << 24), (1, 1 << 26)]]
                configs.append(split_config(space, CACHE=1, ITEMS=4))
                if kernel == "layernorm":
                    configs.append(split_config(space, STATS="welford", CACHE=1, ITEMS=4))
                for config in configs:
                    jobs.append((kernel, config, compiler.submit(space.template_for(config), space.defines(config))))
        for kernel, config, future in jobs:
            result = future.result()
            assert result.ok, (kernel, config, result.error)
            space = get_space(kernel)
            launched = {s.kernel for s in space.launches(config, (4, 131072), h200) if isinstance(s, Launch)}
            assert launched == {kernel, f"{kernel}_split_stats"} <= set(result.kernels), (kernel, result.kernels)
            assert result.spill_bytes == 0, (kernel, config)
    finally:
        compiler.close()



# --- softmax's backward ----------------------------------------------------------------------------------------
def test_softmax_backward_caches_both_rows_in_registers_or_none(h200):
    space = get_space("softmax_backward")
    assert space.domain("CACHE") == (0, 1)  # y and dy: no shared-memory cache
    forward = get_space("softmax")
    config = {**space.default_config, "MAPPING": "block", "BLOCK": 512, "VEC": 4, "CACHE": 1, "ITEMS": 16}
    fwd = {**config, "ONLINE": 0}
    assert forward.violations(fwd, (64, 32768), h200) == []  # 16 x 4 values and 40 more fit 128 registers
    assert "a cache of 128 fp32 values" in space.violations(config, (64, 32768), h200)[0]  # two rows do not
    assert space.violations({**config, "ITEMS": 8}, (64, 16384), h200) == []
    assert space.rule_default((16384, 8192), h200)["CACHE"] == 1
    assert get_space("softmax_backward", dtype="bfloat16").rule_default((16384, 8192), h200)["CACHE"] == 1


def test_softmax_backward_reference_and_inputs():
    space = get_space("softmax_backward")
    shape = (6, 300)
    inputs = space.decoded_inputs(space.inputs(shape, np.random.default_rng(0)), shape)
    y, dy = inputs["y"].astype(np.float64), inputs["dy"].astype(np.float64)
    assert np.allclose(y.sum(axis=1), 1, atol=1e-6) and (y >= 0).all() and (y == 0).any()
    # the Jacobian of softmax applied to dy: diag(y) - y yᵀ
    want = np.stack([(np.diag(r) - np.outer(r, r)) @ g for r, g in zip(y, dy)])
    assert np.allclose(space.reference(inputs, shape)["dx"], want)
    assert space.infer_shape({"y": (6, 300), "dy": (6, 300)}) == (6, 300)
    with pytest.raises(InvalidArgument, match="dy has shape"):
        space.infer_shape({"y": (6, 300), "dy": (6, 301)})
