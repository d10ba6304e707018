"""Dump what every kernel space says about a deterministic sample of configurations, to JSON: run it before and
after a refactoring of autotune/spaces/ and compare (the two files must be identical byte for byte).

For every space and every dtype it supports, on three devices (H200, A100-like, RTX-like) and a handful of
shapes (the default shape, the first validation shapes, one shrunken shape and a few per-family shapes that
reach split-K, GEMV and split-KV paths), it records the parameters, default configuration, templates, the
dispatcher's answers (shape_key, shape_class, rule_default, for_problem's algorithms), the correctness hooks'
specs and tolerances, and for a seeded sample of configurations (uniform draws, valid or not) either the
violations (invalid) or the template, defines, compile defines, launch plan, workspace and description (valid).

Also the rule-based default of the space narrowed to one value of each parameter in turn (both ends of its
domain; families: each algorithm alone), where the rules fall back to defaults within narrowed domains.

Usage: python3 docs/results/2026-11-25b/dump_spaces.py OUT.json [ROOT]
ROOT: the directory whose autotune/ is dumped (default: this worktree), e.g. an exported older commit.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(sys.argv[2] if len(sys.argv) > 2 else Path(__file__).resolve().parents[3])
sys.path.insert(0, str(ROOT))  # that autotune, not an installed one

from autotune.device import DeviceInfo  # noqa: E402
from autotune.spaces import config_key, kernel_names, space_class  # noqa: E402
from autotune.spaces.enumeration import random_config, size  # noqa: E402

DEVICES = {
    "h200": DeviceInfo(
        name="NVIDIA H200", compute_capability=(9, 0), multiprocessors=132, l2_bytes=62914560,
        total_memory=150_754_820_096, max_threads_per_block=1024, smem_per_block=49152,
        smem_per_block_optin=232448, smem_per_multiprocessor=233472, registers_per_block=65536,
        registers_per_multiprocessor=65536, driver_version="580.159.04", cuda_driver_api="13.0",
    ),
    "a100": DeviceInfo(
        name="A100-like", compute_capability=(8, 0), multiprocessors=108, l2_bytes=41943040,
        total_memory=42_000_000_000, max_threads_per_block=1024, smem_per_block=49152,
        smem_per_block_optin=166912, smem_per_multiprocessor=167936, registers_per_block=65536,
        registers_per_multiprocessor=65536, driver_version="x", cuda_driver_api="12.0",
    ),
    "rtx": DeviceInfo(
        name="RTX-like", compute_capability=(8, 6), multiprocessors=84, l2_bytes=6291456,
        total_memory=24_000_000_000, max_threads_per_block=1024, smem_per_block=49152,
        smem_per_block_optin=101376, smem_per_multiprocessor=102400, registers_per_block=65536,
        registers_per_multiprocessor=65536, driver_version="x", cuda_driver_api="12.0",
    ),
}  # fmt: skip

EXTRA_SHAPES = {
    3: [(1, 4096, 4096), (127, 4096, 4096), (4096, 1, 4096), (1000, 333, 77), (64, 64, 65536)],
    5: [(2, 8, 1, 4096, 128), (1, 4, 1000, 1000, 64), (2, 2, 7, 33, 128), (1, 16, 2048, 2048, 256)],
    2: [(1, 65536), (8192, 128)],
    1: [(255,), (1 << 26,)],
}
DRAWS = 250  # uniform draws per (space, dtype, shape, device)
VALID_WANTED = 25  # and this many valid ones found by further draws (at most VALID_TRIES)
VALID_TRIES = 3000


def plain(x: Any) -> Any:
    """JSON-able form that keeps types visible (np.int32(5) -> "int32:5")."""
    if isinstance(x, np.generic):
        return f"{type(x).__name__}:{x.item()!r}"
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {"__type": type(x).__name__, **{f.name: plain(getattr(x, f.name)) for f in dataclasses.fields(x)}}
    if isinstance(x, dict):
        return {str(k): plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    if isinstance(x, Path):
        return f"path:{x}"
    if isinstance(x, float):
        return repr(x)
    return x


def attempt(fn: Any, *args: Any) -> Any:
    try:
        return plain(fn(*args))
    except Exception as exc:  # recorded: the same failure before and after is the same behaviour
        return f"raises {type(exc).__name__}: {exc}"


def describe_config(space: Any, config: dict, shape: tuple, device: DeviceInfo) -> dict:
    problems = space.violations(config, shape, device)
    if problems:
        return {"config": config_key(config), "violations": problems}
    return {
        "config": config_key(config),
        "template": attempt(space.template_for, config),
        "defines": attempt(space.defines, config),
        "compile_defines": attempt(space.compile_defines, config, shape),
        "launches": attempt(space.launches, config, shape, device),
        "workspace": attempt(space.workspace, config, shape),
        "describe": attempt(space.describe, config),
        "device_bytes": attempt(space.device_bytes, config, shape),
    }


def infer_cases(space: Any, shape: tuple) -> dict:
    """`infer_shape` from the inputs' own shapes, and with each input's shape spoiled (a dimension more, the
    last dimension one longer, emptied): the errors' texts are behaviour too."""
    try:
        given = {name: tuple(spec.shape) for name, spec in space.input_specs(shape).items()}
    except Exception as exc:
        return {"input_specs": f"raises {type(exc).__name__}: {exc}"}
    cases = {"as given": given}
    for name, dims in given.items():
        cases[f"{name} +dim"] = {**given, name: (*dims, 1)}
        cases[f"{name} longer"] = {**given, name: (*dims[:-1], dims[-1] + 1)} if dims else given
        cases[f"{name} empty"] = {**given, name: (*dims[:-1], 0)} if dims else given
    return {label: attempt(space.infer_shape, inputs) for label, inputs in cases.items()}


