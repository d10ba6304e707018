"""Grouped-query and multi-query attention without a GPU: the shape forms and their parsing, shape inference and
its errors, keys and defines, the float64 references against attention with k and v repeated per query head,
launch plans (grids, the group argument, fa3's tensor maps, split_kv's packed rows), validation cases, and the
grouped kernels compiling without spills (nvcc)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from autotune.errors import InvalidArgument
from autotune.runtime import call_log
from autotune.runtime.compiler import Compiler
from autotune.spaces import ALGO, TensorMap, get_space
from autotune.spaces._attention import attention_dims
from autotune.spaces.attention import HEAD_DIMS, WIDE
from space_checks import sample_valid

GQA = (2, 8, 2, 77, 1031, 64)  # group 4
MQA = (1, 8, 1, 1, 4097, 128)  # group 8, decoding
KERNELS = ("attention", "attention_causal")
BACKWARD = ("attention_backward", "attention_causal_backward")


# --- shapes -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, shape",
    [
        ("4x32x8x4096x4096x128", (4, 32, 8, 4096, 4096, 128)),
        ("1x8x1x1x65536x128", (1, 8, 1, 1, 65536, 128)),
        ("4x16x4096x4096x128", (4, 16, 4096, 4096, 128)),  # multi-head: the 5-number form, as before
    ],
)
def test_shapes_parse_and_format_round_trip(text, shape):
    space = get_space("attention")
    assert space.parse_shape(text) == shape
    assert space.format_shape(shape) == text
    assert space.parse_shape(space.format_shape(shape)) == shape


def test_a_six_number_shape_with_as_many_kv_heads_is_the_multi_head_shape():
    """One problem, one text in the store: HKV = H is written (and looked up) as the 5-number form."""
    space = get_space("attention_causal")
    assert space.parse_shape("4x16x16x4096x4096x128") == (4, 16, 4096, 4096, 128)
    assert space.format_shape((4, 16, 16, 4096, 4096, 128)) == "4x16x4096x4096x128"
    assert space.shape_key((4, 16, 16, 4096, 4096, 128)) == space.shape_key((4, 16, 4096, 4096, 128))


@pytest.mark.parametrize(
    "text, message",
    [
        ("4x6x4x1x1x64", "6 query heads are not a multiple of 4 kv heads"),
        ("4x2x4x1x1x64", "2 query heads are not a multiple of 4 kv heads"),
        ("4x8x0x1x1x64", "HKV must be a positive integer"),
        ("1x2x3x4", "BxHxSQxSKVxD or BxHxHKVxSQxSKVxD"),
        ("1x2x3x4x5x6x7", "5 or 6 positive integers"),
    ],
)
def test_bad_shape_texts_are_one_line(text, message):
    with pytest.raises(InvalidArgument, match=message) as info:
        get_space("attention").parse_shape(text)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("kernel", KERNELS + BACKWARD)
def test_inferred_from_k_and_v_heads(kernel):
    space = get_space(kernel, dtype="float16")
    shapes = {"q": (2, 8, 77, 64), "k": (2, 2, 1031, 64), "v": (2, 2, 1031, 64)}
    if kernel in BACKWARD:
        shapes.update(o=(2, 8, 77, 64), do=(2, 8, 77, 64), lse=(2, 8, 77))
    assert space.infer_shape(shapes) == GQA
    assert space.infer_shape({**shapes, "k": (2, 1, 1031, 64), "v": (2, 1, 1031, 64)}) == (2, 8, 1, 77, 1031, 64)
    same = {**shapes, "k": (2, 8, 1031, 64), "v": (2, 8, 1031, 64)}
    assert space.infer_shape(same) == (2, 8, 77, 1031, 64)
    assert {n: s.shape for n, s in space.input_specs(GQA).items()} == shapes
    if kernel in BACKWARD:
        assert {n: s.shape for n, s in space.outputs(GQA).items()} == {
            "dq": (2, 8, 77, 64), "dk": (2, 2, 1031, 64), "dv": (2, 2, 1031, 64)}  # fmt: skip
    else:
        assert {n: s.shape for n, s in space.outputs(GQA).items()} == {"o": (2, 8, 77, 64), "lse": (2, 8, 77)}


def test_backward_checks_o_do_and_lse_against_q():
    space = get_space("attention_backward", dtype="float16")
    shapes = {"q": (2, 8, 77, 64), "k": (2, 2, 1031, 64), "v": (2, 2, 1031, 64), "o": (2, 8, 77, 64),
              "do": (2, 2, 77, 64), "lse": (2, 8, 77)}  # fmt: skip
    with pytest.raises(InvalidArgument, match=r"do has shape \(2, 2, 77, 64\), expected \(2, 8, 77, 64\)"):
        space.infer_shape(shapes)


def test_keys_defines_work_and_classes():
    space = get_space("attention", dtype="bfloat16")
    assert space.shape_key(GQA) != space.shape_key((2, 8, 77, 1031, 64)), "grouped never stands in for MHA"
    assert space.shape_key(GQA) != space.shape_key((2, 8, 1, 77, 1031, 64)), "nor one group size for another"
    assert space.shape_key(GQA) == space.shape_key((1, 32, 8, 4096, 4096, 64)), "H, HKV, lengths may differ"
    assert space.problem_defines(GQA) == {"HEAD_DIM": 64, "CAUSAL": 0, "KV_GROUPED": 1}
    assert space.problem_defines((2, 8, 77, 1031, 64)) == {"HEAD_DIM": 64, "CAUSAL": 0}, "MHA: as before"
    assert space.work(GQA) == space.work((2, 8, 77, 1031, 64)), "FLOPs per query head"
    assert space.shape_class(MQA) == space.shape_class((1, 8, 1, 4097, 128)) != space.shape_class(GQA)


# --- references -------------------------------------------------------------------------------------------------
def repeated(x: dict, group: int) -> dict:
    """k and v (and nothing else) repeated per query head: the multi-head problem a grouped one equals."""
    return {n: np.repeat(a, group, axis=1) if n in ("k", "v") else a for n, a in x.items()}


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("shape", [(2, 6, 2, 5, 9, 32), (1, 4, 1, 3, 3, 64), (2, 4, 2, 1, 7, 32)])
def test_forward_reference_is_attention_with_k_and_v_repeated(kernel, shape):
    space = get_space(kernel, dtype="float32")
    b, h, hkv, sq, skv, d = shape
    x = space.decoded_inputs(space.inputs(shape, np.random.default_rng(7)), shape)
    assert x["k"].shape == (b, hkv, skv, d) and x["q"].shape == (b, h, sq, d)
    mha = (b, h, sq, skv, d)
    want = space.reference(repeated(x, h // hkv), mha)
    got = space.reference(x, shape)
    for name in ("o", "lse"):
        np.testing.assert_allclose(got[name], want[name], rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("kernel", BACKWARD)
@pytest.mark.parametrize("shape", [(2, 6, 2, 5, 9, 32), (1, 4, 1, 3, 3, 64)])
def test_backward_reference_sums_the_groups_gradients(kernel, shape):
    """dq as with k and v repeated; dk, dv of a kv head the sum of the repeated problem's over its group."""
    space = get_space(kernel, dtype="float16")
    b, h, hkv, sq, skv, d = shape
    x = space.decoded_inputs(space.inputs(shape, np.random.default_rng(8)), shape)
    want = space.reference(repeated(x, h // hkv), (b, h, sq, skv, d))
    got = space.reference(x, shape)
    np.testing.assert_allclose(got["dq"], want["dq"], rtol=1e-12, atol=1e-14)
    for name in ("dk", "dv"):
        summed = want[name].reshape(b, hkv, h // hkv, skv, d).sum(axis=2)
        np.testing.assert_allclose(got[name], summed, rtol=1e-12, atol=1e-14)


def test_backward_inputs_are_the_forward_of_the_grouped_problem():
    space = get_space("attention_causal_backward", dtype="bfloat16")
    shape = (1, 4, 2, 6, 10, 32)
    x = space.decoded_inputs(space.inputs(shape, np.random.default_rng(9)), shape)
    forward = space.forward().reference({n: x[n] for n in ("q", "k", "v")}, shape)
    np.testing.assert_allclose(x["lse"], forward["lse"], rtol=1e-6)
    np.testing.assert_allclose(x["o"], forward["o"], atol=1e-2)


# --- launch plans -----------------------------------------------------------------------------------------------
def config_of(space, algo, **changes):
    return {ALGO: algo, **space.algos[algo].default_config, **changes}


@pytest.mark.parametrize("algo", ["fa2", "simt"])
def test_one_pass_launch_adds_the_group_size_only_when_grouped(algo, h200):
    space = get_space("attention", dtype="float32" if algo == "simt" else "float16")
    config = config_of(space, algo)
    (grouped,) = space.launches(config, GQA, h200)
    (mha,) = space.launches(config, (2, 8, 77, 1031, 64), h200)
    assert grouped.grid == mha.grid and grouped.grid[1:] == (8, 2), "a block per query head"
    assert grouped.args[:-1] == mha.args[: len(grouped.args) - 1] and len(mha.args) == 8
    assert type(grouped.args[-1]) is np.int32 and int(grouped.args[-1]) == 4


def test_fa3_tensor_maps_cover_the_kv_heads(h200):
    space = get_space("attention", dtype="bfloat16")
    (launch,) = space.launches(config_of(space, "fa3"), (2, 8, 2, 300, 1031, 128), h200)
    q, k, v = launch.args[:3]
    assert isinstance(k, TensorMap) and q.dims == (128, 300, 16)
    assert k.dims == v.dims == (128, 1031, 4), "(head_dim, seq_kv, batch·kv heads)"
    assert all(m.problems() == [] for m in (q, k, v))
    assert launch.grid == (math.ceil(300 / 128), 8, 2) and int(launch.args[-1]) == 4


def test_split_kv_packs_a_groups_rows_into_one_tile(h200):
    space = get_space("attention", dtype="float16")
    config = config_of(space, "split_kv", SPLITS=8)
    main, combine = space.launches(config, MQA, h200)
    assert main.grid == (8, 1, 1), "8 heads x 1 query: one 16-row tile per split, one kv head"
    assert int(main.args[-1]) == 8 and int(combine.args[4]) == 8, "combine: every query head's rows"
    main, _ = space.launches(config, (3, 12, 4, 12, 1000, 64), h200)
    assert main.grid == (math.ceil(3 * 12 / 16) * 8, 4, 3)
    assert space.workspace(config, MQA)["o_part"].shape == (8, 8, 128)
    (mha, _) = space.launches(config, (1, 8, 1, 4097, 128), h200)
    assert mha.grid == (8, 8, 1) and len(mha.args) == 8, "multi-head: a tile per head, no group argument"


def split_kv_coverage(shape, splits: int, bc: int, causal: int) -> np.ndarray:
    """How often each (flat query row, key) pair of one kv head's group is left unmasked by attention_split_kv's
    blocks: its index arithmetic (packed rows, the tile's first and last query, kv_end, the splits' tile ranges, the
    masks), transcribed from kernel_templates/attention_split_kv.cu with KV_GROUPED."""
    p = attention_dims(shape)
    seq_q, seq_kv, rows_q = p.sq, p.skv, p.sq * p.group
    offset = seq_kv - seq_q
    seen = np.zeros((rows_q, seq_kv), int)
    for q0 in range(0, rows_q, 16):
        last = min(q0 + 16, rows_q) - 1
        spans = last // seq_q != q0 // seq_q
        q_first, q_end = (0, seq_q) if spans else (q0 % seq_q, last % seq_q + 1)
        kv_end = min(seq_kv, q_end + offset) if causal else seq_kv
        n_tiles = -(-seq_kv // bc)
        per_split = -(-n_tiles // splits)
        for split in range(splits):
            t_begin = split * per_split
            t_end = min(min(n_tiles, t_begin + per_split), -(-kv_end // bc))
            for tile in range(t_begin, t_end):
                kv0 = tile * bc
                masked = kv0 + bc > seq_kv or (causal and kv0 + bc - 1 > q_first + offset)
                for row in range(q0, last + 1):
                    for col in range(kv0, min(kv0 + bc, seq_kv) if masked else kv0 + bc):
                        if not masked or not (col >= seq_kv or (causal and col > row % seq_q + offset)):
                            seen[row, col] += 1
    return seen


@pytest.mark.parametrize("causal", [0, 1])
@pytest.mark.parametrize("shape", [(1, 8, 1, 1, 100, 64), (1, 6, 2, 3, 33, 64), (1, 8, 2, 7, 70, 64),
                                   (1, 12, 1, 16, 33, 64)], ids=lambda s: "x".join(map(str, s)))  # fmt: skip
@pytest.mark.parametrize("splits, bc", [(1, 32), (4, 16), (16, 32)])
def test_split_kv_packed_rows_see_exactly_their_keys(shape, causal, splits, bc):
    """Every packed row (query i of the group's query head j: row j·seq_q + i) sees each key it may see
    (causal: key ≤ i + seq_kv − seq_q, bottom-right) exactly once over the splits, and no other; tiles that span
    two query heads included."""
    p = attention_dims(shape)
    seen = split_kv_coverage(shape, splits, bc, causal)
    queries = np.arange(p.sq * p.group) % p.sq
    want = np.ones_like(seen)
    if causal:
        want = (np.arange(p.skv)[None, :] <= queries[:, None] + p.skv - p.sq).astype(int)
    np.testing.assert_array_equal(seen, want)


def test_split_kv_blocks_and_rule_default_count_packed_tiles(h200):
    space = get_space("attention", dtype="bfloat16")
    mqa = (1, 32, 1, 1, 65536, 128)  # 32 query rows of one kv head: two tiles
    default = space.rule_default(mqa, h200)
    assert default[ALGO] == "split_kv" and 2 * default["SPLITS"] <= 2 * h200.multiprocessors
    assert default["SPLITS"] > space.rule_default((1, 32, 1, 65536, 128), h200)["SPLITS"], "fewer blocks per split"
    assert not space.violations({**config_of(space, "split_kv"), "SPLITS": 128}, mqa, h200)


def test_backward_sums_a_group_in_one_block(h200):
    space = get_space("attention_backward", dtype="float16")
    for atomic in (1, 0):
        config = config_of(space, "fa2", DQ_ATOMIC=atomic)
        steps = space.launches(config, GQA, h200)
        mha = space.launches(config, (2, 8, 77, 1031, 64), h200)
        dkdv = next(s for s in steps if s.kernel == "attention_bwd_dkdv")
        assert dkdv.grid == (math.ceil(1031 / config["BC"]), 2, 2), "a block per kv head's keys"
        assert int(dkdv.args[-1]) == 4 and len(dkdv.args) == len(mha[1].args) + 1
        if not atomic:
            dq = steps[-1]
            assert dq.kernel == "attention_bwd_dq" and dq.grid[1:] == (8, 2) and int(dq.args[-1]) == 4
        assert space.workspace(config, GQA) == space.workspace(config, (2, 8, 77, 1031, 64)), "no workspace"


# --- validation -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kernel", KERNELS + BACKWARD)
def test_grouped_targets_validate_on_grouped_cases_only(kernel, h200):
    """KV_GROUPED is compiled in: a grouped target's cases are all grouped (group sizes 2 to 8, multi-query
    among them, ragged lengths, large logits), a multi-head target's all multi-head."""
    space = get_space(kernel, dtype="bfloat16")
    cases = space.validation_cases((4, 32, 8, 4096, 4096, 96))
    dims = [attention_dims(s) for s, _ in cases]
    assert all(len(s) == 6 and p.grouped and p.d == 96 and p.h % p.hkv == 0 for (s, _), p in zip(cases, dims))
    assert {p.group for p in dims} >= {2, 3, 4, 8} and any(p.hkv == 1 for p in dims)
    assert any(p.sq % 16 and p.skv % 64 for p in dims) and any(kind == WIDE for _, kind in cases)
    assert any(p.sq <= 16 for p in dims) and any(p.sq > 64 for p in dims), "decoding (split_kv) and prefill"
    assert not any(p.grouped for p in map(attention_dims, (s for s, _ in space.validation_cases((4, 16, 64, 64, 96)))))
    config = space.rule_default((4, 32, 8, 4096, 4096, 96), h200)
    assert all(not space.violations(config, s, h200) for s, _ in cases if attention_dims(s).sq > 64)


def test_call_logs_take_six_number_shapes(tmp_path):
    path = tmp_path / "calls.json"
    path.write_text('{"version": %d, "calls": [{"kernel": "attention", "shape": [2, 8, 2, 77, 1031, 64], '
                    '"dtype": "float16"}]}' % call_log.VERSION)  # fmt: skip
    assert [c[1] for c in call_log.load_shapes(path)] == [GQA]
    path.write_text('{"version": %d, "calls": [{"kernel": "attention", "shape": [2, 8, 77], "dtype": "float16"}]}'
                    % call_log.VERSION)  # fmt: skip
    with pytest.raises(InvalidArgument, match=r"expected 5 integers \[B, H, SQ, SKV, D\] or 6 integers"):
        call_log.load_shapes(path)


# --- nvcc -------------------------------------------------------------------------------------------------------
@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_grouped_kernels_compile_without_spills(arch, h200, cache_dir):
    """Random valid configurations of every algorithm (fa3: sm_90a only), forward and backward, causal or not, at
    every head_dim, compiled with KV_GROUPED (the group-size argument): no errors, no spills."""
    jobs = []
    for i, d in enumerate(HEAD_DIMS):
        for kernel in (KERNELS[i % 2], BACKWARD[i % 2]):
            for dtype in ("float16", "bfloat16", "float32"):
                if dtype == "float32" and kernel in BACKWARD:
                    continue
                space = get_space(kernel, dtype=dtype)
                for algo in space.domain(ALGO):
                    if algo == "fa3" and arch != "sm_90a":
                        continue
                    narrowed = get_space(kernel, {ALGO: [algo]}, dtype=dtype)
                    shape = (1, 8, 2, 16 if algo == "split_kv" else 1000, 1000, d)
                    if narrowed.algos[algo].unfit(shape, h200):
                        continue
                    for config in sample_valid(narrowed, h200, shape, 1, seed=d):
                        jobs.append((space, config, shape))
    assert {c[ALGO] for _, c, _ in jobs} == {"fa2", "simt", "split_kv"} | ({"fa3"} if arch == "sm_90a" else set())
    compiler = Compiler(arch, cache_dir=cache_dir)
    try:
        futures = [compiler.submit(s.template_for(c), s.compile_defines(c, sh)) for s, c, sh in jobs]
        results = [f.result() for f in futures]
    finally:
        compiler.close()
    failed = [(s.name, s.dtype, c, r.error) for (s, c, _), r in zip(jobs, results) if not r.ok]
    assert not failed, failed[:2]
    spilled = [(s.name, s.dtype, c, r.spill_bytes) for (s, c, _), r in zip(jobs, results) if r.spill_bytes]
    assert not spilled, spilled[:3]


# --- the grouped backward's pipeline, transcribed -----------------------------------------------------------------
def dkdv_block_schedule(shape, config: dict, causal: int, k0: int, fault: str = "") -> dict:
    """One block of attention_bwd_dkdv with KV_GROUPED (kernel_templates/attention_backward.cu), transcribed: the
    loop over the group's query heads, each with its STAGES-deep cp.async ring, as the sequence of what every
    thread of the block does (every bound and branch depends on the block, the query head and the tile alone, so
    all threads run this same sequence: the same barriers, commits and waits). Checked as it runs: a tile is
    computed on only after a wait that covers its commit group and a barrier after that wait; no slot of the ring
    (nor the dSᵀ tile) is written before a barrier that follows its last read; K and V land with the first group and
    are never written again; no copy is in flight at the end of a query head's pipeline. Returns the query rows
    walked per query head and the barriers."""
    p = attention_dims(shape)
    bc, br, stages, atomic = config["BC"], config["BR"], config["STAGES"], config["DQ_ATOMIC"]
    seq_q, seq_kv, offset = p.sq, p.skv, p.skv - p.sq
    barriers = 0
    groups: list[list[tuple]] = []  # committed cp.async groups, each the copies it holds
    pending: list[tuple] = []  # copies issued since the last commit
    done = 0  # groups a wait has seen complete
    held = {}  # shared region → (what it holds, the barrier count when it became this thread's)
    last_read = {}  # shared region → the barrier count at its last read
    walked: list[list[int]] = []

    def writable(region):
        assert last_read.get(region, -1) < barriers, f"{region} rewritten without a barrier after its last read"

    def load(region, what):  # cp.async
        writable(region)
        pending.append((region, what))

    def store(region, what):  # st.shared
        writable(region)
        held[region] = (what, barriers)

    def commit():
        groups.append(list(pending))
        pending.clear()

    def wait(n):
        nonlocal done
        done = max(done, len(groups) - n)
        for g in groups[:done]:
            for region, what in g:
                if held.get(region, (None,))[0] != what:
                    held[region] = (what, barriers)

    def sync():
        nonlocal barriers
        barriers += 1

    def read(region, what):
        got, since = held.get(region, (None, barriers))
        assert got == what and since < barriers, f"{what} read before its wait and a barrier (holding {got})"
        last_read[region] = barriers

    load("k", ("k", k0))  # KV_GROUPED: before the loop over the group
    load("v", ("v", k0))
    for member in range(p.group):
        head = member
        if member and fault != "no_head_barrier":
            sync()
        qt_begin = max(0, k0 - offset) // br if causal else 0
        n_iter = -(-seq_q // br) - qt_begin

        def load_stage(slot, i):
            load(("ring", slot), ("q", head, qt_begin + i))

        for s in range(stages - 1):
            if s < n_iter:
                load_stage(s, s)
            commit()
        rows = []
        for i in range(n_iter):
            wait(max(stages - 2, 0) + (fault == "wait_short"))
            sync()
            if stages > 1:
                if i + stages - 1 < n_iter:
                    load_stage((i + stages - 1) % stages, i + stages - 1)
                commit()
            else:
                load_stage(0, i)
                commit()
                wait(0 + (fault == "wait_short"))
                sync()
            slot = i % stages if stages > 1 else 0
            read("k", ("k", k0))
            read("v", ("v", k0))
            read(("ring", slot), ("q", head, qt_begin + i))
            rows += range((qt_begin + i) * br, min((qt_begin + i + 1) * br, seq_q))
            if atomic:
                store("ds", ("ds", head, i))  # every warp's dSᵀ
                sync()
                read("ds", ("ds", head, i))
                read("k", ("k", k0))
        commit()
        if fault != "no_drain":
            wait(0)
        assert not pending and done == len(groups), "copies in flight past a query head's pipeline"
        walked.append(rows)
    return {"walked": walked, "barriers": barriers}


@pytest.mark.parametrize("kernel", BACKWARD)
@pytest.mark.parametrize("changes", [{}, {"STAGES": 1}, {"STAGES": 3, "DQ_ATOMIC": 0}, {"BR": 16, "WARPS": 4},
                                     {"BC": 64, "WARPS": 4, "STAGES": 1, "DQ_ATOMIC": 0}, {"BR": 64, "BC": 32}],
                         ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "default")  # fmt: skip
def test_grouped_dkdv_pipeline_stays_in_step_and_walks_every_visible_query(kernel, changes, h200):
    """The transcribed dK/dV block (`dkdv_block_schedule`) on the grouped validation cases and the GPU run's
    target: every key block of every case runs each query head's pipeline in step (checks inside), and walks, for
    each query head of its group, exactly the query tiles holding a query that sees one of its keys (causal: from
    the tile of query k0 − (seq_kv − seq_q), at least one), each row once."""
    space = get_space(kernel, dtype="float16")
    config = {**config_of(space, "fa2"), **changes}
    target = (2, 8, 2, 333, 1000, 64)
    for shape, _ in [*space.validation_cases(target), (target, None)]:
        p = attention_dims(shape)
        if space.violations(config, shape, h200):
            continue
        for k0 in range(0, p.skv, config["BC"]):
            walked = dkdv_block_schedule(shape, config, space.causal, k0)["walked"]
            assert len(walked) == p.group
            keys_last = min(k0 + config["BC"], p.skv) - 1
            first_seeing = max(0, k0 - (p.skv - p.sq)) if space.causal else 0  # the first query seeing key k0
            for rows in walked:
                assert rows == sorted(set(rows)) and rows[-1] == p.sq - 1, (shape, k0)
                assert rows[0] <= first_seeing < rows[0] + config["BR"], (shape, k0)
                assert keys_last >= 0 and first_seeing < p.sq


@pytest.mark.parametrize("stages", [1, 2, 3])
@pytest.mark.parametrize("fault, message", [("no_head_barrier", "without a barrier"), ("wait_short", "before its wait"),
                                            ("no_drain", "in flight")])  # fmt: skip
def test_dkdv_pipeline_transcription_catches_a_pipeline_out_of_step(stages, fault, message):
    """The transcription's checks bite: without the barrier between query heads the next head's prologue
    overwrites a slot the last one may still read; a wait that leaves one group more in flight reads a tile before
    it landed; a head's pipeline not drained leaves copies in flight."""
    config = {"BC": 64, "BR": 16, "STAGES": stages, "DQ_ATOMIC": 0}
    shape = (1, 4, 2, 100, 100, 64)
    assert dkdv_block_schedule(shape, config, 0, 0)["barriers"] > 0
    if fault == "no_head_barrier" and stages == 1:
        pytest.skip("one slot: each tile's own barrier comes before its load")
    with pytest.raises(AssertionError, match=message):
        dkdv_block_schedule(shape, config, 0, 0, fault=fault)


@pytest.mark.nvcc
def test_grouped_backward_at_the_register_bound_does_not_spill(h200, cache_dir):
    """The two grouped dK/dV builds that spilled (255 registers, 16 and 24 bytes) while K, V and the zeroed sums
    were set inside the loop over the group (ptxas 13.0, sm_90a); their multi-head builds never did."""
    space = get_space("attention_causal_backward", dtype="float16")
    jobs = [({"BC": 128, "WARPS": 4, "BR": 16, "STAGES": 2, "DQ_ATOMIC": 1}, 64),
            ({"BC": 128, "WARPS": 8, "BR": 32, "STAGES": 1, "DQ_ATOMIC": 1}, 128)]  # fmt: skip
    compiler = Compiler("sm_90a", cache_dir=cache_dir)
    try:
        for changes, d in jobs:
            config, shape = config_of(space, "fa2", **changes), (2, 8, 2, 333, 1000, d)
            assert not space.violations(config, shape, h200)
            result = compiler.compile(space.template_for(config), space.compile_defines(config, shape))
            assert result.ok and not result.spill_bytes, (changes, d, result.error, result.spill_bytes)
    finally:
        compiler.close()
