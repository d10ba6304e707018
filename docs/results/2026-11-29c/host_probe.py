"""Where the host time of a patched bf16 GPT-2 step goes (issue 22), as experiments, not product code:

1. eager and patched, each with the block as written (3-D activations: our modules reshape to 2-D and back, two
   view ops a call and a ViewBackward node each in the backward) and with a 2-D variant (one view at each end):
   alternating rounds, step and host medians;
2. per call, queued behind a sleeping kernel (host µs alone): a patched Linear / LayerNorm module against the raw
   operator on the same 2-D tensor, no grad and forward + backward, and torch's own;
3. the host time of a step's three parts (forward, backward, AdamW) eager and patched.

    python host_probe.py [--rounds 7] [--steps 25]
"""
import argparse
import copy
import statistics
import sys
import time

import torch
from torch import nn

sys.path.insert(0, "examples")
from gpt2_block import Block  # noqa: E402

import autotune.torch as att  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--rounds", type=int, default=7)
parser.add_argument("--steps", type=int, default=25)
args = parser.parse_args()
dt = torch.bfloat16


class Block2D(Block):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        x = x.view(b * t, c)
        q, k, v = self.attn(self.ln_1(x)).split(c, dim=1)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b * t, c))
        return (x + self.mlp(self.ln_2(x))).view(b, t, c)


torch.manual_seed(0)
base = Block().cuda().to(dt)
models = {"eager": base, "eager2d": Block2D().cuda().to(dt)}
models["eager2d"].load_state_dict(base.state_dict())
models["patched"] = copy.deepcopy(base)
models["patched2d"] = copy.deepcopy(models["eager2d"])
print(att.patch(models["patched"]))
att.patch(models["patched2d"])
x = torch.randn(8, 1024, 768, device="cuda", dtype=dt)
optims = {k: torch.optim.AdamW(m.parameters(), lr=1e-4) for k, m in models.items()}


def step(name):
    optims[name].zero_grad(set_to_none=True)
    models[name](x).float().pow(2).mean().backward()
    optims[name].step()


def timed(name, steps):
    times, host = [], []
    for _ in range(steps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        t = time.perf_counter()
        step(name)
        host.append(1e3 * (time.perf_counter() - t))
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times), statistics.median(host)


for name in models:
    for _ in range(5):
        step(name)
torch.cuda.synchronize()
print("== 1. steps, alternating rounds (ms: step / host)")
results = {k: [] for k in models}
for r in range(args.rounds):
    line = []
    for name in models:
        s, h = timed(name, args.steps)
        results[name].append((s, h))
        line.append(f"{name} {s:.3f}/{h:.3f}")
    print(f"round {r}: " + "  ".join(line), flush=True)
for name in models:
    ratios = [e[0] / p[0] for e, p in zip(results["eager"], results[name])]
    print(f"{name:10} step median {statistics.median(s for s, _ in results[name]):.3f} ms, host "
          f"{statistics.median(h for _, h in results[name]):.3f} ms; eager/this median {statistics.median(ratios):.3f}")

print("== 2. host us per call (queued behind a sleeping kernel)")
CALLS, BATCHES = 40, 12


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


x2 = torch.randn(8192, 768, device="cuda", dtype=dt, requires_grad=True)
x3 = x2.detach().view(8, 1024, 768).requires_grad_()
for label, module in (("linear 768->2304", nn.Linear(768, 2304)), ("layernorm 768", nn.LayerNorm(768))):
    eager = module.cuda().to(dt)
    holder = nn.Sequential(copy.deepcopy(eager))
    att.patch(holder)
    patched = holder[0]
    if isinstance(module, nn.Linear):
        raw = lambda z, m=patched: torch.ops.autotune.linear.default(z, m.weight, m.bias)  # noqa: E731
    else:
        raw = lambda z, m=patched: torch.ops.autotune.layernorm.default(z, m.weight, m.bias)[0]  # noqa: E731
    for name, fn, inp in (("eager 2d", eager, x2), ("eager 3d", eager, x3), ("patched 2d", patched, x2),
                          ("patched 3d", patched, x3), ("raw op 2d", raw, x2)):
        g = torch.randn_like(fn(inp))
        with torch.no_grad():
            fwd = per_call_us(lambda: fn(inp))

        def train():
            fn(inp).backward(g)
        print(f"{label:18} {name:11} forward {fwd:6.1f} us   forward+backward {per_call_us(train):6.1f} us",
              flush=True)
for name in ("eager", "patched"):
    m = models[name]
    with torch.no_grad():
        fwd = per_call_us(lambda: m(x))
    print(f"block {name:8} forward (no grad) {fwd:7.1f} us", flush=True)

print("== 3. host ms of a step's parts (median of 30, GPU queued behind a sleep)")
for name in ("eager", "patched", "patched2d"):
    parts = {"forward": [], "backward": [], "adamw": []}
    for _ in range(30):
        torch.cuda.synchronize()
        torch.cuda._sleep(60_000_000)
        t0 = time.perf_counter()
        optims[name].zero_grad(set_to_none=True)
        loss = models[name](x).float().pow(2).mean()
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        optims[name].step()
        t3 = time.perf_counter()
        for k, v in zip(parts, (t1 - t0, t2 - t1, t3 - t2)):
            parts[k].append(1e3 * v)
    print(f"{name:10} " + "  ".join(f"{k} {statistics.median(v):.3f}" for k, v in parts.items()), flush=True)
