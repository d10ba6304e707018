"""GPU tier: every attention algorithm, at every dtype it answers, head_dim 64 and 128, causal and not, is correct
for its default and random valid configurations. Each evaluation first checks the family's validation cases
(lengths 1, 77, 1000, 1031, 4097; seq_q ≠ seq_kv; large logits) against float64, then the target shape.
fa3 (Hopper only; skipped elsewhere) has its own sweep over every tunable value at head_dim 64, 96 and 128, and is
compared with fa2 on the very same inputs."""

from __future__ import annotations

import pytest

from autotune.spaces import ALGO, get_space

from attention_checks import pick
from pinned_rows import pinned

pytestmark = pytest.mark.gpu

PER_ALGORITHM = 3  # random valid configurations per case, besides the default
KERNELS = ("attention", "attention_causal")
CASES = [
    (kernel, dtype, algo, d)
    for kernel in KERNELS
    for dtype in ("float16", "bfloat16", "float32")
    for algo in get_space(kernel, dtype=dtype).domain(ALGO)
    for d in (64, 128)
]


@pytest.fixture(scope="module")
def device():
    from autotune.device import query_device

    return query_device()


@pytest.mark.parametrize("kernel, dtype, algo, d", CASES, ids=["-".join(map(str, c)) for c in CASES])
def test_random_valid_configs_are_correct(kernel, dtype, algo, d, device):
    from autotune.tuning.evaluation.gpu import GpuEvaluator

    space = get_space(kernel, dtype=dtype)
    shape = (2, 3, 5, 3001, d) if algo == "split_kv" else (2, 3, 333, 1000, d)  # split_kv decodes (seq_q ≤ 64)
    configs = pick(space, shape, device, PER_ALGORITHM, seed=d, algo=algo)
    assert len(configs) > PER_ALGORITHM // 2, "the space offers valid configurations here"
    with GpuEvaluator(space, shape, seed=11, min_time_ms=0.5, max_reps=3) as evaluator:
        results = [f.result() for f in [evaluator.submit(c) for c in configs]]
    wrong = [(space.describe(c), m.failure, m.reason) for c, m in zip(configs, results) if not m.ok]
    assert not wrong, wrong
    assert all(m.registers and m.spill_bytes == 0 for m in results)


FA3_CASES = [(kernel, dtype, d) for kernel in KERNELS for dtype in ("float16", "bfloat16") for d in (64, 96, 128)]


def fa3_variants(space, d: int) -> list[dict]:
    """The default, then one change at a time so that every tunable value runs: both consumer counts, ping-pong
    on and off, overlap on and off, the ring depths, small and FA3-sized key tiles (BN 176 at head_dim 96/128, 192
    at 64, 224 and 256 without overlap at 64), REVERSE (causal)."""
    base = {ALGO: "fa3", **space.algos["fa3"].default_config}
    changes = [{}, {"WG": 1, "PINGPONG": 0}, {"WG": 1, "PINGPONG": 0, "OVERLAP": 0, "BN": 64}, {"PINGPONG": 0},
               {"OVERLAP": 0}, {"STAGES": 3}, {"STAGES": 4, "BN": 64}, {"BN": 96, "STAGES": 3},
               {"BN": 144}, {"BN": 176} if d > 64 else {"BN": 192},
               {"BN": 160, "WG": 1, "PINGPONG": 0}]  # fmt: skip
    if d == 64:
        changes += [{"BN": 256, "OVERLAP": 0}, {"BN": 224, "STAGES": 3}]
    if space.causal:
        changes += [{"REVERSE": 1}, {"REVERSE": 1, "BN": 64, "WG": 1, "PINGPONG": 0}]
    return [{**base, **change} for change in changes]


@pytest.mark.parametrize("kernel, dtype, d", FA3_CASES, ids=["-".join(map(str, c)) for c in FA3_CASES])
def test_fa3_variants_and_random_configs_are_correct(kernel, dtype, d, device):
    """fa3 (Hopper only) at head_dim 64, 96 and 128: each variant and a few random valid configurations, on the
    family's validation cases (ragged seq_q and seq_kv, seq_q != seq_kv causal, one row, large logits) and an odd
    target shape, against float64."""
    from autotune.tuning.evaluation.gpu import GpuEvaluator

    space = get_space(kernel, dtype=dtype)
    shape = (2, 3, 333, 1000, d)
    if space.algos["fa3"].unfit(shape, device):
        pytest.skip(space.algos["fa3"].unfit(shape, device))
    configs = [c for c in fa3_variants(space, d) if not space.violations(c, shape, device)]
    assert len(configs) >= 9, "the variants are valid here"
    configs += [c for c in pick(space, shape, device, 3, seed=d + 7, algo="fa3") if c not in configs]
    with GpuEvaluator(space, shape, seed=13, min_time_ms=0.5, max_reps=3) as evaluator:
        results = [f.result() for f in [evaluator.submit(c) for c in configs]]
    wrong = [(space.describe(c), m.failure, m.reason) for c, m in zip(configs, results) if not m.ok]
    assert not wrong, wrong
    assert all(m.registers and m.spill_bytes == 0 for m in results)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("shape", [(3, 5, 1, 1, 128), (1, 2, 200, 200, 64), (2, 2, 129, 4097, 96),
                                   (1, 1, 1000, 1031, 128)], ids=lambda s: "x".join(map(str, s)))  # fmt: skip
