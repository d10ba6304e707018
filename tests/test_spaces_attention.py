"""The attention family without a GPU: keys and classes, constraints against the templates' static_asserts
(nvcc), the float64 reference (causal alignment bottom-right, periodic large inputs), bad input."""

from __future__ import annotations

import dataclasses

import math
import random

import numpy as np
import pytest

from autotune.errors import InvalidArgument, InvalidType
from autotune.spaces import ALGO, config_key, get_space
from autotune.spaces.attention import HEAD_DIMS, WIDE
from autotune.spaces.attention_split_kv import MAX_SEQ_Q
from autotune.spaces.enumeration import random_config

from space_checks import assert_built_without_spills, compile_jobs

SHAPE = (4, 16, 4096, 4096, 128)


def naive(q, k, v, causal):
    """Row by row, straight from the definition (float64)."""
    sq, skv, d = q.shape[0], k.shape[0], q.shape[1]
    o, lse = np.empty_like(q), np.empty(sq)
    for i in range(sq):
        keys = [j for j in range(skv) if not causal or j <= i + skv - sq]
        s = np.array([q[i] @ k[j] for j in keys]) / math.sqrt(d)
        w = np.exp(s - s.max())
        o[i] = (w[:, None] * v[keys]).sum(axis=0) / w.sum()
        lse[i] = s.max() + math.log(w.sum())
    return o, lse


@pytest.mark.parametrize("kernel", ["attention", "attention_causal"])
@pytest.mark.parametrize("shape", [(1, 2, 3, 7, 32), (2, 1, 7, 7, 64), (1, 1, 1, 5, 32)])
def test_reference_matches_the_definition(kernel, shape):
    space = get_space(kernel, dtype="float32")
    inputs = space.decoded_inputs(space.inputs(shape, np.random.default_rng(1)), shape)
    refs = space.reference(inputs, shape)
    b, h = shape[:2]
    for i in range(b):
        for j in range(h):
            o, lse = naive(inputs["q"][i, j], inputs["k"][i, j], inputs["v"][i, j], space.causal)
            np.testing.assert_allclose(refs["o"][i, j], o, rtol=1e-12, atol=1e-14)
            np.testing.assert_allclose(refs["lse"][i, j], lse, rtol=1e-12)


def test_causal_mask_is_bottom_right_aligned():
    """seq_q 2 < seq_kv 4: query 0 sees keys 0..2, query 1 all four (torch's alignment); the last query row of a
    causal problem equals the non-causal one."""
    shape = (1, 1, 2, 4, 32)
    causal = get_space("attention_causal", dtype="float32")
    inputs = causal.decoded_inputs(causal.inputs(shape, np.random.default_rng(2)), shape)
    ref = causal.reference(inputs, shape)
    full = get_space("attention", dtype="float32").reference(inputs, shape)
    np.testing.assert_allclose(ref["o"][0, 0, 1], full["o"][0, 0, 1], rtol=1e-13)
    q, k, v = (inputs[n][0, 0] for n in ("q", "k", "v"))
    s = k[:3] @ q[0] / math.sqrt(32)
    w = np.exp(s - s.max())
    np.testing.assert_allclose(ref["o"][0, 0, 0], w @ v[:3] / w.sum(), rtol=1e-12)
    assert not np.allclose(ref["o"][0, 0, 0], full["o"][0, 0, 0])


def test_large_inputs_repeat_and_the_reference_computes_one_period():
    space = get_space("attention", dtype="bfloat16")
    shape = (2, 4, 4096, 4096, 128)  # 2^34 score elements: periodic
    inputs = space.inputs(shape, np.random.default_rng(3))
    q = inputs["q"].reshape(8, 4096, 128)
    assert np.array_equal(q[3], q[0]) and not np.array_equal(q[1], q[0])
    small = (1, 4, 64, 80, 32)  # same rule at a small size: one period computed equals all heads computed
    x = space.decoded_inputs(space.inputs(small, np.random.default_rng(4)), small)
    x = {n: np.tile(a[:, :3], (1, 2, 1, 1))[:, :4] for n, a in x.items()}  # make it periodic by hand
    ref = space.reference(x, small)
    for h in range(4):
        o, lse = naive(x["q"][0, h], x["k"][0, h], x["v"][0, h], False)
        np.testing.assert_allclose(ref["o"][0, h], o, rtol=1e-12, atol=1e-14)


