"""A GPT-2-sized transformer block (d_model 768, 12 heads, MLP 3072), one training step — forward, backward and
AdamW — in eager torch against the same block patched with autotune's kernels (`autotune.torch.patch`: its
LayerNorms run the tuned forward and backward kernels, its Linear layers the tuned GEMMs: ``linear`` forward,
``gemm``, ``gemm_tn`` and ``bias_grad`` backward, the MLP's first Linear and its GELU as one ``linear_gelu`` with
``gelu_bias_grad`` in its backward; ``--norms-only`` leaves the Linear layers to torch). Attention stays torch's
``scaled_dot_product_attention`` in both, unless ``--attention``: then the patched block's runs autotune's
``attention_causal`` and its backward (`patch(..., attention=True)`).

    python examples/gpt2_block.py [--batch 8] [--seq 1024] [--dtype float32 bfloat16] [--record shapes.json]
                                  [--norms-only] [--attention] [--no-compile] [--graphs]

Prints the median step time of each — eager, patched, and ``torch.compile`` of the eager block — the speedups, the
host time to enqueue a step beside the GPU kernel time (where they are close, the step measures the host), and
each kernel's share of the GPU time of a patched step (torch.profiler). ``--graphs`` also times eager and patched
with the whole step (forward, backward, AdamW) captured in one CUDA graph each: what the kernels give where the host
does not count. ``--record`` writes the problems the
patched step sends to autotune (every dtype's, in one file), for ``autotune search --shapes-from shapes.json``. A
dtype that autotune's LayerNorm has no kernel for is skipped (the patched module would run torch's own). Tune first
for the numbers that matter: without stored configurations the kernels run their rule defaults.
"""

from __future__ import annotations

import argparse
import copy
import statistics
from collections import defaultdict

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d_model: int = 768, heads: int = 12) -> None:
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(d_model)
        self.attn = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln_2 = nn.LayerNorm(d_model)
        # GPT-2's MLP as an nn.Sequential, so that `patch` sees the Linear → GELU pair (nanoGPT and timm hold the same
        # modules but call them from their own forward: there patch swaps the Linear layers alone)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * d_model, d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.ln_2(x))


def step_ms(model: nn.Module, x: torch.Tensor, steps: int) -> tuple[float, float]:
    """Median milliseconds of a training step from an idle GPU: between CUDA events, and on the host (the time to
    enqueue it; where it nears the first, the step waits on the host, not the GPU)."""
    import time

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        model(x).float().pow(2).mean().backward()
        optimizer.step()

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    times, host = [], []
    for _ in range(steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        began = time.perf_counter()
        step()
        host.append(1e3 * (time.perf_counter() - began))
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times), statistics.median(host)


def graphed_step_ms(model: nn.Module, x: torch.Tensor, steps: int) -> float:
    """Median milliseconds of a training step replayed from one CUDA graph (torch's whole-network capture: warm-up
    on a side stream, gradients left to the graph's pool, a capturable AdamW)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, capturable=True)

    def step() -> None:
        model(x).float().pow(2).mean().backward()
        optimizer.step()

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            optimizer.zero_grad(set_to_none=True)
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    optimizer.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        step()
    times = []
    for _ in range(steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def kernel_times(model: nn.Module, x: torch.Tensor) -> dict[str, float]:
    """Milliseconds of GPU time per kernel in one forward + backward (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        model(x).float().pow(2).mean().backward()
        torch.cuda.synchronize()
    totals: dict[str, float] = defaultdict(float)
    for event in prof.key_averages():
        total = getattr(event, "device_time_total", None) or getattr(event, "cuda_time_total", 0)
        if total and event.key:
            totals[event.key] += total / 1e3
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--dtype", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--record", default=None, help="write the problems a patched step sends to autotune")
    parser.add_argument("--norms-only", action="store_true", help="patch the LayerNorms only, not the Linear layers")
    parser.add_argument("--attention", action="store_true", help="patch scaled_dot_product_attention too")
    parser.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    parser.add_argument("--graphs", action="store_true", help="also time both steps captured in CUDA graphs")
    args = parser.parse_args()

    import autotune
    import autotune.torch as att
    from autotune.spaces import space_class

    supported = space_class("layernorm").supported_dtypes()
    recording = autotune.record(args.record) if args.record else None  # one file for every dtype
    print(f"{torch.cuda.get_device_name()}: GPT-2 block, batch {args.batch} x seq {args.seq}, d_model 768")
    for name in args.dtype:
        if name not in supported:
            print(f"{name}: skipped (autotune's layernorm supports {', '.join(supported)})")
            continue
        dtype = getattr(torch, name)
        torch.manual_seed(0)
        eager = Block().cuda().to(dtype)
        patched = copy.deepcopy(eager)
        report = att.patch(patched, linear=not args.norms_only, attention=args.attention)
        print(f"{name}: {report}".replace("\n", "; "))
        x = torch.randn(args.batch, args.seq, 768, device="cuda", dtype=dtype)
        with torch.no_grad():
            error = (patched(x) - eager(x)).float().norm() / eager(x).float().norm()
        if recording is not None:
            with recording as calls:
                patched(x).float().pow(2).mean().backward()
            print(f"  recorded {len(calls)} problems so far to {args.record}")
        eager_ms, eager_host = step_ms(eager, x, args.steps)
        patched_ms, patched_host = step_ms(patched, x, args.steps)
        print(f"  step: eager {eager_ms:.3f} ms, patched {patched_ms:.3f} ms = {eager_ms / patched_ms:.3f}x; "
              f"output relative error {float(error):.2e}")  # fmt: skip
        eager_kernels, patched_kernels = kernel_times(eager, x), kernel_times(patched, x)
        print(f"  host time to enqueue a step: eager {eager_host:.3f} ms, patched {patched_host:.3f} ms; GPU kernel "
              f"time of a forward + backward: eager {sum(eager_kernels.values()):.3f} ms, patched "
              f"{sum(patched_kernels.values()):.3f} ms")  # fmt: skip
        if not args.no_compile:
            compiled = copy.deepcopy(eager)
            compiled_ms, _ = step_ms(torch.compile(compiled), x, args.steps)
            print(f"  torch.compile of eager: {compiled_ms:.3f} ms; patched = {compiled_ms / patched_ms:.3f}x it")
        if args.graphs:  # last: the models' gradients then live in the graphs' memory pools
            try:
                eager_graph = graphed_step_ms(eager, x, args.steps)
                patched_graph = graphed_step_ms(patched, x, args.steps)
                print(f"  step in a CUDA graph: eager {eager_graph:.3f} ms, patched {patched_graph:.3f} ms = "
                      f"{eager_graph / patched_graph:.3f}x")  # fmt: skip
            except RuntimeError as exc:  # a step that cannot be captured: say so, keep the other figures
                print(f"  step in a CUDA graph: not captured ({str(exc).splitlines()[0]})")
        if report.fallbacks:
            print(f"  calls that ran torch's Linear: {dict(report.fallbacks)}")
        print("  GPU time shares of a patched forward+backward:")
        whole = sum(patched_kernels.values()) or 1.0
        for kernel, ms in sorted(patched_kernels.items(), key=lambda kv: -kv[1])[:12]:
            print(f"    {100 * ms / whole:5.1f}%  {ms:.3f} ms  {kernel[:90]}")


if __name__ == "__main__":
    main()
