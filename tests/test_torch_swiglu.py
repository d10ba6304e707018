"""`patch`'s SwiGLU fusion (autotune/torch/swiglu.py) without a GPU: which forwards it rewrites, that the model keeps
its parameters, state_dict and answers (CPU tensors run torch's path), what it leaves alone and says why, and the
fused operator's shapes on meta tensors."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")

import autotune.torch as att  # noqa: E402
from torch import nn  # noqa: E402


class FeedForward(nn.Module):  # Llama's MLP with its gate and up projections in one weight
    def __init__(self, d=32, hidden=48, bias=False, act=None):
        super().__init__()
        self.gate_up = nn.Linear(d, 2 * hidden, bias=bias)
        self.down = nn.Linear(hidden, d, bias=False)
        self.act = act

    def forward(self, x):
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        gate = self.act(gate) if self.act is not None else nn.functional.silu(gate)
        return self.down(gate * up)


class Model(nn.Module):
    def __init__(self, **kw):
        super().__init__()
        self.norm = nn.RMSNorm(32, eps=1e-6)
        self.mlp = FeedForward(**kw)

    def forward(self, x):
        return x + self.mlp(self.norm(x))


@pytest.mark.parametrize("act", [None, nn.SiLU()], ids=["F.silu", "nn.SiLU"])
def test_the_gate_up_linear_is_fused_and_answers_stay_the_same(act):
    torch.manual_seed(0)
    model = Model(act=act)
    before, weight = copy.deepcopy(model), model.mlp.gate_up.weight
    report = att.patch(model)
    assert type(model.mlp.gate_up) is att.LinearSwiGLU and model.mlp.gate_up.weight is weight  # the same Parameter
    assert "mlp.gate_up (Linear and SwiGLU, fused)" in report.swapped
    assert model.state_dict().keys() == before.state_dict().keys()
    x = torch.randn(2, 5, 32)
    assert torch.equal(model(x), before(x))  # CPU: torch's path through the same formula
    clone = copy.deepcopy(model)  # the rewritten forward follows the copy's own modules
    with torch.no_grad():
        clone.mlp.down.weight.zero_()
    assert torch.equal(clone(x), x) and torch.equal(model(x), before(x))


def test_the_fused_operator_takes_activations_with_leading_dims():
    def meta(*shape):
        return torch.randn(*shape, device="meta", dtype=torch.bfloat16)

    x, w = meta(2, 5, 32), meta(96, 32)
    assert torch.ops.autotune.linear_swiglu(x, w).shape == (2, 5, 48)
    assert att.functional.linear_swiglu(x, w).shape == (2, 5, 48)
    with pytest.raises(att.WrongShape, match="gate rows, then as many up rows"):
        torch.ops.autotune.linear_swiglu(x, meta(95, 32))
    with pytest.raises(att.WrongDtype, match="linear_swiglu supports float16, bfloat16"):
        torch.ops.autotune.linear_swiglu(x.float(), w.float())


def test_a_biased_projection_is_left_alone_and_reported():
    model = Model(bias=True)
    report = att.patch(model)
    assert type(model.mlp.gate_up) is att.Linear  # swapped alone, its SwiGLU left in the forward
    assert "forward" not in vars(model.mlp)


class Twice(FeedForward):  # the gate half used again: the product is not the halves' only use
    def forward(self, x):
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(nn.functional.silu(gate) * up) + gate.sum()


class Branchy(FeedForward):  # control flow on a value: fx cannot follow it
    def forward(self, x):
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        if gate.sum() > 0:
            up = up * 2
        return self.down(nn.functional.silu(gate) * up)


@pytest.mark.parametrize("cls", [Twice, Branchy])
def test_forwards_it_cannot_rewrite_keep_their_own(cls):
    torch.manual_seed(1)
    model = nn.Sequential(cls())
    before = copy.deepcopy(model)
    att.patch(model)
    assert type(model[0].gate_up) is att.Linear and "forward" not in vars(model[0])
    x = torch.randn(3, 32)
    assert torch.equal(model(x), before(x))


def test_a_linear_held_twice_is_not_fused():
    model = Model()
    model.alias = model.mlp.gate_up
    report = att.patch(model)
    assert type(model.mlp.gate_up) is att.Linear
    assert any("held elsewhere" in why for _, why in report.skipped)
