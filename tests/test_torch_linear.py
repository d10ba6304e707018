"""autotune.torch's GEMM layouts without a GPU: `Linear`, `patch` over nn.Linear, the operators gemm_nt, gemm_tn and
linear, and each GEMM's gradients through the other two (stand-in kernels on the CPU), with no operand copied."""

from __future__ import annotations

from collections import Counter

import pytest

torch = pytest.importorskip("torch")

import autotune  # noqa: E402
import autotune.torch as att  # noqa: E402
from autotune.torch import WrongShape  # noqa: E402

GEMMS = ("gemm", "gemm_nt", "gemm_tn", "linear")
FORMULAS = {
    "gemm": lambda t: t[0] @ t[1],
    "gemm_nt": lambda t: t[0] @ t[1].T,
    "gemm_tn": lambda t: t[0].T @ t[1],
    "linear": lambda t: t[0] @ t[1].T + t[2],
}


def meta(*shape, **kw):
    return torch.randn(*shape, device="meta", **kw)


@pytest.fixture
def stand_ins(monkeypatch):
    """Every GEMM operator computed on the CPU by its formula; the tensors each call got, by operator."""
    calls: dict[str, list] = {name: [] for name in GEMMS}
    for name in GEMMS:
        formula = FORMULAS[name]
        def launcher(tensors, name=name, f=formula):
            calls[name].append(tensors)
            return (f(tensors),)

        monkeypatch.setattr(att.OPS[name], "launcher", launcher)
    # linear_gelu's and the bias gradients' kernels, by their formulas (not counted among the GEMMs' calls)
    monkeypatch.setattr(att.OPS["bias_grad"], "launcher", lambda t: (t[0].sum(0),))
    monkeypatch.setattr(att.OPS["linear_gelu"], "launcher",
                        lambda t: (gelu(FORMULAS["linear"](t)), FORMULAS["linear"](t)))

    def gelu_bias_grad(t):
        dy, pre = t
        x = pre.detach().requires_grad_()
        with torch.enable_grad():
            (dpre,) = torch.autograd.grad(gelu(x), x, dy)
        return dpre, dpre.sum(0)

    monkeypatch.setattr(att.OPS["gelu_bias_grad"], "launcher", gelu_bias_grad)
    return calls


def gelu(x):
    return torch.nn.functional.gelu(x, approximate="tanh")


def test_the_layouts_are_operators_with_autograd():
    assert set(GEMMS) <= set(att.OPERATORS) and set(GEMMS) <= set(att.WITH_AUTOGRAD)
    schema = "autotune::linear(Tensor A, Tensor B, Tensor bias) -> Tensor"
    assert str(torch.ops.autotune.linear.default._schema) == schema


@pytest.mark.parametrize("kernel", GEMMS)
def test_gradients_are_the_other_layouts_products_with_no_copy(kernel, stand_ins):
    g = torch.Generator().manual_seed(0)
    m, n, k = 5, 7, 3
    shapes = {"gemm": [(m, k), (k, n)], "gemm_nt": [(m, k), (n, k)], "gemm_tn": [(k, m), (k, n)],
              "linear": [(m, k), (n, k), (n,)]}[kernel]  # fmt: skip
    leaves = [torch.randn(*s, generator=g, dtype=torch.float64, requires_grad=True) for s in shapes]
    w = torch.randn(m, n, generator=g, dtype=torch.float64)
    (att.op(kernel)(*leaves) * w).sum().backward()
    mine = [t.grad for t in leaves]
    ref = [t.detach().requires_grad_() for t in leaves]
    (FORMULAS[kernel](ref) * w).sum().backward()
    for got, want in zip(mine, (t.grad for t in ref)):
        torch.testing.assert_close(got, want)
    # The backward read the forward's operands in place: every tensor any backward GEMM got is one of the forward's
    # operands or dC itself, never a transposed copy.
    forward_storage = {t.untyped_storage().data_ptr() for t in leaves}
    forward = stand_ins[kernel][0]
    backward_calls = [c for cs in stand_ins.values() for c in cs if c is not forward]
    assert len(backward_calls) == 2
    for tensors in backward_calls:
        assert all(t.is_contiguous() for t in tensors)
        assert sum(t.untyped_storage().data_ptr() in forward_storage for t in tensors) == 1, "one operand as stored"


