"""The GPT-2 block's training step (examples/gpt2_block.py: 8×1024 tokens, bf16 by default), eager against patched,
measured in alternating rounds (so that a drift of the host's speed falls on both), and where the host time of a
patched step goes against eager's (torch.profiler, CPU self time per operator, one step each).

    python gpt2_ab.py [--dtype bfloat16] [--rounds 7] [--steps 30]
"""
import argparse
import copy
import statistics
import sys
import time

import torch

sys.path.insert(0, "examples")
from gpt2_block import Block  # noqa: E402

import autotune.torch as att  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--dtype", default="bfloat16")
parser.add_argument("--rounds", type=int, default=7)
parser.add_argument("--steps", type=int, default=30)
args = parser.parse_args()
dtype = getattr(torch, args.dtype)
torch.manual_seed(0)
eager = Block().cuda().to(dtype)
patched = copy.deepcopy(eager)
print(att.patch(patched))
x = torch.randn(8, 1024, 768, device="cuda", dtype=dtype)
models = {"eager": eager, "patched": patched}
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
ratios = []
for r in range(args.rounds):
    (e, eh), (p, ph) = timed("eager", args.steps), timed("patched", args.steps)
    ratios.append(e / p)
    print(f"round {r}: eager {e:.3f} ms (host {eh:.3f}), patched {p:.3f} ms (host {ph:.3f}) = {e / p:.3f}x", flush=True)
print(f"{args.dtype} step, median of {args.rounds} rounds: {statistics.median(ratios):.3f}x eager "
      f"(min {min(ratios):.3f}, max {max(ratios):.3f})")

from torch.profiler import ProfilerActivity, profile  # noqa: E402

for name in models:
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(5):
            step(name)
        torch.cuda.synchronize()
    rows = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:22]
    total = sum(e.self_cpu_time_total for e in prof.key_averages()) / 5
    print(f"--- {name}: host self time per step {total / 1e3:.3f} ms (profiled), top operators (us per step, calls):")
    for e in rows:
        print(f"  {e.self_cpu_time_total / 5:8.1f}  {e.count // 5:3d}  {e.key[:80]}")
