"""Host µs per call of the GPT-2 block's pieces, eager torch against patched (issue 22): each call queued behind a
sleeping kernel, so the host time is the launch path alone. Forward alone (no_grad) and forward + backward through
autograd, for one Linear (8192×768 → 2304, bias) and one LayerNorm (8192×768), bf16."""
import copy
import statistics
import time

import torch
from torch import nn

import autotune.torch as att

CALLS, BATCHES = 50, 15


def per_call_us(fn) -> float:
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(BATCHES):
        torch.cuda._sleep(20_000_000)
        t = time.perf_counter_ns()
        for _ in range(CALLS):
            fn()
        samples.append((time.perf_counter_ns() - t) / CALLS / 1000)
        torch.cuda.synchronize()
    return statistics.median(samples)


dt = torch.bfloat16
x = torch.randn(8192, 768, device="cuda", dtype=dt, requires_grad=True)
for name, module in (("linear 768->2304", nn.Linear(768, 2304)), ("layernorm 768", nn.LayerNorm(768))):
    eager = module.cuda().to(dt)
    holder = nn.Sequential(copy.deepcopy(eager))
    att.patch(holder)
    patched = holder[0]
    g = torch.randn_like(eager(x))
    for label, m in (("eager", eager), ("patched", patched)):
        with torch.no_grad():
            fwd = per_call_us(lambda: m(x))

        def train():
            y = m(x)
            y.backward(g)
        both = per_call_us(train)
        print(f"{name:18} {label:8} forward {fwd:7.1f} us   forward+backward {both:7.1f} us", flush=True)

# The whole block, 8×1024 tokens: forward with grad (the autograd graph built), and backward alone, host µs.
import sys  # noqa: E402

sys.path.insert(0, "examples")
from gpt2_block import Block  # noqa: E402

torch.manual_seed(0)
eager_block = Block().cuda().to(dt)
patched_block = copy.deepcopy(eager_block)
att.patch(patched_block)
xb = torch.randn(8, 1024, 768, device="cuda", dtype=dt)
x3 = torch.randn(8, 1024, 768, device="cuda", dtype=dt, requires_grad=True)
for label, m in (("eager", eager_block), ("patched", patched_block)):
    lin = m.fc
    g3 = torch.randn(8, 1024, 3072, device="cuda", dtype=dt)

    def lin3():
        lin(x3).backward(g3)
    print(f"block.fc 3-D {label:8} forward+backward {per_call_us(lin3):7.1f} us", flush=True)
    fwd_us, bwd_us = [], []
    for _ in range(3):
        m(xb).float().pow(2).mean().backward()
    for _ in range(15):
        torch.cuda.synchronize()
        torch.cuda._sleep(50_000_000)
        t = time.perf_counter_ns()
        loss = m(xb).float().pow(2).mean()
        t1 = time.perf_counter_ns()
        loss.backward()
        t2 = time.perf_counter_ns()
        fwd_us.append((t1 - t) / 1000)
        bwd_us.append((t2 - t1) / 1000)
    print(f"block {label:8} forward (grad) {statistics.median(fwd_us):7.1f} us   backward {statistics.median(bwd_us):7.1f} us",
          flush=True)
