"""autotune.torch without a GPU: operator schemas, fake implementations on meta tensors (opcheck), torch.compile
tracing without graph breaks, errors in torch's style, the drop-in modules and patch, recording on meta."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import autotune  # noqa: E402
import autotune.torch as att  # noqa: E402
from autotune.torch import NotContiguous, WrongDevice, WrongDtype, WrongShape  # noqa: E402


def meta(*shape, **kw):
    return torch.randn(*shape, device="meta", **kw)


CASES = {
    "layernorm": lambda: (meta(37, 1031), meta(1031), meta(1031)),
    "layernorm_backward": lambda: (meta(37, 1031), meta(37, 1031), meta(1031), meta(37), meta(37)),
    "rmsnorm": lambda: (meta(5, 96), meta(96)),
    "softmax": lambda: (meta(5, 96),),
    "softmax_backward": lambda: (meta(5, 96), meta(5, 96)),
    "gemm": lambda: (meta(33, 17), meta(17, 65)),
    "gemm_nt": lambda: (meta(33, 17), meta(65, 17)),
    "gemm_tn": lambda: (meta(17, 33), meta(17, 65)),
    "linear": lambda: (meta(33, 17), meta(65, 17), meta(65)),
}
OUTPUT_SHAPES = {
    "layernorm": [(37, 1031), (37,), (37,)],
    "layernorm_backward": [(37, 1031), (1031,), (1031,)],
    "rmsnorm": [(5, 96)],
    "softmax": [(5, 96)],
    "softmax_backward": [(5, 96)],
    "gemm": [(33, 65)],
    "gemm_nt": [(33, 65)],
    "gemm_tn": [(33, 65)],
    "linear": [(33, 65)],
}


def test_library_operators_are_registered():
    assert set(CASES) <= set(att.OPERATORS)
    assert {"attention", "attention_backward", "attention_causal", "attention_causal_backward"} <= set(att.OPERATORS)
    assert {"linear_gelu", "bias_grad", "gelu_bias_grad"} <= set(att.OPERATORS)
    assert set(att.WITH_AUTOGRAD) == {"layernorm", "rmsnorm", "softmax", "gemm", "gemm_nt", "gemm_tn", "linear",
                                      "linear_gelu", "attention", "attention_causal"}  # fmt: skip
    schema = str(torch.ops.autotune.layernorm.default._schema)
    assert schema == "autotune::layernorm(Tensor x, Tensor weight, Tensor bias) -> (Tensor, Tensor, Tensor)"


@pytest.mark.parametrize("kernel", sorted(CASES))
def test_fake_implementation_gives_the_spaces_output_shapes(kernel):
    out = att.op(kernel)(*CASES[kernel]())
    out = out if isinstance(out, tuple) else (out,)
    assert [tuple(t.shape) for t in out] == OUTPUT_SHAPES[kernel]
    assert all(t.device.type == "meta" and t.dtype == torch.float32 for t in out)


@pytest.mark.parametrize("kernel", sorted(CASES))
def test_opcheck_on_meta(kernel):
    args = CASES[kernel]()
    if kernel in att.WITH_AUTOGRAD:
        args = tuple(a.requires_grad_() for a in args)
    # Every check (schema, autograd registration, fake tensors, AOT dispatch with dynamic shapes, which traces the
    # backward too) runs the operator on meta tensors: the fake implementations answer.
    result = torch.library.opcheck(att.op(kernel), args)
    assert set(result.values()) == {"SUCCESS"} and "test_aot_dispatch_dynamic" in result


def test_compile_traces_without_graph_breaks():
    """torch._dynamo.explain on meta tensors: the functions are traced whole (the fake implementations answer)."""
    import torch._dynamo

    def block(x, w, b, m):
        h = att.functional.layer_norm(x, (x.shape[-1],), w, b)
        h = att.functional.matmul(h, m)
        h = att.functional.linear(h, m, w)  # (4, 8, 32) · (64, 32)ᵀ + bias
        h = att.functional.softmax(h)
        return att.functional.rms_norm(h, w[: h.shape[-1]])

    torch._dynamo.reset()
    explained = torch._dynamo.explain(block)(meta(4, 8, 64), meta(64), meta(64), meta(64, 32))
    assert explained.graph_break_count == 0, explained.break_reasons
    assert explained.graph_count == 1


def test_errors_name_the_argument_in_torchs_style():
    x, w, b = CASES["layernorm"]()
    with pytest.raises(WrongDevice, match="x is on cpu") as err:
        torch.ops.autotune.layernorm(torch.randn(3, 4), torch.randn(4), torch.randn(4))
    assert isinstance(err.value, RuntimeError) and isinstance(err.value, autotune.AutotuneError)
    with pytest.raises(WrongDtype, match="x has dtype float64") as err:
        torch.ops.autotune.layernorm(x.double(), w.double(), b.double())
    assert isinstance(err.value, RuntimeError)
    with pytest.raises(WrongDtype, match="bias has dtype float16"):
        torch.ops.autotune.layernorm(x, w, b.half())
    with pytest.raises(WrongShape, match="weight has shape") as err:
        torch.ops.autotune.layernorm(x, meta(7), b)
    assert isinstance(err.value, ValueError)
    with pytest.raises(NotContiguous, match="x is not contiguous") as err:
        torch.ops.autotune.layernorm(meta(1031, 37).t(), w, b)
    assert isinstance(err.value, ValueError)
    with pytest.raises(WrongShape, match="dim=0"):
        att.functional.softmax(meta(4, 4), dim=0)


# Activations with leading dims (batch, seq): each operator's outputs that carry them, for inputs of (2, 3, ...).
LEADING_CASES = {
    "layernorm": ((meta(2, 3, 96), meta(96), meta(96)), [(2, 3, 96), (2, 3), (2, 3)]),
    "layernorm_backward": ((meta(2, 3, 96), meta(2, 3, 96), meta(96), meta(2, 3), meta(2, 3)),
                           [(2, 3, 96), (96,), (96,)]),
    "rmsnorm": ((meta(2, 3, 96), meta(96)), [(2, 3, 96)]),
    "softmax": ((meta(2, 3, 96),), [(2, 3, 96)]),
    "softmax_backward": ((meta(2, 3, 96), meta(2, 3, 96)), [(2, 3, 96)]),
    "gemm": ((meta(2, 3, 17), meta(17, 65)), [(2, 3, 65)]),
    "gemm_nt": ((meta(2, 3, 17), meta(65, 17)), [(2, 3, 65)]),
    "gemm_tn": ((meta(2, 3, 33), meta(2, 3, 65)), [(33, 65)]),
    "linear": ((meta(2, 3, 17), meta(65, 17), meta(65)), [(2, 3, 65)]),
    "linear_gelu": ((meta(2, 3, 17), meta(65, 17), meta(65)), [(2, 3, 65), (2, 3, 65)]),
    "bias_grad": ((meta(2, 3, 65),), [(65,)]),
    "gelu_bias_grad": ((meta(2, 3, 65), meta(2, 3, 65)), [(2, 3, 65), (65,)]),
}


@pytest.mark.parametrize("kernel", sorted(LEADING_CASES))
def test_operators_take_activations_with_leading_dims(kernel):
    args, shapes = LEADING_CASES[kernel]
    out = att.op(kernel)(*args)
    out = out if isinstance(out, tuple) else (out,)
    assert [tuple(t.shape) for t in out] == shapes


def test_leading_dims_must_agree_across_inputs():
    with pytest.raises(WrongShape, match="leading dims"):
        torch.ops.autotune.gemm_tn(meta(2, 3, 33), meta(6, 65))
    with pytest.raises(WrongShape, match="leading dims"):  # the statistics keep x's leading dims
        torch.ops.autotune.layernorm_backward(meta(2, 3, 96), meta(2, 3, 96), meta(96), meta(6), meta(6))
    with pytest.raises(WrongShape, match="weight has shape"):  # a weight takes no leading dims
        torch.ops.autotune.layernorm(meta(2, 3, 96), meta(2, 96), meta(96))
    with pytest.raises(WrongShape, match=r"empty .*given x \(3, 0, 5\)"):  # the caller's shape, not the folded one
        torch.ops.autotune.softmax(meta(3, 0, 5))


def test_functions_pass_activations_as_they_are():
    """No reshape or view around the operator for a contiguous N-D activation: the output's autograd node is the
    operator's own, not a ViewBackward."""
    x = meta(2, 3, 96, requires_grad=True)
    y = att.functional.layer_norm(x, 96, meta(96), meta(96))
    assert y.shape == (2, 3, 96) and "View" not in type(y.grad_fn).__name__
    lin = att.functional.linear(meta(2, 3, 17, requires_grad=True), meta(65, 17), meta(65))
    assert lin.shape == (2, 3, 65) and "View" not in type(lin.grad_fn).__name__
    assert att.functional.linear(meta(17), meta(65, 17)).shape == (65,)  # a vector: one row, as F.linear


