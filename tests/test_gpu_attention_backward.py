"""GPU tier of the attention backward: the default and random valid configurations, and every tunable value one
at a time, are correct against the float64 reference, causal and not, fp16 and bf16, every head_dim. Each
evaluation first checks the family's validation cases (lengths 1, 5, 77, 129, 1000, 1031, 4097; seq_q ≠ seq_kv
both ways, causal bottom-right with seq_q < seq_kv; one query and one key; large logits), then an odd target
shape. Then end to end: the GPU forward's own o and lse fed to the backward, and the two dQ strategies on the same
inputs."""

from __future__ import annotations

import numpy as np
import pytest

from autotune.spaces import ALGO, get_space
from autotune.spaces.attention import HEAD_DIMS

from attention_checks import evaluate, pick
from pinned_rows import pinned

pytestmark = pytest.mark.gpu

PER_CASE = 3  # random valid configurations per case, besides the default
KERNELS = ("attention_backward", "attention_causal_backward")
CASES = [(kernel, dtype, d) for kernel in KERNELS for dtype in ("float16", "bfloat16") for d in HEAD_DIMS]


@pytest.fixture(scope="module")
def device():
    from autotune.device import query_device

    return query_device()


@pytest.mark.parametrize("kernel, dtype, d", CASES, ids=["-".join(map(str, c)) for c in CASES])
def test_random_valid_configs_are_correct(kernel, dtype, d, device):
    space = get_space(kernel, dtype=dtype)
    shape = (2, 3, 333, 1000, d)
    configs = pick(space, shape, device, PER_CASE, seed=d)
    assert len(configs) > PER_CASE // 2, "the space offers valid configurations here"
    evaluate(space, shape, configs, seed=11)


def variants(space, d: int) -> list[dict]:
    """The default, then one change at a time so that every tunable value runs: the dQ pass (atomic and not),
    each ring depth, each query tile, 2, 4 and 8 warps with one and two m16 key tiles per warp, swizzle."""
    base = dict(space.default_config)
    changes = [{}, {"DQ_ATOMIC": 0}, {"STAGES": 1}, {"STAGES": 3}, {"STAGES": 1, "DQ_ATOMIC": 0},
               {"STAGES": 3, "DQ_ATOMIC": 0}, {"BR": 16}, {"BR": 16, "DQ_ATOMIC": 0},
               {"BC": 64, "WARPS": 4}, {"BC": 32, "WARPS": 2, "BR": 16}, {"BC": 32, "WARPS": 2, "DQ_ATOMIC": 0},
               {"BC": 128, "WARPS": 4, "BR": 16}, {"BC": 128, "WARPS": 4, "BR": 16, "DQ_ATOMIC": 0},
               {"BR": 64}, {"BR": 64, "DQ_ATOMIC": 0, "BC": 64, "WARPS": 4}]  # fmt: skip
    if d in (64, 128):
        changes += [{"SWIZZLE": 1}, {"SWIZZLE": 1, "DQ_ATOMIC": 0, "STAGES": 3}]
    return [{**base, **change} for change in changes]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("d", [64, 128])
def test_every_tunable_value_is_correct(kernel, d, device):
    """The variants valid at this head_dim (two m16 key tiles per warp and BR 64 only fit head_dim 64), bf16."""
    space = get_space(kernel, dtype="bfloat16")
    shape = (1, 4, 200, 333, d)
    configs = [c for c in variants(space, d) if not space.violations(c, shape, device)]
    assert len(configs) >= 10, "the variants are valid here"
    evaluate(space, shape, configs, seed=13)


