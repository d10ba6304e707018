"""Where the Llama-style block's time goes (issue 22), eager against patched: GPU time per kernel of a bf16 prefill
of 2048 tokens, and host time per operator of a decoding step at batch 1 and 16 (torch.profiler, 5 calls each).

    python llama_probe.py
"""
import copy
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, "examples")
from llama_block import Block  # noqa: E402

import autotune.torch as att  # noqa: E402

torch.manual_seed(0)
dt = torch.bfloat16
eager = Block().cuda().to(dt).eval()
patched = copy.deepcopy(eager)
print(att.patch(patched))
cases = [("prefill", torch.randn(1, 2048, 4096, device="cuda", dtype=dt), None)]
for b in (1, 16):
    cache = tuple(torch.randn(b, 8, 2048, 128, device="cuda", dtype=dt) for _ in range(2))
    cases.append((f"decode b{b}", torch.randn(b, 1, 4096, device="cuda", dtype=dt), cache))

with torch.no_grad():
    for label, x, cache in cases:
        for name, m in (("eager", eager), ("patched", patched)):
            for _ in range(3):
                m(x, cache)
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for _ in range(5):
                    m(x, cache)
                torch.cuda.synchronize()
            events = prof.key_averages()
            gpu = sorted((e for e in events if e.device_time_total > 0 and e.device_type.name == "CUDA"),
                         key=lambda e: -e.device_time_total)
            gpu_total = sum(e.device_time_total for e in gpu) / 5
            host = sorted(events, key=lambda e: -e.self_cpu_time_total)
            host_total = sum(e.self_cpu_time_total for e in events) / 5
            print(f"--- {label} {name}: GPU kernels {gpu_total / 1e3:.3f} ms, host self {host_total / 1e3:.3f} ms "
                  f"(profiled, per call)")
            for e in gpu[:12]:
                print(f"  gpu {e.device_time_total / 5:8.1f} us {e.count // 5:3d}x  {e.key[:90]}")
            if label != "prefill":
                for e in host[:16]:
                    print(f"  cpu {e.self_cpu_time_total / 5:8.1f} us {e.count // 5:3d}x  {e.key[:90]}")
