"""GPU tier of autotune.torch: results against torch in float64, gradcheck, opcheck on CUDA tensors,
torch.compile(fullgraph=True) with no graph breaks, CUDA graph capture, and bad input.

Tolerances (relative Frobenius norm against float64 torch on the same fp32 values): the kernels' own validation
tolerances — layernorm 2e-5 forward and backward, rmsnorm and softmax 2e-5, gemm 1e-5 at K ≤ 256 (SIMT FFMA,
fp32 accumulation) — and 1e-4 where a result chains two kernels (a backward through a forward)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import autotune  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def att():
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    import autotune.torch as att

    return att


def rel(a, b) -> float:
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def cuda(*shape, seed=0, **kw):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(*shape, device="cuda", generator=g, **kw)


def test_forward_matches_float64_torch(att):
    x, w, b = cuda(37, 1031) * 2 + 3, cuda(1031, seed=1), cuda(1031, seed=2)
    y, mean, rstd = torch.ops.autotune.layernorm(x, w, b)
    ref = torch.nn.functional.layer_norm(x.double(), (1031,), w.double(), b.double(), eps=1e-5)
    assert rel(y, ref) < 2e-5
    assert rel(mean, x.double().mean(1)) < 2e-5
    r = torch.ops.autotune.rmsnorm(x, w)
    ref = x.double() * torch.rsqrt(x.double().pow(2).mean(1, keepdim=True) + 1e-6) * w.double()
    assert rel(r, ref) < 2e-5
    s = torch.ops.autotune.softmax(x)
    assert rel(s, torch.softmax(x.double(), -1)) < 2e-5
    a, m = cuda(33, 200), cuda(200, 65, seed=3)
    assert rel(torch.ops.autotune.gemm(a, m), a.double() @ m.double()) < 1e-5


CASES = {
    "layernorm": lambda: (cuda(6, 40) + 1, cuda(40, seed=1), cuda(40, seed=2)),
    "rmsnorm": lambda: (cuda(6, 40), cuda(40, seed=1)),
    "softmax": lambda: (cuda(6, 40),),
    "gemm": lambda: (cuda(7, 12), cuda(12, 9, seed=1)),
}
REFERENCE = {
    "layernorm": lambda x, w, b: torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5),
    "rmsnorm": lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w,
    "softmax": lambda x: torch.softmax(x, -1),
    "gemm": lambda a, b: a @ b,
}


def first(out):
    return out[0] if isinstance(out, tuple) else out


@pytest.mark.parametrize("kernel", sorted(CASES))
def test_gradients_against_float64(att, kernel):
    """The fp32 kernels' analytic gradients against torch autograd in float64 on the same values, and
    torch.autograd.gradcheck in fp32 (finite differences at eps 1e-2: tolerances of fp32 differencing)."""
    args = [a.requires_grad_() for a in CASES[kernel]()]
    op = att.op(kernel)
    out = first(op(*args))
    dy = cuda(*out.shape, seed=9)
    grads = torch.autograd.grad(out, args, dy)
    ref_args = [a.detach().double().requires_grad_() for a in args]
    ref_grads = torch.autograd.grad(REFERENCE[kernel](*ref_args), ref_args, dy.double())
    for name, g, r in zip(att.OPS[kernel].inputs, grads, ref_grads):
        assert rel(g, r) < 1e-4, name
    assert torch.autograd.gradcheck(lambda *a: first(op(*a)), args, eps=1e-2, atol=5e-3, rtol=5e-3,
                                    nondet_tol=1e-5)  # fmt: skip


@pytest.mark.parametrize("kernel", sorted(CASES))
def test_opcheck_on_cuda(att, kernel):
    args = [a.requires_grad_() for a in CASES[kernel]()]
    torch.library.opcheck(att.op(kernel), args)


class Block(torch.nn.Module):
    def __init__(self, width=256):
        super().__init__()
        self.ln = torch.nn.LayerNorm(width)
        self.fc = torch.nn.Linear(width, width)
        self.rms = torch.nn.RMSNorm(width, eps=1e-6)

    def forward(self, x):
        h = self.ln(x)
        h = torch.nn.functional.gelu(self.fc(h))
        return self.rms(h) + x


def test_compile_fullgraph_has_no_graph_breaks(att):
    import torch._dynamo

    model = Block().cuda()
    assert att.patch(model).swapped == ["ln", "rms"]
    x = cuda(4, 64, 256)
    eager = model(x)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(model)(x)
    print(f"torch._dynamo.explain: {explained.graph_count} graph(s), {explained.graph_break_count} graph breaks")
    assert explained.graph_break_count == 0, explained.break_reasons
    compiled = torch.compile(model, fullgraph=True)
    assert rel(compiled(x), eager) < 1e-5
    x.requires_grad_()
    compiled(x).sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()


def test_cuda_graph_capture_of_forward_and_backward(att):
    model = Block().cuda()
    att.patch(model)
    static_x = cuda(8, 256, requires_grad=True)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up: plans built, kernels compiled and loaded, before capture
        for _ in range(2):
            model.zero_grad(set_to_none=True)
            model(static_x).sum().backward()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    model.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        static_y = model(static_x)
        static_y.sum().backward()
    with torch.no_grad():
        static_x.copy_(cuda(8, 256, seed=5))
    graph.replay()
    torch.cuda.synchronize()
    x = static_x.detach().clone().requires_grad_()
    eager = Block().cuda()
    eager.load_state_dict(model.state_dict())
    y = eager(x)
    y.sum().backward()
    assert rel(static_y, y) < 1e-5
    assert rel(model.ln.weight.grad, eager.ln.weight.grad) < 1e-4


def test_bad_input_on_the_gpu(att):
    x, w, b = CASES["layernorm"]()
    with pytest.raises(att.NotContiguous, match="x is not contiguous"):
        torch.ops.autotune.layernorm(cuda(40, 6).t(), w, b)
    with pytest.raises(att.WrongDevice, match="weight is on cpu"):
        torch.ops.autotune.layernorm(x, w.cpu(), b)
    with pytest.raises(att.WrongDtype, match="float64"):
        torch.ops.autotune.softmax(x.double())
    y = att.functional.layer_norm(cuda(6, 40).t(), (6,), cuda(6), cuda(6))  # the function copies the view
    assert y.shape == (40, 6) and torch.isfinite(y).all()


def test_recording_sees_the_operators(att):
    x = cuda(12, 96)
    with autotune.record() as calls:
        torch.ops.autotune.softmax(x)
        torch.ops.autotune.softmax(x)
        att.functional.matmul(x, cuda(96, 32))
    assert calls.calls == [("softmax", (12, 96), "float32"), ("gemm", (12, 32, 96), "float32")]
    assert calls.count(("softmax", (12, 96), "float32")) == 2


def test_the_operators_launch_from_cpp_asking_python_once_per_key(att):
    """The C++ launcher (autotune.torch.native) builds on a GPU machine with a toolkit, and takes every call of a
    key seen before without Python: the plan hook runs once per new key, not per call."""
    from autotune.runtime import torch_native as native

    assert native.module() is not None, native.unavailable_reason()
    info = att.OPS["softmax"]
    asked, plan = [], info.launcher.plan
    info.launcher.plan = lambda *tensors: asked.append(tuple(tensors[0].shape)) or plan(*tensors)
    try:
        x = cuda(24, 80, seed=4)
        ys = [torch.ops.autotune.softmax(x) for _ in range(3)]
        torch.ops.autotune.softmax(cuda(25, 80, seed=5))
    finally:
        info.launcher.plan = plan
    assert asked == [(24, 80), (25, 80)]
    assert all(torch.equal(y, ys[0]) for y in ys) and rel(ys[0], torch.softmax(x.double(), -1)) < 2e-5