def test_functions_copy_non_contiguous_inputs():
    """The functions accept views the raw operator refuses (a transposed x is copied)."""
    x = meta(1031, 37).t()
    y = att.functional.layer_norm(x, (1031,), meta(1031), meta(1031))
    assert y.shape == (37, 1031)
    assert att.functional.matmul(meta(2, 3, 17), meta(65, 17).t()).shape == (2, 3, 65)


def test_functions_copy_a_strided_weight_the_fast_path_leaves_unchecked():
    """The 2-D fast path checks x alone; a strided weight or bias is refused by the operator and copied."""
    strided = meta(2 * 1031)[::2]
    assert att.functional.layer_norm(meta(37, 1031), (1031,), strided, meta(1031)).shape == (37, 1031)
    assert att.functional.layer_norm(meta(37, 1031), 1031, meta(1031), strided).shape == (37, 1031)
    assert att.functional.rms_norm(meta(37, 1031), strided).shape == (37, 1031)


def test_modules_are_drop_in():
    ln = torch.nn.LayerNorm(64)
    mine = att.LayerNorm(64)
    mine.load_state_dict(ln.state_dict())
    assert mine.state_dict().keys() == ln.state_dict().keys()
    x = torch.randn(3, 5, 64)
    # On the CPU the module runs torch's implementation: it never fails where nn.LayerNorm works.
    assert torch.equal(mine(x), ln(x))
    assert att.RMSNorm(64)(meta(2, 64)).shape == (2, 64)
    with pytest.raises(ValueError, match="eps=0.001"):
        att.LayerNorm(64, eps=1e-3)
    with pytest.raises(ValueError, match="eps=None"):
        att.RMSNorm(64, eps=None)