def test_wide_inputs_give_large_logits():
    space = get_space("attention", dtype="float16")
    shape = (1, 1, 64, 256, 128)
    x = space.decoded_inputs(space.inputs(shape, np.random.default_rng(5), WIDE), shape)
    logits = x["q"][0, 0] @ x["k"][0, 0].T / math.sqrt(128)
    assert np.abs(logits).max() > 50
    assert np.isfinite(space.reference(x, shape)["o"]).all()


def test_keys_and_classes():
    space = get_space("attention", dtype="float16")
    assert space.shape_key(SHAPE) != space.shape_key((4, 16, 4096, 4096, 64)), "head_dim is never crossed"
    assert space.shape_key(SHAPE) == space.shape_key((1, 32, 77, 1000, 128)), "batch and lengths may be"
    assert space.shape_class((1, 32, 1, 65536, 128)) != space.shape_class(SHAPE)
    assert space.problem_defines(SHAPE) == {"HEAD_DIM": 128, "CAUSAL": 0}
    assert get_space("attention_causal").problem_defines(SHAPE)["CAUSAL"] == 1
    assert get_space("attention_causal").work(SHAPE) == space.work(SHAPE) / 2 == 2 * 64 * 4096**2 * 128


def test_algorithms_per_dtype():
    assert get_space("attention", dtype="float32").domain(ALGO) == ("simt",)
    assert "simt" not in get_space("attention", dtype="bfloat16").domain(ALGO), "fp32 only at fp32 accuracy"
    assert get_space("attention", dtype="float16").default_config[ALGO] == "fa2"


@pytest.mark.parametrize(
    "shapes, message",
    [
        ({"q": (1, 2, 8, 64), "k": (1, 2, 8, 128), "v": (1, 2, 8, 128)}, "head_dim 64 but k and v have 128"),
        ({"q": (1, 2, 8, 64), "k": (1, 2, 8, 64), "v": (1, 2, 9, 64)}, "must match"),
        ({"q": (1, 2, 8, 48), "k": (1, 2, 8, 48), "v": (1, 2, 8, 48)}, "head_dim 48 is not supported"),
        ({"q": (1, 2, 8, 64), "k": (1, 2, 0, 64), "v": (1, 2, 0, 64)}, "seq_kv is 0"),
        ({"q": (2, 8, 64), "k": (1, 2, 8, 64), "v": (1, 2, 8, 64)}, "must be 4-D"),
        ({"q": (1, 3, 8, 64), "k": (1, 2, 8, 64), "v": (1, 2, 8, 64)}, "q has 3 heads but k and v have 2: the query"),
        ({"q": (2, 4, 8, 64), "k": (1, 2, 8, 64), "v": (1, 2, 8, 64)}, "q has batch 2 but k and v have 1"),
        ({"q": (1, 2, 8, 64), "k": (1, 4, 8, 64), "v": (1, 4, 8, 64)}, "q has 2 heads but k and v have 4"),
        ({"q": (1, 4, 8, 64), "k": (1, 2, 8, 64), "v": (1, 1, 8, 64)}, "k has shape (1, 2, 8, 64) but v has"),
    ],
)
def test_bad_shapes_get_one_clear_line(shapes, message):
    with pytest.raises(InvalidArgument, match=message.replace("(", r"\(").replace(")", r"\)")) as info:
        get_space("attention").infer_shape(shapes)
    assert "\n" not in str(info.value)


def test_causal_refuses_more_queries_than_keys():
    shapes = {"q": (1, 2, 9, 64), "k": (1, 2, 8, 64), "v": (1, 2, 8, 64)}
    assert get_space("attention").infer_shape(shapes) == (1, 2, 9, 8, 64)
    with pytest.raises(InvalidArgument, match="see no key"):
        get_space("attention_causal").infer_shape(shapes)


def test_mixed_dtypes_are_refused():
    with pytest.raises(InvalidType, match="v has dtype float32 but q has float16"):
        get_space("attention").infer_dtype({"q": "float16", "k": "float16", "v": "float32"})


