"""Every kernel space, without a GPU: defaults, constraints, launch plans, references, and nvcc compiles."""

from __future__ import annotations

import random
import re
import shutil
import subprocess

import numpy as np
import pytest

from autotune import dtypes
from autotune.runtime.compiler import Compiler
from autotune.spaces import Launch, Zero, config_key, get_space, kernel_names
from autotune.spaces.base import UNIFORM, TensorMap
from autotune.spaces.enumeration import random_config
from autotune.spaces.gemm_layouts import LAYOUT_DEFINES
from autotune.templates import _sources, template_path

KERNELS = kernel_names()
# gemm and its layouts have their own modules (tests/test_spaces_gemm*.py)
LIBRARY = [k for k in KERNELS if k not in ("gemm", "gemm_nt", "gemm_tn", "linear", "linear_gelu")]


def template_defaults(space, config) -> dict[str, int]:
    """Each ``#ifndef X / #define X n`` default of a template and its includes; as in the preprocessor, the first
    definition wins (a template may set its own defaults, then include another template)."""
    defaults: dict[str, int] = {}
    for _, data in _sources(template_path(space.template_for(config))):
        for name, value in re.findall(r"#ifndef (\w+)\n#define \1 (-?\d+)[^\n]*\n#endif", data.decode()):
            defaults.setdefault(name, int(value))
    return defaults


def test_the_library_is_complete():
    expected = {"sgemv", "sum", "max", "softmax", "layernorm", "layernorm_backward", "rmsnorm",
                "add", "relu", "sigmoid", "gelu", "gemm", "rmsnorm_backward", "dot", "histogram"}  # fmt: skip
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
        # Chosen by the kernel and the problem, not tuned (the layouts and the bias: by the GEMM layout families).
        skip = ("OP", "DTYPE", "WDTYPE", "RMS", *LAYOUT_DEFINES)
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
        config = random_config(space, rng)
        if space.violations(config, shape, h200):
            continue
        known = set(space.input_specs(shape)) | set(space.outputs(shape)) | set(space.workspace(config, shape))
        for step in space.launches(config, shape, h200):
            if isinstance(step, Zero):
                assert step.buffer in known
                continue
            assert isinstance(step, Launch)
            assert all(a in known for a in step.args if isinstance(a, str)), (step.kernel, step.args)
            maps = [a for a in step.args if isinstance(a, TensorMap)]  # TMA descriptors over named buffers
            assert all(m.buffer in known and m.problems() == [] for m in maps), (step.kernel, maps)
            assert all(isinstance(a, (str, np.generic, TensorMap)) for a in step.args), "scalars carry their C type"
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


def test_the_cache_holds_rows_whose_chunks_start_early(h200):
    # Rows of a length no multiple of VEC start their first chunk up to VEC - 1 elements before the row (at an
    # aligned address): a cache of exactly `cols` elements is then one chunk short.
    space = get_space("softmax")
    cached = {**space.default_config, "CACHE": 1, "ITEMS": 8}  # 1024 elements
    assert space.violations(cached, (8, 1024), h200) == []
    assert "register cache" in space.violations(cached, (8, 1022), h200)[0]
    assert space.violations(cached, (8, 1021), h200) == []


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
        config = random_config(space, rng)
        if config_key(config) not in seen and not space.violations(config, shape, device):
            seen.add(config_key(config))
            out.append(config)
            if len(out) == n:
                break
    return out


@pytest.mark.nvcc
def test_sampled_configs_of_every_template_compile(h200, cache_dir):
    compiler = Compiler(h200.compile_arch, cache_dir=cache_dir)  # sm_90a: the H200's (and wgmma's) target
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


# --- dtypes ---------------------------------------------------------------------------------------------------
ROW_KERNELS = ["softmax", "layernorm", "rmsnorm", "layernorm_backward", "rmsnorm_backward"]
HALF = ("float16", "bfloat16")


# Opted into by name: TF32 tensor-core products of float32 storage, at TF32's tolerance (no half variant either)
REDUCED_PRECISION = ("gemm_tf32",)


@pytest.mark.parametrize(
    "kernel", [k for k in LIBRARY if get_space(k).supported_dtypes()[0] == "float32" and k not in REDUCED_PRECISION]
)
def test_every_library_kernel_answers_float32_and_both_halves(kernel):
    assert set(get_space(kernel).supported_dtypes()) == {"float32", "float16", "bfloat16"}


