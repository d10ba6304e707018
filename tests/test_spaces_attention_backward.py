"""The attention backward family without a GPU: the float64 reference against finite differences, inputs that are
the exact forward rounded, the tolerance against an emulation of the kernels' arithmetic, shapes and dtypes,
constraints, launch plans, and nvcc compiles (sm_80 and sm_90a) of default and random valid configurations."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from autotune import dtypes
from autotune.errors import InvalidArgument, InvalidType
from autotune.spaces import ALGO, Launch, get_space
from autotune.spaces.attention import HEAD_DIMS, WIDE, AttentionSpace
from autotune.spaces.attention_backward import GRAD_TOLERANCE
from autotune.spaces.base import UNIFORM

from space_checks import assert_built_without_spills, compile_jobs, sample_valid

KERNELS = ("attention_backward", "attention_causal_backward")
SHAPE = (4, 16, 4096, 4096, 128)


def forward(q, k, v, causal):
    """O and LSE of one head, float64 (for finite differences)."""
    sq, skv, d = q.shape[0], k.shape[0], q.shape[1]
    s = (q @ k.T) * (1.0 / math.sqrt(d))  # as the forward's reference: o and lse compare exactly
    if causal:
        s[np.arange(skv)[None, :] > np.arange(sq)[:, None] + skv - sq] = -np.inf
    m = s.max(axis=1, keepdims=True)
    p = np.exp(s - m)
    return p @ v / p.sum(axis=1, keepdims=True), (m + np.log(p.sum(axis=1, keepdims=True)))[:, 0]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("shape", [(1, 2, 3, 7, 32), (2, 1, 6, 6, 32), (1, 1, 1, 4, 32)])
def test_reference_is_the_gradient(kernel, shape):
    """dq, dk, dv are the gradients of sum(O∘dO): central differences of the float64 forward, every coordinate."""
    space = get_space(kernel, dtype="float16")
    x = space.decoded_inputs(space.inputs(shape, np.random.default_rng(1)), shape)
    ref = space.reference(x, shape)
    h = 1e-6
    for i in range(shape[0]):
        for j in range(shape[1]):
            args = {n: x[n][i, j].copy() for n in ("q", "k", "v")}
            do = x["do"][i, j]
            for name in args:
                grad = np.empty_like(args[name])
                for idx in np.ndindex(*grad.shape):
                    keep = args[name][idx]
                    args[name][idx] = keep + h
                    up = (forward(args["q"], args["k"], args["v"], space.causal)[0] * do).sum()
                    args[name][idx] = keep - h
                    down = (forward(args["q"], args["k"], args["v"], space.causal)[0] * do).sum()
                    args[name][idx] = keep
                    grad[idx] = (up - down) / (2 * h)
                np.testing.assert_allclose(ref["d" + name][i, j], grad, rtol=1e-6, atol=1e-8, err_msg=name)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_inputs_hold_the_exact_forward_rounded(kernel, dtype):
    space = get_space(kernel, dtype=dtype)
    shape = (2, 3, 77, 130, 64)
    inputs = space.inputs(shape, np.random.default_rng(2))
    specs = space.input_specs(shape)
    assert list(inputs) == list(specs) == ["q", "k", "v", "o", "do", "lse"]
    assert inputs["lse"].dtype == np.float32 and specs["lse"].dtype == "float32" and specs["o"].dtype == dtype
    x = space.decoded_inputs(inputs, shape)
    for i in range(2):
        for j in range(3):
            o, lse = forward(x["q"][i, j], x["k"][i, j], x["v"][i, j], space.causal)
            assert np.array_equal(x["o"][i, j], dtypes.round_to(o, dtype))
            np.testing.assert_array_equal(inputs["lse"][i, j], lse.astype(np.float32))
    wide = space.decoded_inputs(space.inputs(shape, np.random.default_rng(3), WIDE), shape)
    assert np.abs(wide["q"]).max() > 4 and np.abs(wide["do"]).max() <= 1, "large logits; dO stays uniform"


@pytest.mark.parametrize("shape", [(1, 5, 24, 40, 32), (1, 10, 5, 24, 40, 32)])
def test_large_inputs_repeat_and_the_reference_computes_one_period(monkeypatch, shape):
    """Multi-head: every input repeats every 3 heads. Grouped (group 2): k and v every 3 kv heads, q, do, o and
    lse every 6 query heads, so each query head keeps reading the kv head of its own period."""
    import autotune.spaces.attention as attention

    monkeypatch.setattr(attention, "PERIODIC_ABOVE", 1000)  # the forward's rule (q, k, v) and the backward's (do)
    space = get_space("attention_causal_backward", dtype="bfloat16")
    inputs = space.inputs(shape, np.random.default_rng(4))
    group = 1 if len(shape) == 5 else shape[1] // shape[2]
    for n, x in inputs.items():
        period = 3 if n in ("k", "v") else 3 * group
        assert np.array_equal(x[0, period], x[0, 0]) and not np.array_equal(x[0, 1], x[0, 0]), n
    x = space.decoded_inputs(inputs, shape)
    ref = space.reference(x, shape)
    monkeypatch.setattr(attention, "HEAD_PERIOD", 5)  # every head computed on its own
    assert all(np.array_equal(ref[n], space.reference(x, shape)[n]) for n in ref)


# --- the tolerance against the kernels' arithmetic -------------------------------------------------------------
def fa2_numerics(x: dict, causal: int, dtype: str, lse_dtype: str = "float32") -> dict:
    """What attention_backward.cu computes, emulated per head in float64 with its roundings: fp32 scores and
    sums, P = exp(S·scale − lse), P and dS rounded to the dtype before the products that take them, Δ from the
    rounded o, outputs rounded. ``lse_dtype``: the type lse is read in (a kernel fed lse in the dtype)."""
    f32 = lambda a: a.astype(np.float32).astype(np.float64)  # noqa: E731
    rnd = lambda a: dtypes.round_to(a, dtype)  # noqa: E731
    b, h, sq, d = x["q"].shape
    skv = x["k"].shape[2]
    scale = 1.0 / math.sqrt(d)
    out = {n: np.empty_like(x[m]) for n, m in (("dq", "q"), ("dk", "k"), ("dv", "v"))}
    for i, j in np.ndindex(b, h):
        q, k, v, o, do = (x[n][i, j] for n in ("q", "k", "v", "o", "do"))
        lse = dtypes.round_to(x["lse"][i, j], lse_dtype)
        s = f32(q @ k.T)
        if causal:
            s[np.arange(skv)[None, :] > np.arange(sq)[:, None] + skv - sq] = -np.inf
        p = f32(np.exp(s * scale - lse[:, None]))
        ds = rnd(f32(p * (f32(do @ v.T) - f32((do * o).sum(axis=1))[:, None])))
        out["dv"][i, j] = rnd(f32(rnd(p).T @ do))
        out["dk"][i, j] = rnd(f32(ds.T @ q * scale))
        out["dq"][i, j] = rnd(f32(ds @ k * scale))
    return out


def rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_tolerance_holds_the_kernels_arithmetic_and_needs_an_fp32_lse(kernel, dtype):
    """On every validation case (head_dim 64), the emulated kernel arithmetic stays within half the tolerance
    (within 0.6 units of the dtype's rounding on uniform inputs); the same arithmetic fed lse in the dtype instead
    of fp32 fails on large logits."""
    space = get_space(kernel, dtype=dtype)
    tol = space.tolerance("dq", SHAPE)
    assert tol == GRAD_TOLERANCE[dtype]
    unit = dtypes.dtype(dtype).unit_roundoff
    rng = np.random.default_rng(5)
    for shape, kind in space.validation_cases((1, 1, 64, 64, 64)):
        x = space.decoded_inputs(space.inputs(shape, rng, kind), shape)
        ref = space.reference(x, shape)
        got = fa2_numerics(x, space.causal, dtype)
        for name in ref:
            if not np.any(ref[name]):  # one query, one key: dq = dk = 0 exactly (the RMS bound applies)
                assert np.sqrt(np.mean(got[name] ** 2)) <= space.zero_tolerance(name, shape)
                continue
            err = rel(got[name], ref[name])
            assert err <= tol / 2, (shape, kind, name, err)
            if kind == UNIFORM:
                assert err <= 0.6 * unit, (shape, name, err)
        if kind == WIDE:
            fp16_lse = fa2_numerics(x, space.causal, dtype, lse_dtype=dtype)
            assert max(rel(fp16_lse[n], ref[n]) for n in ref) > tol, shape


# --- problem, dtypes, shapes -----------------------------------------------------------------------------------
def test_keys_classes_and_work():
    space = get_space("attention_backward")
    causal = get_space("attention_causal_backward")
    assert space.problem_defines(SHAPE) == {"HEAD_DIM": 128, "CAUSAL": 0} and causal.problem_defines(SHAPE)["CAUSAL"]
    assert space.shape_key(SHAPE) != space.shape_key((4, 16, 4096, 4096, 64)), "head_dim is never crossed"
    assert space.work(SHAPE) == 2.5 * get_space("attention").work(SHAPE) == 2 * causal.work(SHAPE)
    assert space.supported_dtypes() == ("float16", "bfloat16") and space.domain(ALGO) == ("fa2", "fa3")
    assert isinstance(causal.forward(), AttentionSpace) and causal.forward().name == "attention_causal"


def shapes_of(b=1, h=2, sq=8, skv=9, d=64, **change):
    shapes = {"q": (b, h, sq, d), "k": (b, h, skv, d), "v": (b, h, skv, d), "o": (b, h, sq, d),
              "do": (b, h, sq, d), "lse": (b, h, sq)}  # fmt: skip
    shapes.update(change)
    return shapes


@pytest.mark.parametrize(
    "shapes, message",
    [
        (shapes_of(o=(1, 2, 8, 32)), "o has shape (1, 2, 8, 32), expected (1, 2, 8, 64)"),
        (shapes_of(do=(1, 2, 9, 64)), "do has shape"),
        (shapes_of(lse=(1, 2, 8, 1)), "lse has shape (1, 2, 8, 1), expected (1, 2, 8)"),
        (shapes_of(v=(1, 2, 8, 64)), "must match"),
        (shapes_of(d=48), "head_dim 48 is not supported"),
    ],
)
def test_bad_shapes_get_one_clear_line(shapes, message):
    with pytest.raises(InvalidArgument, match=message.replace("(", r"\(").replace(")", r"\)")) as info:
        get_space("attention_backward").infer_shape(shapes)
    assert "\n" not in str(info.value)


def test_shapes_and_dtypes_are_inferred():
    assert get_space("attention_backward").infer_shape(shapes_of(sq=9, skv=8)) == (1, 2, 9, 8, 64)
    with pytest.raises(InvalidArgument, match="see no key"):
        get_space("attention_causal_backward").infer_shape(shapes_of(sq=9, skv=8))
    cls = type(get_space("attention_backward"))
    half = {n: "float16" for n in ("q", "k", "v", "o", "do")}
    assert cls.infer_dtype({**half, "lse": "float32"}) == "float16"
    with pytest.raises(InvalidType, match="lse has dtype float16"):
        cls.infer_dtype({**half, "lse": "float16"})
    with pytest.raises(InvalidType, match="do has dtype bfloat16 but q has float16"):
        cls.infer_dtype({**half, "do": "bfloat16", "lse": "float32"})
    with pytest.raises(InvalidType, match="q has dtype float32"):
        cls.infer_dtype({**{n: "float32" for n in half}, "lse": "float32"})


def test_validation_cases_are_ragged_and_keep_the_head_dim():
    for kernel in KERNELS:
        space = get_space(kernel, dtype="bfloat16")
        cases = space.validation_cases((1, 8, 4096, 4096, 96))
        shapes = [s for s, _ in cases]
        assert all(s[4] == 96 for s in shapes), "head_dim is compiled in"
        tiles = set(space.domain("fa2.BC")) | set(space.domain("fa2.BR"))
        assert any(all(s[2] % t and s[3] % t for t in tiles) for s in shapes)
        assert (1, 1, 1, 1, 96) in shapes and any(s[3] > 4096 for s in shapes)
        assert any(1 < s[2] < s[3] for s in shapes), "seq_q < seq_kv (causal: bottom-right)"
        assert any(s[2] > s[3] for s in shapes) == (not space.causal), "seq_q > seq_kv where it is defined"
        assert {kind for _, kind in cases} == {UNIFORM, WIDE}


# --- the algorithm: constraints, launch plans, rule default ----------------------------------------------------
def test_constraints_explain_themselves(h200):
    space = get_space("attention_causal_backward", dtype="bfloat16")
    base = {ALGO: "fa2", **space.algos["fa2"].default_config}
    assert space.violations(base, SHAPE, h200) == []
    assert "keys per warp" in space.violations({**base, "BC": 64}, SHAPE, h200)[0]  # 8 warps, 8 keys each
    assert "would spill" in space.violations({**base, "BR": 64}, SHAPE, h200)[0]  # 128 + 64
    assert space.violations({**base, "BR": 64}, (1, 1, 64, 64, 64), h200) == []
    assert "would spill" in space.violations({**base, "BC": 64, "WARPS": 2, "BR": 16}, (1, 1, 64, 64, 64), h200)[0]
    assert "SWIZZLE needs head_dim" in space.violations({**base, "SWIZZLE": 1}, (1, 1, 64, 64, 96), h200)[0]
    assert "not supported" in space.violations(base, (1, 1, 64, 64, 48), h200)[0]
    assert "causal with seq_q" in space.violations(base, (1, 1, 65, 64, 64), h200)[0]
    ada = dataclasses.replace(h200, name="NVIDIA L4", compute_capability=(8, 9), smem_per_block_optin=101376)
    assert "shared memory" in space.violations(base, SHAPE, ada)[0]
    turing = dataclasses.replace(h200, name="Tesla T4", compute_capability=(7, 5))
    assert "compute capability 8.0" in space.violations(base, SHAPE, turing)[0]


def test_launch_plans(h200):
    space = get_space("attention_backward", dtype="float16")
    shape = (2, 3, 1000, 77, 64)
    atomic = {ALGO: "fa2", **space.algos["fa2"].default_config, "BC": 64, "WARPS": 4, "BR": 64, "STAGES": 3}
    prep, main, store = space.launches(atomic, shape, h200)
    assert set(space.workspace(atomic, shape)) == {"delta", "dq_acc"}
    assert space.workspace(atomic, shape)["dq_acc"].shape == (2, 3, 1000, 64)
    assert prep.kernel == "attention_bwd_prep" and prep.grid == (math.ceil(6000 / 32), 1, 1)
    assert prep.args[:4] == ("o", "do", "delta", "dq_acc")
    assert main.kernel == "attention_bwd_dkdv" and main.grid == (2, 3, 2) and main.block == (128, 1, 1)
    row = 2 * (64 + 8)
    assert main.shared_bytes == 2 * 64 * row + 3 * (2 * 64 * row + 2 * 64 * 4) + 64 * (64 + 8) * 2
    assert main.args[:9] == ("q", "k", "v", "do", "lse", "delta", "dk", "dv", "dq_acc")
    assert math.isclose(float(main.args[11]), math.log2(math.e) / 8, rel_tol=1e-7) and float(main.args[12]) == 0.125
    assert store.kernel == "attention_bwd_dq_store" and store.args[:2] == ("dq_acc", "dq")
    assert int(store.args[2]) == 6000 * 64 and store.grid == (math.ceil(6000 * 64 / 2048), 1, 1)
    separate = {**atomic, "DQ_ATOMIC": 0, "SWIZZLE": 1}
    prep, main, dq = space.launches(separate, shape, h200)
    assert set(space.workspace(separate, shape)) == {"delta"} and "dq_acc" not in main.args
    assert main.shared_bytes == 2 * 64 * 128 + 3 * (2 * 64 * 128 + 2 * 64 * 4)
    assert dq.kernel == "attention_bwd_dq" and dq.grid == (math.ceil(1000 / 64), 3, 2) and dq.args[6] == "dq"
    assert dq.shared_bytes == 2 * 64 * 128 + 3 * 2 * 64 * 128
    assert all(s.grid[0] >= 1 for s in space.launches(separate, (1, 1, 1, 1, 64), h200))


def test_rule_default_fits_the_device_and_the_queries(h200):
    space = get_space("attention_causal_backward", dtype="float16")
    ada = dataclasses.replace(h200, name="NVIDIA L4", compute_capability=(8, 9), smem_per_block_optin=101376)
    assert space.rule_default(SHAPE, ada)[ALGO] == "fa2" and space.rule_default(SHAPE, h200)[ALGO] == "fa3"
    assert space.rule_default((8, 16, 8, 4096, 128), h200) == {**space.default_config, "BR": 16}, "fa2's 16 rows"
    for d in HEAD_DIMS:
        config = space.rule_default((2, 8, 1024, 1024, d), ada)
        assert space.violations(config, (2, 8, 1024, 1024, d), ada) == [], d
        assert space.violations(space.rule_default((2, 8, 1024, 1024, d), h200), (2, 8, 1024, 1024, d), h200) == []


# --- nvcc --------------------------------------------------------------------------------------------------------
@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_configs_compile_without_spills_and_bad_ones_fail_static_asserts(arch, h200, cache_dir):
    """Every head_dim, both dtypes, causal and not: the rule default and random valid configurations compile for
    Ampere and Hopper without spilling and with every kernel the launch plan names; configurations the register
    and swizzle constraints reject fail the template's static_asserts."""
    jobs = []
    for i, d in enumerate(HEAD_DIMS):
        space = get_space(KERNELS[i % 2], {ALGO: ["fa2"]}, dtype=("float16", "bfloat16")[i // 2 % 2])  # fa3: sm_90a
        shape = (1, 8, 1000, 1000, d)
        for config in [space.rule_default(shape, h200), *sample_valid(space, h200, shape, 2, seed=d)]:
            jobs.append((space, config, shape))
    space = get_space("attention_backward", dtype="bfloat16")
    base = {ALGO: "fa2", **space.algos["fa2"].default_config}
    bad = [({**base, "BR": 64}, 128), ({**base, "BC": 64, "WARPS": 2, "BR": 16}, 64), ({**base, "SWIZZLE": 1}, 96),
           ({**base, "BC": 64, "WARPS": 2, "BR": 64}, 96)]  # fmt: skip
    for config, d in bad:
        assert space.violations(config, (1, 1, 64, 64, d), h200), (config, d)
    results = compile_jobs(jobs + [(space, c, (1, 1, 64, 64, d)) for c, d in bad], arch, cache_dir)
    good = results[: len(jobs)]
    assert_built_without_spills(jobs, good)
    for (s, c, sh), r in zip(jobs, good):
        launched = {step.kernel for step in s.launches(c, sh, h200) if isinstance(step, Launch)}
        assert launched <= set(r.kernels), (launched, set(r.kernels))
    assert all(not r.ok and "static assertion" in (r.error or "") for r in results[len(jobs) :])