def infer_dtypes(cls: Any) -> dict:
    """`infer_dtype` for inputs all of one dtype, and with the last input in another."""
    names = list(cls(dtype=cls.supported_dtypes()[0]).input_specs(cls.default_shape))
    out = {}
    for dtype in (*cls.supported_dtypes(), "float64"):
        out[dtype] = attempt(cls.infer_dtype, {n: dtype for n in names})
        for other in ("float32", "float16"):
            out[f"{dtype}+{other}"] = attempt(cls.infer_dtype, {**{n: dtype for n in names}, names[-1]: other})
    return out


def dump_space(name: str, dtype: str) -> dict:
    cls = space_class(name)
    space = cls(dtype=dtype)
    default = tuple(cls.default_shape)
    shapes = [default, *[tuple(s) for s in space.validation_shapes(default)[:3]]]
    shapes.append(tuple(max(1, d // 3) + 1 for d in default))
    shapes += EXTRA_SHAPES.get(len(default), []) if len(default) != 2 or name != "histogram" else []
    shapes = list(dict.fromkeys(shapes))
    out: dict[str, Any] = {
        "params": [[p.key, plain(p.values), p.doc] for p in space.params],
        "default_config": plain(space.default_config),
        "templates": plain(space.templates()),
        "size": size(space),
        "metric_unit": cls.metric_unit,
        "infer_dtype": infer_dtypes(cls),
        "shapes": {},
    }
    for shape in shapes:
        entry: dict[str, Any] = {
            "work": attempt(space.work, shape),
            "problem_defines": attempt(space.problem_defines, shape),
            "input_specs": attempt(space.input_specs, shape),
            "outputs": attempt(space.outputs, shape),
            "tolerance": {o: attempt(space.tolerance, o, shape) for o in space.outputs(shape)}
            if not isinstance(attempt(space.outputs, shape), str) else None,
            "validation_cases": attempt(space.validation_cases, shape),
            "shape_key": attempt(space.shape_key, shape),
            "shape_class": attempt(space.shape_class, shape),
            "baseline": attempt(space.baseline_config),
            "infer_shape": infer_cases(space, shape),
            "devices": {},
        }
        for dev_name, device in DEVICES.items():
            narrowed = None
            try:
                narrowed = space.for_problem(shape, device)
                algos = plain(narrowed.params[0].values) if space.algorithms else None
            except Exception as exc:
                algos = f"raises {type(exc).__name__}: {exc}"
            rule = attempt(space.rule_default, shape, device)
            sample_space = narrowed or space
            rng = random.Random(f"{name}/{dtype}/{shape}/{dev_name}")
            draws = [describe_config(space, random_config(sample_space, rng), shape, device) for _ in range(DRAWS)]
            valid, seen = [], set()
            for _ in range(VALID_TRIES):
                if len(valid) >= VALID_WANTED:
                    break
                config = random_config(sample_space, rng)
                key = config_key(config)
                if key in seen or space.violations(config, shape, device):
                    continue
                seen.add(key)
                valid.append(describe_config(space, config, shape, device))
            entry["devices"][dev_name] = {
                "for_problem": algos,
                "rule_default": rule,
                "rule_default_check": describe_config(space, dict(rule), shape, device)
                if isinstance(rule, dict) else None,
                "default_check": describe_config(space, dict(space.default_config), shape, device),
                "draws": draws,
                "valid": valid,
            }
        out["shapes"]["x".join(map(str, shape))] = entry
    out["narrowed_rule_default"] = narrowed_rules(cls, dtype, shapes)
    return out


def narrowed_rules(cls: Any, dtype: str, shapes: list) -> dict:
    space = cls(dtype=dtype)
    narrowings = []
    for p in space.params:
        for value in dict.fromkeys((p.values[0], p.values[-1])) if p.name != "ALGO" else p.values:
            narrowings.append({p.key: (value,)})
    out = {}
    for domains in narrowings:
        narrowed = cls(domains, dtype=dtype)
        label = json.dumps(plain(domains), sort_keys=True)
        out[label] = {
            "x".join(map(str, shape)) + "/" + dev: attempt(narrowed.rule_default, shape, device)
            for shape in shapes
            for dev, device in DEVICES.items()
        }
    return out


def main() -> None:
    result = {}
    for name in kernel_names():
        for dtype in space_class(name).supported_dtypes():
            result[f"{name}/{dtype}"] = dump_space(name, dtype)
    text = json.dumps(result, indent=1)  # keys in the order the spaces give them: order changes show too
    Path(sys.argv[1]).write_text(text)
    counts = sum(len(d["draws"]) + len(d["valid"]) for s in result.values() for e in s["shapes"].values()
                 for d in e["devices"].values())  # fmt: skip
    valid = sum(1 for s in result.values() for e in s["shapes"].values() for d in e["devices"].values()
                for c in d["draws"] + d["valid"] if "defines" in c)  # fmt: skip
    import autotune

    print(f"autotune from {Path(autotune.__file__).parent}: {len(result)} space/dtype pairs, {counts} "
          f"configurations ({valid} valid), sha256 {hashlib.sha256(text.encode()).hexdigest()}")  # fmt: skip


if __name__ == "__main__":
    main()
