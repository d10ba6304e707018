"""GPU tier of autotune.torch's GEMM layouts: `Linear` forward and backward against float64 torch at a GPT-2 layer's
shape in every dtype (untuned: the rule defaults), under autocast, and a patched MLP's training step against
eager torch.

Tolerances (relative Frobenius norm against float64 on the same rounded values): fp32 1e-5 (FP32-accurate
algorithms at K ≤ 3072); fp16 2e-3 and bf16 1.6e-2 — a few units of the dtype's rounding, the output's own
(the GEMM families' `HALF_TOLERANCE` is per element, these are norms) — and twice that through a chain of layers."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")

from torch_gpu import rel  # noqa: E402

pytestmark = pytest.mark.gpu

TOLERANCE = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("rows", [2048, 77, 1], ids=lambda r: f"rows{r}")
def test_linear_forward_and_gradients_against_float64(att, dtype, bias, rows):
    torch.manual_seed(0)
    layer = att.Linear(768, 3072, bias=bias, device="cuda", dtype=dtype)
    x = torch.randn(rows, 768, device="cuda", dtype=dtype, requires_grad=True)
    dy = torch.randn(rows, 3072, device="cuda", dtype=dtype)
    y = layer(x)
    y.backward(dy)
    ref = torch.nn.Linear(768, 3072, bias=bias, device="cuda", dtype=torch.float64)
    ref.load_state_dict({k: v.double() for k, v in layer.state_dict().items()})
    x64 = x.detach().double().requires_grad_()
    y64 = ref(x64)
    y64.backward(dy.double())
    tol = TOLERANCE[dtype]
    assert y.dtype == dtype and rel(y, y64) < tol
    assert rel(x.grad, x64.grad) < tol and rel(layer.weight.grad, ref.weight.grad) < tol
    if bias:
        assert rel(layer.bias.grad, ref.bias.grad) < tol


def test_autocast_casts_as_torch_would_and_runs_our_kernels(att):
    torch.manual_seed(0)
    eager = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256)).cuda()
    patched = copy.deepcopy(eager)
    report = att.patch(patched)
    x = torch.randn(64, 256, device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        mine, theirs = patched(x), eager(x)
    assert mine.dtype == theirs.dtype == torch.bfloat16
    assert rel(mine, theirs) < 2 * TOLERANCE[torch.bfloat16]
    assert not report.fallbacks, report.fallbacks


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_a_patched_mlp_trains_like_eager(att, dtype, compiled):
    torch.manual_seed(0)
    eager = torch.nn.Sequential(torch.nn.LayerNorm(768), torch.nn.Linear(768, 3072), torch.nn.GELU(),
                                torch.nn.Linear(3072, 768)).cuda().to(dtype)  # fmt: skip
    patched = copy.deepcopy(eager)
    report = att.patch(patched)
    assert report.swapped == ["0", "1", "3"]
    run = torch.compile(patched, fullgraph=True) if compiled else patched
    x = torch.randn(4, 512, 768, device="cuda", dtype=dtype)
    for model in (run, eager):
        model(x).float().pow(2).mean().backward()
    tol = 2 * TOLERANCE[dtype] if dtype != torch.float32 else 1e-4  # LayerNorm's 2e-5 and two GEMMs chained
    for (name, mine), theirs in zip(patched.named_parameters(), eager.parameters()):
        assert rel(mine.grad, theirs.grad) < tol, name
    assert not report.fallbacks


class NanoGptMlp(torch.nn.Module):  # the same pair called from a forward of its own (torch.fx finds it)
    def __init__(self):
        super().__init__()
        self.c_fc, self.gelu = torch.nn.Linear(768, 3072), torch.nn.GELU(approximate="tanh")
        self.c_proj = torch.nn.Linear(3072, 768)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("form", ["sequential", "traced"])
def test_a_gpt2_mlp_fuses_linear_and_gelu_and_trains_like_eager(att, dtype, form):
    """nn.Linear → nn.GELU("tanh") runs as one linear_gelu (its backward: gelu_bias_grad, then the products of dpre),
    in a Sequential or in a module's own forward; forward and every gradient match eager torch's."""
    torch.manual_seed(0)
    if form == "sequential":
        eager = torch.nn.Sequential(torch.nn.Linear(768, 3072), torch.nn.GELU(approximate="tanh"),
                                    torch.nn.Linear(3072, 768))  # fmt: skip
    else:
        eager = NanoGptMlp()
    eager = eager.cuda().to(dtype)
    patched = copy.deepcopy(eager)
    report = att.patch(patched)
    fused = {"sequential": ["0+1 (Linear and GELU, fused)", "2"], "traced": ["c_fc+gelu (Linear and GELU, fused)",
                                                                              "c_proj"]}[form]  # fmt: skip
    assert report.swapped == fused, report
    x = torch.randn(4, 512, 768, device="cuda", dtype=dtype)
    outs = [model(x) for model in (patched, eager)]
    assert rel(outs[0], outs[1]) < 2 * TOLERANCE[dtype]
    for out in outs:
        out.float().pow(2).mean().backward()
    tol = 2 * TOLERANCE[dtype] if dtype != torch.float32 else 1e-4
    for (name, mine), theirs in zip(patched.named_parameters(), eager.parameters()):
        assert rel(mine.grad, theirs.grad) < tol, name
    assert not report.fallbacks
