"""GPU tier of patch's attention (`autotune.torch.attention`): GPT-2's attention patched with ``attention=True`` runs
our causal attention forward and backward, and its output and every gradient stay within twice the attention
backward's tolerance (`GRAD_TOLERANCE`, fp16 2e-3, bf16 1.6e-2) of the same module in float64 with torch's SDPA; in
training and under torch.compile(fullgraph=True)."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")

import autotune  # noqa: E402
from test_torch_attention import GptAttention  # noqa: E402
from torch_gpu import cuda, rel  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_patched_gpt_attention_trains_on_our_kernels_against_float64(att, dtype, compiled):
    import torch._dynamo

    from autotune.spaces.attention_backward import GRAD_TOLERANCE

    torch.manual_seed(0)
    model = GptAttention(device="cuda", dtype=dtype)
    reference = copy.deepcopy(model).double()
    report = att.patch(model, attention=True, linear=False)
    assert "autotune_attention (scaled_dot_product_attention)" in report.swapped
    x = cuda(2, 200, 256, seed=1).to(dtype).requires_grad_()
    torch._dynamo.reset()
    run = torch.compile(model, fullgraph=True) if compiled else model
    with autotune.record() as calls:
        y = run(x)
    if not compiled:
        assert "attention_causal" in [kernel for kernel, _, _ in calls.calls]
    dy = cuda(2, 200, 256, seed=2).to(dtype)
    y.backward(dy)
    x_ref = x.detach().double().requires_grad_()
    y_ref = reference(x_ref)
    y_ref.backward(dy.double())
    tolerance = 2 * GRAD_TOLERANCE["float16" if dtype is torch.float16 else "bfloat16"]
    assert rel(y, y_ref) <= tolerance and rel(x.grad, x_ref.grad) <= tolerance, (rel(y, y_ref), rel(x.grad, x_ref.grad))
    for (name, p), r in zip(model.named_parameters(), reference.parameters()):
        assert rel(p.grad, r.grad) <= tolerance, (name, rel(p.grad, r.grad))
    assert not report.attention_fallbacks
