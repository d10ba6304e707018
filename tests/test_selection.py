"""Which stored configuration the dispatcher runs (autotune.runtime.selection), without a GPU."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest

from autotune.errors import NotTuned
from autotune.runtime.selection import DEFAULT, NEAREST, TUNED, choose, describe_fallback, log_distance
from autotune.spaces import get_space

HASH = "ab" * 32
OLD = "cd" * 32


@dataclass
class Row:
    shape: str
    params: dict
    device_name: str = "NVIDIA H200"
    compute_capability: str = "9.0"
    dtype: str = "float32"
    template_hash: str = HASH

    @property
    def config(self):
        return self.params


@pytest.fixture
def space():
    return get_space("gemm")


def cfg(space, **change):
    return {**space.default_config, **change}


def test_exact_shape(space, h200):
    rows = [Row("1024x1024x1024", cfg(space, BM=64)), Row("4096x4096x4096", cfg(space, BM=256))]
    choice = choose(space, (4096, 4096, 4096), h200, rows, HASH)
    assert choice.source == TUNED and choice.config["BM"] == 256 and choice.reason == ""


def test_nearest_tuned_shape_in_log_space(space, h200):
    rows = [Row("1024x1024x1024", cfg(space, BM=64)), Row("4096x4096x4096", cfg(space, BM=256))]
    choice = choose(space, (3000, 3000, 3000), h200, rows, HASH)
    assert choice.source == NEAREST and choice.config["BM"] == 256
    assert "nearest tuned shape is 4096x4096x4096" in choice.reason
    assert "4096x4096x4096" in describe_fallback(choice)
    assert log_distance((1000, 10, 10), (10, 10, 10)) == pytest.approx(log_distance((10, 10, 10), (1000, 10, 10)))


def test_nearest_skips_configurations_invalid_here(space, h200):
    # The nearest row holds a configuration this device cannot run (too much shared memory): take the next.
    small_smem = dataclasses.replace(h200, smem_per_block_optin=48 * 1024)
    big = cfg(space, BM=256, BN=128, BK=32, PIPELINE="cp.async-4", WARPS_M=4, WARPS_N=2)
    assert space.violations(big, (2000,) * 3, small_smem)
    rows = [Row("2048x2048x2048", big, device_name="Small GPU"), Row("512x512x512", cfg(space, BM=64),
                                                                     device_name="Small GPU")]  # fmt: skip
    choice = choose(space, (2000, 2000, 2000), dataclasses.replace(small_smem, name="Small GPU"), rows, HASH)
    assert choice.source == NEAREST and choice.config["BM"] == 64


def test_default_when_nothing_fits(space, h200):
    choice = choose(space, (100, 100, 100), h200, [], HASH)
    assert choice.source == DEFAULT and choice.config == space.rule_default((100, 100, 100), h200)
    assert choice.config["ALGO"] == "tf32x3", "beyond 64 rows fp32 runs FP32-accurate on tensor cores"
    assert "no configuration of gemm tuned" in choice.reason


def test_other_device_is_never_used(space, h200):
    rows = [Row("4096x4096x4096", cfg(space, BM=256), device_name="NVIDIA H100 80GB HBM3")]
    choice = choose(space, (4096, 4096, 4096), h200, rows, HASH)
    assert choice.source == DEFAULT and "tuned only on NVIDIA H100 80GB HBM3 (cc 9.0)" in choice.reason
    other_cc = [Row("4096x4096x4096", cfg(space, BM=256), compute_capability="8.0")]
    assert choose(space, (4096, 4096, 4096), h200, other_cc, HASH).source == DEFAULT


def test_stale_template_is_never_used(space, h200):
    rows = [Row("4096x4096x4096", cfg(space, BM=256), template_hash=OLD)]
    choice = choose(space, (4096, 4096, 4096), h200, rows, HASH)
    assert choice.source == DEFAULT and "1 stale" in choice.reason


def test_other_dtype_is_ignored(space, h200):
    rows = [Row("4096x4096x4096", cfg(space, BM=256), dtype="float16")]
    assert choose(space, (4096, 4096, 4096), h200, rows, HASH).source == DEFAULT


def test_strict_raises_instead_of_falling_back(space, h200):
    rows = [Row("4096x4096x4096", cfg(space, BM=256))]
    assert choose(space, (4096,) * 3, h200, rows, HASH, strict=True).source == TUNED
    with pytest.raises(NotTuned, match="strict"):
        choose(space, (4000, 4096, 4096), h200, rows, HASH, strict=True)
    with pytest.raises(NotTuned, match="stale"):
        choose(space, (4096,) * 3, h200, [Row("4096x4096x4096", cfg(space), template_hash=OLD)], HASH, strict=True)


# --- GEMM shape classes and rule defaults ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "shape, klass",
    [
        ((1, 4096, 4096), ("1", "wide")),
        ((4096, 1, 4096), ("large", "col")),
        ((16, 4096, 4096), ("16", "wide")),
        ((40, 4096, 1024), ("64", "wide")),
        ((127, 4096, 4096), ("256", "wide")),
        ((16384, 128, 16384), ("large", "narrow")),
        ((1024, 1024, 65536), ("large", "deep")),
        ((4096, 4096, 4096), ("large", "wide")),
    ],
)
def test_gemm_shape_classes(space, shape, klass):
    assert space.shape_class(shape) == klass


def test_fallback_prefers_the_same_class_over_a_nearer_shape(space, h200):
    small = cfg(space, BM=16, BN=128, WARPS_M=1, WARPS_N=4, TM=4, TN=4, WNITER=1, SPLIT_K=4)
    rows = [Row("32x4096x4096", cfg(space, BM=32, WARPS_M=1)), Row("16x32768x32768", small)]
    assert log_distance((16, 4096, 4096), (32, 4096, 4096)) < log_distance((16, 4096, 4096), (16, 32768, 32768))
    choice = choose(space, (16, 4096, 4096), h200, rows, HASH)
    assert choice.source == NEAREST and choice.row.shape == "16x32768x32768" and choice.config == small


@pytest.mark.parametrize("shape", [(1, 4096, 4096), (4096, 1, 4096), (16, 4096, 4096), (16384, 128, 16384)])
def test_rule_default_not_the_square_winner(space, h200, shape):
    """With only 4096³ tuned, other classes run their rule default: GEMV for a row or a column, a small SIMT
    tile with split-K for 16 rows, 3xTF32 with split-K for a tall-skinny output."""
    winner = cfg(space, BM=256, BN=128, WARPS_M=4, WARPS_N=2, BK=16)
    assert space.violations(winner, shape, h200) == [], "the square winner would run here: the class decides"
    choice = choose(space, shape, h200, [Row("4096x4096x4096", winner)], HASH)
    assert choice.source == DEFAULT and "1 tuned for shapes of another class" in choice.reason
    config = choice.config
    assert space.violations(config, shape, h200) == []
    m, n, _ = shape
    if m == 1 or n == 1:
        assert config["ALGO"] == "gemv" and (n == 1 or config["SPLIT_K"] > 1)
    elif m <= 64:
        assert config["ALGO"] == "simt" and config["SPLIT_K"] > 1 and config["BM"] == 16
    else:  # FP32-accurate on tensor cores (mma.sync: a narrow output), split to fill the GPU
        assert config["ALGO"] == "tf32x3" and config["BM"] == 64


@pytest.mark.parametrize(
    "shape, expected",
    [((4096, 4096, 4096), {"ALGO": "wgmma_tf32x3", "BM": 64, "BN": 128, "SPLIT_K": 1}),
     ((4095, 4097, 1023), {"ALGO": "wgmma_tf32x3", "BM": 64, "BN": 128, "SPLIT_K": 1}),
     ((600, 1000, 4096), {"ALGO": "wgmma_tf32x3", "BM": 64, "BN": 64, "SPLIT_K": 1}),
     ((512, 512, 65536), {"ALGO": "wgmma_tf32x3", "BM": 64, "BN": 128, "SPLIT_K": 4}),
     ((127, 4096, 4096), {"ALGO": "tf32x3"}),
     ((16384, 128, 16384), {"ALGO": "tf32x3"})],  # fmt: skip
)
def test_fp32_rule_takes_wgmma_where_both_sides_are_wide(h200, shape, expected):
    """3xTF32 on wgmma where M and N exceed 256 (its pre-pass pays off): 64x128 tiles, else 64x64 where those
    fill the GPU, else split along K; 3xTF32 on mma.sync otherwise; and never wgmma before Hopper."""
    space = get_space("gemm", dtype="float32")
    config = space.rule_default(shape, h200)
    assert {k: config[k] for k in expected} == expected and space.violations(config, shape, h200) == []
    ampere = dataclasses.replace(h200, name="NVIDIA A100", compute_capability=(8, 0), multiprocessors=108)
    assert space.rule_default(shape, ampere)["ALGO"] == "tf32x3"


def test_rule_defaults_are_valid_everywhere(h200):
    import random

    rng = random.Random(5)
    shapes = [(rng.choice([1, 2, 7, 16, 33, 64, 100, 255, 1000, 5000]), rng.choice([1, 3, 64, 129, 4096]),
               rng.choice([1, 5, 64, 1000, 16384])) for _ in range(200)]  # fmt: skip
    for dtype in ("float32", "float16", "bfloat16"):
        space = get_space("gemm", dtype=dtype)
        for shape in shapes:
            config = space.rule_default(shape, h200)
            assert space.violations(config, shape, h200) == [], (dtype, shape, config)


def test_rule_default_stays_within_narrowed_domains(h200):
    narrow = get_space("gemm", {"ALGO": ["simt"], "SPLIT_K": [1]})
    config = narrow.rule_default((1, 4096, 4096), h200)
    assert config["ALGO"] == "simt" and config["SPLIT_K"] == 1
    assert narrow.violations(config, (1, 4096, 4096), h200) == []


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize(
    "shape, algo, tile",
    [
        ((4096, 4096, 4096), "wgmma_tma", (128, 256)),  # many tiles: the largest
        ((1000, 1000, 1000), "wgmma_tma", (64, 128)),  # the largest tile still giving about one per SM
        ((127, 4096, 4096), "wgmma_skinny", (128, 64)),  # to 128 rows: the transposed product, split along K
        ((200, 4096, 4096), "wgmma_tma", (64, 128)),
        ((16384, 128, 16384), "wgmma_tma_streamk", (128, 128)),  # long K over under a wave of tiles: stream-K
        ((64, 4096, 4096), "wgmma_skinny", (64, 64)),  # too few tiles: split along K (below)
        ((4096, 64, 4096), "wgmma_tma", (64, 64)),
        ((256, 256, 65536), "wgmma_tma", (128, 128)),  # 4 tiles, too few to share K among 132 SMs: split-K
        ((16, 4096, 4096), "wgmma_skinny", (16, 64)),  # few rows: the transposed product, split along K
        ((4095, 4097, 1023), "wgmma_tma_padded", (128, 128)),  # rows TMA cannot stride: padded first
        ((8191, 8191, 8191), "wgmma_tma_padded", (128, 256)),
        ((333, 264, 105), "mma", (64, 128)),  # ... but not where the copy would weigh against a small product
        ((13, 1000, 2049), "mma", (16, 64)),  # few rows TMA cannot stride: a low, narrow mma tile, split along K
    ],
)
def test_half_rule_defaults_use_tma_where_it_fits_and_split_k_where_tiles_are_few(h200, dtype, shape, algo, tile):
    space = get_space("gemm", dtype=dtype)
    config = space.rule_default(shape, h200)
    assert (config["ALGO"], (config["BM"], config["BN"])) == (algo, tile), config
    if shape in ((64, 4096, 4096), (127, 4096, 4096), (4096, 64, 4096), (256, 256, 65536), (16, 4096, 4096),
                 (13, 1000, 2049)):
        m, n, _ = shape
        tiles = -(-m // config["BM"]) * -(-n // config["BN"])
        assert config["SPLIT_K"] > 1 and tiles * config["SPLIT_K"] >= 0.9 * h200.multiprocessors
    older = dataclasses.replace(h200, compute_capability=(8, 0))
    assert space.rule_default(shape, older)["ALGO"] == "mma", "no TMA before Hopper"


@pytest.mark.parametrize("kernel", ["gemm", "gemm_nt", "gemm_tn", "linear"])
@pytest.mark.parametrize("shape", [(768, 768, 8192), (3072, 768, 8192), (768, 3072, 8192), (1024, 1024, 16384)])
def test_long_k_over_a_small_output_runs_stream_k(h200, kernel, shape):
    """K ≥ 8192 over about one wave of 128×128 tiles: those tiles in ping-pong under stream-K, every SM a share of
    the tiles' k-tiles (0.86–0.98× cuBLAS at GPT-2's weight gradients on an H200, where split-K ran 0.54–0.81×);
    with so few tiles that each would be shared by more than four blocks, split-K as before (stream-K's last piece
    adds its peers one by one: 0.41× at 256×256×65536)."""
    space = get_space(kernel, dtype="bfloat16")
    config = space.rule_default(shape, h200)
    picked = {k: config[k] for k in ("ALGO", "BM", "BN", "PINGPONG", "STAGES")}
    assert picked == {"ALGO": "wgmma_tma_streamk", "BM": 128, "BN": 128, "PINGPONG": 1, "STAGES": 6}
    assert space.violations(config, shape, h200) == []
    # Shorter K, an output of more than about a wave of such tiles, or of very few: the tile rule as before.
    for other in ((768, 768, 4096), (4096, 4096, 8192), (256, 256, 65536)):
        assert space.rule_default(other, h200)["ALGO"] == "wgmma_tma", other
    assert space.rule_default((256, 256, 65536), h200)["SPLIT_K"] > 1


@pytest.mark.parametrize("kernel, tile", [("gemm", (128, 192)), ("gemm_nt", (128, 192)), ("linear", (128, 128))])
@pytest.mark.parametrize("shape", [(8192, 3072, 768), (8192, 768, 3072), (8192, 2304, 768), (8192, 768, 768)])
def test_short_k_takes_ping_pong_tiles_that_fill_the_gpu(h200, kernel, tile, shape):
    """K ≤ 3072 (a layer's forward and input gradients): consumers in ping-pong, 128×192 (128×128 with linear's
    bias, which allows 128 accumulators), unsplit; where those tiles do not fill the GPU, the tile rule as before."""
    space = get_space(kernel, dtype="bfloat16")
    config = space.rule_default(shape, h200)
    assert (config["ALGO"], config["PINGPONG"], config["BM"], config["BN"], config["SPLIT_K"]) == (
        "wgmma_tma", 1, *tile, 1), config
    assert space.violations(config, shape, h200) == []
    few = space.rule_default((1000, 1000, 1000), h200)  # 48 such tiles on 132 SMs
    assert (few["PINGPONG"], few["BM"], few["BN"]) == (0, 64, 128)
    assert space.rule_default((4096, 4096, 4096), h200)["PINGPONG"] == 0  # longer K: cooperative, as measured
    for square in ((2048, 2048, 2048), (2000, 2000, 2000), (2048, 2048, 768)):  # 128 tiles of 128×256: one wave
        one = space.rule_default(square, h200)
        if kernel == "linear":  # the bias epilogue: ping-pong stays ahead there
            assert (one["PINGPONG"], one["BM"], one["BN"]) == (1, 128, 128), one
        else:
            assert (one["ALGO"], one["PINGPONG"], one["BM"], one["BN"], one["SPLIT_K"]) == ("wgmma_tma", 0, 128, 256, 1)
        assert space.violations(one, square, h200) == []


def test_a_stale_row_with_unchanged_machine_code_is_used(space, h200):
    """A row of another template hash runs where `revalidate` says its configuration builds the cubin it was tuned
    with (a comment edit); it is asked only of rows that would be used, and a row it refuses stays stale."""
    asked = []

    def same_code(row):
        asked.append(row.shape)
        return row.params["BM"] == 256  # this row's machine code is unchanged, the others' is not

    rows = [Row("1024x1024x1024", cfg(space, BM=64), template_hash=OLD),
            Row("4096x4096x4096", cfg(space, BM=256), template_hash=OLD),
            Row("8192x8192x8192", cfg(space, BM=128), template_hash=OLD)]  # fmt: skip
    exact = choose(space, (4096, 4096, 4096), h200, rows, HASH, revalidate=same_code)
    assert exact.source == TUNED and exact.config["BM"] == 256 and asked == ["4096x4096x4096"]
    asked.clear()
    nearest = choose(space, (3000, 3000, 3000), h200, rows, HASH, revalidate=same_code)
    assert nearest.source == NEAREST and nearest.config["BM"] == 256 and asked == ["4096x4096x4096"]
    asked.clear()
    refused = choose(space, (1024, 1024, 1024), h200, rows, HASH, revalidate=same_code)
    assert refused.source == NEAREST and refused.config["BM"] == 256 and asked[0] == "1024x1024x1024"
    assert choose(space, (1024, 1024, 1024), h200, rows, HASH).source == DEFAULT  # no revalidation: all stale
    current = [Row("1024x1024x1024", cfg(space, BM=32)), *rows]
    asked.clear()
    first = choose(space, (1024, 1024, 1024), h200, current, HASH, revalidate=same_code)
    assert first.config["BM"] == 32 and asked == []  # a row of this template first, nothing compiled


def test_a_row_tuned_before_a_parameter_was_added_takes_its_default(h200):
    """A stale row whose machine code is unchanged (revalidated) but which lacks a parameter added since (the row
    families' SPLIT): it ran with the template's default, and is used with it, as the exact shape and as the
    nearest; an algorithm family's row takes its own algorithm's defaults."""
    space = get_space("rmsnorm")
    old = {k: v for k, v in space.default_config.items() if k != "SPLIT"}
    old.update(MAPPING="cluster", CLUSTER=4, BLOCK=512, CACHE=2, ITEMS=8, VEC=4)
    rows = [Row("64x65536", old, template_hash=OLD)]
    exact = choose(space, (64, 65536), h200, rows, HASH, revalidate=lambda row: True)
    assert exact.source == TUNED and exact.config["SPLIT"] == space.default_config["SPLIT"]
    assert space.violations(exact.config, (64, 65536), h200) == []
    assert [s.grid for s in space.launches(exact.config, (64, 65536), h200)] == [(256, 1, 1)]
    nearest = choose(space, (48, 65536), h200, rows, HASH, revalidate=lambda row: True)
    assert nearest.source == NEAREST and nearest.config == exact.config
    gemm = get_space("gemm")
    mma = {k: v for k, v in gemm.algos["tf32x3"].default_config.items() if k != "SPLIT_K"}
    completed = gemm.completed({"ALGO": "tf32x3", **mma})
    assert completed["SPLIT_K"] == gemm.algos["tf32x3"].default_config["SPLIT_K"]
    assert gemm.completed(completed) is completed  # nothing missing: the same dict