def test_patch_swaps_what_the_kernels_compute_and_shares_parameters():
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.LayerNorm(16), torch.nn.LayerNorm(16, eps=1e-6),
                                torch.nn.Sequential(torch.nn.RMSNorm(16, eps=1e-6), torch.nn.RMSNorm(16)))  # fmt: skip
    weight = model[1].weight
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    report = att.patch(model)
    assert report.swapped == ["0", "1", "3.0"] and type(model[0]) is att.Linear
    assert [name for name, _ in report.skipped] == ["2", "3.1"]
    assert type(model[1]) is att.LayerNorm and type(model[3][0]) is att.RMSNorm
    assert type(model[2]) is torch.nn.LayerNorm and type(model[3][1]) is torch.nn.RMSNorm
    assert model[1].weight is weight and optimizer.param_groups[0]["params"][2] is weight
    assert att.patch(model).swapped == [], "patching twice changes nothing"


def test_backward_on_meta_reaches_the_backward_operators():
    model = torch.nn.Sequential(att.LayerNorm(64), att.RMSNorm(64)).to("meta")
    x = meta(2, 3, 64, requires_grad=True)
    with autotune.record() as calls:
        model(x).sum().backward()
    assert x.grad.shape == x.shape and model[0].weight.grad.shape == (64,)
    assert calls.calls == [("layernorm", (6, 64), "float32"), ("rmsnorm", (6, 64), "float32"),
                           ("layernorm_backward", (6, 64), "float32")]  # fmt: skip


