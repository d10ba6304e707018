"""LayerNorm / RMSNorm backward as a family of two algorithms, without a GPU: `tiles` (the family before it had
algorithms) is unchanged, and `persistent` has the constraints, launches, workspace and rule defaults its template
needs, and compiles for sm_90a without spills."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random

import numpy as np
import pytest

from autotune.runtime.compiler import Compiler
from autotune.spaces import ALGO, Launch, config_key, get_space
from autotune.spaces.base import BufferSpec, Zero
from autotune.spaces.enumeration import configs, random_config
from autotune.spaces.layernorm_backward_persistent import MAX_SMS

from conftest import H200
from space_checks import template_defaults

KERNELS = ["layernorm_backward", "rmsnorm_backward", "layernorm_backward_mixed", "rmsnorm_backward_mixed"]
VARIANTS = [(k, d) for k in KERNELS for d in get_space(k).supported_dtypes()]
HIDDEN = [768, 1024, 2048, 4096, 5120, 8192]  # the target widths, at 8192 rows and more


def persistent(kernel: str, dtype: str, **domains):
    return get_space(kernel, {ALGO: ["persistent"], **domains}, dtype=dtype)


# --- tiles: as before -------------------------------------------------------------------------------------------
# Digests of every tiles configuration's violations, defines, template, workspace and launches at TILES_SHAPES,
# and of the rule default at RULE_SHAPES (where it stays tiles), computed by `tiles_digest` on the commit before
# the family had algorithms (821cd57, configurations without ALGO): the same function gives the same digest now.
TILES_SHAPES = [(1, 1), (3, 7), (5, 1031), (2, 65539), (37, 768), (8192, 768), (4096, 4096), (1024, 65536)]
RULE_SHAPES = [(1, 1), (7, 1), (3, 7), (5, 1031), (2, 65539), (37, 768), (100, 768), (1, 12288), (131, 4096),
               (1024, 65536), (4096, 50257)]  # fmt: skip
BEFORE = {
    ("layernorm_backward", "float32"): "e7afece0e38ecd11",
    ("layernorm_backward", "bfloat16"): "56d60190a09c30fe",
    ("rmsnorm_backward", "float16"): "778fb871543912f0",
    ("layernorm_backward_mixed", "bfloat16"): "dbd7cbb1858a5f42",
    ("rmsnorm_backward_mixed", "float16"): "8bdac8573c49c885",
}


def _step(step) -> list:
    if isinstance(step, Launch):
        args = [a if isinstance(a, str) else f"{type(a).__name__}({a})" for a in step.args]
        return [step.kernel, list(step.grid), list(step.block), step.shared_bytes, args]
    return [type(step).__name__, step.buffer]


def tiles_digest(kernel: str, dtype: str, device) -> str:
    space = get_space(kernel, dtype=dtype)
    tiles = get_space(kernel, {ALGO: ["tiles"]}, dtype=dtype) if space.algorithms else space
    digest = hashlib.sha256()
    for config in configs(tiles):
        entry = [{k: v for k, v in config.items() if k != ALGO}, space.defines(config), str(space.template_for(config))]
        for shape in TILES_SHAPES:
            problems = space.violations(config, shape, device)
            entry.append(problems)
            if not problems:
                entry.append({n: [list(b.shape), b.dtype] for n, b in space.workspace(config, shape).items()})
                entry.append([_step(s) for s in space.launches(config, shape, device)])
        digest.update(json.dumps(entry, sort_keys=True).encode())
    for shape in RULE_SHAPES:
        rule = space.rule_default(shape, device)
        digest.update(json.dumps({k: v for k, v in rule.items() if k != ALGO}, sort_keys=True).encode())
    return digest.hexdigest()[:16]


@pytest.mark.parametrize("kernel, dtype", sorted(BEFORE))
def test_tiles_configurations_defines_and_launches_are_unchanged(kernel, dtype, h200):
    assert tiles_digest(kernel, dtype, h200) == BEFORE[(kernel, dtype)]


@pytest.mark.parametrize("kernel, dtype", VARIANTS)
def test_the_family_keeps_tiles_first(kernel, dtype):
    space = get_space(kernel, dtype=dtype)
    assert space.domain(ALGO) == ("tiles", "persistent")
    assert space.default_config == {ALGO: "tiles", "BLOCK": 256, "VEC": 4, "ITEMS": 2, "RPB": 16, "SPLIT": 1,
                                    "ATOMIC": 0}  # fmt: skip
    assert type(space).supported_dtypes() == (("float16", "bfloat16") if "mixed" in kernel else
                                              ("float32", "float16", "bfloat16"))  # fmt: skip
    assert "ALGO" not in space.defines(space.default_config)
    # narrowing by a name both algorithms have narrows both; one algorithm's key narrows it alone
    assert get_space(kernel, {"VEC": [4]}, dtype=dtype).domain("persistent.VEC") == (4,)
    assert get_space(kernel, {"tiles.VEC": [4]}, dtype=dtype).domain("persistent.VEC") == (1, 2, 4, 8)


# --- persistent: constraints, launches, workspace -----------------------------------------------------------------
def test_persistent_default_is_the_templates_and_fits_the_default_shape(h200):
    space = get_space("layernorm_backward")
    algo = space.algos["persistent"]
    defaults = template_defaults(algo.template)  # its own defaults come before row_groups.cuh's: they win
    assert {k: defaults[k] for k in algo.default_config if k != "STREAM"} == {
        k: v for k, v in algo.default_config.items() if k != "STREAM"}
    assert algo.default_config["STREAM"] == 0  # common.cuh's default
    for kernel, dtype in VARIANTS:
        space = get_space(kernel, dtype=dtype)
        config = {ALGO: "persistent", **algo.default_config}
        assert space.violations(config, space.default_shape, h200) == [], (kernel, dtype)


@pytest.mark.parametrize("kernel, dtype", VARIANTS)
def test_persistent_defines(kernel, dtype):
    space = persistent(kernel, dtype)
    config = {ALGO: "persistent", **space.algos["persistent"].default_config}
    defines = space.defines(config)
    assert ALGO not in defines and defines["RMS"] == int(kernel.startswith("rms"))
    assert defines["WDTYPE"] == (0 if "mixed" in kernel else defines["DTYPE"])
    assert {k: defines[k] for k in ("BLOCK", "TPR", "BPS", "RWARPS", "RVEC", "FUSE")} == {
        k: config[k] for k in ("BLOCK", "TPR", "BPS", "RWARPS", "RVEC", "FUSE")}


def test_persistent_constraints(h200):
    space = persistent("layernorm_backward", "bfloat16")
    base = {ALGO: "persistent", "BLOCK": 256, "TPR": 32, "VEC": 8, "ITEMS": 3, "ROWS": 1, "CACHE": 1, "BPS": 1,
            "STREAM": 0, "RWARPS": 8, "RVEC": 1, "FUSE": 0}  # fmt: skip
    shape = (8192, 768)
    assert space.violations(base, shape, h200) == []
    assert space.violations(base, (8192, 767), h200) == []  # odd widths: the scalar path, same capacity
    assert "do not fit the register cache of TPR*VEC*ITEMS = 768" in space.violations(base, (8192, 769), h200)[0]
    assert "TPR=512 threads per row > BLOCK=256" in space.violations({**base, "TPR": 512}, shape, h200)[0]
    sixteen = {**base, "BLOCK": 1024, "TPR": 64, "ITEMS": 2}
    assert "named barriers" in space.violations(sixteen, shape, h200)[0]
    assert space.violations({**sixteen, "TPR": 32, "ITEMS": 3, "BPS": 1}, shape, h200) != []  # registers
    f32 = persistent("layernorm_backward", "float32")
    assert "is 32 B per access (> 16)" in f32.violations({**base, "ITEMS": 6}, shape, h200)[0]  # 8 floats
    many = {**base, "BPS": 8}
    assert any("threads per SM" in p for p in space.violations(many, shape, h200))
    assert any("registers per thread" in p for p in space.violations({**base, "BPS": 4}, shape, h200))
    smem = {**base, "CACHE": 2, "BLOCK": 512, "TPR": 512, "ITEMS": 4}
    assert space.violations(smem, (8192, 16384), h200) == []
    assert any("cp.async" in p for p in space.violations({**smem, "VEC": 1, "ITEMS": 8}, (8, 64), h200))  # 2 B
    assert any("12 chunks per thread (> 8)" in p for p in space.violations({**smem, "ITEMS": 12}, (8, 64), h200))
    a100 = dataclasses.replace(h200, compute_capability=(8, 0), name="NVIDIA A100")
    v100 = dataclasses.replace(h200, compute_capability=(7, 0), name="Tesla V100")
    assert space.violations(smem, (8192, 16384), a100) == []
    assert any("compute capability 8.0" in p for p in space.violations(smem, (8192, 16384), v100))
    assert any("do not fit one SM" in p for p in space.violations({**smem, "ROWS": 2, "BPS": 2}, (8192, 16384), h200))


@pytest.mark.parametrize("kernel", KERNELS)
def test_persistent_launches_and_workspace(kernel, h200):
    dtype = "bfloat16"
    space = persistent(kernel, dtype)
    rms = kernel.startswith("rms")
    config = {ALGO: "persistent", "BLOCK": 512, "TPR": 64, "VEC": 8, "ITEMS": 2, "ROWS": 2, "CACHE": 1, "BPS": 1,
              "STREAM": 1, "RWARPS": 16, "RVEC": 2, "FUSE": 0}  # fmt: skip
    for shape, grid in [((8192, 1024), 132), ((200, 1024), 13), ((1, 1000), 1), ((100_000, 1024), 132)]:
        assert space.violations(config, shape, h200) == []
        main, finalize = space.launches(config, shape, h200)
        assert main.kernel == "layernorm_backward_persistent" and main.grid == (grid, 1, 1)
        assert main.block == (512, 1, 1) and main.shared_bytes == 512 * 16 * 4  # 8 groups add up their sums
        assert finalize.kernel == "layernorm_backward_finalize" and finalize.block == (16 * 32, 1, 1)
        assert finalize.grid == (-(-shape[1] // 64), 1 if rms else 2, 1)
        assert finalize.args[-2] == np.int32(grid) and finalize.args[-1] == np.int32(shape[1])
        workspace = space.workspace(config, shape)
        assert set(workspace) == ({"partial_dw"} if rms else {"partial_dw", "partial_db"})
        for spec in workspace.values():
            assert spec.dtype == "float32" and spec.shape[1] == shape[1] and grid <= spec.shape[0] <= MAX_SMS
        assert main.args[:8] == ("dy", "x", "weight", "rstd" if rms else "mean", "rstd", "dx", "partial_dw",
                                 "partial_dw" if rms else "partial_db")  # fmt: skip
        assert finalize.args[:4] == ("partial_dw", "partial_dw" if rms else "partial_db", "dweight",
                                     "dweight" if rms else "dbias")  # fmt: skip
    # a device with more SMs than the workspace was sized for gets as many blocks as it holds partial rows
    big = dataclasses.replace(h200, multiprocessors=2 * MAX_SMS)
    main, finalize = space.launches(config, (1 << 20, 1024), big)
    assert main.grid[0] == MAX_SMS == space.workspace(config, (1 << 20, 1024))["partial_dw"].shape[0]
    one_group = {**config, "TPR": 512, "BLOCK": 512, "ITEMS": 1, "CACHE": 2}
    assert space.launches(one_group, (8192, 4096), h200)[0].shared_bytes == 2 * 2 * 512 * 8 * 2  # dy, x; 2 rows


@pytest.mark.parametrize("kernel", KERNELS)
def test_fused_finalize_launches_one_kernel_after_zeroing_its_tickets(kernel, h200):
    """FUSE=1: a memset of the tickets (the workspace is allocated per call, uninitialised), then the main kernel
    alone, with the tickets and dweight (and dbias) after FUSE=0's arguments; the same partial rows, and one
    counter per segment (RWARPS) plus one."""
    space = persistent(kernel, "bfloat16")
    rms = kernel.startswith("rms")
    unfused = {ALGO: "persistent", "BLOCK": 512, "TPR": 64, "VEC": 8, "ITEMS": 2, "ROWS": 2, "CACHE": 1, "BPS": 1,
               "STREAM": 1, "RWARPS": 16, "RVEC": 2, "FUSE": 0}  # fmt: skip
    fused = {**unfused, "FUSE": 1}
    for shape, grid in [((8192, 1024), 132), ((200, 1024), 13), ((1, 1000), 1)]:
        assert space.violations(fused, shape, h200) == []
        zero, main = space.launches(fused, shape, h200)
        assert isinstance(zero, Zero) and zero.buffer == "tickets"
        before = space.launches(unfused, shape, h200)[0]
        assert main == dataclasses.replace(before, args=(*before.args, "tickets", "dweight",
                                                         "dweight" if rms else "dbias"))  # fmt: skip
        assert main.grid == (grid, 1, 1)
        workspace = space.workspace(fused, shape)
        assert workspace["tickets"] == BufferSpec((17,), "int32")
        assert {n: w for n, w in workspace.items() if n != "tickets"} == space.workspace(unfused, shape)
        assert set(space.outputs(shape)) >= {"dweight"} | (set() if rms else {"dbias"})
    assert "tickets" not in space.workspace(unfused, (8192, 1024))
    for rwarps in space.domain("persistent.RWARPS"):  # every (RWARPS, RVEC) stays a distinct configuration
        for rvec in space.domain("persistent.RVEC"):
            assert space.violations({**fused, "RWARPS": rwarps, "RVEC": rvec}, (8192, 1024), h200) == []
    assert "fused=16x2" in space.describe(fused) and "finalize=16x2" in space.describe(unfused)


def test_fuse_is_off_in_the_defaults_and_rule(h200):
    """FUSE=0 until a GPU compares the two (see the module of the algorithm): the template's default, the
    algorithm's default and every rule default."""
    assert template_defaults("layernorm_backward_persistent.cu")["FUSE"] == 0
    for kernel, dtype in VARIANTS:
        space = get_space(kernel, dtype=dtype)
        assert space.algos["persistent"].default_config["FUSE"] == 0
        for cols in HIDDEN:
            rule = space.rule_default((8192, cols), h200)
            assert rule[ALGO] == "persistent" and rule["FUSE"] == 0