@pytest.mark.parametrize("kernel", LIBRARY)
@pytest.mark.parametrize("dtype", ["float32", *HALF])
def test_inputs_outputs_and_references_per_dtype(kernel, dtype, h200):
    cls = type(get_space(kernel))
    if dtype not in cls.supported_dtypes():
        pytest.skip(f"{kernel} has no {dtype}")
    space = get_space(kernel, dtype=dtype)
    shape = space.validation_cases(space.default_shape)[2][0]
    specs = space.input_specs(shape)
    inputs = space.inputs(shape, np.random.default_rng(0))
    for name, array in inputs.items():
        assert array.dtype == np.dtype(dtypes.dtype(specs[name].dtype).host), name
    # The reference sees the rounded values the kernel is given, and the problem's dtype renders as DTYPE.
    decoded = space.decoded_inputs(inputs, shape)
    refs = space.reference(decoded, shape)
    assert all(np.isfinite(r).all() for r in refs.values())
    assert space.defines(space.default_config)["DTYPE"] == dtypes.dtype(dtype).code
    for name, spec in space.outputs(shape).items():
        tol = space.tolerance(name, shape)
        assert tol >= 1e-3 if spec.dtype in HALF else tol <= (1e-2 if kernel in REDUCED_PRECISION else 1e-4), (
            name, spec.dtype, tol
        )
    assert space.violations(space.rule_default(space.default_shape, h200), space.default_shape, h200) == []


def test_statistics_stay_fp32_and_mixed_variants_take_fp32_weights():
    ln = get_space("layernorm", dtype="bfloat16")
    out = ln.outputs((4, 8))
    assert out["y"].dtype == "bfloat16" and out["mean"].dtype == out["rstd"].dtype == "float32"
    assert ln.input_specs((4, 8))["weight"].dtype == "bfloat16"
    mixed = get_space("layernorm_mixed", dtype="float16")
    assert mixed.input_specs((4, 8))["weight"].dtype == "float32" and mixed.defines(mixed.default_config)["WDTYPE"] == 0
    assert mixed.input_specs((4, 8))["x"].dtype == "float16"
    bwd = get_space("rmsnorm_backward_mixed", dtype="bfloat16")
    assert bwd.outputs((4, 8))["dweight"].dtype == "float32" and bwd.outputs((4, 8))["dx"].dtype == "bfloat16"
    assert "float32" not in type(mixed).supported_dtypes()
    assert get_space("sum", dtype="float16").outputs((8,))["out"].dtype == "float32"  # fp32 result


def test_vectors_wider_than_16_bytes_and_half_atomics_are_rejected(h200):
    f32, f16 = get_space("softmax"), get_space("softmax", dtype="float16")
    wide = {**f32.default_config, "VEC": 8}
    assert any("16" in p for p in f32.violations(wide, (64, 1024), h200))
    assert f16.violations(wide, (64, 1024), h200) == []  # 8 halves: one 16-byte access
    for kernel in ("layernorm_backward", "sum", "add", "sgemv"):
        assert get_space(kernel).violations({**get_space(kernel).default_config, "VEC": 8}, (64, 1024)[: len(get_space(kernel).dims)], h200)
    atomic = {**get_space("layernorm_backward").default_config, "ATOMIC": 1}
    assert get_space("layernorm_backward").violations(atomic, (64, 1024), h200) == []
    assert "fp32 only" in get_space("layernorm_backward", dtype="float16").violations(atomic, (64, 1024), h200)[0]
    assert get_space("layernorm_backward_mixed", dtype="float16").violations(atomic, (64, 1024), h200) == []


