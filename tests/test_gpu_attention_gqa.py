"""GPU tier of grouped-query and multi-query attention (k and v with HKV < H heads; query head h reads kv head
h // (H / HKV)). Every forward algorithm (simt, fa2, fa3 on Hopper, split_kv with a group's rows packed into one
tile) and the fa2 backward (dK, dV summed over the group in one block), at their dtypes and head_dim 64 and 128:
the default and random valid configurations against float64, after the grouped validation cases (groups of 2, 3,
4 and 8, multi-query, ragged lengths, large logits). Then the same inputs through the multi-head kernels with k and
v repeated per query head (the same per-row arithmetic: agreement to fp32 rounding, where a wrong kv head errs by
O(1)); the backward of the GPU forward; the dispatcher's rule defaults and the torch operators with autograd
against torch in float64 with k and v repeated by ``repeat_interleave``."""

from __future__ import annotations

import math

import numpy as np
import pytest

from autotune.spaces import ALGO, get_space

from attention_checks import evaluate, pick
from pinned_rows import pinned

pytestmark = pytest.mark.gpu

PER_CASE = 2  # random valid configurations per case, besides the default
KERNELS = ("attention", "attention_causal")
BACKWARD = ("attention_backward", "attention_causal_backward")
FORWARD_CASES = [
    (kernel, dtype, algo, d)
    for kernel in KERNELS
    for dtype in ("float16", "bfloat16", "float32")
    for algo in get_space(kernel, dtype=dtype).domain(ALGO)
    for d in (64, 128)
]
BACKWARD_CASES = [(kernel, dtype, d) for kernel in BACKWARD for dtype in ("float16", "bfloat16") for d in (64, 128)]


@pytest.fixture(scope="module")
def device():
    from autotune.device import query_device

    return query_device()


