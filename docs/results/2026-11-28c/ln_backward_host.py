"""Host µs of the LayerNorm backward operator called directly (8192×768 bf16), against torch's own
(aten::native_layer_norm_backward), queued behind a sleeping kernel; then cProfile of 50 calls: does a call reach
Python (the plan looked up again) or stay in the C++ launcher?"""
import cProfile
import pstats
import statistics
import time

import torch

import autotune.torch  # noqa: F401  (registers torch.ops.autotune)

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
x = torch.randn(8192, 768, device="cuda", dtype=dt)
w, b = torch.randn(768, device="cuda", dtype=dt), torch.randn(768, device="cuda", dtype=dt)
dy = torch.randn_like(x)
y, mean, rstd = torch.ops.autotune.layernorm(x, w, b)
_, tmean, trstd = torch.ops.aten.native_layer_norm(x, [768], w, b, 1e-5)
ops = {
    "autotune.layernorm (forward)": lambda: torch.ops.autotune.layernorm(x, w, b),
    "aten.native_layer_norm": lambda: torch.ops.aten.native_layer_norm(x, [768], w, b, 1e-5),
    "autotune.layernorm_backward": lambda: torch.ops.autotune.layernorm_backward(dy, x, w, mean, rstd),
    "aten.native_layer_norm_backward": lambda: torch.ops.aten.native_layer_norm_backward(
        dy, x, [768], tmean, trstd, w, b, [True, True, True]),
    "autotune.gemm 8192x768x768": (lambda a=torch.randn(8192, 768, device="cuda", dtype=dt),
                                   m=torch.randn(768, 768, device="cuda", dtype=dt): torch.ops.autotune.gemm(a, m)),
}
for name, fn in ops.items():
    print(f"{name:36} {per_call_us(fn):7.1f} us per call", flush=True)
pr = cProfile.Profile()
pr.enable()
for _ in range(50):
    torch.ops.autotune.layernorm_backward(dy, x, w, mean, rstd)
torch.cuda.synchronize()
pr.disable()
pstats.Stats(pr).sort_stats("tottime").print_stats(12)
from torch.profiler import ProfilerActivity, profile  # noqa: E402

with profile(activities=[ProfilerActivity.CPU]) as prof:
    for _ in range(20):
        torch.ops.autotune.layernorm_backward(dy, x, w, mean, rstd)
    torch.cuda.synchronize()
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15, max_name_column_width=50))
