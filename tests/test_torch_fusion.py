"""`patch`'s fusions (autotune/torch/fusion.py) without a GPU: Linear → GELU pairs in an nn.Sequential or a traced
forward, and SwiGLU over one Linear's halves: which it fuses or rewrites, that the model keeps its parameters,
state_dict and answers (CPU tensors run torch's path), what it leaves alone and says why, and the fused operator's
shapes on meta tensors."""

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


# --- Linear → GELU -------------------------------------------------------------------------------------------------
def test_patch_fuses_linear_and_gelu_in_a_sequential_only():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(approximate="tanh"), torch.nn.Linear(32, 8),
                                torch.nn.GELU(), torch.nn.Linear(8, 4, bias=False), torch.nn.GELU(approximate="tanh"))
    keys, eager = set(model.state_dict()), copy.deepcopy(model)
    weight = model[0].weight
    report = att.patch(model)
    assert isinstance(model[0], att.LinearGELU) and isinstance(model[1], torch.nn.Identity)
    assert model[0].weight is weight and set(model.state_dict()) == keys
    assert type(model[2]) is att.Linear and isinstance(model[3], torch.nn.GELU), "erf GELU: not the kernel's"
    assert type(model[4]) is att.Linear and isinstance(model[5], torch.nn.GELU), "no bias: not fused"
    assert "0+1 (Linear and GELU, fused)" in report.swapped
    assert any(name == "3" and "approximate='none'" in why for name, why in report.skipped)
    x = torch.randn(4, 16)  # CPU: torch's Linear and GELU run, the unpatched copy's answers
    torch.testing.assert_close(model(x), eager(x))
    assert model[0].fallbacks and sum(model[0].fallbacks.values()) >= 1


class Gated(torch.nn.Sequential):  # a Sequential subclass that calls its children its own way
    def forward(self, x):
        h = self[0](x)
        return self[1](h) * h


def test_patch_leaves_pairs_whose_fusion_would_change_what_they_compute_or_who_sees_it():
    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 8)
    shared = torch.nn.Sequential(lin, torch.nn.GELU(approximate="tanh"))
    hooked = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(approximate="tanh"))
    seen = []
    hooked[0].register_forward_hook(lambda module, inputs, output: seen.append(output))
    model = torch.nn.ModuleDict({"shared": shared, "alias": torch.nn.ModuleList([lin]), "hooked": hooked,
                                 "gated": Gated(torch.nn.Linear(8, 8), torch.nn.GELU(approximate="tanh"))})
    eager = copy.deepcopy(model)
    report = att.patch(model)
    assert not any(isinstance(m, att.LinearGELU) for m in model.modules()), report.swapped
    assert model["shared"][0] is model["alias"][0], "one module, swapped once"
    assert type(model["shared"][0]) is att.Linear
    skipped = dict(report.skipped)
    assert "held elsewhere" in skipped["shared.1"] and "hook" in skipped["hooked.1"]
    x = torch.randn(3, 8)
    torch.testing.assert_close(model["gated"](x), eager["gated"](x))
    model["hooked"](x)
    torch.testing.assert_close(seen[-1], eager["hooked"][0](x))  # the hook still sees the Linear's output


def test_the_hook_tables_patch_reads_exist_in_this_torch():
    # autotune.torch.tracing.HOOK_TABLES reads nn.Module's private hook dicts (written against torch 2.11–2.13).
    from autotune.torch.tracing import HOOK_TABLES

    module = torch.nn.Linear(2, 2)
    assert all(isinstance(getattr(module, table), dict) for table in HOOK_TABLES), torch.__version__
    module.register_forward_pre_hook(lambda m, i: None)
    assert module._forward_pre_hooks


class NanoGptMlp(torch.nn.Module):  # nanoGPT's MLP: its children called from its own forward
    def __init__(self, width=16):
        super().__init__()
        self.c_fc = torch.nn.Linear(width, 4 * width)
        self.gelu = torch.nn.GELU(approximate="tanh")
        self.c_proj = torch.nn.Linear(4 * width, width)
        self.dropout = torch.nn.Dropout(0.0)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Residual(NanoGptMlp):  # the Linear's output used twice: GELU is not its only reader
    def forward(self, x):
        h = self.c_fc(x)
        return self.c_proj(self.gelu(h) + h)


class Branchy(NanoGptMlp):  # control flow on a value: fx cannot trace it
    def forward(self, x):
        h = self.gelu(self.c_fc(x))
        return self.c_proj(h) if h.sum() > 0 else self.c_proj(-h)


class Remembers(NanoGptMlp):  # sets an attribute in its forward
    def forward(self, x):
        self.seen = x
        return super().forward(x)


def test_patch_fuses_a_pair_its_traced_forward_feeds_one_to_the_other():
    torch.manual_seed(0)
    model = torch.nn.ModuleDict({"mlp": NanoGptMlp(), "residual": Residual(), "branchy": Branchy(),
                                 "remembers": Remembers()})
    eager = copy.deepcopy(model)
    report = att.patch(model)
    assert isinstance(model["mlp"].c_fc, att.LinearGELU) and isinstance(model["mlp"].gelu, torch.nn.Identity)
    assert "mlp.c_fc+gelu (Linear and GELU, fused)" in report.swapped
    assert type(model["residual"].c_fc) is att.Linear and type(model["residual"].gelu) is torch.nn.GELU
    assert "could not be traced" in dict(report.skipped)["branchy"]
    assert isinstance(model["remembers"].c_fc, att.LinearGELU) and not hasattr(model["remembers"], "seen")
    x = torch.randn(3, 16)
    for name in ("mlp", "residual", "branchy", "remembers"):
        torch.testing.assert_close(model[name](x), eager[name](x))
