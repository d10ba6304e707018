"""gemm_nt, gemm_tn and linear (autotune/spaces/gemm_layouts.py, linear.py): gemm with an operand stored the other
way, and with a bias. Each algorithm computes the stored layout natively, by swapping a vector's operands, or
after a transposed copy that its launch plan holds."""

import numpy as np
import pytest

from autotune.errors import InvalidArgument
from autotune.spaces import ALGO, Launch, TensorMap, _gemm_rules, get_space, kernel_names
from autotune.spaces.gemm_layouts import relabel
from autotune.spaces.gemm_wgmma_tma import BK

from conftest import H200
from space_checks import assert_built_without_spills, compile_jobs, sample_valid

FAMILIES = ("gemm_nt", "gemm_tn", "linear")
DTYPES = ("float32", "float16", "bfloat16")
# Every shape class of gemm's rules: M 1, ≤ 16, ≤ 64, ≤ 256, large; one column, narrow, deep, wide; ragged sizes.
SHAPES = [(1, 4096, 4096), (4096, 1, 4096), (8, 3072, 768), (61, 768, 3072), (200, 2304, 768), (8192, 3072, 768),
          (8192, 768, 3072), (768, 3072, 8192), (64, 64, 65536), (333, 264, 104), (67, 131, 33), (1, 1, 77)]
TRANSPOSED = {"gemm_nt": "B", "gemm_tn": "A", "linear": "B"}
NATIVE = ("wgmma_tma", "wgmma_tma_streamk", "wgmma_tf32x3", "wgmma_skinny")  # read the stored layout themselves


def stored(family: str, shape: tuple) -> tuple:
    m, n, k = shape
    return (n, k) if TRANSPOSED[family] == "B" else (k, m)


@pytest.fixture(params=[(f, d) for f in FAMILIES for d in DTYPES], ids=lambda p: f"{p[0]}-{p[1]}")
def space(request):
    return get_space(request.param[0], dtype=request.param[1])


def test_registered_with_gemms_algorithms_and_defaults(space):
    assert set(FAMILIES) <= set(kernel_names())
    gemm = get_space("gemm", dtype=space.dtype)
    assert list(space.algos) == list(gemm.algos)
    assert space.default_config == gemm.default_config
    for name, algo in space.algos.items():
        assert algo.default_config == gemm.algos[name].default_config
        assert [p.name for p in algo.parameters] == [p.name for p in gemm.algos[name].parameters]


def test_templates_are_gemms_own_or_with_the_layout_kernels(space):
    for name, algo in space.algos.items():
        base = get_space("gemm", dtype=space.dtype).algos[name].template
        assert algo.template == (base if name in NATIVE else f"layout_{base}"), name


def test_shapes_are_inferred_from_the_stored_operands(space):
    m, n, k = 33, 48, 72
    given = {"A": (m, k), "B": (k, n)}
    given[TRANSPOSED[space.name]] = stored(space.name, (m, n, k))
    if space.name == "linear":
        given["bias"] = (n,)
    assert space.infer_shape(given) == (m, n, k)
    assert {name: spec.shape for name, spec in space.input_specs((m, n, k)).items()} == given


@pytest.mark.parametrize(
    "family, given, match",
    [
        ("gemm_nt", {"A": (4, 8), "B": (6, 9)}, "A has 8 columns but B has 9: C = A·Bᵀ needs A \\(M, K\\) and B"),
        ("gemm_tn", {"A": (8, 4), "B": (9, 6)}, "A has 8 rows but B has 9: C = Aᵀ·B needs A \\(K, M\\)"),
        ("gemm_nt", {"A": (4, 8), "B": (8,)}, "B must be a 2-D matrix"),
        ("gemm_tn", {"A": (0, 4), "B": (0, 6)}, "is empty"),
        ("linear", {"A": (4, 8), "B": (6, 8), "bias": (4,)}, "bias has shape \\(4,\\).*needs a bias of \\(6,\\)"),
        ("linear", {"A": (4, 8), "B": (6, 8), "bias": (1, 6)}, "bias has shape \\(1, 6\\)"),
    ],
)
def test_mismatched_operands_get_one_clear_line(family, given, match):
    with pytest.raises(InvalidArgument, match=match):
        get_space(family, dtype="bfloat16").infer_shape(given)


