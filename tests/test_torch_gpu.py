"""GPU tier of autotune.torch: results against torch in float64, gradcheck, opcheck on CUDA tensors,
torch.compile(fullgraph=True) with no graph breaks, CUDA graph capture, and bad input; attention's autograd
(attention, attention_causal through their backward kernels) against float64 autograd, alone and in a model.

Tolerances (relative Frobenius norm against float64 torch on the same fp32 values): the kernels' own validation
tolerances — layernorm 2e-5 forward and backward, rmsnorm and softmax 2e-5, gemm 1e-5 at K ≤ 256 (SIMT FFMA,
fp32 accumulation) — and 1e-4 where a result chains two kernels (a backward through a forward).

Attention is fp16/bf16 (no fp32 backward): gradcheck's finite differences are meaningless at that precision, so
its gradients are compared with float64 autograd of a reference attention on the very (rounded) q, k, v and dO.
Each of dq, dk, dv within the backward family's `GRAD_TOLERANCE` (fp16 2e-3, bf16 1.6e-2: four units of the
dtype's rounding), o within the forward's `O_TOLERANCE` (same values): the backward's contract already covers an o
and lse from a real fp16/bf16 forward (the tolerance's derivation in `autotune.spaces.attention_backward`).
Through a model (fp16/bf16 linear layers from torch around our attention), twice that: the linears' own rounding
of activations and of their gradients adds a few units more."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

import autotune  # noqa: E402
from torch_gpu import cuda, rel  # noqa: E402

pytestmark = pytest.mark.gpu


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
    "gemm_nt": lambda: (cuda(7, 12), cuda(9, 12, seed=1)),
    "gemm_tn": lambda: (cuda(12, 7), cuda(12, 9, seed=1)),
    "linear": lambda: (cuda(7, 12), cuda(9, 12, seed=1), cuda(9, seed=2)),
    "linear_gelu": lambda: (cuda(7, 12), cuda(9, 12, seed=1), cuda(9, seed=2)),
}
REFERENCE = {
    "layernorm": lambda x, w, b: torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5),
    "rmsnorm": lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w,
    "softmax": lambda x: torch.softmax(x, -1),
    "gemm": lambda a, b: a @ b,
    "gemm_nt": lambda a, b: a @ b.T,
    "gemm_tn": lambda a, b: a.T @ b,
    "linear": lambda a, b, bias: a @ b.T + bias,
    "linear_gelu": lambda a, b, bias: torch.nn.functional.gelu(a @ b.T + bias, approximate="tanh"),
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


# The operators on (2, 3, ...) activations, against the same call on their 2-D views: the kernel reads the same
# memory, so the results are bitwise equal; and their gradients through autograd, from the 3-D call.
LEADING = {
    "layernorm": lambda: (cuda(2, 3, 40) + 1, cuda(40, seed=1), cuda(40, seed=2)),
    "rmsnorm": lambda: (cuda(2, 3, 40), cuda(40, seed=1)),
    "softmax": lambda: (cuda(2, 3, 40),),
    "softmax_backward": lambda: (torch.softmax(cuda(2, 3, 40), -1), cuda(2, 3, 40, seed=1)),
    "gemm": lambda: (cuda(2, 3, 12), cuda(12, 9, seed=1)),
    "gemm_nt": lambda: (cuda(2, 3, 12), cuda(9, 12, seed=1)),
    "gemm_tn": lambda: (cuda(2, 3, 7), cuda(2, 3, 9, seed=1)),
    "linear": lambda: (cuda(2, 3, 12), cuda(9, 12, seed=1), cuda(9, seed=2)),
    "linear_gelu": lambda: (cuda(2, 3, 12), cuda(9, 12, seed=1), cuda(9, seed=2)),
    "bias_grad": lambda: (cuda(2, 3, 9),),
    "gelu_bias_grad": lambda: (cuda(2, 3, 9), cuda(2, 3, 9, seed=1)),
}


@pytest.mark.parametrize("kernel", sorted(LEADING))
def test_activations_with_leading_dims_equal_their_2d_call(att, kernel):
    args = LEADING[kernel]()
    info = att.OPS[kernel]
    space = info.space("float32")
    def flat(tensors):
        return [t.view(-1, t.shape[-1]) if space.leading_dims.get(n) == 2 else t for n, t in zip(info.inputs, tensors)]

    outs, ref = att.op(kernel)(*args), att.op(kernel)(*flat(args))
    outs, ref = (outs, ref) if isinstance(outs, tuple) else ((outs,), (ref,))
    for name, o, r in zip(info.outputs, outs, ref):
        assert o.shape == space.leading_shape(name, r.shape, args[0].shape[:2]), name
        assert torch.equal(o.reshape(r.shape), r), name
    if kernel in CASES:  # a differentiable operator: its gradients from the 3-D call, against float64
        args = [a.requires_grad_() for a in args]
        out = first(att.op(kernel)(*args))
        dy = cuda(*out.shape, seed=9)
        grads = torch.autograd.grad(out, args, dy)
        ref_args = [a.detach().double().requires_grad_() for a in args]
        ref = REFERENCE[kernel](*flat(ref_args))  # the reference on 2-D views: its gradients come back in 3-D
        ref_grads = torch.autograd.grad(ref, ref_args, dy.double().view(ref.shape))
        for name, g, r in zip(info.inputs, grads, ref_grads):
            assert g.shape == r.shape and rel(g, r) < 1e-4, name


def test_backward_materializes_no_zeros_for_the_statistics(att):
    """mean and rstd (layernorm) and lse (attention) get no gradient: autograd would materialize each as a tensor of
    zeros (a torch.zeros and its fill kernel per backward call) unless told not to."""
    from torch.profiler import ProfilerActivity, profile

    x, w, b = (a.requires_grad_() for a in CASES["layernorm"]())
    q, k, v = (cuda(1, 2, 64, 64, seed=i).half().requires_grad_() for i in range(3))
    y = torch.ops.autotune.layernorm(x, w, b)[0]
    o = torch.ops.autotune.attention(q, k, v)[0]
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        torch.autograd.backward([y, o], [torch.ones_like(y), torch.ones_like(o)])
    assert not {"aten::zeros", "aten::zeros_like"} & {e.key for e in prof.key_averages()}
    assert all(t.grad is not None for t in (x, w, b, q, k, v))


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
    assert att.patch(model).swapped == ["ln", "fc", "rms"]
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


def test_cuda_graph_capture_of_decoding_with_a_dependent_combine(att):
    """Batch-1 grouped decoding over 32K keys runs split_kv's splits and, on sm_90, its combine kernel as a
    programmatic dependent launch (`Launch.overlaps_previous`): captured in a CUDA graph and replayed on new
    queries, it gives the eager call's answer bit for bit."""
    q = cuda(1, 32, 1, 128, seed=0).bfloat16()
    k, v = (cuda(1, 8, 32768, 128, seed=i).bfloat16() for i in (1, 2))
    att.functional.attention(q, k, v)  # warm-up: the plan built, its kernels compiled and loaded
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static = att.functional.attention(q, k, v)
    q.copy_(cuda(1, 32, 1, 128, seed=7).bfloat16())
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(static, att.functional.attention(q, k, v))


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
    # The 2-D fast path leaves weight and bias unchecked: the operator refuses a strided one, the function copies it.
    x, w2 = cuda(40, 6), cuda(12)
    assert torch.equal(att.functional.layer_norm(x, (6,), w2[::2], b[:6]),
                       att.functional.layer_norm(x, (6,), w2[::2].contiguous(), b[:6]))  # fmt: skip
    assert torch.equal(att.functional.rms_norm(x, w2[::2]), att.functional.rms_norm(x, w2[::2].contiguous()))


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
    asked, prepared = [], info.launcher.prepared
    info.launcher.prepared = lambda *tensors: asked.append(tuple(tensors[0].shape)) or prepared(*tensors)
    try:
        x = cuda(24, 80, seed=4)
        ys = [torch.ops.autotune.softmax(x) for _ in range(3)]
        torch.ops.autotune.softmax(cuda(25, 80, seed=5))
        torch.ops.autotune.softmax(x.view(4, 6, 80))  # the same rows with leading dims: a key of its own
    finally:
        info.launcher.prepared = prepared
    assert asked == [(24, 80), (25, 80), (4, 6, 80)]
    assert all(torch.equal(y, ys[0]) for y in ys) and rel(ys[0], torch.softmax(x.double(), -1)) < 2e-5


