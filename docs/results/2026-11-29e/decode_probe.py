"""Where the Llama block's decoding step goes (issue 22: decode b16 at 1.04-1.06x eager with the cat cache). An
experiment, not product code:

1. per-call host cost of each operator the patched step calls, against torch's (a loop of calls, no sync);
2. torch.profiler's table of one step, eager and patched, with the cat cache and with a static cache;
3. eager against patched in alternating rounds, for the cat cache (the example's) and a static cache (buffers of the
   full length, the token's k and v written in place: HF's StaticCache, gpt-fast), and both captured in CUDA graphs.

    python decode_probe.py [--batches 1 16] [--rounds 9] [--profile]
"""
import argparse
import copy
import statistics
import sys
import time

import torch
from torch import nn

sys.path.insert(0, "examples")
import llama_block  # noqa: E402

import autotune.torch as att  # noqa: E402
from autotune.runtime import torch_native  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--batches", type=int, nargs="+", default=[1, 16])
parser.add_argument("--rounds", type=int, default=9)
parser.add_argument("--cache", type=int, default=2048)
parser.add_argument("--profile", action="store_true")
args = parser.parse_args()
dt = torch.bfloat16


class StaticBlock(llama_block.Block):
    """The block with a static KV cache: ``cache`` is (k buffer, v buffer, filled length)."""

    def forward(self, x, cache=None):
        if cache is None or len(cache) == 2:  # prefill, or the cat cache
            return super().forward(x, cache)
        kbuf, vbuf, start = cache
        b, t, d = x.shape
        h = self.attn_norm(x)
        q = self.rotary(self.q(h).view(b, t, self.heads, self.head_dim).transpose(1, 2), start)
        k, v = self.kv(h).view(b, t, 2, self.kv_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        kbuf[:, :, start:start + t] = self.rotary(k, start)
        vbuf[:, :, start:start + t] = v
        y = nn.functional.scaled_dot_product_attention(q, kbuf[:, :, :start + t], vbuf[:, :, :start + t],
                                                       enable_gqa=True)
        x = x + self.o(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.mlp_norm(x))


def timed(fn, steps):
    times, host = [], []
    for _ in range(steps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        t = time.perf_counter()
        fn()
        host.append(1e3 * (time.perf_counter() - t))
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times), statistics.median(host)


def ab(label, fns, steps=20):
    for fn in fns.values():
        for _ in range(5):
            fn()
    torch.cuda.synchronize()
    results = {k: [] for k in fns}
    for _ in range(args.rounds):
        for name, fn in fns.items():
            results[name].append(timed(fn, steps))
    base = results[next(iter(fns))]
    for name in fns:
        ratios = [e[0] / p[0] for e, p in zip(base, results[name])]
        print(f"{label:22} {name:16} step {statistics.median(s for s, _ in results[name]):.3f} ms, host "
              f"{statistics.median(h for _, h in results[name]):.3f} ms; first/this median "
              f"{statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f})", flush=True)


def host_per_call(fn, n=300):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    host = (time.perf_counter() - t) / n * 1e6
    torch.cuda.synchronize()
    return host


def graphed(fn):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g.replay


print(f"{torch.cuda.get_device_name()} torch {torch.__version__}; native launcher: "
      f"{torch_native.unavailable_reason() or 'in use'}", flush=True)
torch.manual_seed(0)
eager = StaticBlock().cuda().to(dt).eval()
patched = copy.deepcopy(eager)
print(att.patch(patched))

with torch.no_grad():
    # 1. host cost per call, 16 rows
    x16 = torch.randn(16, 4096, device="cuda", dtype=dt)
    pairs = {
        "q Linear 16x4096->4096": (lambda: eager.q(x16), lambda: patched.q(x16)),
        "down Linear 16x14336->4096": (lambda: eager.mlp.down(torch.empty(16, 14336, device="cuda", dtype=dt)),
                                       lambda: patched.mlp.down(torch.empty(16, 14336, device="cuda", dtype=dt))),
        "MLP 16x4096": (lambda: eager.mlp(x16), lambda: patched.mlp(x16)),
        "RMSNorm 16x4096": (lambda: eager.attn_norm(x16), lambda: patched.attn_norm(x16)),
    }
    for name, (e, p) in pairs.items():
        print(f"host per call {name:28} torch {host_per_call(e):6.1f} us  patched {host_per_call(p):6.1f} us",
              flush=True)
    xs = x16.view(16, 1, 4096)
    print(f"host per call {'rotary q (torch ops)':28} {host_per_call(lambda: eager.rotary(torch.empty(16, 32, 1, 128, device='cuda', dtype=dt), 2048)):6.1f} us")  # noqa: E501

    for b in args.batches:
        x = torch.randn(b, 1, 4096, device="cuda", dtype=dt)
        cat_cache = tuple(torch.randn(b, 8, args.cache, 128, device="cuda", dtype=dt) for _ in range(2))
        bufs = {name: tuple(torch.zeros(b, 8, args.cache + 64, 128, device="cuda", dtype=dt) for _ in range(2))
                for name in ("eager", "patched")}
        for name in bufs:
            for buf, src in zip(bufs[name], cat_cache):
                buf[:, :, :args.cache] = src
        static = {name: (*bufs[name], args.cache) for name in bufs}
        models = {"eager": eager, "patched": patched}
        ref = eager(x, cat_cache).float()
        for name in ("patched",):
            err = float((models[name](x, cat_cache).float() - ref).norm() / ref.norm())
            errs = float((models[name](x, static[name]).float() - eager(x, static["eager"]).float()).norm()
                         / ref.norm())
            print(f"decode b{b}: patched relative error cat {err:.2e}, static {errs:.2e}", flush=True)
        if args.profile and b == max(args.batches):
            from torch.profiler import ProfilerActivity, profile
            for kind in ("cat", "static"):
                for name, m in models.items():
                    c = cat_cache if kind == "cat" else static[name]
                    for _ in range(3):
                        m(x, c)
                    torch.cuda.synchronize()
                    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                        for _ in range(10):
                            m(x, c)
                        torch.cuda.synchronize()
                    print(f"=== profile decode b{b} {kind} {name} (10 steps)")
                    print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=18,
                                                    max_name_column_width=60))
                    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=14,
                                                    max_name_column_width=60), flush=True)
        ab(f"decode b{b} cat", {n: (lambda m=m: m(x, cat_cache)) for n, m in models.items()})
        ab(f"decode b{b} static", {n: (lambda m=m, n=n: m(x, static[n])) for n, m in models.items()})
        graphs = {n: graphed(lambda m=m, n=n: m(x, static[n])) for n, m in models.items()}
        graphs.update({f"{n} cat": graphed(lambda m=m: m(x, cat_cache)) for n, m in models.items()})
        ab(f"decode b{b} graphs", graphs)
