"""`patch`'s SwiGLU fusion (autotune/torch/fusion.py) without a GPU: which forwards it rewrites, that the model keeps
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
    assert ("mlp.gate_up", "the Linear has a bias (linear_swiglu takes none); swapped alone") in report.skipped


def test_input_features_tma_cannot_stride_are_left_alone():
    model = Model(d=36)
    model.norm = nn.RMSNorm(36, eps=1e-6)
    report = att.patch(model)
    assert type(model.mlp.gate_up) is att.Linear
    assert any("multiple of 8" in why for _, why in report.skipped)


class Optional(FeedForward):  # an optional argument: a trace would freeze the branch taken at patch time
    def forward(self, x, scale=None):
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        if scale is not None:
            gate = gate * scale
        return self.down(nn.functional.silu(gate) * up)


class Dropping(FeedForward):  # dropout follows the mode: train and eval trace to different code
    def forward(self, x):
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(nn.functional.dropout(nn.functional.silu(gate) * up, 0.5, training=self.training))


def test_forwards_a_trace_would_freeze_are_not_rewritten():
    torch.manual_seed(2)
    for cls in (Optional, Dropping):
        model = nn.Sequential(cls())
        before = copy.deepcopy(model).eval()
        report = att.patch(model)
        assert type(model[0].gate_up) is att.Linear and "forward" not in vars(model[0]), cls
        model.eval()
        x = torch.randn(3, 32)
        assert torch.equal(model(x), before(x)), cls
    assert any("train and eval" in why for _, why in report.skipped)


class Sliced(FeedForward):  # a slice of the halves, not the halves: no SwiGLU, and no crash matching it
    def forward(self, x):
        halves = self.gate_up(x).chunk(2, dim=-1)
        return self.down(nn.functional.silu(halves[1:][0]) * halves[0])


def test_a_slice_of_the_halves_is_no_swiglu():
    model = nn.Sequential(Sliced())
    att.patch(model)
    assert type(model[0].gate_up) is att.Linear and "forward" not in vars(model[0])


def test_the_raw_operator_refuses_to_train_and_the_function_trains():
    w = torch.randn(96, 32, device="meta", dtype=torch.bfloat16, requires_grad=True)
    x = torch.randn(2, 5, 32, device="meta", dtype=torch.bfloat16)
    with pytest.raises(att.NoBackward, match="linear_swiglu has no backward.*functional.linear_swiglu"):
        torch.ops.autotune.linear_swiglu(x, w)
    y = att.functional.linear_swiglu(x, w)  # linear's kernels, then torch's silu: a graph to train through
    assert y.shape == (2, 5, 48) and y.requires_grad
    with torch.no_grad():
        assert torch.ops.autotune.linear_swiglu(x, w).shape == (2, 5, 48)


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
