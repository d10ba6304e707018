"""Every kernel space, without a GPU: defaults, constraints, launch plans, references, and nvcc compiles."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

from autotune import dtypes
from autotune.compiler import Compiler
from autotune.spaces import Launch, Zero, config_key, get_space, kernel_names
from autotune.spaces.base import UNIFORM
from autotune.templates import _sources, template_path

KERNELS = kernel_names()
LIBRARY = [k for k in KERNELS if k != "gemm"]  # gemm has its own module


def template_defaults(space, config) -> dict[str, int]:
    defaults = {}
    for _, data in _sources(template_path(space.template_for(config))):
        text = data.decode()
        defaults.update({m[0]: int(m[1]) for m in re.findall(r"#ifndef (\w+)\n#define \1 (-?\d+)[^\n]*\n#endif", text)})
    return defaults


def test_the_library_is_complete():
    expected = {"sgemv", "sum", "max", "softmax", "layernorm", "layernorm_backward", "rmsnorm",
                "add", "relu", "sigmoid", "gelu", "gemm"}  # fmt: skip
    assert expected <= set(KERNELS)


def default_configs(space) -> list[dict]:
    """The default configuration of a plain space; of a family, each algorithm's."""
    if not space.algos:
        return [dict(space.default_config)]
    return [{"ALGO": name, **algo.default_config} for name, algo in space.algos.items()]


@pytest.mark.parametrize("kernel", KERNELS)
def test_default_config_is_the_templates_and_valid_everywhere(kernel, h200):
    space = get_space(kernel)
    for config in default_configs(space):
        defaults = template_defaults(space, config)
        rendered = space.defines(config)
        skip = ("OP", "DTYPE")  # chosen by the kernel and the problem, not tuned
        mismatched = {k: (v, defaults.get(k)) for k, v in rendered.items() if k not in skip and defaults.get(k) != v}
        assert not mismatched, f"default configuration and template macro defaults disagree ({config.get('ALGO')})"
    config = space.default_config
    for shape in [space.default_shape, *(s for s, _ in space.validation_cases(space.default_shape))]:
        assert space.violations(config, shape, h200) == [], shape


@pytest.mark.parametrize("kernel", KERNELS)
def test_launch_plans_name_known_buffers(kernel, h200):
    space = get_space(kernel)
    rng = random.Random(0)
    shape = space.default_shape
    for _ in range(30):
        config = space.random_config(rng)
        if space.violations(config, shape, h200):
            continue
        known = set(space.input_specs(shape)) | set(space.outputs(shape)) | set(space.workspace(config, shape))
        for step in space.launches(config, shape, h200):
            if isinstance(step, Zero):
                assert step.buffer in known
                continue
            assert isinstance(step, Launch)
            assert all(a in known for a in step.args if isinstance(a, str)), (step.kernel, step.args)
            assert all(isinstance(a, (str, np.generic)) for a in step.args), "scalars carry their C type"
            assert all(g >= 1 for g in step.grid) and 1 <= step.block[0] <= 1024


@pytest.mark.parametrize("kernel", KERNELS)
def test_references_and_shape_inference(kernel):
    space = get_space(kernel)
    rng = np.random.default_rng(0)
    for shape, kind in space.validation_cases(space.default_shape)[:4]:
        inputs = space.inputs(shape, rng) if kind == UNIFORM else space.inputs(shape, rng, kind)
        specs = space.input_specs(shape)
        assert set(inputs) == set(specs)
        for name, array in inputs.items():
            assert array.shape == specs[name].shape and array.dtype == np.dtype(dtypes.dtype(specs[name].dtype).host)
        decoded = space.decoded_inputs(inputs, shape)
        for name, array in decoded.items():
            assert np.isfinite(array).any() and np.any(array != 0), "never zeros"
        refs = space.reference(decoded, shape)
        assert set(refs) == set(space.outputs(shape))
        for name, ref in refs.items():
            assert ref.dtype == np.float64 and ref.size == np.prod(space.outputs(shape)[name].shape)
            assert np.isfinite(ref).all()
        assert space.infer_shape({n: s.shape for n, s in specs.items()}) == tuple(shape)


def test_row_cache_constraint_depends_on_the_shape(h200):
    space = get_space("softmax")
    cached = {**space.default_config, "CACHE": 1, "ITEMS": 8}  # a warp, float4: 32*4*8 = 1024 columns
    assert space.violations(cached, (8192, 768), h200) == []
    assert "do not fit the register cache" in space.violations(cached, (8192, 4096), h200)[0]


def test_softmax_inputs_hold_minus_infinity_and_large_values():
    x = get_space("softmax").inputs((64, 1000), np.random.default_rng(1))["x"]
    assert np.isneginf(x).any() and (x > 80).any() and not np.isneginf(x).all(axis=1).any()


def test_layernorm_inputs_hold_constant_rows():
    x = get_space("layernorm").inputs((20, 300), np.random.default_rng(1))["x"]
    assert (x.std(axis=1) == 0).sum() >= 4


def sample_valid(space, shape, device, n, seed):
    rng = random.Random(seed)
    seen, out = set(), []
    for _ in range(5000):
        config = space.random_config(rng)
        if config_key(config) not in seen and not space.violations(config, shape, device):
            seen.add(config_key(config))
            out.append(config)
            if len(out) == n:
                break
    return out


@pytest.mark.nvcc
def test_sampled_configs_of_every_template_compile(h200, cache_dir):
    compiler = Compiler("sm_90", cache_dir=cache_dir)
    jobs = []
    try:
        for kernel in LIBRARY:
            space = get_space(kernel)
            for config in [dict(space.default_config), *sample_valid(space, space.default_shape, h200, 6, seed=7)]:
                jobs.append((kernel, config, compiler.submit(space.template_for(config), space.defines(config))))
        failures = []
        for kernel, config, future in jobs:
            result = future.result()
            if not result.ok:
                failures.append((kernel, config, result.error))
                continue
            space = get_space(kernel)
            launched = {s.kernel for s in space.launches(config, space.default_shape, h200) if isinstance(s, Launch)}
            assert launched <= set(result.kernels), (kernel, launched, set(result.kernels))
            spills = result.spill_bytes
            assert spills == 0, f"{kernel} {config} spills {spills} bytes"
    finally:
        compiler.close()
    assert not failures, failures[:3]