def test_backward_on_meta_records_every_layout():
    model = torch.nn.Sequential(att.Linear(64, 96), att.Linear(96, 32, bias=False)).to("meta")
    x = meta(2, 8, 64, requires_grad=True)
    with autotune.record() as calls:
        model(x).sum().backward()
    assert x.grad.shape == x.shape and model[0].bias.grad.shape == (96,)
    assert sorted(calls.calls) == sorted([
        ("linear", (16, 96, 64), "float32"), ("gemm_nt", (16, 32, 96), "float32"),  # forward: A·Wᵀ (+ bias)
        ("gemm", (16, 96, 32), "float32"), ("gemm_tn", (32, 96, 16), "float32"),  # second layer: dX, dW
        ("gemm_tn", (96, 64, 16), "float32"),  # first layer: dW (x needs a gradient: dX too)
        ("gemm", (16, 64, 96), "float32"),
        ("bias_grad", (16, 96), "float32"),  # first layer's bias
    ])  # fmt: skip


def test_linear_is_drop_in_and_runs_torchs_where_no_kernel_does():
    torch.manual_seed(0)
    lin = torch.nn.Linear(16, 8)
    mine = att.Linear(16, 8)
    mine.load_state_dict(lin.state_dict())
    assert mine.state_dict().keys() == lin.state_dict().keys()
    x = torch.randn(3, 16)
    assert torch.equal(mine(x), lin(x))  # a CPU tensor: torch's own
    assert mine.to("meta")(meta(4, 5, 16)).shape == (4, 5, 8)
    assert att.Linear(16, 8, dtype=torch.float64).to("meta")(meta(2, 16, dtype=torch.float64)).device.type == "meta"


def test_patch_swaps_linear_layers_keeps_subclasses_and_counts_fallbacks():
    mha = torch.nn.MultiheadAttention(16, 2)
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), mha, torch.nn.LayerNorm(16))
    weight = model[0].weight
    report = att.patch(model)
    assert type(model[0]) is att.Linear and model[0].weight is weight
    assert "0" in report.swapped and "2" in report.swapped
    assert ("1.out_proj", "a subclass of nn.Linear (NonDynamicallyQuantizableLinear) whose use may bypass its "
            "forward") in report.skipped  # fmt: skip
    model[0](torch.randn(2, 16))
    model[0](torch.randn(2, 16))
    assert report.fallbacks == {"cpu torch.float32 input, torch.float32 weight": 2}
    assert "2 calls ran torch's Linear: cpu torch.float32 input" in str(report)
    kept = torch.nn.Sequential(torch.nn.Linear(4, 4))
    assert att.patch(kept, linear=False).swapped == [] and type(kept[0]) is torch.nn.Linear
    with pytest.raises(ValueError, match="model is itself a layer patch would swap"):
        att.patch(torch.nn.Linear(4, 4))


def test_functional_linear_takes_any_leading_shape_and_refuses_a_bad_weight():
    assert att.functional.linear(meta(2, 3, 17), meta(65, 17)).shape == (2, 3, 65)
    assert att.functional.linear(meta(2, 3, 17), meta(65, 17), meta(65)).shape == (2, 3, 65)
    assert att.functional.linear(meta(17, 2, 3).permute(1, 2, 0), meta(17, 130)[:, ::2].t()).shape == (2, 3, 65)
    with pytest.raises(WrongShape, match="weight must be 2-D"):
        att.functional.linear(meta(2, 17), meta(17))
    with pytest.raises(WrongShape, match="x has 17 features \\(its last dim\\) but weight has in_features 16"):
        att.functional.linear(meta(2, 17), meta(5, 16))
    with pytest.raises(WrongShape, match="bias has shape \\(4,\\): it must be \\(5,\\)"):
        att.functional.linear(meta(2, 17), meta(5, 17), meta(4))
    assert att.functional.linear(meta(0, 17), meta(5, 17), meta(5)).shape == (0, 5)  # empty: torch's answer
    with pytest.raises(WrongShape, match="A has 17 columns but B has 16"):  # the raw operator: its buffers' names
        torch.ops.autotune.gemm_nt(meta(2, 17), meta(5, 16))