@pytest.mark.parametrize(
    "kernel, given, message",
    [
        ("softmax", {"x": "float64"}, "x has dtype float64"),
        ("add", {"x": "float16", "y": "float32"}, "y has dtype float32"),
        ("layernorm", {"x": "float16", "weight": "float32", "bias": "float32"}, "layernorm_mixed"),
        ("layernorm", {"x": "float16", "weight": "float16", "bias": "bfloat16"}, "bias has dtype bfloat16"),
        ("layernorm_mixed", {"x": "float16", "weight": "float16", "bias": "float16"}, "weight has dtype float16"),
        ("layernorm_mixed", {"x": "float32", "weight": "float32", "bias": "float32"}, "x has dtype float32"),
        ("layernorm_backward", {"dy": "bfloat16", "x": "bfloat16", "weight": "bfloat16", "mean": "bfloat16",
                                "rstd": "float32"}, "mean has dtype bfloat16"),
        ("rmsnorm_backward", {"dy": "float16", "x": "float32", "weight": "float16", "rstd": "float32"}, "x has dtype"),
    ],
)
def test_dtype_errors_name_the_argument(kernel, given, message):
    from autotune.errors import InvalidType

    with pytest.raises(InvalidType, match=message):
        type(get_space(kernel)).infer_dtype(given)


def test_dtype_inference_accepts_fp32_statistics_and_mixed_weights():
    assert type(get_space("layernorm_backward")).infer_dtype(
        {"dy": "float16", "x": "float16", "weight": "float16", "mean": "float32", "rstd": "float32"}) == "float16"
    assert type(get_space("rmsnorm_mixed")).infer_dtype({"x": "bfloat16", "weight": "float32"}) == "bfloat16"


# --- the half tolerance separates fp32 accumulation from half accumulation -------------------------------------
def _rmsnorm_like(x: np.ndarray, w: np.ndarray, acc: str) -> np.ndarray:
    """RMSNorm computed with its sum of squares accumulated column by column in ``acc`` (a row per thread, the
    crudest kernel), then the output rounded like the kernel's store."""
    ss = np.zeros(x.shape[0], dtype=acc)
    for j in range(x.shape[1]):
        ss = (ss + (x[:, j] * x[:, j]).astype(acc)).astype(acc)
    rstd = 1.0 / np.sqrt(ss.astype(np.float64) / x.shape[1] + 1e-6)
    return x * rstd[:, None] * w


@pytest.mark.parametrize("dtype", HALF)
def test_half_tolerance_passes_fp32_accumulation_and_fails_half_accumulation(dtype):
    space = get_space("rmsnorm", dtype=dtype)
    shape = (64, 3001)
    inputs = space.decoded_inputs(space.inputs(shape, np.random.default_rng(2)), shape)
    ref = space.reference(inputs, shape)["y"]
    tol = space.tolerance("y", shape)
    half_acc = "float16"  # numpy has no bfloat16 arithmetic: float16 stands for a half accumulator (bf16's is worse)
    for acc, passes in (("float32", True), (half_acc, False)):
        got = dtypes.round_to(_rmsnorm_like(inputs["x"], inputs["weight"], acc), dtype)
        err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
        assert (err <= tol) == passes, (acc, err, tol)


def test_rule_defaults_follow_the_shape(h200):
    sm = get_space("softmax", dtype="float16")
    narrow, wide, one = (sm.rule_default(s, h200) for s in [(8192, 768), (4096, 50257), (1, 12288)])
    assert narrow["MAPPING"] == "warp" and narrow["VEC"] == 8 and narrow["CACHE"] == 1
    # odd rows keep 16-byte vectors (shifted chunks); long half rows in shared memory
    assert (wide["MAPPING"], wide["BLOCK"], wide["VEC"], wide["CACHE"], wide["ITEMS"]) == ("block", 1024, 8, 2, 8)
    assert one["MAPPING"] == "block" and one["BLOCK"] >= 256
    mid = sm.rule_default((16384, 8192), h200)  # 1024 vectors: a block of 512 threads, two vectors each
    assert (mid["MAPPING"], mid["BLOCK"], mid["CACHE"], mid["ITEMS"]) == ("block", 512, 2, 2)
    mid32 = get_space("softmax").rule_default((16384, 8192), h200)  # fp32 that fits stays in registers
    assert (mid32["MAPPING"], mid32["BLOCK"], mid32["CACHE"], mid32["ITEMS"]) == ("block", 1024, 1, 2)
    assert get_space("layernorm", dtype="float16").rule_default((1024, 65536), h200)["STATS"] == "shifted_sumsq"
    assert get_space("softmax").rule_default((8192, 768), h200)["VEC"] == 4
    few = get_space("rmsnorm").rule_default((16, 768), h200)
    assert few["BLOCK"] < narrow["BLOCK"]  # few rows: fewer rows per block, so more blocks
    for kernel in LIBRARY:
        space = get_space(kernel)
        rows = [(8192, 768), (1, 12288), (1024, 65536), (4096, 50257)]
        for shape in {1: [(1 << 26,)], 2: rows}.get(len(space.dims), [space.default_shape]):
            assert space.violations(space.rule_default(shape, h200), shape, h200) == [], (kernel, shape)