def rel(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("shape", [(2, 3, 77, 1031, 128), (1, 2, 1000, 1000, 64), (3, 1, 5, 4097, 128)],
                         ids=lambda s: "x".join(map(str, s)))  # fmt: skip
def test_backward_of_the_gpu_forward(kernel, shape, device, tmp_path):
    """The training path: fp16 o and lse from the GPU forward (fa2, default) fed to the backward (both dQ
    strategies); each gradient within the family's tolerance of float64 gradients of the same q, k, v, do, on
    uniform inputs and large logits; the two strategies agree closely on the very same inputs."""
    from autotune.spaces.attention import WIDE
    from autotune.spaces.base import UNIFORM

    backward = get_space(kernel, dtype="float16")
    fwd_kernel = backward.forward().name
    fwd_space = get_space(fwd_kernel, dtype="float16")
    fwd = pinned(fwd_kernel, fwd_space, shape, {ALGO: "fa2", **fwd_space.algos["fa2"].default_config}, device,
                 tmp_path / "forward.db")  # fmt: skip
    base = dict(backward.default_config)
    runs = {}
    for kind in (UNIFORM, WIDE):
        x = backward.inputs(shape, np.random.default_rng(7), kind)
        o, lse = fwd(x["q"], x["k"], x["v"])
        ref = backward.reference(backward.decoded_inputs(x, shape), shape)
        for atomic in (1, 0):
            config = {**base, "DQ_ATOMIC": atomic}
            grads = pinned(kernel, backward, shape, config, device, tmp_path / f"bwd-{kind}-{atomic}.db")(
                x["q"], x["k"], x["v"], o, x["do"], lse
            )
            runs[kind, atomic] = grads
            for name, g in zip(("dq", "dk", "dv"), grads):
                assert np.isfinite(g).all(), (kind, atomic, name)
                assert rel(g, ref[name]) <= backward.tolerance(name, shape), (kind, atomic, name, rel(g, ref[name]))
        for a, b in zip(runs[kind, 1], runs[kind, 0]):
            assert rel(a, b) <= 1e-3, kind  # the same products; only the order of dQ's fp32 sums differs


@pytest.mark.parametrize("kernel", KERNELS)
def test_dispatch_on_torch_tensors(kernel, tmp_path):
    """Nothing tuned: the rule default on bf16 tensors against torch's own autograd in float64, with causal
    seq_q < seq_kv (bottom-right) and ragged lengths; bad input is one clear line."""
    torch = pytest.importorskip("torch")
    import math

    import autotune
    from autotune.errors import InvalidArgument, InvalidType
    from autotune.spaces.attention_backward import GRAD_TOLERANCE

    b, h, sq, skv, d = 2, 3, 77, 1031, 64
    q, k, v = (((torch.rand(b, h, n, d, device="cuda") * 2 - 1)).to(torch.bfloat16) for n in (sq, skv, skv))
    do = (torch.rand(b, h, sq, d, device="cuda") * 2 - 1).to(torch.bfloat16)
    o, lse = autotune.load(kernel.replace("_backward", ""), db=str(tmp_path / "none.db"))(q, k, v)
    dq, dk, dv = autotune.load(kernel, db=str(tmp_path / "none.db"))(q, k, v, o, do, lse)
    leaves = [t.double().requires_grad_() for t in (q, k, v)]
    s = leaves[0] @ leaves[1].transpose(-1, -2) / math.sqrt(d)
    if kernel == "attention_causal_backward":
        rows = torch.arange(sq, device="cuda")[:, None] + (skv - sq)
        s = s.masked_fill(torch.arange(skv, device="cuda")[None, :] > rows, float("-inf"))
    (torch.softmax(s, dim=-1) @ leaves[2]).backward(do.double())
    for got, leaf in zip((dq, dk, dv), leaves):
        err = float(torch.linalg.norm(got.double() - leaf.grad) / torch.linalg.norm(leaf.grad))
        assert err <= GRAD_TOLERANCE["bfloat16"], err
    tuned = autotune.load(kernel, db=str(tmp_path / "none.db"))
    with pytest.raises(InvalidType, match="lse"):
        tuned(q, k, v, o, do, lse.bfloat16())
    with pytest.raises(InvalidArgument, match="do has shape"):
        tuned(q, k, v, o, do[:, :, :5].contiguous(), lse)
