"""bias_grad and gelu_bias_grad without a GPU: one template (column_sum.cu, OP 0 / 1) and its defaults, constraints,
launch plan and workspace, the rule default, float64 references, tolerances against an fp32 emulation of the
kernel's summation order, and sm_90a compiles of every dtype, VEC and WARPS without spills."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from space_checks import assert_built_without_spills, compile_jobs, template_defaults

from autotune import dtypes
from autotune.errors import InvalidArgument
from autotune.spaces import Launch, get_space
from autotune.spaces._gelu import gelu_tanh_grad
from autotune.spaces.bias_grad import MAX_SPLITS

KERNELS = ["bias_grad", "gelu_bias_grad"]
DTYPES = ["float32", "float16", "bfloat16"]
VARIANTS = [(k, d) for k in KERNELS for d in DTYPES]


def test_both_families_share_one_template_and_its_defaults(h200):
    defaults = template_defaults("column_sum.cu")
    for kernel, dtype in VARIANTS:
        space = get_space(kernel, dtype=dtype)
        assert str(space.template_for(space.default_config)) == "column_sum.cu"
        assert {k: defaults[k] for k in space.default_config} == space.default_config
        assert type(space).supported_dtypes() == tuple(DTYPES)
        for shape in [space.default_shape, *space.validation_shapes(space.default_shape)]:
            assert space.violations(space.default_config, shape, h200) == [], (kernel, dtype, shape)
    assert defaults["OP"] == 0  # bias_grad's; gelu_bias_grad renders OP=1


@pytest.mark.parametrize("kernel, dtype", VARIANTS)
def test_defines_select_the_family_and_dtype(kernel, dtype):
    space = get_space(kernel, dtype=dtype)
    config = {"VEC": 2, "WARPS": 16, "ROWS_PER_BLOCK": 512}
    assert space.defines(config) == {**config, "OP": KERNELS.index(kernel), "DTYPE": dtypes.dtype(dtype).code}


def test_constraints(h200):
    f32, bf16 = get_space("bias_grad"), get_space("gelu_bias_grad", dtype="bfloat16")
    wide = {"VEC": 8, "WARPS": 8, "ROWS_PER_BLOCK": 128}
    assert "is 32 B per access (> 16)" in f32.violations(wide, (8192, 768), h200)[0]
    assert bf16.violations(wide, (8192, 768), h200) == []  # 8 halves: one 16-byte access
    assert bf16.violations(wide, (8193, 767), h200) == []  # unaligned N: the scalar path, still valid
    few = {**wide, "ROWS_PER_BLOCK": 32}
    rows = MAX_SPLITS * 32
    assert bf16.violations(few, (rows, 8), h200) == []
    assert "exceed the grid's 65535 in y" in bf16.violations(few, (rows + 1, 8), h200)[0]
    assert bf16.violations({**few, "ROWS_PER_BLOCK": 64}, (rows + 1, 8), h200) == []
    small = dataclasses.replace(h200, max_threads_per_block=256)
    assert "512 threads per block > device limit" in bf16.violations({**wide, "WARPS": 16}, (64, 64), small)[0]


@pytest.mark.parametrize("kernel", KERNELS)
def test_launch_plan_and_workspace(kernel, h200):
    space = get_space(kernel, dtype="float16")
    matrices = ("dC",) if kernel == "bias_grad" else ("dy", "pre", "dpre")
    config = {"VEC": 8, "WARPS": 4, "ROWS_PER_BLOCK": 256}
    for shape, grid in [((8192, 768), (3, 32, 1)), ((1, 1), (1, 1, 1)), ((8193, 1031), (5, 33, 1)),
                        ((2, 65539), (257, 1, 1))]:  # fmt: skip
        rows, cols = shape
        main, final = space.launches(config, shape, h200)
        assert (main.kernel, main.grid, main.block, main.shared_bytes) == ("column_sum", grid, (128, 1, 1), 0)
        assert main.args == (*matrices, "partials", np.int32(rows), np.int32(cols))
        assert all(isinstance(a, np.int32) for a in main.args[-2:])
        assert final.kernel == "column_sum_finalize" and final.grid == (-(-cols // 128), 1, 1)
        assert final.block == (128, 1, 1) and final.args == ("partials", "dbias", np.int32(grid[1]), np.int32(cols))
        workspace = space.workspace(config, shape)
        assert set(workspace) == {"partials"}
        assert workspace["partials"].shape == (grid[1], cols) and workspace["partials"].dtype == "float32"
        known = set(space.input_specs(shape)) | set(space.outputs(shape)) | set(workspace)
        assert all(a in known for s in (main, final) for a in s.args if isinstance(a, str))
    outputs = space.outputs((5, 7))
    assert {n: (o.shape, o.dtype) for n, o in outputs.items()} == (
        {"dbias": ((7,), "float16")} if kernel == "bias_grad" else
        {"dpre": ((5, 7), "float16"), "dbias": ((7,), "float16")})  # fmt: skip


def test_rule_default_for_gpt2_width_on_an_h200(h200):
    space = get_space("bias_grad", dtype="bfloat16")
    rule = space.rule_default((8192, 768), h200)
    assert rule == {"VEC": 8, "WARPS": 8, "ROWS_PER_BLOCK": 64}
    main, final = space.launches(rule, (8192, 768), h200)
    assert main.grid == (3, 128, 1) and 3 * 128 >= 2 * h200.multiprocessors  # 384 blocks: ≥ 2 per SM
    assert final.args[2] == np.int32(128)


@pytest.mark.parametrize("kernel, dtype", VARIANTS)
def test_rule_default_gives_two_blocks_per_sm_with_the_fewest_partials(kernel, dtype, h200):
    space = get_space(kernel, dtype=dtype)
    target = 2 * h200.multiprocessors
    for shape in [(8192, 768), (8192, 4096), (4096, 50257), (65536, 1024), (1, 12288), (100, 768), (7, 1),
                  (1024, 65536), (MAX_SPLITS * 1024, 64), (8193, 3001)]:  # fmt: skip
        rule = space.rule_default(shape, h200)
        assert space.violations(rule, shape, h200) == [], (shape, rule)
        assert rule["VEC"] * space.itemsize == 16 and rule["WARPS"] == 8  # 16 B, also where N is unaligned
        strips, splits = space.launches(rule, shape, h200)[0].grid[:2]
        larger = [r for r in space.domain("ROWS_PER_BLOCK") if r > rule["ROWS_PER_BLOCK"]]
        if strips * splits >= target:  # and no larger ROWS_PER_BLOCK still gets there
            assert all(strips * -(-shape[0] // r) < target for r in larger), (shape, rule)
        else:  # nothing gets there: as many blocks as there can be
            assert rule["ROWS_PER_BLOCK"] == 32, (shape, rule)


def test_rule_default_keeps_to_narrowed_domains(h200):
    space = get_space("gelu_bias_grad", {"VEC": [2, 4], "WARPS": [4, 16], "ROWS_PER_BLOCK": [256, 512]},
                      dtype="bfloat16")  # fmt: skip
    rule = space.rule_default((8192, 768), h200)
    assert rule == {"VEC": 4, "WARPS": 16, "ROWS_PER_BLOCK": 256}
    assert space.violations(rule, (8192, 768), h200) == []


# --- references, inputs, shapes -------------------------------------------------------------------------------
def test_gelu_tanh_grad_is_the_derivative_of_gelu_tanh():
    def gelu(x):
        return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))

    x = np.linspace(-6.0, 6.0, 2401)
    h = 1e-5
    numeric = (gelu(x + h) - gelu(x - h)) / (2 * h)
    assert np.max(np.abs(gelu_tanh_grad(x) - numeric)) < 1e-9
    assert abs(gelu_tanh_grad(np.array([0.0]))[0] - 0.5) < 1e-15


def test_references_and_inputs():
    rng = np.random.default_rng(3)
    shape = (300, 37)
    bias = get_space("bias_grad", dtype="bfloat16")
    inputs = bias.decoded_inputs(bias.inputs(shape, rng), shape)
    assert np.array_equal(bias.reference(inputs, shape)["dbias"], inputs["dC"].sum(axis=0))
    gelu = get_space("gelu_bias_grad", dtype="float16")
    inputs = gelu.decoded_inputs(gelu.inputs(shape, rng), shape)
    pre = inputs["pre"]
    assert pre.min() < -4.5 and pre.max() > 4.5 and np.abs(pre).max() <= 5.0  # both signs, |x| up to ~5
    assert (np.abs(pre) < 1).mean() > 0.1  # and gelu's curved middle
    refs = gelu.reference(inputs, shape)
    assert np.array_equal(refs["dpre"], inputs["dy"] * gelu_tanh_grad(pre))
    assert np.allclose(refs["dbias"], refs["dpre"].sum(axis=0), rtol=1e-15, atol=0)  # of dpre before rounding


@pytest.mark.parametrize("kernel", KERNELS)
def test_shape_inference(kernel):
    space = get_space(kernel)
    names = list(space.input_specs((1, 1)))
    assert space.infer_shape({n: (33, 7) for n in names}) == (33, 7)
    with pytest.raises(InvalidArgument, match="non-empty 2-D"):
        space.infer_shape({n: (33,) for n in names})
    with pytest.raises(InvalidArgument, match="non-empty 2-D"):
        space.infer_shape({n: (0, 7) for n in names})
    if len(names) > 1:
        with pytest.raises(InvalidArgument, match="pre has shape"):
            space.infer_shape({"dy": (33, 7), "pre": (33, 8)})


# --- tolerances: the kernel's order of fp32 sums passes, a half accumulator does not -------------------------------
def emulate(space, config: dict, inputs: dict, shape: tuple, acc: str = "float32") -> dict[str, np.ndarray]:
    """The kernel's outputs with its order of additions in ``acc``: dpre = dy·gelu'(pre) in fp32, rounded once;
    per row range, warp w's rows w, w + WARPS, … in turn, then the warps in order; then the ranges in order."""
    out = {}
    if "dC" in inputs:
        x = inputs["dC"].astype(np.float32)
    else:
        f, alpha, beta = np.float32, np.float32(0.7978845608028654), np.float32(0.044715)
        pre = inputs["pre"].astype(f)
        x2 = pre * pre
        t = np.tanh(alpha * pre * (f(1) + beta * x2))
        grad = f(0.5) * (f(1) + t) + f(0.5) * pre * (f(1) - t * t) * alpha * (f(1) + f(3) * beta * x2)
        x = inputs["dy"].astype(f) * grad
        out["dpre"] = dtypes.round_to(x.astype(np.float64), space.dtype)
    x = x.astype(acc)
    per_block, warps = config["ROWS_PER_BLOCK"], config["WARPS"]
    total = np.zeros(shape[1], acc)
    for first in range(0, shape[0], per_block):
        block = np.zeros(shape[1], acc)
        for w in range(warps):
            lane = np.zeros(shape[1], acc)
            for row in x[first + w:first + per_block:warps]:
                lane = (lane + row).astype(acc)
            block = (block + lane).astype(acc)
        total = (total + block).astype(acc)
    out["dbias"] = dtypes.round_to(total.astype(np.float64), space.dtype)
    return out