@pytest.mark.nvcc
def test_half_and_mixed_configs_compile_without_spills(h200, cache_dir):
    compiler = Compiler(h200.compile_arch, cache_dir=cache_dir)
    jobs = []
    try:
        for kernel in LIBRARY:
            for dtype in HALF:
                if dtype not in type(get_space(kernel)).supported_dtypes():
                    continue
                space = get_space(kernel, dtype=dtype)
                shape = space.default_shape
                for config in [space.rule_default(shape, h200), *sample_valid(space, shape, h200, 1, seed=3)]:
                    jobs.append((kernel, dtype, config, compiler.submit(space.template_for(config), space.defines(config))))
        failures = [(k, d, c, f.result().error) for k, d, c, f in jobs if not f.result().ok]
        assert not failures, failures[:3]
        spills = [(k, d, c) for k, d, c, f in jobs if f.result().spill_bytes]
        assert not spills, spills[:3]
    finally:
        compiler.close()


# --- dot and histogram ----------------------------------------------------------------------------------------
def test_histogram_drops_out_of_range_values_and_validates_with_them(h200):
    space = get_space("histogram")
    values = np.array([0, 3, 3, -1, 4, 2**31 - 1, -(2**31), 1], dtype=np.int32)
    base = np.array([10, 0, 0, 5], dtype=np.int32)
    counts = space.reference({"values": values, "base": base}, (8, 4))["counts"]
    assert counts.tolist() == [11, 1, 0, 7]  # -1, 4 and the int32 extremes count nowhere
    inputs = space.inputs((100_003, 256), np.random.default_rng(0))
    v = inputs["values"]
    assert (v < 0).any() and (v >= 256).any() and (v == -(2**31)).any() and (v == 2**31 - 1).any()
    assert space.tolerance("counts", (10, 4)) == 0.0
    big = {**space.default_config, "SMEM": 1, "REPLICAS": 8}
    assert "shared memory" in space.violations(big, (1 << 20, 8192), h200)[0]
    assert space.rule_default((1 << 20, 1 << 20), h200)["SMEM"] == 0  # a million bins: global atomics
    assert space.infer_shape({"values": (1000,), "base": (256,)}) == (1000, 256)


def test_histogram_launch_geometry(h200):
    space = get_space("histogram")
    config = {**space.default_config, "REPLICAS": 4}
    init, main = space.launches(config, (1 << 20, 300), h200)
    assert init.kernel == "histogram_init" and main.shared_bytes == 4 * 300 * 4


def test_dot_answers_half_inputs_with_an_fp32_result():
    space = get_space("dot", dtype="bfloat16")
    assert space.outputs((100,))["out"].dtype == "float32" and space.input_specs((100,))["x"].dtype == "bfloat16"
    inputs = space.decoded_inputs(space.inputs((1000,), np.random.default_rng(0)), (1000,))
    assert space.reference(inputs, (1000,))["out"][0] == pytest.approx(float(inputs["x"] @ inputs["y"]))
    assert space.tolerance("out", (1 << 26,)) < 1e-3