def test_the_llama_example_is_patched_whole_and_records_its_problems():
    """examples/llama_block.py at a small width on meta tensors: every Linear and RMSNorm swapped, the MLP's
    gate-and-up projection fused with its SwiGLU, prefill and a decoding step over a GQA cache recorded (equal
    problems once: the static cache's step sends the cat cache's problems)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    try:
        from llama_block import Block
    finally:
        sys.path.pop(0)
    model = Block(d_model=256, heads=4, kv_heads=2, hidden=512, positions=64, device="meta")
    model = model.to("meta", torch.bfloat16)
    report = att.patch(model)
    assert len(report.swapped) == 7 and not report.skipped
    assert "mlp.gate_up (Linear and SwiGLU, fused)" in report.swapped
    cache = tuple(meta(2, 2, 16, 64, dtype=torch.bfloat16) for _ in range(2))
    with torch.no_grad(), autotune.record() as calls:
        assert model(meta(1, 16, 256, dtype=torch.bfloat16)).shape == (1, 16, 256)
        assert model(meta(2, 1, 256, dtype=torch.bfloat16), cache).shape == (2, 1, 256)
        assert model(meta(2, 1, 256, dtype=torch.bfloat16), cache, pos=8).shape == (2, 1, 256)
    assert calls.calls == [(kernel, shape, "bfloat16") for kernel, shape in [
        ("rmsnorm", (16, 256)), ("gemm_nt", (16, 256, 256)), ("linear_swiglu", (16, 512, 256)),
        ("gemm_nt", (16, 256, 512)),
        ("rmsnorm", (2, 256)), ("gemm_nt", (2, 256, 256)), ("linear_swiglu", (2, 512, 256)), ("gemm_nt", (2, 256, 512)),
    ]]  # fmt: skip
    assert not report.fallbacks


def test_linear_runs_torchs_for_an_empty_batch_or_a_kernel_that_refuses(monkeypatch):
    layer = att.Linear(8, 16, device="meta", dtype=torch.bfloat16)
    layer.fallbacks = __import__("collections").Counter()
    assert layer(meta(0, 8, dtype=torch.bfloat16)).shape == (0, 16)
    assert layer(meta(3, 0, 8, dtype=torch.bfloat16)).shape == (3, 0, 16)
    assert layer.fallbacks == {"an empty input": 2}

    def refuse(*_args):
        raise autotune.errors.InvalidArgument("A is at an address TMA cannot read (offset 2 bytes)\nmore")

    monkeypatch.setattr(att.functional, "linear", refuse)
    assert layer(meta(4, 8, dtype=torch.bfloat16)).shape == (4, 16)
    assert layer.fallbacks["A is at an address TMA cannot read (offset 2 bytes)"] == 1


def test_patch_swaps_a_shared_or_aliased_module_once_everywhere():
    shared = torch.nn.Linear(4, 4)
    model = torch.nn.Module()
    model.a, model.b = torch.nn.Sequential(shared), torch.nn.Sequential(shared)
    model.head = torch.nn.Linear(4, 4)
    model.head2 = model.head  # an alias under a second name
    report = att.patch(model)
    assert model.a[0] is model.b[0] and type(model.a[0]) is att.Linear
    assert model.head is model.head2 and type(model.head2) is att.Linear
    assert sorted(report.swapped) == ["a.0", "b.0", "head", "head2"] and not report.skipped
    assert len(list(model.named_modules())) == 5, "no module multiplied"
    twice = torch.nn.Sequential(model.a, model.a)
    assert att.patch(twice).swapped == [], "a shared parent's children are swapped once"


def test_linear_gelu_trains_as_linear_then_gelu(stand_ins):
    """linear_gelu's gradients (gelu_bias_grad, then linear's products of dpre) are torch's Linear + GELU's."""
    g = torch.Generator().manual_seed(1)
    leaves = [torch.randn(*s, generator=g, dtype=torch.float64, requires_grad=True) for s in ((5, 3), (7, 3), (7,))]
    w = torch.randn(5, 7, generator=g, dtype=torch.float64)
    out, pre = att.op("linear_gelu")(*leaves)
    assert not pre.requires_grad, "pre is kept for the backward, not differentiated"
    (out * w).sum().backward()
    ref = [t.detach().requires_grad_() for t in leaves]
    (gelu(torch.nn.functional.linear(*ref)) * w).sum().backward()
    for got, want in zip(leaves, ref):
        torch.testing.assert_close(got.grad, want.grad)
    assert [len(stand_ins[k]) for k in ("gemm", "gemm_tn")] == [1, 1], "dA and dB, one product each"


def test_linear_gelu_without_a_bias_runs_torchs_and_says_so():
    layer = att.LinearGELU(8, 4, bias=False)
    layer.fallbacks = Counter()
    x = torch.randn(2, 8)
    torch.testing.assert_close(layer(x), torch.nn.functional.gelu(x @ layer.weight.T, approximate="tanh"))
    layer.to("meta")  # a device the kernels take (tracing): the missing bias is the reason
    assert layer(meta(2, 8)).shape == (2, 4)
    assert any("no bias" in why for why in layer.fallbacks), layer.fallbacks


def test_a_patched_gelu_mlp_records_linear_gelu_and_its_backward():
    model = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.GELU(approximate="tanh"), torch.nn.Linear(96, 64))
    att.patch(model)
    model.to("meta")
    x = meta(2, 8, 64, requires_grad=True)
    with autotune.record() as calls:
        model(x).sum().backward()
    assert ("linear_gelu", (16, 96, 64), "float32") in calls.calls
    assert ("gelu_bias_grad", (16, 96), "float32") in calls.calls and ("bias_grad", (16, 64), "float32") in calls.calls