def test_constraints_explain_themselves(h200):
    space = get_space("attention_causal", dtype="bfloat16")
    base = {ALGO: "fa2", **space.algos["fa2"].default_config}
    assert space.violations(base, SHAPE, h200) == []
    assert "would spill" in space.violations({**base, "MT": 2, "BC": 128}, SHAPE, h200)[0]
    assert "SWIZZLE needs head_dim" in space.violations({**base, "SWIZZLE": 1}, (1, 1, 64, 64, 96), h200)[0]
    big = {**base, "STAGES": 3, "BC": 128, "WARPS": 8, "Q_REGS": 0}
    assert "shared memory" in space.violations(big, SHAPE, h200)[0]
    assert "not supported" in space.violations(base, (1, 1, 64, 64, 48), h200)[0]
    plain = get_space("attention", dtype="bfloat16")
    assert "REVERSE only matters" in plain.violations({**base, "REVERSE": 1}, SHAPE, h200)[0]


def test_launch_geometry(h200):
    space = get_space("attention", dtype="float16")
    config = {ALGO: "fa2", **space.algos["fa2"].default_config, "WARPS": 8, "MT": 1}
    (launch,) = space.launches(config, (2, 3, 1000, 77, 64), h200)
    assert launch.grid == (math.ceil(1000 / 128), 3, 2) and launch.block == (256, 1, 1)
    assert launch.shared_bytes == 2 * (64 + 8) * (128 + 2 * 2 * 64)
    assert launch.args[:5] == ("q", "k", "v", "o", "lse")
    assert math.isclose(float(launch.args[7]), math.log2(math.e) / 8, rel_tol=1e-7)


def test_validation_cases_are_ragged_and_keep_the_head_dim():
    space = get_space("attention_causal", dtype="float16")
    cases = [s for s, _ in space.validation_cases((1, 8, 4096, 4096, 64))]
    assert all(s[4] == 64 for s in cases), "head_dim is compiled in"
    tiles = {16 * mt * w for mt in space.domain("MT") for w in space.domain("fa2.WARPS")} | set(space.domain("fa2.BC"))
    assert any(all(s[2] % t and s[3] % t for t in tiles) for s in cases)
    assert any(s[2] != s[3] and s[2] > 1 for s in cases), "causal with seq_q != seq_kv"
    assert any(s[2] == 1 for s in cases) and any(s[3] > 4096 for s in cases)
    assert any(kind == WIDE for _, kind in space.validation_cases(SHAPE))
    assert sum(s[2] <= MAX_SEQ_Q for s in cases) >= 4, "split_kv (decoding only) is validated too"