@pytest.mark.parametrize("kind", ["uniform", "wide"])
def test_reference_is_gemms_on_the_stored_operand_transposed(space, kind):
    shape = (37, 24, 40)
    inputs = space.inputs(shape, np.random.default_rng(3), kind)
    name = TRANSPOSED[space.name]
    assert inputs[name].shape == stored(space.name, shape) and inputs[name].flags.c_contiguous
    decoded = space.decoded_inputs(inputs, shape)
    a, b = decoded["A"], decoded["B"]
    expect = (a @ b.T) if space.name != "gemm_tn" else (a.T @ b)
    if space.name == "linear":
        expect = expect + decoded["bias"][None, :]
    atol = 1e-12 * np.abs(expect).max()  # float64 sums in another order: cancellation differs at ~1e-16
    np.testing.assert_allclose(space.reference(decoded, shape)["C"], expect, rtol=1e-12, atol=atol)
    gemm = get_space("gemm", dtype=space.dtype)
    plain = {"A": a.T if name == "A" else a, "B": b.T if name == "B" else b}
    product = gemm.reference(plain, shape)["C"]
    np.testing.assert_allclose(expect - (decoded["bias"][None, :] if space.name == "linear" else 0), product,
                               rtol=1e-12, atol=atol)  # fmt: skip


def test_tolerances_and_validation_are_gemms(space):
    gemm = get_space("gemm", dtype=space.dtype)
    assert space.tolerance("C", (64, 64, 64)) == gemm.tolerance("C", (64, 64, 64))
    assert space.baseline_config() == gemm.baseline_config()
    cases = space.validation_cases((4096, 4096, 4096))
    assert cases[: len(gemm.validation_cases((4096, 4096, 4096)))] == gemm.validation_cases((4096, 4096, 4096))
    if space.name == "gemm_tn" and space.dtype != "float32":
        native = space.algos["wgmma_tma"]
        assert [s for s, _ in cases if native.unfit(s, H200) is None], "a case the TMA path takes"
        assert any(s[2] % 8 and native.unfit(s, H200) is None for s, _ in cases), "ragged K, natively"


def _copy_plans(space, config, shape):
    gemm = get_space("gemm", dtype=space.dtype)
    return space.launches(config, shape, H200), gemm.launches(config, shape, H200)


@pytest.mark.parametrize("shape", [(333, 264, 104), (67, 131, 33), (8192, 3072, 768)])
def test_copying_algorithms_transpose_first_then_run_gemms_plan(space, shape):
    name = TRANSPOSED[space.name]
    for algo in space.algos:
        if algo in (*NATIVE, "gemv"):
            continue
        config = {ALGO: algo, **space.algos[algo].default_config}
        ours, gemms = _copy_plans(space, config, shape)
        copy = ours[0]
        rows, cols = stored(space.name, shape)
        assert copy.kernel == "gemm_transpose" and copy.args[:2] == (name, name + "T")
        assert (int(copy.args[2]), int(copy.args[3])) == (rows, cols)
        assert copy.grid[0] * 32 >= cols and copy.grid[1] * 32 >= rows
        body = ours[1:-1] if space.name == "linear" else ours[1:]
        assert body == relabel(gemms, {name: name + "T"})
        ws = space.workspace(config, shape)
        assert ws[name + "T"].shape == (cols, rows) and ws[name + "T"].dtype == space.dtype
        if space.name == "linear":
            assert ours[-1].kernel == "gemm_bias_add" and ours[-1].args[:2] == ("C", "bias")
            assert int(ours[-1].args[2]) == shape[0] * shape[1] and int(ours[-1].args[3]) == shape[1]


def test_relabel_renames_buffers_in_arguments_maps_and_zeroings():
    from autotune.spaces import Zero

    steps = [Zero("B"), Launch("k", (1, 1, 1), (32, 1, 1), 0,
                                (TensorMap("B", "float16", (8, 8), (8, 8)), "A", "B", np.int32(3)))]  # fmt: skip
    out = relabel(steps, {"A": "B", "B": "A"})
    assert out[0] == Zero("A")
    assert out[1].args[0].buffer == "A" and out[1].args[1:3] == ("B", "A") and out[1].args[3] == 3


