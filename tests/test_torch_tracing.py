"""`autotune.torch.tracing` without a GPU: which train and eval traces count as the same code (constants by value),
and that a forward an earlier rewrite set on the instance is the one traced."""

from __future__ import annotations

import types

import pytest

torch = pytest.importorskip("torch")

from autotune.torch.tracing import forward_function, same_code, trace_forward  # noqa: E402

F = torch.nn.functional
nn = torch.nn


class NanoGptAttention(nn.Module):
    """nanoGPT's call: dropout_p from the mode."""

    def __init__(self, dropout: float) -> None:
        super().__init__()
        self.dropout = dropout

    def forward(self, x):
        return F.scaled_dot_product_attention(x, x, x, dropout_p=self.dropout if self.training else 0, is_causal=True)


class ModeFlag(nn.Module):
    def forward(self, x):
        return F.dropout(x, 0.0, training=self.training)


@pytest.mark.parametrize("module, same", [(NanoGptAttention(0.0), True), (NanoGptAttention(0.1), False),
                                          (ModeFlag(), False)],
                         ids=["dropout-0", "dropout-0.1", "training-flag"])  # fmt: skip
def test_train_and_eval_traces_compare_constants_by_value(module, same):
    train, evaluation = trace_forward(module, True), trace_forward(module, False)
    assert same_code(train, evaluation) is same
    assert same_code(train, trace_forward(module, True))


def test_a_forward_set_on_the_instance_is_the_one_traced():
    module = ModeFlag()

    def doubled(self, x):
        return x * 2

    module.forward = types.MethodType(doubled, module)
    assert forward_function(module) is doubled
    ops = [n.target for n in trace_forward(module, True).nodes if n.op == "call_function"]
    assert ops == [__import__("operator").mul]
    assert forward_function(ModeFlag()) is ModeFlag.forward


def test_a_trace_replaces_a_forward_only_where_both_modes_agree():
    from autotune.torch.tracing import replace_forward, unsafe_to_replace

    differing = NanoGptAttention(0.1)
    assert "differs between train and eval" in unsafe_to_replace(differing, trace_forward(differing, True),
                                                                 trace_forward(differing, False))  # fmt: skip
    module = NanoGptAttention(0.0)
    graph = trace_forward(module, True)
    assert unsafe_to_replace(module, graph, trace_forward(module, False)) == ""
    x = torch.randn(1, 2, 8, 16)
    before = module(x)
    replace_forward(module, graph)
    assert "forward" in module.__dict__ and torch.equal(module(x), before)
