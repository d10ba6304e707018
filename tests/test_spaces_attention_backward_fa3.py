"""The Hopper attention backward (autotune/spaces/attention_backward_fa3.py, kernel_templates/attention_backward_fa3.cu)
on the CPU: offered where it can run (sm_90a, head_dim 64/128, multi-head) and never the default, defaults valid
at every validation case, constraints, the launch plan with its 3-D tensor maps and padded workspaces, and sm_90a
compiles (every default, sampled configurations) without spills or serialised wgmma; refused configurations trip
the template's static_asserts."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest

from autotune.spaces import ALGO, Launch, get_space
from autotune.spaces.attention_backward_fa3 import (
    DEFAULTS,
    TEMPLATE_DEFAULTS,
    HEAD_DIMS,
    MAX_TILE_REGISTERS,
)
from autotune.spaces.base import TensorMap

from space_checks import (
    assert_offered_on_compute_capability_9_0_only,
    compile_jobs,
    sample_valid,
    sm90a_ptxas_log,
    template_defaults,
)

ALGORITHM = "fa3"
KERNELS = ("attention_backward", "attention_causal_backward")
PROBLEMS = [(kernel, dtype) for kernel in KERNELS for dtype in ("float16", "bfloat16")]
SHAPE = (4, 16, 4096, 4096, 128)


def fa3_space(kernel: str, dtype: str):
    return get_space(kernel, {ALGO: [ALGORITHM]}, dtype=dtype)


@pytest.fixture(params=PROBLEMS, ids=["-".join(p) for p in PROBLEMS])
def space(request):
    return fa3_space(*request.param)


def default(space, d: int = 128, **change):
    return {ALGO: ALGORITHM, **space.algos[ALGORITHM].default_for(d), **change}


def test_offered_for_half_types_and_the_rule_picks_fa3_on_hopper_where_it_fits(h200):
    ada = dataclasses.replace(h200, name="NVIDIA L4", compute_capability=(8, 9), smem_per_block_optin=101376)
    for kernel, dtype in PROBLEMS:
        space = get_space(kernel, dtype=dtype)
        assert space.domain(ALGO) == ("fa2", "fa3")
        assert space.default_config[ALGO] == "fa2", "the space's first configuration runs on every GPU"
        for d in HEAD_DIMS:
            shape = (2, 8, 1024, 1024, d)
            keys_first = int(space.causal)  # 128 blocks: under one wave of the H200's 132 SMs
            assert space.rule_default(shape, h200) == {ALGO: "fa3", **DEFAULTS[d], "BLOCK_ORDER": keys_first}
            assert DEFAULTS[d]["DQ_MODE"] == 2, "dQ reduced over the block's keys: the measured fastest"
            assert space.rule_default(shape, ada)[ALGO] == "fa2"
        assert space.rule_default((2, 8, 2, 1024, 1024, 128), h200)[ALGO] == "fa3", "grouped heads too"
        many_waves = (8, 16, 1024, 1024, 128)  # 1024 blocks, 7.8 waves: head by head keeps L2 reuse
        assert space.rule_default(many_waves, h200)["BLOCK_ORDER"] == 0
        four_waves = (4, 32, 8, 2048, 2048, 128)  # 512 blocks of 132 SMs
        assert space.rule_default(four_waves, h200)["BLOCK_ORDER"] == int(space.causal)
        assert space.violations(space.rule_default(four_waves, h200), four_waves, h200) == []
        assert space.rule_default((2, 8, 1024, 1024, 96), h200)[ALGO] == "fa2", "head_dim 96"


def test_default_config_is_the_templates_defaults(space):
    rendered = space.defines({ALGO: ALGORITHM, **space.algos[ALGORITHM].default_config})
    assert rendered.pop("DTYPE") == (1 if space.dtype == "float16" else 2)
    defaults = template_defaults("attention_backward_fa3.cu")
    assert rendered == {k: defaults[k] for k in rendered}
    assert set(defaults) == set(rendered), "every tunable macro of the template is a parameter"
    assert space.algos[ALGORITHM].default_config == TEMPLATE_DEFAULTS


@pytest.mark.parametrize("d", HEAD_DIMS)
def test_default_per_head_dim_is_valid_on_hopper_at_every_validation_case(space, h200, d):
    config = default(space, d)
    for case in [(4, 16, 4096, 4096, d), *(s for s, _ in space.validation_cases((4, 16, 4096, 4096, d)))]:
        assert space.violations(config, case, h200) == [], case
    template = {ALGO: ALGORITHM, **TEMPLATE_DEFAULTS}
    assert space.violations(template, (2, 3, 1000, 1000, d), h200) == [], "default_config: both dims"


def test_sm90a_code_is_rejected_off_compute_capability_9_0(space, h200):
    assert_offered_on_compute_capability_9_0_only(space, ALGORITHM, default(space), SHAPE, h200)


@pytest.mark.parametrize("d", [32, 96])
def test_head_dims_32_and_96_are_left_to_fa2(space, h200, d):
    shape = (1, 8, 1000, 1000, d)
    reason = space.algos[ALGORITHM].unfit(shape, h200)
    assert reason is not None and "head_dim" in reason and "\n" not in reason
    narrowed = get_space(space.name, dtype=space.dtype).for_problem(shape, h200)
    assert ALGORITHM not in narrowed.domain(ALGO) and "fa2" in narrowed.domain(ALGO)


def test_grouped_shapes_run_a_block_per_kv_head_and_the_rule_takes_fa3(space, h200):
    """Grouped-query attention: one block per 128 keys of a kv head, the group size the main kernel's last argument;
    k and v read as their own (fewer) heads. The rule takes fa3 there too (2.1-2.6x fa2's default on the H200); the
    search offers both."""
    shape = (2, 32, 8, 1000, 1000, 128)
    assert space.algos[ALGORITHM].unfit(shape, h200) is None and space.violations(default(space), shape, h200) == []
    main = space.launches(default(space), shape, h200)[1]
    assert main.grid == (math.ceil(1000 / 128), 8, 2) and main.args[-1] == 4 and isinstance(main.args[-1], np.int32)
    q, k, v, do = main.args[:4]
    assert q.dims == do.dims == (128, 1000, 64) and k.dims == v.dims == (128, 1000, 16)
    mha = space.launches(default(space), (2, 32, 1000, 1000, 128), h200)[1]
    assert mha.grid == (math.ceil(1000 / 128), 32, 2) and not isinstance(mha.args[-1], np.int32), "no group argument"
    keys_first = space.launches(default(space, BLOCK_ORDER=1), shape, h200)[1]  # heads and batch folded into x
    assert keys_first.grid == (math.ceil(1000 / 128) * 2 * 8, 1, 1) and keys_first.args[4:] == main.args[4:]
    family = get_space(space.name, dtype=space.dtype)
    assert family.rule_default(shape, h200)[ALGO] == ALGORITHM
    assert family.for_problem(shape, h200).domain(ALGO) == ("fa2", "fa3")


@pytest.mark.parametrize(
    "change, d, reason",
    [
        ({"BM": 128}, 128, "would spill"),  # 128 + 128 registers of tiles
        ({"Q_STAGES": 2, "DO_STAGES": 2, "BM": 128}, 128, "shared memory"),  # and 232520 B
        ({"DQ_MODE": 2, "BM": 64}, 64, "one m64n64 piece of dQ"),  # 64 × 64: a piece for one consumer only
    ],
)
def test_constraints_explain_themselves(space, h200, change, d, reason):
    problems = space.violations(default(space, d, **change), (2, 4, 1000, 1000, d), h200)
    assert any(reason in p for p in problems), problems


def test_the_key_block_order_is_for_causal_attention(space, h200):
    """BLOCK_ORDER 1 dispatches a causal mask's heaviest key blocks first; without a mask every block has the same
    work, so the search is not offered it there."""
    problems = space.violations(default(space, BLOCK_ORDER=1), (2, 4, 1000, 1000, 128), h200)
    assert (problems == []) if space.causal else any("only matters for causal" in p for p in problems), problems


def test_shared_memory_formula_and_the_device_limit(h200):
    space = fa3_space("attention_backward", "bfloat16")
    algo = space.algos[ALGORITHM]
    g = algo.geometry({"BM": 128, "Q_STAGES": 3, "DO_STAGES": 2, "DQ_MODE": 0}, 64)
    assert g["smem_bytes"] == 1024 + 2 * 128 * 128 + 5 * (128 * 128 + 512) + 2 * 128 * 128 + 8 * 11
    bulk = algo.geometry({"BM": 64, "Q_STAGES": 3, "DO_STAGES": 2, "DQ_MODE": 1}, 128)
    assert bulk["smem_bytes"] == 1024 + 2 * 256 * 128 + 5 * (128 * 128 + 256) + 2 * 64 * 128 + 2 * 64 * 64 * 4 + 8 * 11
    block = algo.geometry({"BM": 64, "Q_STAGES": 3, "DO_STAGES": 2, "DQ_MODE": 2}, 128)
    assert block["smem_bytes"] == bulk["smem_bytes"] + 2 * 64 * 128, "two dS stages"
    assert g["tile_registers"] == 192 == MAX_TILE_REGISTERS
    small = dataclasses.replace(h200, smem_per_block_optin=101376)  # an sm_90 part with Ada's limit, hypothetically
    problems = space.violations(default(space, 64, Q_STAGES=3), (1, 2, 500, 500, 64), small)
    assert any("shared memory" in p and "101376" in p for p in problems), problems


def test_every_tile_fits_head_dim_64_and_head_dim_128_streams_64_rows(space, h200):
    algo = space.algos[ALGORITHM]
    names = [p.name for p in algo.parameters]
    grid = [{ALGO: ALGORITHM, **dict(zip(names, v))} for v in itertools.product(*(p.values for p in algo.parameters))]
    valid = {d: [c for c in grid if not space.violations(c, (2, 4, 2048, 2048, d), h200)] for d in HEAD_DIMS}
    orders = 2 if space.causal else 1  # BLOCK_ORDER 1 only matters under a causal mask
    assert len(grid) == 48 and len(valid[64]) == 20 * orders, "mode 2 needs BM 128 at head_dim 64"
    assert all(c["BM"] == 128 for c in valid[64] if c["DQ_MODE"] == 2)
    assert len(valid[128]) == 12 * orders and all(c["BM"] == 64 for c in valid[128]), "every dQ mode at BM 64"


def test_launch_plan_tensor_maps_and_padded_workspaces(h200):
    space = fa3_space("attention_causal_backward", "bfloat16")
    shape = (2, 3, 1000, 1031, 64)
    config = default(space, 64, DQ_MODE=0)  # BM 128, dQ by atomics: four tensor maps
    ws = space.workspace(config, shape)
    assert list(ws) == ["delta", "lse2", "dq_acc"]
    assert ws["delta"].shape == ws["lse2"].shape == (2, 3, 1024) and ws["dq_acc"].shape == (2, 3, 1000, 64)
    assert all(w.dtype == "float32" for w in ws.values())
    prep, main, store = space.launches(config, shape, h200)
    assert all(isinstance(s, Launch) for s in (prep, main, store))
    assert prep.kernel == "attention_bwd_fa3_prep" and prep.block == (256, 1, 1)
    assert prep.grid == (math.ceil(6 * 1024 / 32), 1, 1)
    assert prep.args[:6] == ("o", "do", "lse", "delta", "lse2", "dq_acc")
    assert [int(x) for x in prep.args[6:]] == [1000, 6 * 1024]
    assert main.kernel == "attention_bwd_fa3" and main.grid == (math.ceil(1031 / 128), 3, 2)
    assert main.block == (384, 1, 1)
    assert main.shared_bytes == 1024 + 2 * 128 * 128 + 4 * (128 * 128 + 512) + 2 * 128 * 128 + 8 * 9
    q, k, v, do, *rest = main.args
    assert q == TensorMap("q", "bfloat16", dims=(64, 1000, 6), box=(64, 128, 1))
    assert do == TensorMap("do", "bfloat16", dims=(64, 1000, 6), box=(64, 128, 1))
    assert k == TensorMap("k", "bfloat16", dims=(64, 1031, 6), box=(64, 128, 1))
    assert v == TensorMap("v", "bfloat16", dims=(64, 1031, 6), box=(64, 128, 1))
    assert all(m.problems() == [] and m.swizzle == 128 for m in (q, k, v, do))
    assert rest[:5] == ["lse2", "delta", "dk", "dv", "dq_acc"]
    assert [int(x) for x in rest[5:7]] == [1000, 1031] and all(isinstance(x, np.int32) for x in rest[5:7])
    assert math.isclose(float(rest[7]), math.log2(math.e) / 8, rel_tol=1e-7) and float(rest[8]) == 0.125
    assert store.kernel == "attention_bwd_dq_store" and store.args[:2] == ("dq_acc", "dq")
    assert int(store.args[2]) == 6000 * 64 and store.grid == (math.ceil(6000 * 64 / 2048), 1, 1)
    d128 = space.launches(default(space, 128), (1, 2, 77, 77, 128), h200)[1]
    assert d128.args[0].box == (64, 64, 1) and d128.args[1].box == (64, 128, 1) and d128.grid == (1, 2, 1)
    assert space.workspace(default(space, 128), (1, 2, 77, 77, 128))["lse2"].shape == (1, 2, 128)
    assert all(s.grid[0] >= 1 for s in space.launches(config, (1, 1, 1, 1, 64), h200))
    bulk = space.launches({**config, "DQ_MODE": 1}, shape, h200)[1]
    assert bulk.args[4] == TensorMap("dq_acc", "float32", dims=(64, 1000, 6), box=(32, 64, 1)), "after do"
    assert bulk.args[4].problems() == [] and bulk.args[5:10] == main.args[4:9]
    assert bulk.shared_bytes == main.shared_bytes + 2 * 64 * 64 * 4
    block = space.launches({**config, "DQ_MODE": 2}, shape, h200)[1]  # two dS stages
    assert block.args[4] == bulk.args[4] and block.shared_bytes == bulk.shared_bytes + 2 * 128 * 128


def test_describe(space):
    assert space.describe(default(space, 64, Q_STAGES=3, DQ_MODE=0)) == "fa3 BM=128 q3 do2 dq=atomic"
    assert space.describe(default(space, 64)) == "fa3 BM=128 q2 do2 dq=bulk-block"
    assert space.describe(default(space, 128, DQ_MODE=1)) == "fa3 BM=64 q2 do2 dq=bulk"
    assert space.describe(default(space, 128, DQ_MODE=2)) == "fa3 BM=64 q2 do2 dq=bulk-block"


# --- nvcc -------------------------------------------------------------------------------------------------------
def build_jobs(h200):
    """Every default (both head dims, causal and not, fp16 and bf16) with each dQ mode, grouped (KV_GROUPED) with
    two of them, and two sampled valid configurations per head_dim and causality."""
    jobs = []
    for kernel, dtype in PROBLEMS:
        space = fa3_space(kernel, dtype)
        for d in HEAD_DIMS:
            jobs.append((space, default(space, d), (2, 3, 1000, 1000, d)))
            jobs += [(space, default(space, d, DQ_MODE=mode), (2, 3, 1000, 1000, d)) for mode in (0, 1)]
            jobs += [(space, default(space, d, DQ_MODE=mode), (2, 8, 2, 1000, 1000, d)) for mode in (0, 2)]
    for i, d in enumerate(HEAD_DIMS):
        for space in (fa3_space("attention_backward", "bfloat16"), fa3_space("attention_causal_backward", "float16")):
            shape = (2, 3, 1000, 1000, d)
            jobs += [(space, c, shape) for c in sample_valid(space, h200, shape, 2, seed=i)]
    return jobs


@pytest.mark.nvcc
def test_every_default_and_sampled_configs_compile_without_spills(h200, cache_dir):
    jobs = build_jobs(h200)
    results = compile_jobs(jobs, "sm_90a", cache_dir)
    failed = [(s.name, s.dtype, c, sh[-1], r.error) for (s, c, sh), r in zip(jobs, results) if not r.ok]
    assert not failed, failed[:2]
    for (s, c, sh), r in zip(jobs, results):
        launched = {step.kernel for step in s.launches(c, sh, h200) if isinstance(step, Launch)}
        assert launched <= set(r.kernels), (launched, set(r.kernels))
        for name in launched:
            kernel = r.kernels[name]
            assert kernel.spill_stores == kernel.spill_loads == kernel.stack_bytes == 0, (s.name, c, sh[-1], name)
        # setmaxnreg hands 24 + 2·240 registers per lane of a warpgroup out of the block's 384 × 168
        assert r.kernels["attention_bwd_fa3"].registers == 168, (c, r.kernels["attention_bwd_fa3"].registers)


@pytest.mark.nvcc
def test_configs_the_constraints_refuse_fail_the_templates_static_asserts(h200, cache_dir):
    space = fa3_space("attention_backward", "bfloat16")
    bad = [
        (space, default(space, 128, BM=128, DO_STAGES=1), (1, 1, 64, 64, 128)),  # registers only
        (space, default(space, 128, BM=128), (1, 1, 64, 64, 128)),  # registers and shared memory
    ]
    for s, c, sh in bad:
        assert s.violations(c, sh, h200), c
    results = compile_jobs(bad, "sm_90a", cache_dir)
    assert all(not r.ok and "static assertion" in (r.error or "") for r in results), [r.error for r in results]


@pytest.mark.nvcc
@pytest.mark.parametrize("d", HEAD_DIMS)
@pytest.mark.parametrize("mode", [0, 1, 2], ids=["atomic", "bulk", "bulk-block"])
def test_default_wgmma_are_neither_serialised_nor_fenced_by_ptxas(d, mode, tmp_path):
    """No ptxas C75xx note (wgmma serialised for lack of registers, or a fence it had to inject) and no C7508
    (setmaxnreg ignored) for the default, causal and not, with each dQ path."""
    for kernel in KERNELS:
        space = fa3_space(kernel, "bfloat16")
        defines = space.compile_defines(default(space, d, DQ_MODE=mode), (1, 1, 64, 64, d))
        log = sm90a_ptxas_log("attention_backward_fa3.cu", defines, tmp_path)
        assert "C75" not in log, [line for line in log.splitlines() if "C75" in line]
        assert log.count("0 bytes spill stores, 0 bytes spill loads") == 3, log