def test_split_kv_plan_and_constraints(h200):
    space = get_space("attention_causal", dtype="bfloat16")
    config = {ALGO: "split_kv", **space.algos["split_kv"].default_config, "SPLITS": 32}
    shape = (1, 32, 1, 65536, 128)
    assert space.violations(config, shape, h200) == []
    assert set(space.workspace(config, shape)) == {"o_part", "lse_part"}
    assert space.workspace(config, shape)["o_part"].shape == (32, 32, 128)
    main, combine = space.launches(config, shape, h200)
    assert main.grid == (32, 32, 1) and main.args[3:5] == ("o_part", "lse_part")
    assert combine.args[:4] == ("o_part", "lse_part", "o", "lse") and int(combine.args[4]) == 32
    assert combine.overlaps_previous and not main.overlaps_previous, "the combine waits on the splits in-kernel"
    assert "decoding" in space.violations(config, (1, 32, 1000, 65536, 128), h200)[0]
    assert "blocks" in space.violations({**config, "SPLITS": 128}, (16, 32, 1, 65536, 128), h200)[0]
    assert "would spill" in space.violations({**config, "BC": 64}, shape, h200)[0]
    cluster = {**config, "SPLITS": 8, "COMBINE": 1}  # the splits combined in their cluster: one launch
    assert space.violations(cluster, shape, h200) == [] and space.workspace(cluster, shape) == {}
    (one,) = space.launches(cluster, shape, h200)
    assert one.grid == (8, 32, 1) and one.args[3:5] == ("o", "lse") and one.args[5:] == main.args[5:]
    assert one.shared_bytes == main.shared_bytes, "the split's state fits where the rings were"
    assert space.describe(cluster).endswith("combine=cluster")
    assert space.violations({**cluster, "SPLITS": 16}, shape, h200) == []  # past the portable size: opted in
    assert "2 to 16" in space.violations({**cluster, "SPLITS": 32}, shape, h200)[0]
    assert "only matters" in space.violations({**cluster, "COMBINE_THREADS": 256}, shape, h200)[0]
    ampere = dataclasses.replace(h200, name="NVIDIA A100", compute_capability=(8, 0), multiprocessors=108)
    assert any("clusters" in p for p in space.violations(cluster, shape, ampere))
    assert not space.launches(config, shape, ampere)[1].overlaps_previous, "programmatic launches need sm_90"
    single = {**config, "SPLITS": 1}  # the one split writes o and lse itself: no workspace, no combine kernel
    assert space.violations(single, shape, h200) == [] and space.workspace(single, shape) == {}
    (alone,) = space.launches(single, shape, h200)
    assert alone.grid == (1, 32, 1) and alone.args[3:5] == ("o", "lse") and alone.args[5:] == main.args[5:]
    assert space.describe(single).endswith("combine=none")
    assert "only matters" in space.violations({**single, "COMBINE_THREADS": 64}, shape, h200)[0]


def test_rule_default_decodes_with_split_kv_sized_to_the_gpu(h200):
    space = get_space("attention", dtype="float16")
    one = space.rule_default((1, 32, 1, 65536, 128), h200)
    assert one[ALGO] == "split_kv" and one["SPLITS"] == 4 and not one["COMBINE"], "about a block per SM"
    assert space.rule_default((16, 32, 1, 8192, 128), h200)["SPLITS"] == 1
    # Grouped batch-1 decoding: 8 blocks per split. Short KV: 8 splits combined in their cluster (Hopper only);
    # long KV: 16 splits (a block per SM) and the combine kernel.
    short, long = (1, 32, 8, 1, 8192, 128), (1, 32, 8, 1, 131072, 128)
    assert {n: space.rule_default(short, h200)[n] for n in ("SPLITS", "COMBINE", "STAGES")} == {
        "SPLITS": 8, "COMBINE": 1, "STAGES": 3}
    assert {n: space.rule_default(long, h200)[n] for n in ("SPLITS", "COMBINE", "SWIZZLE")} == {
        "SPLITS": 16, "COMBINE": 0, "SWIZZLE": 1}
    assert space.rule_default((1, 32, 8, 1, 131072, 96), h200)["SWIZZLE"] == 0, "the swizzle needs head_dim 64/128"
    ampere = dataclasses.replace(h200, name="NVIDIA A100", compute_capability=(8, 0), multiprocessors=108)
    assert space.rule_default(short, ampere)["COMBINE"] == 0, "no clusters before Hopper"
    small = dataclasses.replace(h200, smem_per_block_optin=160 * 1024)  # three-stage rings of 213 KB do not fit
    assert space.rule_default(short, small)["COMBINE"] == 0 and not space.violations(
        space.rule_default(short, small), short, small)
    assert space.rule_default(SHAPE, h200)[ALGO] == "fa3", "prefill on Hopper"
    assert space.rule_default((2, 8, 512, 512, 32), h200)[ALGO] == "fa2", "fa3 has no head_dim 32"
    assert space.rule_default(SHAPE, ampere)[ALGO] == "fa2"
    assert get_space("attention", dtype="float32").rule_default((1, 32, 1, 65536, 128), h200)[ALGO] == "simt"


def sample(space, shape, device, n, seed, **fixed):
    rng = random.Random(seed)
    seen, out = set(), []
    for _ in range(20000):
        config = {**random_config(space, rng), **fixed}
        if config_key(config) not in seen and not space.violations(config, shape, device):
            seen.add(config_key(config))
            out.append(config)
            if len(out) == n:
                break
    return out


