"""Helpers the space tests share: a template's macro defaults, random valid configurations, compiling many."""

from __future__ import annotations

import dataclasses
import random
import re
import subprocess
from pathlib import Path
from typing import Any

from autotune.runtime.compiler import Compiler, CompileResult, find_nvcc
from autotune.spaces import config_key
from autotune.spaces.enumeration import random_config
from autotune.templates import template_path


def template_defaults(template: str) -> dict[str, int]:
    """The ``#ifndef X / #define X n / #endif`` defaults of a library template."""
    text = template_path(template).read_text()
    return {m[0]: int(m[1]) for m in re.findall(r"#ifndef (\w+)\n#define \1 (\d+)\n#endif", text)}


def sample_valid(space: Any, device: Any, shape: tuple, n: int, seed: int) -> list[dict]:
    """``n`` distinct random configurations valid for ``shape`` on ``device``."""
    rng = random.Random(seed)
    seen, out = set(), []
    while len(out) < n:
        config = random_config(space, rng)
        if config_key(config) not in seen and not space.violations(config, shape, device):
            seen.add(config_key(config))
            out.append(config)
    return out


def compile_all(space: Any, configs: list[dict], cache_dir: Any, arch: str = "sm_90a") -> list[CompileResult]:
    compiler = Compiler(arch, cache_dir=cache_dir)
    try:
        return [f.result() for f in [compiler.submit(space.template_for(c), space.defines(c)) for c in configs]]
    finally:
        compiler.close()


def compile_jobs(jobs: list[tuple[Any, dict, tuple]], arch: str, cache_dir: Any) -> list[CompileResult]:
    """Compile (space, config, shape) jobs side by side, with the defines the tuner passes (`compile_defines`)."""
    compiler = Compiler(arch, cache_dir=cache_dir)
    try:
        futures = [compiler.submit(s.template_for(c), s.compile_defines(c, sh)) for s, c, sh in jobs]
        return [f.result() for f in futures]
    finally:
        compiler.close()


def assert_built_without_spills(jobs: list[tuple[Any, dict, tuple]], results: list[CompileResult]) -> None:
    """Every job compiled, and none spilled (reported with the shape's last number: attention's head_dim)."""
    failed = [(s.name, s.dtype, c, r.error) for (s, c, _), r in zip(jobs, results) if not r.ok]
    assert not failed, failed[:2]
    spilled = [(s.dtype, c, sh[-1], r.spill_bytes) for (s, c, sh), r in zip(jobs, results) if r.spill_bytes]
    assert not spilled, spilled[:3]


def sm90a_ptxas_log(template: str, defines: dict, out_dir: Path) -> str:
    """nvcc's and ptxas's (-v) output of one uncached sm_90a compile of a library template, asserted to succeed: the
    notes (C75xx: wgmma serialised or fenced, C7508: setmaxnreg ignored) that the compile cache does not keep."""
    cmd = [find_nvcc(), "-cubin", "-O3", "-std=c++17", "-Xptxas", "-v",
           "-gencode=arch=compute_90a,code=sm_90a", *(f"-D{k}={v}" for k, v in sorted(defines.items())),
           "-o", str(Path(out_dir) / "k.cubin"), str(template_path(template))]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-2000:]
    return log


def assert_offered_on_compute_capability_9_0_only(space: Any, algorithm: str, config: dict, shape: tuple,
                                                  hopper: Any) -> None:
    """An sm_90a algorithm (wgmma, setmaxnreg run on 9.0 alone): unfit, refused and never proposed on Ampere, Ada
    and Blackwell descriptions of ``hopper``."""
    from autotune.spaces import ALGO, get_space

    for cc in [(8, 0), (8, 9), (10, 0)]:
        other = dataclasses.replace(hopper, compute_capability=cc)
        assert space.algos[algorithm].unfit(shape, other) is not None, cc
        assert space.violations(config, shape, other), cc
        assert algorithm not in get_space(space.name, dtype=space.dtype).for_problem(shape, other).domain(ALGO), cc
