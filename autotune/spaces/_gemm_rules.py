"""GEMM shape classes and the rule-based configuration per class: what the dispatcher runs where nothing tuned
for a shape's class fits (`autotune.runtime.selection`), instead of a square shape's winner.

Classes: the M bucket (1, ≤16, ≤64, ≤256, large) and the aspect (``col``: N = 1; ``narrow``: N ≤ 256;
``deep``: K at least 8× the larger of M and N; ``wide`` otherwise). Rules:

* M = 1 or N = 1: the ``gemv`` algorithm, its K split until the grid holds a few blocks per SM (but one row of
  a B stored K×N: ``wgmma_skinny``, below);
* fp32 on Hopper with more than 256 rows and columns: a ``wgmma_tf32x3`` tile that fills the GPU (split along K
  where the tiles are too few); beyond 64 rows otherwise, a ``tf32x3`` tile (mma.sync), split-K to fill;
* fp32 otherwise: the SIMT tile whose height fits M (16, 32, 64 rows, else the template's 128×128), and
  split-K until the output tiles fill the GPU — without it a 16-row product runs on a quarter of the SMs;
* half precision on Hopper with 2 to 128 rows (and one row where B is stored K×N, which gemv reads across its
  rows), where TMA can stride the rows: the transposed product of ``wgmma_skinny``, K split over a cluster until
  the blocks cover the SMs once;
* half precision on Hopper, where TMA can stride the rows (N, K multiples of 8): for K ≥ 8192 over about one
  wave of 128×128 tiles, those tiles in ping-pong under stream-K (``wgmma_tma_streamk``); for K ≤ 3072, the
  cooperative 128×256 tile where its tiles make one nearly full wave, else ping-pong tiles (128×192, else 128×128)
  where they fill the GPU; otherwise the largest ``wgmma_tma`` tile whose tiles fill
  the GPU (about one per SM) while wasting at most a quarter of their area on the edges; where none does, the
  largest such tile split along K until the slices fill it;
* half precision on Hopper where N or K is not a multiple of 8, with more than 256 rows, columns and K: the same
  tiles (short K, else the tile rule) on ``wgmma_tma_padded``, whose copy of the unaligned operand into padded
  rows costs far less than the product;
* half precision otherwise (other GPUs, unaligned rows, or rows too few for a TMA tile): an ``mma`` tile whose
  height fits M, and split-K until the blocks fill the GPU;
* otherwise: the default configuration of the first algorithm that can run the shape.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from autotune.device import DeviceInfo
from autotune.shape import Shape
from autotune.spaces.base import ALGO, Config, ceil_div

if TYPE_CHECKING:
    from autotune.spaces.base import KernelSpace

M_BUCKETS = ((1, "1"), (16, "16"), (64, "64"), (256, "256"))  # M ≤ bound → label; beyond: "large"
NARROW_N = 256
DEEP_RATIO = 8
BLOCKS_PER_SM = 2  # the grid a rule aims for: two waves' worth of blocks hides the tail of the first
MIN_K_PER_SPLIT = 256  # a split shorter than this spends more on its partial tile than it computes

# SIMT tiles per M bucket: (BM, BN, WARPS_M, WARPS_N, TM, TN, WNITER, BK); each splits into 32-lane warps.
SIMT_TILES = {
    16: {"BM": 16, "BN": 128, "WARPS_M": 1, "WARPS_N": 4, "TM": 4, "TN": 4, "WNITER": 1, "BK": 32},
    32: {"BM": 32, "BN": 128, "WARPS_M": 1, "WARPS_N": 4, "TM": 4, "TN": 4, "WNITER": 2, "BK": 32},
    64: {"BM": 64, "BN": 128, "WARPS_M": 2, "WARPS_N": 4, "TM": 4, "TN": 4, "WNITER": 2, "BK": 16},
}


def m_bucket(m: int) -> str:
    for bound, label in M_BUCKETS:
        if m <= bound:
            return label
    return "large"


def aspect(shape: Shape) -> str:
    m, n, k = shape
    if n == 1:
        return "col"
    if n <= NARROW_N:
        return "narrow"
    if k >= DEEP_RATIO * max(m, n):
        return "deep"
    return "wide"


def shape_class(shape: Shape) -> tuple:
    return (m_bucket(shape[0]), aspect(shape))


def _splits(domain: tuple[int, ...], blocks: int, k: int, device: DeviceInfo) -> int:
    """The smallest split in ``domain`` giving BLOCKS_PER_SM blocks per SM, each split keeping
    MIN_K_PER_SPLIT of K (1 where the grid is full already)."""
    target = BLOCKS_PER_SM * device.multiprocessors
    best = 1
    for s in sorted(domain):
        if s > 1 and k < s * MIN_K_PER_SPLIT:
            break
        best = s
        if blocks * s >= 0.9 * target:
            break
    return best


# wgmma_tma tiles, largest first: (BM, BN, WG, STAGES), the ring as deep as shared memory allows.
# Largest first. 128×192 (five stages of 40 KB) fills the last wave where 128×256 leaves a quarter of it idle: the
# gap to cuBLAS at 8192×768×K tracked that idle share (docs/results/2026-11-28/short_k_gemm_research.md).
TMA_TILES = ((128, 256, 2, 4), (128, 192, 2, 5), (128, 128, 2, 6), (64, 128, 1, 7), (64, 64, 1, 7))
WAVE_TIE = 0.03  # wave fills this close are a tie: the larger tile (fewer, longer main loops) wins
TMA_FILL = 0.9  # tiles per SM a TMA tile must reach (the persistent grid has one block per SM)
TMA_AREA = 0.75  # of the tiles' area that must be inside the matrix
# mma tiles for small M (rows ≤ bound): BM, BN, WM, WN (four warps each).
MMA_TILES = {
    16: {"BM": 16, "BN": 128, "WM": 16, "WN": 32},
    32: {"BM": 32, "BN": 128, "WM": 32, "WN": 32},
    64: {"BM": 64, "BN": 128, "WM": 32, "WN": 64},
}


def _valid(space: "KernelSpace", config: Config, shape: Shape, device: DeviceInfo) -> bool:
    return not space.violations(config, shape, device)


def _defaults(space: "KernelSpace", name: str) -> Config | None:
    """The default configuration of algorithm ``name`` where the space offers it, else None (its rule does not
    apply): a narrowed space keeps every algorithm in `algos`, but offers only those of its ``ALGO`` domain."""
    if name not in space.domain(ALGO):
        return None
    return {ALGO: name, **space.algos[name].default_config}


def _within_domains(space: "KernelSpace", config: Config) -> bool:
    algo = config[ALGO]
    return all(key == ALGO or value in space.domain(f"{algo}.{key}") for key, value in config.items())


def _tile_splits(space: "KernelSpace", config: Config, shape: Shape, device: DeviceInfo) -> int:
    """The split of K (`_splits`) for the configuration's BM×BN output tiles of ``shape``."""
    m, n, k = shape
    blocks = ceil_div(m, config["BM"]) * ceil_div(n, config["BN"])
    return _splits(space.domain(f"{config[ALGO]}.SPLIT_K"), blocks, k, device)