@pytest.mark.parametrize("kernel, dtype", VARIANTS)
def test_tolerances_pass_the_kernels_fp32_sums(kernel, dtype):
    space = get_space(kernel, dtype=dtype)
    for shape in [(3001, 1031), (20001, 3)]:
        raw = space.inputs(shape, np.random.default_rng(shape[1]))
        refs, tolerances = space.references(raw, shape)
        assert tolerances == {n: (1e-5 if dtype == "float32" else {"float16": 1e-3, "bfloat16": 8e-3}[dtype])
                              for n in space.outputs(shape)}  # fmt: skip
        inputs = space.decoded_inputs(raw, shape)
        for config in [{"ROWS_PER_BLOCK": 1024, "WARPS": 4}, {"ROWS_PER_BLOCK": 32, "WARPS": 16}]:
            got = emulate(space, config, inputs, shape)
            for name, ref in refs.items():
                err = np.linalg.norm(got[name] - ref) / np.linalg.norm(ref)
                # Margin for tanhf and fma contractions. A half output is one rounding of its fp32 value, at most
                # 2^-11 (float16) or 2^-8 (bfloat16) of it: under the tolerance / 1.5 even over 3 columns.
                margin = 4 if dtype == "float32" else 1.5
                assert err <= tolerances[name] / margin, (shape, config, name, err)


