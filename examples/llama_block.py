"""A Llama-style transformer block (d_model 4096, 32 query / 8 kv heads of 128, rotary embeddings, SwiGLU MLP of
14336, RMSNorm) in inference: bf16 prefill of a 2048-token prompt, and decoding one token at batch 1 and 16 over a
2048-token KV cache — eager torch against the same block patched with autotune's kernels
(`autotune.torch.patch`: RMSNorm and every Linear, the MLP's gate-and-up projection and its SwiGLU as one
``linear_swiglu`` kernel; attention stays torch's ``scaled_dot_product_attention``),
and against ``torch.compile`` of the eager block.

    python examples/llama_block.py [--prefill 2048] [--batches 1 16] [--cache 2048] [--record shapes.json]

Prints the median time of each and the speedups. The norms use eps 1e-6, the eps autotune's RMSNorm kernel is
built with (Llama's own 1e-5 would be left to torch by `patch`, which says so). ``--record`` writes the problems
the patched block sends to autotune, for ``autotune search --shapes-from shapes.json``; without stored
configurations the kernels run their rule defaults.
"""

from __future__ import annotations

import argparse
import copy
import statistics
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

    def forward(self, x: torch.Tensor, cache: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        b, t, d = x.shape
        h = self.attn_norm(x)
        start = 0 if cache is None else cache[0].shape[2]
        q = self.rotary(self.q(h).view(b, t, self.heads, self.head_dim).transpose(1, 2), start)
        k, v = self.kv(h).view(b, t, 2, self.kv_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        k = self.rotary(k, start)
        if cache is not None:  # decoding: the new token's k, v after the cached ones
            k, v = torch.cat((cache[0], k), dim=2), torch.cat((cache[1], v), dim=2)
        y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=cache is None, enable_gqa=True)
        x = x + self.o(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.mlp_norm(x))


def median_ms(run: Callable[[], object], reps: int = 20) -> float:
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefill", type=int, default=2048, help="prompt tokens (batch 1)")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 16], help="decoding batch sizes")
    parser.add_argument("--cache", type=int, default=2048, help="tokens in the KV cache when decoding")
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
    compiled = None if args.no_compile else torch.compile(eager)
    kv = eager.kv_heads, eager.head_dim
    problems = [("prefill", 1, args.prefill, None)]
    problems += [(f"decode b{b}", b, 1, args.cache) for b in args.batches]
    inputs = []
    for label, batch, tokens, cached in problems:
        x = torch.randn(batch, tokens, 4096, device="cuda", dtype=dtype)
        cache = None
        if cached:
            cache = tuple(torch.randn(batch, kv[0], cached, kv[1], device="cuda", dtype=dtype) for _ in range(2))
        inputs.append((label, x, cache))
    with torch.no_grad():
        if args.record:
            with autotune.record(args.record) as calls:
                for _, x, cache in inputs:
                    patched(x, cache)
            print(f"recorded {len(calls)} problems to {args.record}")
        for label, x, cache in inputs:
            error = float((patched(x, cache) - eager(x, cache)).float().norm() / eager(x, cache).float().norm())
            times = {"eager": median_ms(lambda: eager(x, cache)), "patched": median_ms(lambda: patched(x, cache))}
            if compiled is not None:
                times["compiled"] = median_ms(lambda: compiled(x, cache))
            line = "  ".join(f"{k} {v:.3f} ms" for k, v in times.items())
            vs = f"patched {times['eager'] / times['patched']:.3f}x eager"
            if compiled is not None:
                vs += f", {times['compiled'] / times['patched']:.3f}x compiled"
            print(f"{label:10} {line}  = {vs}; output relative error {error:.2e}")
    if report.fallbacks:
        print(f"calls that ran torch's Linear: {dict(report.fallbacks)}")


if __name__ == "__main__":
    main()