# --- rule defaults -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kernel, dtype", VARIANTS)
def test_rule_defaults_run_persistent_from_one_row_per_sm(kernel, dtype, h200):
    space = get_space(kernel, dtype=dtype)
    longest = 12288 if (kernel, dtype) == ("layernorm_backward", "float32") else 16384  # what a cache holds
    for cols in [*HIDDEN, 3001, longest]:
        for rows in (h200.multiprocessors, 8192, 8193, 65536):
            rule = space.rule_default((rows, cols), h200)
            assert rule[ALGO] == "persistent", (rows, cols, rule)
            assert space.violations(rule, (rows, cols), h200) == []
            assert rule["VEC"] * space.itemsize == 16 or cols % (16 // space.itemsize), rule  # 16 B where it can
        assert space.rule_default((h200.multiprocessors - 1, cols), h200)[ALGO] == "tiles"
    for shape in [(1024, 65536), (4096, 50257), (8192, 32768)]:  # no cache holds these rows
        assert space.rule_default(shape, h200)[ALGO] == "tiles"
    narrowed = get_space(kernel, {ALGO: ["persistent"]}, dtype=dtype)
    assert narrowed.rule_default((4, 768), h200)[ALGO] == "persistent"  # a space of persistent alone keeps to it
    tiles = get_space(kernel, {ALGO: ["tiles"]}, dtype=dtype)
    assert tiles.rule_default((8192, 768), h200)[ALGO] == "tiles"


def test_rule_default_keeps_the_rows_on_chip_and_sms_busy(h200):
    for kernel, dtype in VARIANTS:
        space = get_space(kernel, dtype=dtype)
        algo = space.algos["persistent"]
        for cols in HIDDEN:
            rule = space.rule_default((8192, cols), h200)
            groups = rule["BLOCK"] // rule["TPR"] * rule["BPS"]
            in_flight = groups * rule["ROWS"] * cols * 2 * space.itemsize
            assert in_flight >= 32 << 10, (kernel, dtype, cols, rule)  # bytes of dy and x per SM
            assert algo.grid(rule, (8192, cols), h200) == h200.multiprocessors * rule["BPS"]
            assert rule["TPR"] * rule["VEC"] * rule["ITEMS"] < 2 * cols  # at most half the lanes idle


# --- compiles ------------------------------------------------------------------------------------------------------
def _compile(jobs, cache_dir, arch: str = "sm_90a"):
    compiler = Compiler(arch, cache_dir=cache_dir)
    try:
        futures = [(label, space, config, compiler.submit(space.template_for(config), space.defines(config)))
                   for label, space, config in jobs]  # fmt: skip
        return [(label, space, config, f.result()) for label, space, config, f in futures]
    finally:
        compiler.close()


def _check(results):
    failed = [(label, config, r.error) for label, _, config, r in results if not r.ok]
    assert not failed, failed[:3]
    spilled = [(label, config, r.spill_bytes) for label, _, config, r in results if r.spill_bytes]
    assert not spilled, spilled[:3]
    for label, space, config, result in results:
        kernels = {s.kernel for s in space.launches(config, label[2], H200) if isinstance(s, Launch)}
        assert kernels <= set(result.kernels), (label, kernels)
        if config[ALGO] == "persistent":  # the registers ptxas fit BPS blocks in
            main = result.kernels["layernorm_backward_persistent"]
            assert main.registers <= space.algos["persistent"].register_cap(config, H200), (label, config)


@pytest.mark.nvcc
def test_rule_defaults_compile_without_spills(h200, cache_dir):
    jobs = []
    for kernel, dtype in VARIANTS:
        space = get_space(kernel, dtype=dtype)
        for cols in (768, 1024, 4096, 8192, 3001, 16384):
            rule = space.rule_default((8192, cols), h200)
            jobs.append(((kernel, dtype, (8192, cols)), space, rule))
    _check(_compile(jobs, cache_dir))


def sample_persistent(space, device, shape, n: int, seed: int) -> list[dict]:
    """Up to ``n`` distinct random valid configurations (few exist for the longest rows)."""
    rng = random.Random(seed)
    found: dict[str, dict] = {}
    for _ in range(20000):
        config = random_config(space, rng)
        if not space.violations(config, shape, device):
            found.setdefault(config_key(config), config)
            if len(found) == n:
                break
    return list(found.values())


@pytest.mark.nvcc
@pytest.mark.parametrize("kernel, dtype", VARIANTS)
def test_sampled_persistent_configs_compile_without_spills(kernel, dtype, h200, cache_dir):
    space = persistent(kernel, dtype)
    jobs = []
    for i, cols in enumerate((768, 3001, 8192, 12288)):
        shape = (8192, cols)
        jobs += [((kernel, dtype, shape), space, c) for c in sample_persistent(space, h200, shape, 2, seed=i)]
    assert len(jobs) >= 6
    _check(_compile(jobs, cache_dir))


@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_fused_configs_compile_without_spills(arch, h200, cache_dir):
    """FUSE=1 (the finalize in the main kernel's last blocks): the rule default with FUSE narrowed to 1 and random
    valid configurations, every variant, for the H100/H200 and for the A100; no spills, registers within BPS
    blocks' share."""
    jobs = []
    for i, (kernel, dtype) in enumerate(VARIANTS):
        space = persistent(kernel, dtype, FUSE=[1])
        for cols in ((768, 3001), (1024, 8192))[i % 2]:
            shape = (8192, cols)
            rule = space.rule_default(shape, h200)
            assert rule["FUSE"] == 1  # the rule keeps to a narrowed domain
            configs = [rule, *sample_persistent(space, h200, shape, 2, seed=i)]
            if arch == "sm_80":  # cp.async is there; nothing else of the template asks for sm_90
                assert all(c["FUSE"] == 1 for c in configs)
            jobs += [((kernel, dtype, shape), space, c) for c in configs]
    assert len(jobs) >= 30
    _check(_compile(jobs, cache_dir, arch))
