"""The FlashAttention-3 style Hopper forward (autotune/spaces/attention_fa3.py, kernel_templates/attention_fa3.cu)
on the CPU: offered where it can run, defaults, constraints, the launch with its 3-D tensor maps, and sm_90a
compiles (every default, the FA3 paper's tiles, sampled configurations) without spills or serialised wgmma."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from autotune.runtime.compiler import Compiler
from autotune.spaces import ALGO, Launch, get_space
from autotune.spaces.attention_fa3 import HEAD_DIMS, MAX_TILE_REGISTERS
from autotune.spaces.base import TensorMap
from autotune.spaces.enumeration import random_config

from space_checks import (
    assert_offered_on_compute_capability_9_0_only,
    sample_valid,
    sm90a_ptxas_log,
    template_defaults,
)

ALGORITHM = "fa3"
SHAPE = (4, 16, 4096, 4096, 128)
KERNELS = ("attention", "attention_causal")
PROBLEMS = [(kernel, dtype) for kernel in KERNELS for dtype in ("float16", "bfloat16")]


def fa3_space(kernel: str, dtype: str):
    return get_space(kernel, {ALGO: [ALGORITHM]}, dtype=dtype)


@pytest.fixture(params=PROBLEMS, ids=["-".join(p) for p in PROBLEMS])
def space(request):
    return fa3_space(*request.param)


def default(space, **change):
    return {ALGO: ALGORITHM, **space.algos[ALGORITHM].default_config, **change}


def test_offered_for_half_types_default_config_stays_fa2s():
    assert ALGORITHM not in get_space("attention", dtype="float32").domain(ALGO), "16-bit wgmma never answers fp32"
    for kernel, dtype in PROBLEMS:
        space = get_space(kernel, dtype=dtype)
        assert ALGORITHM in space.domain(ALGO)
        assert space.default_config[ALGO] == "fa2", "the space's first configuration runs on every GPU"


def test_default_config_is_the_templates_defaults(space):
    rendered = space.defines(default(space))
    assert rendered.pop("DTYPE") == (1 if space.dtype == "float16" else 2)
    defaults = template_defaults("attention_fa3.cu")
    problem = template_defaults("attention_problem.cuh")  # HEAD_DIM, CAUSAL, KV_GROUPED: the shared header's
    grouped = space.problem_defines((4, 32, 8, 4096, 4096, 128))
    assert set(problem) == set(grouped) == {*space.problem_defines(SHAPE), "KV_GROUPED"}
    assert rendered == {k: defaults[k] for k in rendered}
    assert set(defaults) == set(rendered), "every tunable macro of the template is a parameter"


@pytest.mark.parametrize("d", HEAD_DIMS)
def test_default_config_is_valid_on_hopper_at_every_validation_case(space, h200, d):
    config = default(space)
    for shape in [(4, 16, 4096, 4096, d), (4, 32, 8, 4096, 4096, d)]:  # multi-head, grouped
        for case in [shape, *(s for s, _ in space.validation_cases(shape))]:
            assert space.violations(config, case, h200) == [], case


def test_sm90a_code_is_rejected_off_compute_capability_9_0(space, h200):
    assert_offered_on_compute_capability_9_0_only(space, ALGORITHM, default(space), SHAPE, h200)


def test_head_dim_32_is_left_to_fa2(space, h200):
    shape = (1, 8, 1000, 1000, 32)
    reason = space.algos[ALGORITHM].unfit(shape, h200)
    assert reason is not None and "head_dim" in reason
    narrowed = get_space(space.name, dtype=space.dtype).for_problem(shape, h200)
    assert ALGORITHM not in narrowed.domain(ALGO) and "fa2" in narrowed.domain(ALGO)


@pytest.mark.parametrize(
    "change, d, reason",
    [
        ({"PINGPONG": 1, "WG": 1}, 128, "ping-pong needs two consumer warpgroups"),
        ({"BN": 224, "OVERLAP": 1, "PINGPONG": 0}, 128, "would spill"),
        ({"BN": 256, "OVERLAP": 1, "STAGES": 2}, 64, "would spill"),
        ({"BN": 192, "STAGES": 3, "OVERLAP": 0}, 128, "shared memory"),
        ({"BN": 176, "STAGES": 3}, 96, "shared memory"),  # head_dim 96 takes 128 columns of shared memory
    ],
)
def test_constraints_explain_themselves(space, h200, change, d, reason):
    problems = space.violations(default(space, **change), (2, 4, 1000, 1000, d), h200)
    assert any(reason in p for p in problems), problems


def test_reverse_is_for_causal_only(h200):
    plain, causal = fa3_space("attention", "float16"), fa3_space("attention_causal", "float16")
    assert "REVERSE only matters" in plain.violations(default(plain, REVERSE=1), SHAPE, h200)[0]
    assert causal.violations(default(causal, REVERSE=1), SHAPE, h200) == []


def test_the_fa3_paper_tiles_fit(space, h200):
    """FA3's hopper/tile_size.h choices within our two consumer warpgroups: 128x176 (head_dim 128, non-causal),
    128x128 (causal), 128x192 (head_dim 64), 128x144 (head_dim 96), all with intra-warpgroup overlap."""
    for d, bn in [(128, 176), (128, 128), (64, 192), (96, 144)]:
        config = default(space, BN=bn)
        assert space.violations(config, (2, 16, 8192, 8192, d), h200) == [], (d, bn)
        g = space.algos[ALGORITHM].geometry(space.algos[ALGORITHM].local(config), d)
        assert g["tile_registers"] <= MAX_TILE_REGISTERS and g["threads"] == 384


def test_a_fair_share_of_the_space_is_valid(space, h200):
    rng = random.Random(0)
    for d in HEAD_DIMS:
        draws = [random_config(space, rng) for _ in range(1000)]
        valid = sum(not space.violations(c, (2, 16, 2048, 2048, d), h200) for c in draws)
        assert valid / len(draws) > 0.1, d  # non-causal: REVERSE=1 is refused, half the draws


def test_launch_passes_3d_tensor_maps_per_head(h200):
    space = fa3_space("attention_causal", "bfloat16")
    shape = (2, 3, 1000, 1031, 128)
    (launch,) = space.launches(default(space, BN=176, STAGES=2), shape, h200)
    assert isinstance(launch, Launch) and launch.kernel == "attention_fa3"
    assert launch.grid == (math.ceil(1000 / 128), 3, 2) and launch.block == (384, 1, 1)
    assert launch.shared_bytes == 1024 + 2 * 128 * (128 + 2 * 2 * 176) + 8 * (1 + 4 * 2)
    q, k, v, *rest = launch.args
    assert q == TensorMap("q", "bfloat16", dims=(128, 1000, 6), box=(64, 128, 1))
    assert k == TensorMap("k", "bfloat16", dims=(128, 1031, 6), box=(64, 176, 1))
    assert v == TensorMap("v", "bfloat16", dims=(128, 1031, 6), box=(64, 176, 1))
    assert all(m.problems() == [] and m.swizzle == 128 for m in (q, k, v))
    assert rest[:2] == ["o", "lse"]
    assert [int(x) for x in rest[2:4]] == [1000, 1031] and all(isinstance(x, np.int32) for x in rest[2:4])
    assert isinstance(rest[4], np.float32) and math.isclose(float(rest[4]), math.log2(math.e) / math.sqrt(128), rel_tol=1e-7)
    (one,) = space.launches(default(space, WG=1, PINGPONG=0), shape, h200)
    assert one.grid == (math.ceil(1000 / 64), 3, 2) and one.block == (256, 1, 1) and one.args[0].box == (64, 64, 1)


def test_head_dim_96_is_two_boxes_the_second_half_outside_the_tensor(h200):
    space = fa3_space("attention", "float16")
    (launch,) = space.launches(default(space), (1, 2, 77, 77, 96), h200)
    q = launch.args[0]
    assert q.dims == (96, 77, 2) and q.box == (64, 128, 1) and q.problems() == []
    assert launch.shared_bytes == 1024 + 2 * 128 * (128 + 2 * 2 * 128) + 8 * 9, "rows of 128 columns in smem"


def test_sampled_launches_have_valid_tensor_maps(space, h200):
    rng = random.Random(3)
    for _ in range(200):
        config = random_config(space, rng)
        shape = (rng.randint(1, 3), rng.randint(1, 4), rng.randint(1, 3000), 0, rng.choice(HEAD_DIMS))
        shape = (*shape[:3], shape[2] + rng.randint(0, 3000), shape[4])
        if space.violations(config, shape, h200):
            continue
        for step in space.launches(config, shape, h200):
            maps = [a for a in step.args if isinstance(a, TensorMap)]
            assert len(maps) == 3 and all(m.problems() == [] for m in maps), (config, shape)
            assert all(m.box[1] <= 256 and len(m.dims) == 3 for m in maps)


def test_describe(space):
    text = space.describe(default(space, BN=176))
    assert text.startswith("fa3 BM=128 BN=176") and "pingpong" in text and "overlap" in text


# --- nvcc -------------------------------------------------------------------------------------------------------
def compile_jobs(jobs, cache_dir):
    compiler = Compiler("sm_90a", cache_dir=cache_dir)
    try:
        futures = [compiler.submit(s.template_for(c), s.compile_defines(c, shape)) for s, c, shape in jobs]
        return [f.result() for f in futures]
    finally:
        compiler.close()


@pytest.mark.nvcc
def test_every_default_and_sampled_configs_compile_without_spills(h200, cache_dir):
    """The default at every head_dim, causal and not, fp16 and bf16; the FA3 paper's tiles; random valid
    configurations (all on sm_90a, the only target)."""
    jobs = []
    for kernel, dtype in PROBLEMS:
        space = fa3_space(kernel, dtype)
        for d in HEAD_DIMS:
            jobs.append((space, default(space), (2, 3, 1000, 1000, d)))
    bf16 = fa3_space("attention", "bfloat16")
    causal = fa3_space("attention_causal", "float16")
    for d, bn in [(128, 176), (64, 192), (96, 144)]:
        jobs.append((bf16, default(bf16, BN=bn), (2, 3, 1000, 1000, d)))
    for i, d in enumerate(HEAD_DIMS):
        for space in (bf16, causal):
            jobs += [(space, c, (2, 3, 1000, 1000, d)) for c in sample_valid(space, h200, (2, 3, 1000, 1000, d), 2, seed=i)]
    results = compile_jobs(jobs, cache_dir)
    failed = [(s.name, s.dtype, c, sh[4], r.error) for (s, c, sh), r in zip(jobs, results) if not r.ok]
    assert not failed, failed[:2]
    for (s, c, sh), r in zip(jobs, results):
        kernel = r.kernels["attention_fa3"]
        assert kernel.spill_stores == kernel.spill_loads == kernel.stack_bytes == 0, (s.name, s.dtype, c, sh[4])
        # WG=2: setmaxnreg hands 24 + 2·240 registers per lane of a warpgroup out of the block's 384 × 168
        assert kernel.registers == 168 if c["WG"] == 2 else kernel.registers <= 255, (c, kernel.registers)


@pytest.mark.nvcc
def test_configs_the_constraints_refuse_fail_the_templates_static_asserts(h200, cache_dir):
    space = fa3_space("attention", "bfloat16")
    bad = [
        (space, default(space, BN=224, OVERLAP=1), (1, 1, 64, 64, 128)),  # registers
        (space, default(space, BN=256, OVERLAP=1, STAGES=2), (1, 1, 64, 64, 64)),  # registers
        (space, default(space, BN=192, STAGES=3, OVERLAP=0), (1, 1, 64, 64, 128)),  # shared memory
        (space, default(space, WG=1, PINGPONG=1), (1, 1, 64, 64, 64)),  # ping-pong with one consumer
    ]
    for s, c, sh in bad:
        assert s.violations(c, sh, h200), c
    results = compile_jobs(bad, cache_dir)
    assert all(not r.ok and "static assertion" in (r.error or "") for r in results), [r.error for r in results]


@pytest.mark.nvcc
@pytest.mark.parametrize("d", HEAD_DIMS)
def test_default_wgmma_are_neither_serialised_nor_fenced_by_ptxas(d, tmp_path):
    """ptxas's C75xx notes (wgmma serialised for lack of registers, or a fence it had to inject because a
    register the wgmma reads was touched) would mean the overlap the template is built for does not happen."""
    for kernel in KERNELS:
        space = fa3_space(kernel, "bfloat16")
        log = sm90a_ptxas_log("attention_fa3.cu", space.compile_defines(default(space), (1, 1, 64, 64, d)), tmp_path)
        assert "C75" not in log, [line for line in log.splitlines() if "C75" in line]
        assert "0 bytes spill stores, 0 bytes spill loads" in log