@pytest.mark.parametrize("family", ["gemm_nt", "linear", "gemm_tn"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_the_tma_algorithm_reads_the_stored_layout_itself(family, dtype):
    space = get_space(family, dtype=dtype)
    shape = (8192, 3072, 768)
    for split in (1, 4):
        config = {ALGO: "wgmma_tma", **space.algos["wgmma_tma"].default_config, "SPLIT_K": split}
        ours = space.launches(config, shape, H200)
        gemm = get_space("gemm", dtype=dtype).launches(config, shape, H200)
        main = ours[0]
        assert main.kernel == "gemm_wgmma_tma" and main.grid == gemm[0].grid and main.block == gemm[0].block
        a_map, b_map = main.args[:2]
        m, n, k = shape
        if family == "gemm_tn":
            assert a_map == TensorMap("A", dtype, dims=(m, k), box=(64, BK)) and b_map == gemm[0].args[1]
        else:
            assert b_map == TensorMap("B", dtype, dims=(k, n), box=(BK, 64)) and a_map == gemm[0].args[0]
        assert not a_map.problems() and not b_map.problems()
        defines = space.defines(config)
        flag = "A_MN_MAJOR" if family == "gemm_tn" else "B_K_MAJOR"
        assert defines[flag] == 1 and defines.get("GEMM_BIAS", 0) == (family == "linear")
        args = main.args[2:]
        if family == "linear":  # the bias pointer follows the output; with a split, bias_add after the reduce
            assert args[1] == "bias"
            args = args[:1] + args[2:]
            tail = [s.kernel for s in ours[1:]]
            assert tail == (["gemm_splitk_reduce", "gemm_bias_add"] if split > 1 else [])
        assert args == gemm[0].args[2:]


@pytest.mark.parametrize("family", FAMILIES)
def test_3xtf32_splits_the_stored_operand_as_it_is(family):
    """wgmma_tf32x3's pre-pass writes both operands K-major: B stored N×K is split without a transpose, A stored
    K×M with one; everything else is gemm's plan (linear: the bias after the output, bias_add after a reduce)."""
    space, gemm = get_space(family, dtype="float32"), get_space("gemm", dtype="float32")
    shape = (1000, 264, 1030)
    m, n, k = shape
    for split in (1, 2):
        config = {ALGO: "wgmma_tf32x3", **space.algos["wgmma_tf32x3"].default_config, "SPLIT_K": split}
        ours, theirs = space.launches(config, shape, H200), gemm.launches(config, shape, H200)
        assert [s.kernel for s in ours[:3]] == ["gemm_tf32_split", "gemm_tf32_split", "gemm_wgmma_tma"]
        split_a, split_b, main = ours[:3]
        if family == "gemm_tn":  # A stored K×M: transposed; B as gemm's
            assert [int(x) for x in split_a.args[3:]] == [k, m, 1, 1032] and split_b == theirs[1]
            assert split_a.grid == (32, 33, 1)
        else:  # B stored N×K: split as it is; A as gemm's
            assert [int(x) for x in split_b.args[3:]] == [n, k, 0, 1032] and split_a == theirs[0]
            assert split_b.grid == (33, 9, 1)
        args = main.args
        if family == "linear":
            assert args[5] == "bias" and space.defines(config)["GEMM_BIAS"] == 1
            args = args[:5] + args[6:]
            assert [s.kernel for s in ours[3:]] == (["gemm_splitk_reduce", "gemm_bias_add"] if split > 1 else [])
        else:
            assert ours[3:] == theirs[3:] and "GEMM_BIAS" not in space.defines(config)
        assert args == theirs[2].args
        assert space.workspace(config, shape) == gemm.workspace(config, shape)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_tma_alignment_follows_the_stored_rows(dtype):
    nt, tn = (get_space(f, dtype=dtype).algos["wgmma_tma"] for f in ("gemm_nt", "gemm_tn"))
    # gemm_nt: rows of A and of B as stored are K long; N is free.
    assert nt.unfit((100, 131, 64), H200) is None
    assert "K must be multiples of 8" in nt.unfit((100, 128, 65), H200)
    # gemm_tn: rows are M (A stored K×M) and N long; K is free.
    assert tn.unfit((136, 72, 333), H200) is None
    reason = tn.unfit((130, 72, 64), H200)
    assert "M and N must be multiples of 8" in reason and "M=130" in reason


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_gemv_swaps_operands_where_a_vector_makes_the_layouts_alike(family, dtype):
    space, gemm = get_space(family, dtype=dtype), get_space("gemm", dtype=dtype)
    config = {ALGO: "gemv", **space.algos["gemv"].default_config, "SPLIT_K": 2}
    m, k = 1 if family != "gemm_tn" else 4096, 4096
    n = 3072 if family != "gemm_tn" else 1
    ours = space.launches(config, (m, n, k), H200)
    swapped = (n, 1, k) if family != "gemm_tn" else (1, m, k)
    expect = relabel(gemm.launches(config, swapped, H200), {"A": "B", "B": "A"})
    assert ours[: len(expect)] == expect
    assert [s.kernel for s in ours[len(expect):]] == (["gemm_bias_add"] if family == "linear" else [])
    ws, gws = space.workspace(config, (m, n, k)), gemm.workspace(config, swapped)
    assert {name: s.nbytes for name, s in ws.items()} == {name: s.nbytes for name, s in gws.items()}
    # The other vector case is gemm's own layout: the same plan, no copy.
    other = (4096, 1, k) if family != "gemm_tn" else (1, 3072, k)
    plain = space.launches(config, other, H200)
    assert plain[: len(gemm.launches(config, other, H200))] == gemm.launches(config, other, H200)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_rule_defaults_are_valid_in_every_shape_class(space, shape):
    config = space.rule_default(shape, H200)
    assert space.violations(config, shape, H200) == [], (config, shape)
    gemm = get_space("gemm", dtype=space.dtype)
    if space.dtype != "float32" and shape[2] % 8 == 0 and gemm.rule_default(shape, H200)[ALGO] == "wgmma_tma":
        assert config[ALGO] == "wgmma_tma"  # where gemm's rule takes TMA, the native layouts do too


def test_random_configurations_are_checked_like_gemms(space):
    shape = (1000, 768, 3072)
    for config in sample_valid(space, H200, shape, 40, seed=11):
        assert space.launches(config, shape, H200)
        assert all(not a.problems() for s in space.launches(config, shape, H200) if isinstance(s, Launch)
                   for a in s.args if isinstance(a, TensorMap))  # fmt: skip


@pytest.mark.nvcc
def test_defaults_rule_defaults_and_samples_compile_without_spills(cache_dir):
    jobs = []
    for family in FAMILIES:
        for dtype in DTYPES:
            space = get_space(family, dtype=dtype)
            configs = [dict(space.default_config)]
            configs += [space.rule_default(s, H200) for s in ((8192, 3072, 768), (1, 3072, 768), (768, 768, 8192))]
            configs += sample_valid(space, H200, (4096, 3072, 768), 2, seed=5)
            jobs += [(space, c, (4096, 3072, 768)) for c in configs]
    results = compile_jobs(jobs, "sm_90a", cache_dir)
    # Spills are asserted for defaults and rule defaults; a sampled SIMT tile may spill as gemm's may.
    checked = [(j, r) for i, (j, r) in enumerate(zip(jobs, results)) if i % 6 < 4]
    assert_built_without_spills([j for j, _ in checked], [r for _, r in checked])
    for (space, config, shape), result in zip(jobs, results):
        assert result.ok, (space.name, config, result.error)
        launched = {s.kernel for s in space.launches(config, shape, H200) if isinstance(s, Launch)}
        assert launched <= set(result.kernels), (space.name, space.dtype, launched, result.kernels)


def test_linear_layout_variants_keep_gemms_tuned_configurations_readable():
    # A configuration tuned for gemm renders for the layout families: same keys, same define values besides the
    # layout's own.
    for dtype in ("bfloat16", "float32"):
        gemm, nt = get_space("gemm", dtype=dtype), get_space("gemm_nt", dtype=dtype)
        for algo in nt.algos:
            c = {ALGO: algo, **nt.algos[algo].default_config}
            extra = set(nt.defines(c)) - set(gemm.defines(c))
            assert extra <= {"B_K_MAJOR"}, (algo, extra)


def test_a_tall_transposed_copy_walks_rows_past_the_grid_limit():
    """gridDim.y ≤ 65535: the copy's blocks walk rows of tiles beyond it, so any K (gemm_tn's dW over millions of
    tokens) keeps a valid plan."""
    space = get_space("gemm_tn", dtype="bfloat16")
    shape = (50257, 768, 4_194_304)  # an LM head's weight gradient over 4M tokens: M not a multiple of 8
    config = space.rule_default(shape, H200)
    assert space.violations(config, shape, H200) == []
    copy = space.launches(config, shape, H200)[0]
    assert copy.kernel == "gemm_transpose" and copy.grid[1] == 65535 and int(copy.args[2]) == shape[2]


@pytest.mark.parametrize(
    "family, tall, wide",
    [  # the pre-pass puts rows of 32×32 tiles on gridDim.y: K-major rows of M (or N) not transposed, else of K
        ("gemm", [(4_194_304, 512, 512), (256, 64, 4_194_304)], []),
        ("linear", [(4_194_304, 512, 512)], [(256, 64, 4_194_304)]),
        ("gemm_tn", [(256, 64, 4_194_304)], [(4_194_304, 512, 512)]),
    ],
)
def test_the_3xtf32_pre_pass_is_refused_past_the_grid_limit(family, tall, wide):
    space = get_space(family, dtype="float32")
    config = {ALGO: "wgmma_tf32x3", **space.algos["wgmma_tf32x3"].default_config}
    for shape in tall:
        assert any("split pre-pass would need" in p for p in space.violations(config, shape, H200)), shape
    for shape in wide:  # its tile rows on gridDim.x (up to 2^31 - 1)
        assert not any("split pre-pass" in p for p in space.violations(config, shape, H200)), shape
    for shape in tall + wide:
        assert space.violations(space.rule_default(shape, H200), shape, H200) == [], shape


@pytest.mark.parametrize("family", ["gemm_nt", "linear"])
def test_few_rows_read_the_weight_as_stored_instead_of_copying_it(family):
    """Decoding (a few rows): copying the weight would move it three times over. Up to 128 rows the rule takes
    wgmma_skinny, which reads it as stored; beyond, where gemm's rule would copy it, a 64×128 TMA tile that reads it
    as stored too, split along K. Where the copy is small next to the product, gemm's rule stands."""
    space = get_space(family, dtype="bfloat16")
    for shape in ((16, 4096, 14336), (2, 6144, 4096), (47, 4096, 4096), (137, 4096, 4096)):
        config = space.rule_default(shape, H200)
        if shape[0] <= 128:
            assert config[ALGO] == "wgmma_skinny", shape
        else:
            assert (config[ALGO], config["BM"], config["BN"]) == ("wgmma_tma", 64, 128), shape
        kernels = [s.kernel for s in space.launches(config, shape, H200)]
        assert config["SPLIT_K"] > 1 and "gemm_transpose" not in kernels
    gemm = get_space("gemm", dtype="bfloat16")
    assert space.rule_default((333, 264, 104), H200) == gemm.rule_default((333, 264, 104), H200)


@pytest.mark.parametrize("family, shape, swapped", [("gemm_nt", (1, 4096, 4096), (4096, 1, 4096)),
                                                    ("linear", (1, 3072, 768), (3072, 1, 768)),
                                                    ("gemm_tn", (4096, 1, 4096), (1, 4096, 4096))])  # fmt: skip
def test_a_swapped_gemv_gets_the_rule_of_the_kernel_that_runs(family, shape, swapped):
    space, gemm = get_space(family, dtype="bfloat16"), get_space("gemm", dtype="bfloat16")
    assert space.rule_default(shape, H200) == _gemm_rules.gemv_rule(gemm, swapped, H200)


@pytest.mark.parametrize("family", ["gemm_nt", "gemm_tn", "linear"])
@pytest.mark.parametrize("change", [{}, {"SPLIT_K": 2}], ids=["whole", "split2"])
def test_native_tma_plans_compute_the_product_when_emulated(h200, family, change):
    """wgmma_tma reading the stored layout itself (B_K_MAJOR / A_MN_MAJOR, the bias in its epilogue or after the
    split-K reduce), its steps emulated in numpy on the buffers they name (`plan_emulation`)."""
    import numpy as np
    from plan_emulation import emulate

    space = get_space(family, dtype="bfloat16")
    shape = (264, 136, 520)
    config = {"ALGO": "wgmma_tma", **space.algos["wgmma_tma"].default_config, "BN": 128, "STAGES": 6, **change}
    assert space.violations(config, shape, h200) == []
    rng = np.random.default_rng(2)
    i = {name: rng.standard_normal(spec.shape) for name, spec in space.input_specs(shape).items()}
    expected = {"gemm_nt": lambda: i["A"] @ i["B"].T, "gemm_tn": lambda: i["A"].T @ i["B"],
                "linear": lambda: i["A"] @ i["B"].T + i["bias"]}[family]()  # fmt: skip
    assert np.allclose(emulate(space, config, shape, h200, i), expected, rtol=1e-10, atol=1e-9)
