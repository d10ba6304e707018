"""GPT-2 MLP pieces (8192 tokens, d 768, bf16 and fp32), untuned (rule defaults), against torch in the same process:
the first Linear and its GELU (linear_gelu vs F.gelu(F.linear)), GELU's backward and the bias sum (gelu_bias_grad vs
torch's gelu backward + sum(0)), and the bias gradients alone (bias_grad vs dC.sum(0)). CUDA events, L2 flushed
before each run, medians of 50."""
import statistics

import torch

import autotune.torch as att  # noqa: F401  (registers the operators)

ops = torch.ops.autotune
flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")


def ms(fn, reps=50):
    for _ in range(5):
        fn()
    times = []
    for _ in range(reps):
        flush.zero_()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def gelu(x):
    return torch.nn.functional.gelu(x, approximate="tanh")


for dtype in (torch.bfloat16, torch.float32):
    torch.manual_seed(0)
    x = torch.randn(8192, 768, device="cuda", dtype=dtype)
    w = torch.randn(3072, 768, device="cuda", dtype=dtype) / 30
    b = torch.randn(3072, device="cuda", dtype=dtype)
    ours = ms(lambda: ops.linear_gelu(x, w, b))
    theirs = ms(lambda: gelu(torch.nn.functional.linear(x, w, b)))
    lin = ms(lambda: ops.linear(x, w, b))
    c, pre = ops.linear_gelu(x, w, b)
    ref = gelu(torch.nn.functional.linear(x.double(), w.double(), b.double()))
    err = float((c.double() - ref).norm() / ref.norm())
    print(f"{dtype}: linear+gelu 8192x3072x768  ours {ours:.4f} ms (our linear alone {lin:.4f})  torch {theirs:.4f} ms"
          f"  = {theirs / ours:.2f}x; C rel. error {err:.1e}", flush=True)
    dy = torch.randn(8192, 3072, device="cuda", dtype=dtype)
    pre_t = pre.clone().requires_grad_()

    def torch_backward():
        dpre = torch.ops.aten.gelu_backward(dy, pre, approximate="tanh")
        return dpre, dpre.sum(0)

    ours = ms(lambda: ops.gelu_bias_grad(dy, pre))
    theirs = ms(torch_backward)
    dpre, db = ops.gelu_bias_grad(dy, pre)
    rdpre, rdb = torch_backward()
    rel_dpre = float((dpre.double() - rdpre.double()).norm() / rdpre.double().norm())
    print(f"{dtype}: gelu backward + bias sum 8192x3072  ours {ours:.4f} ms  torch {theirs:.4f} ms = "
          f"{theirs / ours:.2f}x; dpre vs torch {rel_dpre:.1e}"
          f", dbias {float((db.double() - rdb.double()).norm() / rdb.double().norm()):.1e}", flush=True)
    for n in (768, 2304, 3072):
        dc = torch.randn(8192, n, device="cuda", dtype=dtype)
        ours, theirs = ms(lambda: ops.bias_grad(dc)), ms(lambda: dc.sum(0))
        gb = dc.numel() * dc.element_size() / 1e9
        print(f"{dtype}: bias_grad 8192x{n}  ours {ours:.4f} ms ({gb / ours:.2f} TB/s)  torch sum(0) {theirs:.4f} ms "
              f"({gb / theirs:.2f} TB/s) = {theirs / ours:.2f}x", flush=True)
