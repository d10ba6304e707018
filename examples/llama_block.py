"""A Llama-style transformer block (d_model 4096, 32 query / 8 kv heads of 128, rotary embeddings, SwiGLU MLP of
14336, RMSNorm) in inference: bf16 prefill of a 2048-token prompt, and decoding one token at batch 1 and 16 over a
2048-token KV cache — eager torch against the same block patched with autotune's kernels
(`autotune.torch.patch`: RMSNorm and every Linear, the MLP's gate-and-up projection and its SwiGLU as one
``linear_swiglu`` kernel; attention stays torch's ``scaled_dot_product_attention``),
and against ``torch.compile`` of the eager block (and of the patched one: autotune's operators trace into it).

    python examples/llama_block.py [--prefill 2048] [--batches 1 16] [--cache 2048] [--caches static cat]
                                   [--rounds 9] [--graphs] [--no-compile] [--record shapes.json]

Decoding runs with each KV cache kind named by ``--caches``: ``static`` holds keys and values in buffers of the
full length and writes the new token's in place (as HF's StaticCache and gpt-fast do; serving engines page it);
``cat`` builds a new cache per token with ``torch.cat`` (a copy of the whole cache each step, the same in eager and
patched: at batch 16 about half the step's GPU time). The variants run in alternating rounds, since a host's speed
drifts over seconds and a decoding step is mostly host time; each line gives the medians and the median of the
rounds' ratios.
``--graphs`` also times eager and patched decoding captured in CUDA graphs (no host time: the kernels alone).

The norms use eps 1e-6, the eps autotune's RMSNorm kernel is built with (Llama's own 1e-5 would be left to torch by
`patch`, which says so). ``--record`` writes the problems the patched block sends to autotune, for ``autotune search
--shapes-from shapes.json``; without stored configurations the kernels run their rule defaults.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from typing import Callable

import torch
from torch import nn


class Rotary:
    def __init__(self, head_dim: int, positions: int, device: str) -> None:
        inv = 1.0 / (500000.0 ** (torch.arange(0, head_dim, 2, device=device).float() / head_dim))
        angles = torch.outer(torch.arange(positions, device=device).float(), inv)
        self.cos, self.sin = angles.cos(), angles.sin()

    def __call__(self, x: torch.Tensor, start: int) -> torch.Tensor:  # x: (batch, heads, seq, head_dim)
        seq = x.shape[2]
        cos, sin = self.cos[start:start + seq].to(x.dtype), self.sin[start:start + seq].to(x.dtype)
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


class FeedForward(nn.Module):
    """Llama's SwiGLU MLP, its gate and up projections in one weight (as vLLM and others hold them)."""

    def __init__(self, d_model: int, hidden: int) -> None:
        super().__init__()
        self.gate_up = nn.Linear(d_model, 2 * hidden, bias=False)
        self.down = nn.Linear(hidden, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(nn.functional.silu(gate) * up)


class Block(nn.Module):
    def __init__(self, d_model: int = 4096, heads: int = 32, kv_heads: int = 8, hidden: int = 14336,
                 positions: int = 8192, device: str = "cuda") -> None:  # fmt: skip
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, d_model // heads
        self.attn_norm = nn.RMSNorm(d_model, eps=1e-6)
        self.q = nn.Linear(d_model, d_model, bias=False)
        self.kv = nn.Linear(d_model, 2 * kv_heads * self.head_dim, bias=False)
        self.o = nn.Linear(d_model, d_model, bias=False)
        self.mlp_norm = nn.RMSNorm(d_model, eps=1e-6)
        self.mlp = FeedForward(d_model, hidden)
        self.rotary = Rotary(self.head_dim, positions, device)

    def forward(self, x: torch.Tensor, cache: tuple[torch.Tensor, torch.Tensor] | None = None,
                pos: int | None = None) -> torch.Tensor:
        """``cache``: None for a prompt (causal attention over its own tokens), or the (keys, values) buffers of
        (batch, kv_heads, length, head_dim) for decoding. With ``pos`` None the new tokens' k and v are
        concatenated after the whole buffers (a new cache per step); with ``pos`` they are written into the buffers
        at ``pos`` and attention reads positions ``[0, pos + tokens)`` (a static cache)."""
        b, t, d = x.shape
        h = self.attn_norm(x)
        start = 0 if cache is None else cache[0].shape[2] if pos is None else pos
        q = self.rotary(self.q(h).view(b, t, self.heads, self.head_dim).transpose(1, 2), start)
        k, v = self.kv(h).view(b, t, 2, self.kv_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        k = self.rotary(k, start)
        if cache is not None and pos is None:
            k, v = torch.cat((cache[0], k), dim=2), torch.cat((cache[1], v), dim=2)
        elif cache is not None:
            cache[0][:, :, pos:pos + t], cache[1][:, :, pos:pos + t] = k, v
            k, v = cache[0][:, :, :pos + t], cache[1][:, :, :pos + t]
        y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=cache is None, enable_gqa=True)
        x = x + self.o(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.mlp_norm(x))


def step_times(run: Callable[[], object], steps: int) -> tuple[list[float], list[float]]:
    """Milliseconds per step (CUDA events) and host milliseconds to enqueue it, for ``steps`` steps."""
    times, host = [], []
    for _ in range(steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        began = time.perf_counter()
        run()
        host.append(1e3 * (time.perf_counter() - began))
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times, host


def alternating(runs: dict[str, Callable[[], object]], rounds: int, steps: int = 20) -> dict[str, tuple]:
    """Each variant's median step and host time over ``rounds`` rounds that run every variant in turn, and the
    median, min and max over the rounds of the first variant's time over this one's."""
    for run in runs.values():
        for _ in range(3):
            run()
    torch.cuda.synchronize()
    medians: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            times, host = step_times(run, steps)
            medians[name].append((statistics.median(times), statistics.median(host)))
    first = medians[next(iter(runs))]
    out = {}
    for name, rows in medians.items():
        ratios = [a[0] / b[0] for a, b in zip(first, rows)]
        out[name] = (statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows),
                     statistics.median(ratios), min(ratios), max(ratios))
    return out


def graphed(run: Callable[[], object]) -> Callable[[], object]:
    """``run`` captured in a CUDA graph (after warm-up on a side stream): its replay."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            run()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    return graph.replay


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefill", type=int, default=2048, help="prompt tokens (batch 1)")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 16], help="decoding batch sizes")
    parser.add_argument("--cache", type=int, default=2048, help="tokens in the KV cache when decoding")
    parser.add_argument("--caches", nargs="+", choices=("static", "cat"), default=["static", "cat"],
                        help="KV cache kinds to decode with")
    parser.add_argument("--rounds", type=int, default=9, help="alternating rounds of 20 steps per variant")
    parser.add_argument("--graphs", action="store_true", help="also time decoding captured in CUDA graphs")
    parser.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    parser.add_argument("--record", default=None, help="write the problems the patched block sends to autotune")
    args = parser.parse_args()

    import autotune
    import autotune.torch as att

    torch.manual_seed(0)
    dtype = torch.bfloat16
    eager = Block().cuda().to(dtype).eval()
    patched = copy.deepcopy(eager)
    report = att.patch(patched)
    print(f"{torch.cuda.get_device_name()}: Llama-style block, d 4096, 32/8 heads, MLP 14336, bf16; {report}"
          .replace("\n", "; "))  # fmt: skip
    models = {"eager": eager, "patched": patched}
    if not args.no_compile:  # torch.compile of each: does patching still pay where a model is compiled?
        models["compiled"], models["patched compiled"] = eager, patched  # compiled afresh for each case, below
    kv = eager.kv_heads, eager.head_dim
    problems = [("prefill", 1, args.prefill, None)]
    problems += [(f"decode b{b} {kind}", b, 1, kind) for b in args.batches for kind in args.caches]
    with torch.no_grad():
        cases = []
        for label, batch, tokens, kind in problems:
            x = torch.randn(batch, tokens, 4096, device="cuda", dtype=dtype)
            if kind is None:
                cases.append((label, x, {name: ((), {}) for name in models}))
                continue
            filled = tuple(torch.randn(batch, kv[0], args.cache, kv[1], device="cuda", dtype=dtype) for _ in range(2))
            calls = {}
            for name in models:  # each model its own buffers: a static step writes into them
                if kind == "cat":
                    calls[name] = ((filled,), {})
                else:
                    buffers = tuple(torch.zeros(batch, kv[0], args.cache + 64, kv[1], device="cuda", dtype=dtype)
                                    for _ in range(2))  # fmt: skip
                    for buffer, values in zip(buffers, filled):
                        buffer[:, :, :args.cache] = values
                    calls[name] = ((buffers,), {"pos": args.cache})
            cases.append((label, x, calls))
        if args.record:
            with autotune.record(args.record) as recorded:
                for _, x, calls in cases:
                    patched(x, *calls["patched"][0], **calls["patched"][1])
            print(f"recorded {len(recorded)} problems to {args.record}")
        for label, x, calls in cases:
            # Both compiled models share Block.forward, whose compiled variants count against dynamo's recompile
            # limit (8): five cases of two models each would pass it, and the last ones would run eagerly.
            torch.compiler.reset()
            compiled = {name: torch.compile(m) if "compiled" in name else m for name, m in models.items()}
            runs = {name: (lambda m=m, c=calls[name]: m(x, *c[0], **c[1])) for name, m in compiled.items()}
            reference = runs["eager"]().float()
            error = float((runs["patched"]().float() - reference).norm() / reference.norm())
            if "patched compiled" in runs:  # after patched ran eagerly: its first call chose its kernels
                try:
                    runs["patched compiled"]()
                except Exception as exc:  # noqa: BLE001 — a compile failure is reported; the other figures stand
                    print(f"{label}: torch.compile of the patched block failed: {type(exc).__name__}: "
                          f"{str(exc).splitlines()[0] if str(exc) else ''}")  # fmt: skip
                    del runs["patched compiled"]
            timed = alternating(runs, args.rounds)
            line = ", ".join(f"{name} {t[0]:.3f} ms" for name, t in timed.items())
            p = timed["patched"]
            vs = f"patched {p[2]:.3f}x eager ({p[3]:.2f}-{p[4]:.2f})"
            if "compiled" in timed:
                vs += f", {timed['compiled'][0] / p[0]:.3f}x compiled"
            if "patched compiled" in timed:
                vs += f"; patched compiled {timed['compiled'][0] / timed['patched compiled'][0]:.3f}x compiled"
            host = ", ".join(f"{name} {t[1]:.3f}" for name, t in timed.items())
            print(f"{label:16} {line} = {vs}; host ms {host}; output relative error {error:.2e}", flush=True)
            if args.graphs and label.startswith("decode"):
                graphs = alternating({name: graphed(runs[name]) for name in ("eager", "patched")}, args.rounds)
                print(f"{'':16} in a CUDA graph: eager {graphs['eager'][0]:.3f} ms, patched "
                      f"{graphs['patched'][0]:.3f} ms = {graphs['patched'][2]:.3f}x eager", flush=True)
    if report.fallbacks:
        print(f"calls that ran torch's Linear: {dict(report.fallbacks)}")


if __name__ == "__main__":
    main()
