"""Where the host time of a bf16 GPT-2 training step goes (issue 22): eager against patched, 8×1024 tokens.
torch.profiler's CPU self time per operator (aten ops, autotune's ops, autograd nodes), then cProfile's Python
functions by own time, for 20 steps each."""
import copy
import cProfile
import pstats
import sys
import time

import torch

sys.path.insert(0, "examples")
from gpt2_block import Block  # noqa: E402

import autotune.torch as att  # noqa: E402


def make_step(model, x):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        optimizer.zero_grad(set_to_none=True)
        model(x).float().pow(2).mean().backward()
        optimizer.step()
    return step


torch.manual_seed(0)
eager = Block().cuda().to(torch.bfloat16)
patched = copy.deepcopy(eager)
print(att.patch(patched))
x = torch.randn(8, 1024, 768, device="cuda", dtype=torch.bfloat16)
for name, model in (("eager", eager), ("patched", patched)):
    step = make_step(model, x)
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    # host time with the GPU never the bottleneck: each step waits for the last first
    host = []
    for _ in range(20):
        torch.cuda.synchronize()
        t = time.perf_counter()
        step()
        host.append(time.perf_counter() - t)
    host.sort()
    print(f"\n=== {name}: host ms per step (GPU idle at start) median {1e3 * host[10]:.3f}, min {1e3 * host[0]:.3f}")
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(10):
            step()
        torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=28, max_name_column_width=60))
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(10):
        step()
    torch.cuda.synchronize()
    pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(25)