def test_a_users_kernel_becomes_an_operator():
    from pathlib import Path

    ref = f"{Path(__file__).resolve().parent.parent / 'examples' / 'vector_add' / 'my_space.py'}:MySpace"
    op = att.op(ref)
    assert op is torch.ops.autotune.vector_add and att.op(ref) is op
    assert str(op.default._schema) == "autotune::vector_add(Tensor A, Tensor B) -> Tensor"
    with autotune.record() as calls:
        assert op(meta(1000), meta(1000)).shape == (1000,)
    assert calls.calls == [(ref, (1000,), "float32")]


ATTENTION = ("attention", "attention_causal")


def attention_inputs(sq=40, skv=72, dtype=torch.float16, grad=True):
    """q, k, v on meta with seq_q < seq_kv (valid causal too, bottom-right), so q's and k's shapes differ."""
    return tuple(meta(2, 3, n, 64, dtype=dtype, requires_grad=grad) for n in (sq, skv, skv))


@pytest.mark.parametrize("kernel", ATTENTION)
def test_attention_operators_and_their_backward_on_meta(kernel):
    q, k, v = attention_inputs()
    o, lse = att.op(kernel)(q, k, v)
    assert (o.shape, o.dtype, lse.shape, lse.dtype) == (q.shape, torch.float16, (2, 3, 40), torch.float32)
    assert str(att.op(kernel + "_backward").default._schema) == (
        f"autotune::{kernel}_backward(Tensor q, Tensor k, Tensor v, Tensor o, Tensor do, Tensor lse) -> "
        "(Tensor, Tensor, Tensor)")  # fmt: skip
    assert o.requires_grad and not lse.requires_grad  # lse is a statistic for the backward (non-differentiable)
    with autotune.record() as calls:
        att.op(kernel)(q, k, v)[0].transpose(1, 2).sum().backward()  # a transposed, expanded dO: copied
    assert [g.shape for g in (q.grad, k.grad, v.grad)] == [q.shape, k.shape, v.shape]
    assert q.grad.dtype == torch.float16
    assert calls.calls == [(kernel, (2, 3, 40, 72, 64), "float16"), (kernel + "_backward", (2, 3, 40, 72, 64),
                                                                     "float16")]  # fmt: skip


@pytest.mark.parametrize("kernel", ATTENTION)
def test_attention_backward_gets_the_forwards_tensors_in_the_kernels_order(kernel, monkeypatch):
    """The backward operator is called as its space's buffers are ordered, (q, k, v, o, do, lse), with the forward's
    very tensors (same storage: the meta tensors hold no values to compare) and only needed gradients returned."""
    info = att.OPS[kernel + "_backward"]
    assert info.inputs == ("q", "k", "v", "o", "do", "lse") and info.outputs == ("dq", "dk", "dv")
    got = []
    real = info.op
    monkeypatch.setattr(info, "op", lambda *tensors: got.append(tensors) or real(*tensors))
    q, k, v = attention_inputs()
    k.requires_grad_(False)
    o, lse = att.op(kernel)(q, k, v)
    do = meta(*o.shape, dtype=o.dtype)
    torch.autograd.backward([o], [do])
    (passed,) = got
    storage = [t.untyped_storage()._cdata for t in passed]
    assert storage == [t.untyped_storage()._cdata for t in (q, k, v, o, do, lse)]
    assert all(t.is_contiguous() for t in passed)
    assert q.grad is not None and k.grad is None and v.grad is not None