def test_fa3_matches_fa2_on_the_same_inputs(kernel, shape, device, tmp_path):
    """fa3 and fa2 (both P rounded to fp16 before P·V, fp32 statistics) agree closely on the very same inputs,
    including a head of one query and one key, and large logits; LSE to fp32 rounding."""
    import numpy as np

    from autotune.spaces.attention import O_TOLERANCE, WIDE
    from autotune.spaces.base import UNIFORM

    space = get_space(kernel, dtype="float16")
    if space.algos["fa3"].unfit(shape, device):
        pytest.skip(space.algos["fa3"].unfit(shape, device))
    fa2 = {ALGO: "fa2", **space.algos["fa2"].default_config}
    for kind in (UNIFORM, WIDE):
        x = space.inputs(shape, np.random.default_rng(6), kind)
        q, k, v = (x[n] for n in ("q", "k", "v"))
        ref_o, ref_lse = pinned(kernel, space, shape, fa2, device, tmp_path / f"fa2-{kind}.db")(q, k, v)
        for i, change in enumerate([{}, {"WG": 1, "PINGPONG": 0, "OVERLAP": 0, "BN": 64}]):
            config = {ALGO: "fa3", **space.algos["fa3"].default_config, **change}
            o, lse = pinned(kernel, space, shape, config, device, tmp_path / f"fa3-{kind}-{i}.db")(q, k, v)
            ref = ref_o.astype(np.float64)
            err = np.linalg.norm(o.astype(np.float64) - ref) / max(np.linalg.norm(ref), 1e-30)
            assert err <= O_TOLERANCE["float16"], (kind, change, err)
            np.testing.assert_allclose(lse, ref_lse, rtol=1e-5, atol=1e-5, err_msg=f"{kind} {change}")


SPLIT_SHAPES = [(2, 4, 1, 4097, 128), (1, 3, 7, 3001, 64), (3, 2, 16, 1000, 128)]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("shape", SPLIT_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_split_kv_matches_the_one_pass_kernel(kernel, shape, device, tmp_path):
    """Several split counts (1 to more splits than KV tiles: empty splits), and on Hopper the splits combined in
    their cluster (COMBINE=1, up to the non-portable 16), against fa2 on the very same inputs."""
    import numpy as np

    from autotune.spaces.attention import O_TOLERANCE

    space = get_space(kernel, dtype="float16")
    x = space.inputs(shape, np.random.default_rng(5))
    q, k, v = (x[n] for n in ("q", "k", "v"))
    one_pass = pinned(kernel, space, shape, {ALGO: "fa2", **space.algos["fa2"].default_config}, device,
                      tmp_path / "fa2.db")(q, k, v)  # fmt: skip
    base = {ALGO: "split_kv", **space.algos["split_kv"].default_config}
    changes = [{"SPLITS": 1}, {"SPLITS": 4, "WARPS": 2}, {"SPLITS": 128, "WARPS": 2, "STAGES": 3},
               {"SPLITS": 8, "WARPS": 1, "STAGES": 1, "SWIZZLE": 1}]
    if tuple(device.compute_capability) >= (9, 0):  # thread block clusters
        changes += [{"SPLITS": 8, "COMBINE": 1}, {"SPLITS": 2, "WARPS": 2, "COMBINE": 1, "SWIZZLE": 1},
                    {"SPLITS": 16, "STAGES": 3, "COMBINE": 1}]  # 16: past the portable cluster size
    for i, change in enumerate(changes):
        config = {**base, **change}
        assert not space.violations(config, shape, device), space.violations(config, shape, device)
        o, lse = pinned(kernel, space, shape, config, device, tmp_path / f"split{i}.db")(q, k, v)
        ref_o = one_pass[0].astype(np.float64)
        err = np.linalg.norm(o.astype(np.float64) - ref_o) / np.linalg.norm(ref_o)
        assert err <= O_TOLERANCE["float16"], (change, err)
        np.testing.assert_allclose(lse, one_pass[1], rtol=1e-5, atol=1e-5, err_msg=str(change))


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("shape", [(2, 3, 77, 1031, 128), (1, 8, 1, 20000, 64)], ids=["prefill", "decode"])
def test_dispatch_on_torch_tensors(kernel, shape, tmp_path):
    """Nothing tuned: the rule default (fa3 for prefill on Hopper, fa2 elsewhere; split_kv sized to the GPU for
    decoding) on bf16 tensors, against float64 attention; bad input is one clear line."""
    torch = pytest.importorskip("torch")
    import math

    import autotune
    from autotune.errors import InvalidArgument, InvalidType
    from autotune.spaces.attention import LSE_TOLERANCE, O_TOLERANCE

    b, h, sq, skv, d = shape
    tuned = autotune.load(kernel, db=str(tmp_path / "none.db"))
    q, k, v = ((torch.rand(b, h, n, d, device="cuda") * 2 - 1).to(torch.bfloat16) for n in (sq, skv, skv))
    o, lse = tuned(q, k, v)
    s = q.double() @ k.double().transpose(-1, -2) / math.sqrt(d)
    if kernel == "attention_causal":
        rows = torch.arange(sq, device="cuda")[:, None] + (skv - sq)
        s = s.masked_fill(torch.arange(skv, device="cuda")[None, :] > rows, float("-inf"))
    ref_lse = torch.logsumexp(s, dim=-1)
    ref_o = torch.softmax(s, dim=-1) @ v.double()
    assert float(torch.linalg.norm(o.double() - ref_o) / torch.linalg.norm(ref_o)) <= O_TOLERANCE["bfloat16"]
    assert float(torch.linalg.norm(lse.double() - ref_lse) / torch.linalg.norm(ref_lse)) <= LSE_TOLERANCE["bfloat16"]
    with pytest.raises(InvalidType, match="dtype"):
        tuned(q, k.half(), v)
    with pytest.raises(InvalidArgument, match="head_dim"):
        tuned(q, k[..., :32].contiguous(), v[..., :32].contiguous())