# --- long rows: a cluster of blocks per row --------------------------------------------------------------------
def test_cluster_rows_need_sm90_and_long_rows_get_a_rule(h200):
    import dataclasses

    space = get_space("softmax")
    config = {**space.default_config, "MAPPING": "cluster", "CLUSTER": 8, "BLOCK": 512, "CACHE": 1, "ITEMS": 4}
    assert space.violations(config, (1024, 65536), h200) == []  # 8 x 512 threads x 4 x float4 = 65536
    assert "register cache" in space.violations(config, (1024, 65537), h200)[0]
    a100 = dataclasses.replace(h200, compute_capability=(8, 0), name="NVIDIA A100")
    assert any("compute capability 9.0" in p for p in space.violations(config, (1024, 65536), a100))
    assert space.rule_default((1024, 65536), a100)["MAPPING"] != "cluster"
    assert "CLUSTER only matters" in space.violations({**space.default_config, "CLUSTER": 4}, (8, 64), h200)[0]
    (launch,) = space.launches(config, (1000, 65536), h200)
    assert launch.grid == (8000, 1, 1) and launch.block == (512, 1, 1)
    for kernel in ("softmax", "layernorm", "rmsnorm"):
        for shape in [(1024, 65536), (4096, 50257)]:
            rule = get_space(kernel).rule_default(shape, h200)
            # fp32 rows too long for one block's shared memory: a cluster of 512-thread blocks, each caching its
            # part in shared memory with at most 8 chunks per thread
            expected = ("cluster", 4, 512, 2, 8)
            assert (rule["MAPPING"], rule["CLUSTER"], rule["BLOCK"], rule["CACHE"], rule["ITEMS"]) == expected, rule
            no_clusters = get_space(kernel).rule_default(shape, a100)
            assert (no_clusters["MAPPING"], no_clusters["CACHE"]) == ("block", 0), no_clusters  # re-read


def test_rows_cached_in_shared_memory(h200):
    f16, f32 = get_space("softmax", dtype="float16"), get_space("softmax")
    smem = {**f16.default_config, "MAPPING": "block", "BLOCK": 512, "VEC": 8, "CACHE": 2, "ITEMS": 16}
    assert f16.violations(smem, (1024, 65536), h200) == []  # 512 x 16 x 8 halves = 128 KiB
    (launch,) = f16.launches(smem, (1024, 65536), h200)
    assert launch.shared_bytes == 512 * 16 * 8 * 2
    wide = {**smem, "VEC": 4, "ITEMS": 32}
    assert any("exceeds the device" in p for p in f32.violations(wide, (1024, 65536), h200))  # 256 KiB of fp32
    cluster = {**wide, "MAPPING": "cluster", "CLUSTER": 2, "ITEMS": 16}
    assert f32.violations(cluster, (1024, 65536), h200) == []  # each block of the pair holds half the row
    assert any("shared-memory cache" in p for p in f16.violations(smem, (1024, 65537), h200))
    assert any("cp.async" in p for p in f16.violations({**smem, "VEC": 1, "ITEMS": 32}, (8, 64), h200))
    assert f16.launches({**smem, "CACHE": 0, "ITEMS": 8}, (8, 64), h200)[0].shared_bytes == 0
    import dataclasses

    v100 = dataclasses.replace(h200, compute_capability=(7, 0), name="Tesla V100")
    assert any("cp.async" in p for p in f16.violations(smem, (1024, 65536), v100))
    old = f16.rule_default((1024, 65536), v100)
    assert (old["MAPPING"], old["CACHE"]) == ("block", 0) and f16.violations(old, (1024, 65536), v100) == []


@pytest.mark.nvcc
def test_rows_cached_in_shared_memory_compile_to_cp_async(cache_dir):
    compiler = Compiler("sm_90a", cache_dir=cache_dir)
    try:
        jobs = []
        for kernel in ("softmax", "layernorm", "rmsnorm"):
            for dtype in ("float32", "float16", "bfloat16"):
                space = get_space(kernel, dtype=dtype)
                config = {**space.default_config, "MAPPING": "block", "BLOCK": 256, "CACHE": 2, "ITEMS": 4,
                          "VEC": 16 // space.itemsize}  # fmt: skip
                jobs.append((kernel, dtype, compiler.submit(space.template_for(config), space.defines(config))))
        results = [(k, d, f.result()) for k, d, f in jobs]
        assert all(r.ok for _, _, r in results), [(k, d, r.error) for k, d, r in results if not r.ok][:2]
        assert not [(k, d) for k, d, r in results if r.spill_bytes]
        if shutil.which("cuobjdump") is None:
            pytest.skip("cuobjdump not found: compiled, SASS not checked")
        for kernel, dtype, result in results:
            sass = subprocess.run(["cuobjdump", "-sass", result.cubin], capture_output=True, text=True).stdout
            assert "LDGSTS" in sass, (kernel, dtype)  # the row's copies are cp.async
    finally:
        compiler.close()