def gemv_rule(space: "KernelSpace", shape: Shape, device: DeviceInfo) -> Config | None:
    config = _defaults(space, "gemv")
    if config is None:
        return None
    algo = space.algos["gemv"]
    m, n, k = shape
    itemsize = 4 if space.dtype == "float32" else 2
    config.update(VEC=16 // itemsize, UNROLL=4, STREAM=1)
    if n == 1:  # rows of A: a warp per row, or several where rows are long and few
        config.update(BLOCK=256, KTHREADS=32 if m >= 4 * device.multiprocessors else 128)
        blocks = ceil_div(m, config["BLOCK"] // config["KTHREADS"])
    else:  # columns of B: 32 column threads of VEC columns, 8 thread rows along K
        config.update(BLOCK=256, KTHREADS=8)
        blocks = ceil_div(n, config["BLOCK"] // config["KTHREADS"] * config["VEC"])
    config["SPLIT_K"] = _splits(space.domain("gemv.SPLIT_K"), blocks, k, device)
    for key, value in list(config.items()):  # keep within narrowed domains, else the algorithm's default
        if key != ALGO and value not in space.domain(f"gemv.{key}"):
            config[key] = algo.default_config[key]
    return config if _valid(space, config, shape, device) else None


def simt_rule(space: "KernelSpace", shape: Shape, device: DeviceInfo) -> Config | None:
    config = _defaults(space, "simt")
    if config is None:
        return None
    for bound, tile in SIMT_TILES.items():
        if shape[0] <= bound:
            config.update(tile)
            if device.compute_capability >= (8, 0):
                config["PIPELINE"] = "cp.async-3"  # deep prefetch: small tiles are bound by streaming B
            break
    config["SPLIT_K"] = _tile_splits(space, config, shape, device)
    if not _within_domains(space, config):
        config = _defaults(space, "simt")  # a narrowed space: its default, unsplit
    return config if _valid(space, config, shape, device) else None


def _tma_tile_rule(space: "KernelSpace", name: str, tiles_by_size: tuple, shape: Shape, device: DeviceInfo,
                   schedule: Config | None = None, split: bool = True) -> Config | None:
    """The largest tile of ``tiles_by_size`` ((BM, BN, WG, STAGES), largest first) of TMA algorithm ``name`` that
    fills the GPU with its tiles (``schedule``'s parameters on top); else, if ``split``, the largest whose tiles,
    split along K, do."""
    defaults = _defaults(space, name)
    if defaults is None or space.algos[name].unfit(shape, device):
        return None
    m, n, k = shape
    fill = TMA_FILL * device.multiprocessors
    filling: list[tuple[float, Config]] = []  # unsplit tiles that fill the GPU, with their last wave's fill
    for with_split in (False, True) if split else (False,):
        for bm, bn, wg, stages in tiles_by_size:
            tiles = ceil_div(m, bm) * ceil_div(n, bn)
            if m * n < TMA_AREA * tiles * bm * bn:
                continue
            splits = 1
            if tiles < fill:
                if not with_split:
                    continue
                usable = [s for s in sorted(space.domain(f"{name}.SPLIT_K")) if k >= s * MIN_K_PER_SPLIT]
                splits = next((s for s in usable if tiles * s >= fill), 0)
                if not splits:
                    continue
            config = {**defaults, **(schedule or {}), "BM": bm, "BN": bn, "WG": wg, "STAGES": stages,
                      "SPLIT_K": splits}  # fmt: skip
            if not (_within_domains(space, config) and _valid(space, config, shape, device)):
                continue
            if with_split:
                return config
            filling.append((wave_fill(tiles, device), config))
        if filling:  # the fullest waves, the larger tile where they are within WAVE_TIE of each other
            best = max(f for f, _ in filling)
            return next(c for f, c in filling if f >= best - WAVE_TIE)
    return None


def wave_fill(tiles: int, device: DeviceInfo) -> float:
    """The share of the block slots that ``tiles`` keep busy on a persistent grid of one block per SM: the last
    wave's idle SMs are what a tile size loses (8192×768 outputs: 128×256 tiles leave 27% idle, 128×192 3%)."""
    sms = device.multiprocessors
    return tiles / (ceil_div(tiles, sms) * sms)


# Long K over a small output (a layer's weight gradients: 768..3072 × 768 × 8192): stream-K, each SM an equal share
# of every tile's k-tiles. On an H200 (docs/results/2026-11-28b, call 3) its 128×128 ping-pong tile ran 0.86–0.98×
# cuBLAS at the four GPT-2 weight-gradient shapes, where the 128×128 ping-pong split-K tile that the searches of
# 2026-11-28 had chosen ran 0.54–0.81× (its slices all end together, and a second launch reads them back). Taken
# where K is that long and 128×128 tiles make at most about one wave, until larger outputs are measured, and only where
# each tile is shared by a few blocks: a tile's last piece adds its peers' partials one after another, and at
# 256×256×65536 (4 tiles, each over 33 blocks) stream-K ran 0.41× cuBLAS (call 8); such outputs keep the tile rule,
# split-K 32 there (0.75× or better in the untuned runs of 2026-11-26).
LONG_K = 8192
LONG_K_WAVES = 1.1
LONG_K_MAX_PEERS = 4  # blocks per tile at most: tiles ≥ SMs / 4
LONG_K_TILE = {"BM": 128, "BN": 128, "WG": 2, "PINGPONG": 1, "STAGES": 6, "GROUP_M": 8}


def _long_k_tma(space: "KernelSpace", shape: Shape, device: DeviceInfo) -> Config | None:
    defaults = _defaults(space, "wgmma_tma_streamk")
    m, n, k = shape
    if defaults is None or k < LONG_K or space.algos["wgmma_tma_streamk"].unfit(shape, device):
        return None
    bm, bn = LONG_K_TILE["BM"], LONG_K_TILE["BN"]
    tiles = ceil_div(m, bm) * ceil_div(n, bn)
    if tiles > LONG_K_WAVES * device.multiprocessors or m * n < TMA_AREA * tiles * bm * bn:
        return None
    if tiles * LONG_K_MAX_PEERS < device.multiprocessors:
        return None
    config = {**defaults, **LONG_K_TILE}
    return config if _within_domains(space, config) and _valid(space, config, shape, device) else None


def split_tma_tile(space: "KernelSpace", tile: Config, shape: Shape, device: DeviceInfo) -> Config | None:
    """``wgmma_tma`` with ``tile``'s parameters, K split until the tiles fill the GPU; None where the space does
    not offer it, the shape does not fit it, or the result is invalid."""
    defaults = _defaults(space, "wgmma_tma")
    if defaults is None or space.algos["wgmma_tma"].unfit(shape, device):
        return None
    config = {**defaults, **tile}
    config["SPLIT_K"] = _tile_splits(space, config, shape, device)
    return config if _within_domains(space, config) and _valid(space, config, shape, device) else None


# Short K (a transformer layer's forward and input gradients: K of 768 to 3072): consumers in ping-pong, so one's
# epilogue (the output written from registers, and the bias) hides behind the other's main loop, which at K = 768
# is only about 12 k-tiles long. Measured against the cooperative tiles at the GPT-2 layer's shapes (H200,
# docs/results/2026-11-28b, call 2): 128×192 ping-pong 0.95–1.06× cuBLAS where cooperative 128×256 ran 0.76–0.97×
# and cooperative 128×192 0.93–0.97×; with linear's bias (at most 128 accumulators), 128×128 ping-pong with
# GROUP_M 16 ran 0.98–1.00× where cooperative 128×256 ran 0.83–0.88×. Taken only where such tiles fill the GPU
# unsplit; longer K keeps the cooperative tiles until it is measured. Not yet its best at 2048³: ping-pong 128×128
# ran 0.93–0.97× there against cooperative 128×256's 0.99× (calls 3 and 8), where linear's bias favours ping-pong.
SHORT_K = 3072
SHORT_K_TILES = ((128, 192, 2, 5), (128, 128, 2, 6))
SHORT_K_SCHEDULE = {"PINGPONG": 1, "GROUP_M": 16}


# ... except where the largest cooperative tile makes one nearly full wave (outputs of about 2000×2000 on 132 SMs):
# each SM then runs one tile's main loop of K/64 k-tiles, where ping-pong's 128×128 tiles make two. On an H200
# (2026-11-29f, calls 7-8, align_probe.py, wave_probe.py) cooperative 128×256 ran 0.91× cuBLAS at 2000³ against
# ping-pong 128×128's 0.70×, and 0.98× against 0.96-0.99× at 2048² × K 768-3072 and 1536×2816×2048. With linear's
# bias in the epilogue ping-pong stays ahead (0.96-0.97× against 0.90-0.94× at 2048² × 768 and 2048): not taken there.
def _one_wave_tma(space: "KernelSpace", name: str, shape: Shape, device: DeviceInfo) -> Config | None:
    layout = getattr(space.algos[name], "layout", None)
    if layout is not None and layout.bias:
        return None
    bm, bn = TMA_TILES[0][:2]
    tiles = ceil_div(shape[0], bm) * ceil_div(shape[1], bn)
    if not TMA_FILL * device.multiprocessors <= tiles <= device.multiprocessors:
        return None
    return _tma_tile_rule(space, name, TMA_TILES[:1], shape, device, split=False)


def tma_rule(space: "KernelSpace", shape: Shape, device: DeviceInfo, name: str = "wgmma_tma") -> Config | None:
    """Half precision on Hopper: for a long K over a small output, stream-K on 128×128 ping-pong tiles (see
    LONG_K); for a short K, ping-pong tiles that fill the GPU (SHORT_K); otherwise the largest tile of TMA
    algorithm ``name`` that fills the GPU (split along K if need be)."""
    long_k = _long_k_tma(space, shape, device) if name == "wgmma_tma" else None
    if long_k is not None:
        return long_k
    if shape[2] <= SHORT_K:
        one_wave = _one_wave_tma(space, name, shape, device)
        if one_wave is not None:
            return one_wave
        short_k = _tma_tile_rule(space, name, SHORT_K_TILES, shape, device, SHORT_K_SCHEDULE, split=False)
        if short_k is not None:
            return short_k
    return _tma_tile_rule(space, name, TMA_TILES, shape, device)  # rows too few (M ≤ 16): mma fits M


# N or K not a multiple of 8 (rows TMA cannot stride): ``wgmma_tma_padded`` copies the unaligned operand into
# padded rows, then runs the TMA tiles. The copy reads and writes that operand once more; beyond 256 on every side
# the product's arithmetic dwarfs it, below that the mma tiles (no copy) keep the shape.
PADDED_MIN_SIDE = 256


def padded_tma_rule(space: "KernelSpace", shape: Shape, device: DeviceInfo) -> Config | None:
    if min(shape) <= PADDED_MIN_SIDE:
        return None
    return tma_rule(space, shape, device, "wgmma_tma_padded")


# fp32 on Hopper (3xTF32 on wgmma, FP32-accurate): one consumer warpgroup on 64-row tiles, four
# stages. On the H100 (2026-11-25) 64x128 ran 2.1x cuBLAS FP32 at 4096^3 and 8192^3 alike, where the 128x128
# default of the search ran 2.25x at 4096^3 but 1.36x at 8192^3: its three stages leave the consumers waiting on
# TMA once the operands no longer sit in L2.
TF32X3_TMA_TILES = ((64, 128, 1, 4), (64, 64, 1, 6))


def wgmma_tf32x3_rule(space: "KernelSpace", shape: Shape, device: DeviceInfo) -> Config | None:
    # Its pre-pass reads each operand and writes it twice (big and small parts): paid back only where both sides of
    # the output are wide. With 256 rows or columns or fewer, tf32x3 on mma.sync (which splits in registers) ran
    # 1.0-1.25x cuBLAS FP32 on the H100 where this ran 0.48-0.70x (2026-11-25).
    if min(shape[0], shape[1]) <= NARROW_N:
        return None
    return _tma_tile_rule(space, "wgmma_tf32x3", TF32X3_TMA_TILES, shape, device)


# fp32 beyond 64 rows on tensor cores (FP32-accurate 3xTF32): the tile its searches keep choosing, split-K to fill.
TF32X3_TILE = {"BM": 64, "BN": 64, "BK": 32, "WARPS_M": 2, "WARPS_N": 2, "STAGES": 3}


def tf32x3_rule(space: "KernelSpace", shape: Shape, device: DeviceInfo) -> Config | None:
    config = _defaults(space, "tf32x3")
    if config is None or shape[0] <= 64 or space.algos["tf32x3"].unfit(shape, device):
        return None
    config.update(TF32X3_TILE)
    config["SPLIT_K"] = _tile_splits(space, config, shape, device)
    if not _within_domains(space, config) or not _valid(space, config, shape, device):
        return None
    return config


def mma_rule(space: "KernelSpace", shape: Shape, device: DeviceInfo) -> Config | None:
    config = _defaults(space, "mma")
    if config is None:
        return None
    m, n, k = shape
    tile = next((t for bound, t in MMA_TILES.items() if m <= bound), None)
    if tile is None and ceil_div(m, config["BM"]) * ceil_div(n, config["BN"]) < device.multiprocessors:
        tile = MMA_TILES[64]  # a small output (narrow N, deep K): many small tiles, then split K
    if tile is not None:
        config.update(tile)
        if n <= 64 or ceil_div(m, config["BM"]) * ceil_div(n, config["BN"]) < device.multiprocessors // 8:
            config.update(BN=64, WN=32)  # narrow, or a small output: more, narrower tiles before splitting K
    config["SPLIT_K"] = _tile_splits(space, config, shape, device)
    if not _within_domains(space, config):
        config = _defaults(space, "mma")
    return config if _valid(space, config, shape, device) else None


# Few rows (decoding and small batches, 2 to 128 rows of A) in half precision on Hopper: the transposed product
# (`wgmma_skinny`), its BM the smallest wgmma N that holds M, 64 columns per tile on one consumer (128 past three
# waves at 128 rows), and K split over a cluster until the blocks cover the SMs once, with as deep a ring as the
# blocks an SM then holds leave room for. On the H200 (docs/results/2026-11-29d, calls 2-3, 16 rows, against cuBLAS
# through F.linear): 64-column tiles in two slices ran 1.00-1.06x at Llama's 4096- and 6144-column projections and
# 1.01x at its down projection, where 128-column tiles in four slices (the same number of blocks) ran 0.83-0.88x and
# two blocks per SM (split 8) 0.87-0.90x: fewer slices keep each block's stream of a weight row longer and the
# cluster's sum smaller. linear_swiglu's gate and up rows, 224 tiles of 64 at 14336 columns, run unsplit: 1.18x
# torch's product, silu and multiply. 2026-11-29f (call 1, rows_probe.py): 64-row tiles at 64 rows ran 0.97x cuBLAS
# where the TMA rule's 64x128 tiles ran 0.83x; 128-row tiles at 127-128 rows 0.87-1.00x (two slices; the TMA rule
# 0.76-0.84x); past about three waves of 64-column tiles (28672 columns) 128-column ones, unsplit, 0.96x against
# 0.85x; at 200 and 256 rows the TMA rule's tiles were faster. One row with B stored K×N: 8-row tiles in two slices
# 1.00-1.05x, gemv 0.64-0.72x.
SKINNY_MAX_M = 128
SKINNY_WIDE_WAVES = 3  # 128-row tiles: 128 columns where 64-column tiles would take this many waves of the SMs
SKINNY_TILE = {"BN": 64, "WG": 1}
SKINNY_BLOCK_RESERVE = 2048  # shared bytes an SM keeps per block (1 KB) and the ring's alignment slack


def skinny_splits(space: "KernelSpace", algo: str, blocks: int, k: int, device: DeviceInfo) -> int:
    """The fewest K slices of ``algo`` whose blocks cover 90% of the SMs, each at least MIN_K_PER_SPLIT long."""
    best = 1
    for s in sorted(space.domain(f"{algo}.SPLIT_K")):
        if s > 1 and k < s * MIN_K_PER_SPLIT:
            break
        best = s
        if blocks * s >= 0.9 * device.multiprocessors:
            break
    return best


def skinny_rule(space: "KernelSpace", shape: Shape, device: DeviceInfo, name: str = "wgmma_skinny",
                min_rows: int = 2, max_rows: int = SKINNY_MAX_M) -> Config | None:
    """``name`` (a `WgmmaSkinnyGemm`) for ``min_rows`` to ``max_rows`` rows (one row is gemv's, where the family
    has it and reads B along its rows)."""
    config = _defaults(space, name)
    m, n, k = shape
    if config is None or not min_rows <= m <= max_rows or space.algos[name].unfit(shape, device):
        return None
    bm = next(b for b in (8, 16, 32, 64, 128) if m <= b)
    config.update(SKINNY_TILE, BM=bm)
    if bm == 128 and ceil_div(n, config["BN"]) >= SKINNY_WIDE_WAVES * device.multiprocessors:
        config["BN"] = 128
    tiles = ceil_div(n, config["BN"])
    config["SPLIT_K"] = skinny_splits(space, name, tiles, k, device)
    per_sm = min(2, ceil_div(tiles * config["SPLIT_K"], device.multiprocessors))  # resident at once
    ring = device.smem_per_multiprocessor // per_sm - SKINNY_BLOCK_RESERVE
    config["STAGES"] = max(2, min(8, ring // space.algos[name].stage_bytes(config)))
    if not _within_domains(space, config):
        return None
    return config if _valid(space, config, shape, device) else None


def rule_default(space: "KernelSpace", shape: Shape, device: DeviceInfo) -> Config:
    """The configuration the rules pick for ``shape``; where no rule applies, the default configuration of the
    first algorithm (in the family's order of preference) that can run it."""
    m, n, _ = shape
    skinny = space.algos.get("wgmma_skinny")
    if m == 1 and skinny is not None and not skinny.K_MAJOR_B:  # B stored K×N: gemv would read across its rows
        config = skinny_rule(space, shape, device, min_rows=1)
        if config is not None:
            return config
    if m == 1 or n == 1:
        config = gemv_rule(space, shape, device)
        if config is not None:
            return config
    for rule in (wgmma_tf32x3_rule, tf32x3_rule, simt_rule, skinny_rule, tma_rule, padded_tma_rule, mma_rule):
        config = rule(space, shape, device)
        if config is not None:
            return config
    for name in space.domain(ALGO):
        candidate = _defaults(space, name)
        if _valid(space, candidate, shape, device):
            return candidate
    return dict(space.default_config)