@pytest.mark.parametrize("kernel", KERNELS)
def test_half_tolerance_fails_a_half_accumulator(kernel):
    space = get_space(kernel, dtype="float16")
    shape = (3001, 1031)
    raw = space.inputs(shape, np.random.default_rng(4))
    refs, tolerances = space.references(raw, shape)
    got = emulate(space, {"ROWS_PER_BLOCK": 1024, "WARPS": 4}, space.decoded_inputs(raw, shape), shape, "float16")
    assert np.linalg.norm(got["dbias"] - refs["dbias"]) / np.linalg.norm(refs["dbias"]) > tolerances["dbias"]


# --- compiles ------------------------------------------------------------------------------------------------------
@pytest.mark.nvcc
def test_every_dtype_vec_and_warps_compiles_without_spills(h200, cache_dir):
    """Both OPs, every dtype, every legal VEC × WARPS (ROWS_PER_BLOCK is only a bound of the row loop), and the rule
    defaults: both kernels of each module, for sm_90a, no spills."""
    jobs = []
    for kernel, dtype in VARIANTS:
        space = get_space(kernel, dtype=dtype)
        shape = (8192, 768)
        for vec in space.domain("VEC"):
            for i, warps in enumerate(space.domain("WARPS")):
                config = {"VEC": vec, "WARPS": warps, "ROWS_PER_BLOCK": space.domain("ROWS_PER_BLOCK")[i]}
                if not space.violations(config, shape, h200):
                    jobs.append((space, config, shape))
        jobs.append((space, space.rule_default((4096, 50257), h200), (4096, 50257)))
    assert len(jobs) == 2 * (3 * 3 + 4 * 3 * 2) + 6
    results = compile_jobs(jobs, "sm_90a", cache_dir)
    assert_built_without_spills(jobs, results)
    for (space, config, shape), result in zip(jobs, results):
        launched = {s.kernel for s in space.launches(config, shape, h200) if isinstance(s, Launch)}
        assert launched == {"column_sum", "column_sum_finalize"} and launched <= set(result.kernels)