# --- attention's autograd ---------------------------------------------------------------------------------------
ATTENTION = ("attention", "attention_causal")
DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}
# seq_q == seq_kv ragged against every tile; seq_q < seq_kv (where bottom-right and torch's top-left causal masks
# differ); a decoding length (the forward's split_kv: its lse feeds the backward). Every head_dim the kernels compile
# would multiply the compiles; 64 and 128 are the common ones.
ATTENTION_SHAPES = [(2, 3, 77, 77, 64), (1, 2, 130, 1031, 128), (1, 4, 9, 500, 64)]


def reference_attention(q, k, v, causal: bool):
    """softmax(q·kᵀ/√d)·v, the causal mask aligned bottom-right as the kernels align it (query i sees key j iff
    j ≤ i + seq_kv − seq_q); in whatever dtype it is given (float64 here)."""
    sq, skv = q.shape[2], k.shape[2]
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[3])
    if causal:
        rows = torch.arange(sq, device=q.device)[:, None] + (skv - sq)
        s = s.masked_fill(torch.arange(skv, device=q.device)[None, :] > rows, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


@pytest.mark.parametrize("shape", ATTENTION_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("kernel", ATTENTION)
def test_attention_gradients_against_float64(att, kernel, dtype, shape):
    """q, k, v requiring grad through torch.ops.autotune.<kernel>; dq, dk, dv (the backward kernel, fed our own
    forward's o and lse) against float64 autograd of the reference on the same rounded values."""
    from autotune.spaces.attention import O_TOLERANCE
    from autotune.spaces.attention_backward import GRAD_TOLERANCE

    b, h, sq, skv, d = shape
    causal = kernel == "attention_causal"
    q, k, v = (cuda(b, h, n, d, seed=i).to(DTYPES[dtype]).requires_grad_() for i, n in enumerate((sq, skv, skv)))
    do = cuda(b, h, sq, d, seed=3).to(DTYPES[dtype])
    o, lse = att.op(kernel)(q, k, v)
    assert not lse.requires_grad
    grads = torch.autograd.grad(o, (q, k, v), do)
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    ref = reference_attention(*leaves, causal)
    ref_grads = torch.autograd.grad(ref, leaves, do.double())
    assert rel(o, ref) <= O_TOLERANCE[dtype], rel(o, ref)
    for name, g, r in zip(("dq", "dk", "dv"), grads, ref_grads):
        assert g.dtype == DTYPES[dtype] and g.shape == r.shape, name
        assert torch.isfinite(g).all(), name
        assert rel(g, r) <= GRAD_TOLERANCE[dtype], (name, rel(g, r))
    if causal and sq != skv:  # torch's is_causal aligns top-left: not what this operator computes (documented)
        top_left = torch.nn.functional.scaled_dot_product_attention(*(t.detach() for t in leaves), is_causal=True)
        assert rel(o, top_left) > 10 * O_TOLERANCE[dtype]
    elif causal:  # seq_q == seq_kv: the two alignments agree
        top_left = torch.nn.functional.scaled_dot_product_attention(*(t.detach() for t in leaves), is_causal=True)
        assert rel(o, top_left) <= O_TOLERANCE[dtype]


def test_attention_gradient_of_a_transposed_output_and_partial_needs(att):
    """A dO that is a view (the usual transpose back to (batch, seq, heads, dim)) is copied for the kernel; only
    the gradients asked for are returned."""
    from autotune.spaces.attention_backward import GRAD_TOLERANCE

    q, k, v = (cuda(2, 4, 100, 64, seed=i).half() for i in range(3))
    q.requires_grad_()
    v.requires_grad_()
    o, _ = torch.ops.autotune.attention_causal(q, k, v)
    w = cuda(2, 100, 4, 64, seed=5).half()
    (o.transpose(1, 2) * w).sum().backward()
    assert k.grad is None
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    (reference_attention(*leaves, True).transpose(1, 2) * w.double()).sum().backward()
    assert rel(q.grad, leaves[0].grad) <= GRAD_TOLERANCE["float16"]
    assert rel(v.grad, leaves[2].grad) <= GRAD_TOLERANCE["float16"]


@pytest.mark.parametrize("kernel", ATTENTION)
def test_half_attention_trains_through_a_cpp_node(att, kernel):
    """Where the C++ launcher is loaded, a training call of half-precision attention records its C++ autograd node
    (no Python per call, as linear's), whose gradients are the Python formula's; float32 keeps the Python node,
    which refuses its backward by name (below)."""
    from autotune.runtime import torch_native as native

    assert native.module() is not None, native.unavailable_reason()
    op = getattr(torch.ops.autotune, kernel)
    q = cuda(1, 4, 77, 64, seed=0).half()
    k, v = (cuda(1, 2, 77, 64, seed=i).half() for i in (1, 2))  # grouped: 4 query heads over 2 kv heads
    do = cuda(1, 4, 77, 64, seed=9).half()
    from autotune.torch.autograd import BACKWARDS

    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    o = op(*leaves)[0]
    assert "NativeGrad" in o.grad_fn.name(), o.grad_fn.name()
    o.backward(do)
    ctx = type("Ctx", (), {"needs_input_grad": (True, True, True)})()  # the Python formula on the same tensors
    with torch.no_grad():
        ctx.saved_tensors = (q, k, v, *op(q, k, v))  # q, k, v, o, lse
        python = BACKWARDS[kernel][0](ctx, do, None)
    for leaf, expected in zip(leaves, python):  # the same kernel; dQ's fp32 atomics may add in another order
        assert leaf.grad.shape == expected.shape and rel(leaf.grad, expected) < 1e-3
    fp32 = [t.float().requires_grad_() for t in (q, k, v)]
    assert "NativeGrad" not in op(*fp32)[0].grad_fn.name()


def test_attention_in_float32_runs_forward_but_has_no_backward(att):
    from autotune.spaces.attention import O_TOLERANCE

    q, k, v = (cuda(1, 2, 33, 64, seed=i).requires_grad_() for i in range(3))
    o, _ = torch.ops.autotune.attention(q, k, v)
    ref = reference_attention(*(t.detach().double() for t in (q, k, v)), False)
    assert rel(o, ref) <= O_TOLERANCE["float32"]
    with pytest.raises(att.WrongDtype, match="no backward kernel for float32"):
        o.sum().backward()


class AttentionBlock(torch.nn.Module):
    """A transformer's attention: a qkv projection, heads split by a view and transpose (copied to the contiguous
    layout the raw operator takes), our attention, heads merged, an output projection."""

    def __init__(self, width: int = 256, heads: int = 4, kernel: str = "attention_causal") -> None:
        super().__init__()
        self.heads, self.causal = heads, kernel == "attention_causal"
        self.op = getattr(torch.ops.autotune, kernel)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.out = torch.nn.Linear(width, width)

    def attend(self, q, k, v):
        return self.op(q, k, v)[0]

    def forward(self, x):
        b, s, width = x.shape
        qkv = self.qkv(x).view(b, s, 3, self.heads, width // self.heads).permute(2, 0, 3, 1, 4)
        o = self.attend(*(t.contiguous() for t in qkv.unbind(0)))
        return self.out(o.transpose(1, 2).reshape(b, s, width))


class ReferenceBlock(AttentionBlock):
    def attend(self, q, k, v):
        return reference_attention(q, k, v, self.causal)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("kernel", ATTENTION)
def test_a_model_trains_through_attention(att, kernel, dtype, compiled):
    """Gradients of every parameter and of the input, eager and under torch.compile(fullgraph=True), against the
    same block in float64 with the reference attention (2x the backward's tolerance: see the module docstring);
    then an SGD step along them lowers the loss."""
    import torch._dynamo

    from autotune.spaces.attention_backward import GRAD_TOLERANCE

    torch.manual_seed(0)
    model = AttentionBlock(kernel=kernel).cuda().to(DTYPES[dtype])
    reference = ReferenceBlock(kernel=kernel).cuda().double()
    reference.load_state_dict(model.state_dict())  # the same (rounded) values in float64
    x = cuda(2, 200, 256, seed=1).to(DTYPES[dtype]).requires_grad_()
    target = cuda(2, 200, 256, seed=2).to(DTYPES[dtype])
    torch._dynamo.reset()
    run = torch.compile(model, fullgraph=True) if compiled else model

    def loss_of(y, t):
        # A sum, not a mean: dL/dy = 2(y − t) stays O(1), where a mean's 1e-5 would be fp16 subnormals.
        return ((y - t).float() ** 2).sum()

    loss = loss_of(run(x), target)
    loss.backward()
    x_ref = x.detach().double().requires_grad_()
    loss_of(reference(x_ref), target.double()).backward()
    tolerance = 2 * GRAD_TOLERANCE[dtype]
    assert rel(x.grad, x_ref.grad) <= tolerance, rel(x.grad, x_ref.grad)
    for (name, p), r in zip(model.named_parameters(), reference.parameters()):
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        assert rel(p.grad, r.grad) <= tolerance, (name, rel(p.grad, r.grad))
    # A step whose first-order decrease is 0.1% of the loss: far above the loss's rounding noise, and far enough
    # below the curvature's second-order term that the loss must fall.
    before = float(loss.detach())
    squared = sum(float(p.grad.double().pow(2).sum()) for p in model.parameters())
    torch.optim.SGD(model.parameters(), lr=1e-3 * before / squared).step()
    with torch.no_grad():
        assert float(loss_of(run(x), target)) < before