def rel(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


# --- forward ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kernel, dtype, algo, d", FORWARD_CASES, ids=["-".join(map(str, c)) for c in FORWARD_CASES])
def test_grouped_forward_configs_are_correct(kernel, dtype, algo, d, device):
    space = get_space(kernel, dtype=dtype)
    # group 4 prefill; split_kv: group 4 × 5 queries = 20 packed rows (two tiles, the second ragged)
    shape = (2, 8, 2, 5, 3001, d) if algo == "split_kv" else (2, 8, 2, 333, 1000, d)
    if space.algos[algo].unfit(shape, device):
        pytest.skip(space.algos[algo].unfit(shape, device))
    configs = pick(space, shape, device, PER_CASE, seed=d + 1, algo=algo)
    assert configs, "the space offers valid configurations here"
    evaluate(space, shape, configs, seed=17)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("algo", ["fa2", "fa3", "split_kv", "simt"])
@pytest.mark.parametrize("shape", [(2, 8, 2, 9, 1031, 128), (1, 6, 1, 16, 777, 64), (1, 4, 2, 1, 4097, 64)],
                         ids=lambda s: "x".join(map(str, s)))  # fmt: skip
def test_grouped_forward_equals_multi_head_with_repeated_kv(kernel, algo, shape, device, tmp_path):
    """The grouped kernels and the multi-head kernels on k and v repeated per query head compute each row with the
    same arithmetic: o and lse agree to fp32 rounding (a query head reading another's kv head differs by O(1)).
    split_kv: with the group's rows packed, several split counts, and (Hopper) the splits combined in a cluster."""
    dtype = "float32" if algo == "simt" else "float16"
    space = get_space(kernel, dtype=dtype)
    if algo not in space.domain(ALGO) or space.algos[algo].unfit(shape, device):
        pytest.skip(f"{algo} does not compute {shape} here")
    b, h, hkv, sq, skv, d = shape
    mha = (b, h, sq, skv, d)
    x = space.inputs(shape, np.random.default_rng(3))
    q, k, v = (x[n] for n in ("q", "k", "v"))
    kr, vr = (np.ascontiguousarray(np.repeat(a, h // hkv, axis=1)) for a in (k, v))
    changes = [{}] if algo != "split_kv" else [{"SPLITS": 1}, {"SPLITS": 8, "WARPS": 2}, {"SPLITS": 64, "WARPS": 1},
                                               {"SPLITS": 4, "WARPS": 2, "COMBINE": 1},
                                               {"SPLITS": 16, "COMBINE": 1}]  # fmt: skip
    configs = [{ALGO: algo, **space.algos[algo].default_config, **change} for change in changes]
    configs = [c for c in configs if not space.violations(c, shape, device) and not space.violations(c, mha, device)]
    assert configs, "valid configurations at both shapes"
    for i, config in enumerate(configs):
        change = {n: config[n] for n in ("SPLITS", "WARPS", "COMBINE") if n in config}
        o, lse = pinned(kernel, space, shape, config, device, tmp_path / f"gqa{i}.db")(q, k, v)
        o_ref, lse_ref = pinned(kernel, space, mha, config, device, tmp_path / f"mha{i}.db")(q, kr, vr)
        assert o.shape == o_ref.shape == (b, h, sq, d) and lse.shape == (b, h, sq)
        assert rel(o, o_ref) <= 1e-6, (change, rel(o, o_ref))
        np.testing.assert_allclose(lse, lse_ref, rtol=1e-6, atol=1e-6, err_msg=str(change))
        ref = space.reference(space.decoded_inputs(x, shape), shape)
        assert rel(o, ref["o"]) <= space.tolerance("o", shape), (change, rel(o, ref["o"]))


# --- backward ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kernel, dtype, d", BACKWARD_CASES, ids=["-".join(map(str, c)) for c in BACKWARD_CASES])
def test_grouped_backward_configs_are_correct(kernel, dtype, d, device):
    """The default, both dQ strategies and ring depths, and random valid configurations, on the grouped
    validation cases and a group-4 target."""
    space = get_space(kernel, dtype=dtype)
    shape = (2, 8, 2, 333, 1000, d)
    base = dict(space.default_config)
    configs = [{**base, **change} for change in ({}, {"DQ_ATOMIC": 0}, {"STAGES": 1}, {"STAGES": 3, "DQ_ATOMIC": 0})]
    configs = [c for c in configs if not space.violations(c, shape, device)]
    configs += [c for c in pick(space, shape, device, PER_CASE, seed=d + 2, algo="fa2") if c not in configs]
    assert len(configs) >= 3
    evaluate(space, shape, configs, seed=19)


@pytest.mark.parametrize("kernel", BACKWARD)
@pytest.mark.parametrize("shape", [(2, 8, 2, 77, 1031, 128), (1, 4, 1, 1000, 1000, 64)], ids=["gqa", "mqa"])
def test_grouped_backward_of_the_gpu_forward(kernel, shape, device, tmp_path):
    """fp16 o and lse from the GPU forward (fa2) fed to the backward, both dQ strategies: dq, dk, dv (dk, dv of
    k's shape, summed over each group) within the family's tolerance of float64, uniform and large logits."""
    from autotune.spaces.attention import WIDE
    from autotune.spaces.base import UNIFORM

    backward = get_space(kernel, dtype="float16")
    fwd_space = backward.forward()
    fwd = pinned(fwd_space.name, fwd_space, shape, {ALGO: "fa2", **fwd_space.algos["fa2"].default_config}, device,
                 tmp_path / "forward.db")  # fmt: skip
    for kind in (UNIFORM, WIDE):
        x = backward.inputs(shape, np.random.default_rng(7), kind)
        o, lse = fwd(x["q"], x["k"], x["v"])
        ref = backward.reference(backward.decoded_inputs(x, shape), shape)
        for atomic in (1, 0):
            config = {**backward.default_config, "DQ_ATOMIC": atomic}
            grads = pinned(kernel, backward, shape, config, device, tmp_path / f"bwd-{kind}-{atomic}.db")(
                x["q"], x["k"], x["v"], o, x["do"], lse
            )
            for name, g in zip(("dq", "dk", "dv"), grads):
                assert g.shape == ref[name].shape and np.isfinite(g).all(), (kind, atomic, name)
                assert rel(g, ref[name]) <= backward.tolerance(name, shape), (kind, atomic, name, rel(g, ref[name]))


# --- dispatch and torch -----------------------------------------------------------------------------------------
def torch_reference(q, k, v, causal: bool):
    """float64 attention with k and v repeated per query head (repeat_interleave), the causal mask bottom-right."""
    import torch

    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    sq, skv = q.shape[2], k.shape[2]
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[3])
    if causal:
        rows = torch.arange(sq, device=q.device)[:, None] + (skv - sq)
        s = s.masked_fill(torch.arange(skv, device=q.device)[None, :] > rows, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("shape", [(2, 8, 2, 77, 1031, 128), (1, 32, 8, 1, 20000, 128), (1, 8, 1, 3, 4097, 64)],
                         ids=["prefill", "decode", "mqa-decode"])  # fmt: skip
def test_rule_defaults_on_torch_tensors(kernel, shape, tmp_path):
    """Nothing tuned: the rule default (fa3 for prefill on Hopper, fa2 elsewhere; split_kv for decoding) on bf16
    tensors with fewer kv heads, against float64 with repeated k and v."""
    torch = pytest.importorskip("torch")
    import autotune
    from autotune.errors import InvalidArgument
    from autotune.spaces.attention import LSE_TOLERANCE, O_TOLERANCE

    b, h, hkv, sq, skv, d = shape
    tuned = autotune.load(kernel, db=str(tmp_path / "none.db"))
    q = (torch.rand(b, h, sq, d, device="cuda") * 2 - 1).to(torch.bfloat16)
    k, v = ((torch.rand(b, hkv, skv, d, device="cuda") * 2 - 1).to(torch.bfloat16) for _ in range(2))
    o, lse = tuned(q, k, v)
    ref = torch_reference(q.double(), k.double(), v.double(), kernel == "attention_causal")
    assert o.shape == q.shape and lse.shape == (b, h, sq)
    assert float(torch.linalg.norm(o.double() - ref) / torch.linalg.norm(ref)) <= O_TOLERANCE["bfloat16"]
    group = h // hkv
    s = q.double() @ k.double().repeat_interleave(group, 1).transpose(-1, -2) / math.sqrt(d)
    if kernel == "attention_causal":
        rows = torch.arange(sq, device="cuda")[:, None] + (skv - sq)
        s = s.masked_fill(torch.arange(skv, device="cuda")[None, :] > rows, float("-inf"))
    ref_lse = torch.logsumexp(s, dim=-1)
    assert float(torch.linalg.norm(lse.double() - ref_lse) / torch.linalg.norm(ref_lse)) <= LSE_TOLERANCE["bfloat16"]
    bad = torch.zeros(b, 3, skv, d, dtype=torch.bfloat16, device="cuda")  # 3 kv heads: h (8 or 32) is no multiple
    with pytest.raises(InvalidArgument, match="multiple of the kv heads"):
        tuned(q, bad, bad)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(2, 8, 2, 77, 300, 64), (1, 4, 1, 130, 1031, 128)], ids=["gqa", "mqa"])
def test_torch_operator_gradients_against_float64(kernel, dtype, shape):
    """torch.ops.autotune.<kernel> with autograd: o, and dq, dk, dv of q's, k's and v's shapes, against float64
    autograd of attention with k and v repeated by repeat_interleave (whose gradients sum over each group)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    import autotune.torch as att
    from autotune.spaces.attention import O_TOLERANCE
    from autotune.spaces.attention_backward import GRAD_TOLERANCE

    b, h, hkv, sq, skv, d = shape
    torch_dtype = getattr(torch, dtype)
    g = torch.Generator(device="cuda").manual_seed(5)
    q = torch.randn(b, h, sq, d, device="cuda", generator=g).to(torch_dtype).requires_grad_()
    k, v = (torch.randn(b, hkv, skv, d, device="cuda", generator=g).to(torch_dtype).requires_grad_() for _ in range(2))
    do = torch.randn(b, h, sq, d, device="cuda", generator=g).to(torch_dtype)
    o, lse = att.op(kernel)(q, k, v)
    grads = torch.autograd.grad(o, (q, k, v), do)
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    ref = torch_reference(*leaves, kernel == "attention_causal")
    ref_grads = torch.autograd.grad(ref, leaves, do.double())
    assert float((o.double() - ref).norm() / ref.norm()) <= O_TOLERANCE[dtype]
    for name, got, want in zip(("dq", "dk", "dv"), grads, ref_grads):
        assert got.shape == want.shape and got.dtype == torch_dtype, name
        err = float((got.double() - want).norm() / want.norm())
        assert err <= GRAD_TOLERANCE[dtype], (name, err)