def stand_in_kernels(monkeypatch, kernel: str) -> None:
    """The forward and backward kernels replaced, on the CPU, by their formulas in fp32: the backward uses o (for
    Δ = rowsum(dO∘o)) and lse (P = exp(S − lse)) as the CUDA kernel does, so a swapped or misread tensor shows.
    Grouped-query k and v (fewer heads than q) are repeated per query head, and dk, dv summed over each group."""
    causal = kernel == "attention_causal"

    def per_query_head(q, x):
        return x.float().repeat_interleave(q.shape[1] // x.shape[1], dim=1)

    def group_sum(g, k):
        b, hkv, skv, d = k.shape
        return g.reshape(b, hkv, -1, skv, d).sum(2)

    def scores(q, k):
        s = q.float() @ per_query_head(q, k).transpose(-1, -2) / q.shape[3] ** 0.5
        if causal:
            rows = torch.arange(q.shape[2])[:, None] + (k.shape[2] - q.shape[2])  # bottom-right
            s = s.masked_fill(torch.arange(k.shape[2])[None, :] > rows, float("-inf"))
        return s

    def forward(tensors):
        q, k, v = tensors
        s = scores(q, k)
        lse = torch.logsumexp(s, -1)
        return (torch.exp(s - lse[..., None]) @ per_query_head(q, v)).to(q.dtype), lse

    def backward(tensors):
        q, k, v, o, do, lse = tensors
        p = torch.exp(scores(q, k) - lse[..., None])
        dp = do.float() @ per_query_head(q, v).transpose(-1, -2)
        ds = p * (dp - (do.float() * o.float()).sum(-1, keepdim=True)) / q.shape[3] ** 0.5
        return tuple(g.to(q.dtype) for g in (ds @ per_query_head(q, k), group_sum(ds.transpose(-1, -2) @ q.float(), k),
                                              group_sum(p.transpose(-1, -2) @ do.float(), k)))  # fmt: skip

    monkeypatch.setattr(att.OPS[kernel], "launcher", forward)
    monkeypatch.setattr(att.OPS[kernel + "_backward"], "launcher", backward)


@pytest.mark.parametrize("kernel", ATTENTION)
def test_attention_gradients_through_stand_in_kernels(kernel, monkeypatch):
    """The wiring end to end on CPU tensors (the kernels' formulas standing in): dq, dk, dv of a loss through a
    transposed o equal float64 autograd of softmax attention (masked bottom-right) within the fp16 backward's
    tolerance, 2e-3 (the stand-ins' own error is about 2e-4, the gradients' rounding; a swap of k and v, or o and
    dO, errs by far more)."""
    stand_in_kernels(monkeypatch, kernel)
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, n, 32, generator=g).half().requires_grad_() for n in (20, 45, 45))
    w = torch.randn(2, 20, 3, 32, generator=g).half()
    (att.op(kernel)(q, k, v)[0].transpose(1, 2) * w).float().sum().backward()
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    s = leaves[0] @ leaves[1].transpose(-1, -2) / 32**0.5
    if kernel == "attention_causal":
        s = s.masked_fill(torch.arange(45)[None, :] > torch.arange(20)[:, None] + 25, float("-inf"))
    ((torch.softmax(s, -1) @ leaves[2]).transpose(1, 2) * w.double()).sum().backward()
    for name, got, leaf in zip("qkv", (q, k, v), leaves):
        err = float((got.grad.double() - leaf.grad).norm() / leaf.grad.norm())
        assert err < 2e-3, (name, err)


def test_attention_has_no_backward_in_float32():
    """fp32 attention runs forward (simt) but no backward kernel takes fp32: one typed error at backward time,
    naming the forward the user called."""
    q, k, v = attention_inputs(dtype=torch.float32)
    o, _ = torch.ops.autotune.attention(q, k, v)
    with pytest.raises(WrongDtype, match=r"autotune.attention: no backward kernel for float32 \(attention_backward "
                                         r"takes float16, bfloat16\)") as err:  # fmt: skip
        o.sum().backward()
    assert isinstance(err.value, RuntimeError) and isinstance(err.value, autotune.AutotuneError)


@pytest.mark.parametrize("kernel", ATTENTION)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_attention_opcheck_on_meta(kernel, dtype):
    """opcheck with gradients: the autograd registration, and AOT dispatch tracing the backward operator."""
    result = torch.library.opcheck(att.op(kernel), attention_inputs(dtype=dtype))
    assert set(result.values()) == {"SUCCESS"} and "test_aot_dispatch_dynamic" in result