@pytest.mark.nvcc
def test_valid_configs_compile_without_spills_and_bad_ones_fail_static_asserts(h200, cache_dir):
    """Random valid configurations of every algorithm at every supported head_dim, causal and not, compile for
    the H200's target (sm_90a: fa3 is wgmma code) without spilling; configurations the register and swizzle
    constraints reject fail the templates' static_asserts."""
    jobs, bad = [], []
    for i, d in enumerate(HEAD_DIMS):
        kernel = ("attention", "attention_causal")[i % 2]
        for dtype in ("float16", "bfloat16", "float32"):
            space = get_space(kernel, dtype=dtype)
            shape = (1, 8, 1000, 1000, d)
            for config in sample(space, shape, h200, 2, seed=d):
                jobs.append((space, config, shape))
    fa2 = get_space("attention", dtype="bfloat16")
    rng = random.Random(9)
    while len(bad) < 4:
        config = random_config(fa2, rng)
        shape = (1, 1, 64, 64, rng.choice(HEAD_DIMS))
        problems = fa2.violations(config, shape, h200)
        if problems and ("spill" in problems[0] or "SWIZZLE" in problems[0]):
            bad.append((fa2, config, shape))
    results = compile_jobs(jobs + bad, h200.compile_arch, cache_dir)
    good = results[: len(jobs)]
    assert_built_without_spills(jobs, good)
    assert all(not r.ok and "static assertion" in (r.error or "") for r in results[len(jobs):])


@pytest.mark.nvcc
def test_split_kv_combined_in_a_cluster_compiles_to_one_kernel_without_spills(h200, cache_dir):
    """COMBINE=1 (sm_90a): 2, 4, 8 and 16 splits as a cluster, both head dims, causal, grouped; the kernel its plan
    launches is built (and the combine kernel is not), with no spill."""
    from autotune.spaces import Launch

    jobs = []
    for kernel, dtype, shape, splits, warps in [("attention", "bfloat16", (1, 32, 8, 1, 8192, 128), 8, 4),
                                                ("attention_causal", "float16", (2, 8, 3, 2000, 64), 2, 2),
                                                ("attention", "float16", (4, 16, 1, 4096, 128), 4, 1),
                                                ("attention", "bfloat16", (1, 32, 8, 1, 32768, 128), 16, 4)
                                                ]:  # fmt: skip
        space = get_space(kernel, dtype=dtype)
        config = {ALGO: "split_kv", **space.algos["split_kv"].default_config, "SPLITS": splits, "WARPS": warps,
                  "COMBINE": 1}  # fmt: skip
        assert space.violations(config, shape, h200) == [], (shape, space.violations(config, shape, h200))
        jobs.append((space, config, shape))
    results = compile_jobs(jobs, h200.compile_arch, cache_dir)
    assert_built_without_spills(jobs, results)
    for (space, config, shape), r in zip(jobs, results):
        launched = [s.kernel for s in space.launches(config, shape, h200) if isinstance(s, Launch)]
        assert launched == ["attention_split_kv"]
        assert "attention_combine" not in r.kernels


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_references_widen_one_head_at_a_time(monkeypatch, dtype):
    """`references` (what the GPU worker's validation data calls) gives exactly the float64 reference of the
    decoded inputs, and never widens more than one head at once: a decoding step of 64 x 8 kv heads x 128K keys
    had its worker killed for host memory when all of k and v were widened."""
    from autotune import dtypes

    space = get_space("attention", dtype=dtype)
    shape = (16, 8, 2, 1, 12_000, 64)  # grouped decoding, large enough for periodic inputs
    inputs = space.inputs(shape, np.random.default_rng(11))
    expected = space.reference(space.decoded_inputs(inputs, shape), shape)
    widened = []
    decode = dtypes.decode
    monkeypatch.setattr(dtypes, "decode", lambda array, name: widened.append(np.size(array)) or decode(array, name))
    refs, tolerances = space.references(inputs, shape)
    for name in ("o", "lse"):
        np.testing.assert_array_equal(refs[name], expected[name])
    assert tolerances == {name: space.tolerance(name, shape) for name in ("o", "lse")}
    assert widened and max(widened) <= 12_000 * 64, "one kv head (seq_kv x d) at the most"
