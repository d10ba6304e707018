"""Which host-side CUDA calls a training step of the GPT-2 block makes, eager and patched (bf16, 32×1024 tokens):
a synchronising call (cudaMalloc, a copy to the host, a stream or device synchronize) in the patched step would
explain why its host time grows with the batch where eager's does not (2026-11-28b, call 6)."""

import sys
from collections import Counter

import torch

sys.path.insert(0, "examples")
import copy  # noqa: E402

from gpt2_block import Block  # noqa: E402

import autotune.torch as att  # noqa: E402

dtype = torch.bfloat16
torch.manual_seed(0)
eager = Block().cuda().to(dtype)
patched = copy.deepcopy(eager)
att.patch(patched, linear=True)
x = torch.randn(32, 1024, 768, device="cuda", dtype=dtype)
for name, model in (("eager", eager), ("patched", patched)):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        optimizer.zero_grad(set_to_none=True)
        model(x).float().pow(2).mean().backward()
        optimizer.step()

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    calls = Counter()
    cpu_us = Counter()
    for e in prof.events():
        if e.device_type.name == "CPU" and (e.name.startswith("cuda") or e.name.startswith("cu")):
            calls[e.name] += 1
            cpu_us[e.name] += e.cpu_time_total
    print(f"{name}: host CUDA API calls in one step:")
    for k, v in sorted(calls.items(), key=lambda kv: -cpu_us[kv[0]]):
        print(f"  {v:5d}  {cpu_us[k] / 1e3:8.3f} ms  {k}")
    top = prof.key_averages().table(sort_by="cpu_time_total", row_limit=25)
    print(top)