def test_causal_attention_is_bottom_right_and_refuses_more_queries_than_keys():
    with pytest.raises(WrongShape, match="bottom-right"):
        torch.ops.autotune.attention_causal(*attention_inputs(sq=72, skv=40))


# --- grouped-query and multi-query attention (k and v with fewer heads than q) ---------------------------------
@pytest.mark.parametrize("kernel", ATTENTION)
@pytest.mark.parametrize("kv_heads", [2, 1], ids=["gqa", "mqa"])
def test_grouped_attention_on_meta(kernel, kv_heads):
    """q (2, 8, 40, 64), k and v (2, HKV, 72, 64): o and lse per query head, the problem recorded with its kv heads,
    and gradients of k's and v's own shapes."""
    q = meta(2, 8, 40, 64, dtype=torch.float16, requires_grad=True)
    k, v = (meta(2, kv_heads, 72, 64, dtype=torch.float16, requires_grad=True) for _ in range(2))
    with autotune.record() as calls:
        o, lse = att.op(kernel)(q, k, v)
        assert (o.shape, lse.shape) == ((2, 8, 40, 64), (2, 8, 40))
        o.sum().backward()
    assert [g.shape for g in (q.grad, k.grad, v.grad)] == [q.shape, k.shape, v.shape]
    shape = (2, 8, kv_heads, 40, 72, 64)
    assert calls.calls == [(kernel, shape, "float16"), (kernel + "_backward", shape, "float16")]


@pytest.mark.parametrize("kernel", ATTENTION)
def test_grouped_attention_gradients_through_stand_in_kernels(kernel, monkeypatch):
    """As test_attention_gradients_through_stand_in_kernels with 6 query heads over 2 kv heads, against float64
    autograd of attention with k and v repeated (repeat_interleave) per query head: dk and dv sum the group."""
    stand_in_kernels(monkeypatch, kernel)
    g = torch.Generator().manual_seed(1)
    q = torch.randn(2, 6, 20, 32, generator=g).half().requires_grad_()
    k, v = (torch.randn(2, 2, 45, 32, generator=g).half().requires_grad_() for _ in range(2))
    w = torch.randn(2, 20, 6, 32, generator=g).half()
    (att.op(kernel)(q, k, v)[0].transpose(1, 2) * w).float().sum().backward()
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    kr, vr = (x.repeat_interleave(3, dim=1) for x in leaves[1:])
    s = leaves[0] @ kr.transpose(-1, -2) / 32**0.5
    if kernel == "attention_causal":
        s = s.masked_fill(torch.arange(45)[None, :] > torch.arange(20)[:, None] + 25, float("-inf"))
    ((torch.softmax(s, -1) @ vr).transpose(1, 2) * w.double()).sum().backward()
    for name, got, leaf in zip("qkv", (q, k, v), leaves):
        assert got.grad.shape == leaf.shape
        err = float((got.grad.double() - leaf.grad).norm() / leaf.grad.norm())
        assert err < 2e-3, (name, err)


@pytest.mark.parametrize("kernel", ATTENTION)
def test_grouped_attention_opcheck_on_meta(kernel):
    q = meta(2, 6, 40, 64, dtype=torch.bfloat16, requires_grad=True)
    k, v = (meta(2, 3, 72, 64, dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
    result = torch.library.opcheck(att.op(kernel), (q, k, v))
    assert set(result.values()) == {"SUCCESS"}


@pytest.mark.parametrize(
    "kv_shape, message",
    [((2, 3, 72, 64), "q has 8 heads but k and v have 3: the query heads must be a multiple of the kv heads"),
     ((2, 16, 72, 64), "q has 8 heads but k and v have 16")],
)
def test_grouped_attention_refuses_heads_that_do_not_divide(kv_shape, message):
    q = meta(2, 8, 40, 64, dtype=torch.float16)
    with pytest.raises(WrongShape, match=message) as err:
        torch.ops.autotune.attention(q, meta(*kv_shape, dtype=torch.float16), meta(*kv_shape, dtype=torch.float16))
    assert "\n" not in str(err.value)
