"""GPU tier: linear_swiglu (C = silu(A·Gᵀ)·(A·Uᵀ), B = [G; U] stored 2N×K) is correct for random configurations,
every tile and schedule, a cluster, split-K (the planes and their reduce), the few-row kernel (wgmma_skinny) and the
rule defaults (the family's ragged validation shapes checked first); and a Llama-style MLP patched with it answers
as eager torch, in inference (one kernel) and in training (the Linear's kernels, then torch's silu and product)."""

from __future__ import annotations

import copy

import pytest

from autotune.spaces import ALGO, get_space

from test_gpu_gemm_layouts import evaluate, pick

pytestmark = pytest.mark.gpu

DTYPES = ("float16", "bfloat16")
SHAPES = [(2048, 1408, 512), (333, 264, 104), (1, 1000, 4096), (16, 14336, 4096)]


@pytest.fixture(scope="module")
def device():
    from autotune.device import query_device

    return query_device()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_random_configs_and_the_rule_default_are_correct(dtype, shape, device):
    space = get_space("linear_swiglu", dtype=dtype)
    configs = pick(space, "wgmma_tma", shape, device, 3, 2031) + [space.rule_default(shape, device)]
    assert not evaluate(space, shape, configs)


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_tile_and_schedule(dtype, device):
    space = get_space("linear_swiglu", dtype=dtype)
    tma = {ALGO: "wgmma_tma", **space.algos["wgmma_tma"].default_config}
    variants = ({}, {"BN": 128}, {"BM": 64, "WG": 1}, {"BM": 256, "BN": 128, "STAGES": 3},
                {"PINGPONG": 1, "BN": 128}, {"CLUSTER_M": 2}, {"GROUP_M": 1}, {"BM": 64, "WG": 1, "SPLIT_K": 2},
                {"SPLIT_K": 3, "BN": 128})
    shape = (1000, 520, 1032)
    configs = [c for c in ({**tma, **v} for v in variants) if not space.violations(c, shape, device)]
    assert len(configs) == len(variants)
    assert not evaluate(space, shape, configs)


def test_a_patched_llama_mlp_answers_as_eager_torch():
    torch = pytest.importorskip("torch")
    import autotune.torch as att
    from torch import nn
    from torch_gpu import rel

    class FeedForward(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate_up = nn.Linear(256, 2 * 704, bias=False)
            self.down = nn.Linear(704, 256, bias=False)

        def forward(self, x):
            gate, up = self.gate_up(x).chunk(2, dim=-1)
            return self.down(nn.functional.silu(gate) * up)

    torch.manual_seed(0)
    eager = FeedForward().cuda().to(torch.bfloat16)
    patched = copy.deepcopy(eager)
    report = att.patch(patched)
    assert type(patched.gate_up) is att.LinearSwiGLU, report
    x = torch.randn(3, 77, 256, device="cuda", dtype=torch.bfloat16)
    ref = eager.double()(x.double())
    eager.to(torch.bfloat16)
    with torch.no_grad():
        assert rel(patched(x), ref) < 2e-2  # two bf16 GEMMs and the activation: a few units of bf16 rounding
    xg = x.clone().requires_grad_()
    patched(xg).float().sum().backward()  # training: the Linear's kernels and torch's silu, with gradients
    xr = x.double().requires_grad_()
    eager.double()(xr).sum().backward()
    assert rel(xg.grad, xr.grad) < 3e-2 and patched.gate_up.weight.grad is not None
    assert not report.fallbacks


def test_the_raw_operator_refuses_gradients_through_the_native_autograd_kernel():
    """Where the C++ launcher registers the Autograd kernel, its refusal still reaches the caller as `NoBackward`
    (not a RuntimeError with the message inside), and without a gradient the kernel runs."""
    torch = pytest.importorskip("torch")
    import autotune.torch as att

    w = torch.randn(96, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    x = torch.randn(2, 5, 64, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(att.NoBackward, match="linear_swiglu has no backward"):
        torch.ops.autotune.linear_swiglu(x, w)
    with torch.no_grad():
        assert torch.ops.autotune.linear_swiglu(x, w).shape == (2, 5, 48)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(16, 14336, 4096), (3, 1000, 520), (29, 264, 1160)], ids=str)
def test_the_few_row_kernel_is_correct(dtype, shape, device):
    """wgmma_skinny's SwiGLU (gate and up rows in each stage, the slices' sums added in the cluster before the
    activation) for random configurations, ragged against its tiles."""
    space = get_space("linear_swiglu", dtype=dtype)
    configs = pick(space, "wgmma_skinny", shape, device, 4, 2033)
    assert configs and not evaluate(space, shape, configs)
