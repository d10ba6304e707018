"""Would `patch` gain by taking torch's scaled_dot_product_attention calls too (issue 22)? An experiment, not product
code: the GPT-2 block and the Llama block with SDPA replaced by autotune's attention operators (q, k, v made
contiguous, as the operators take them), both patched, against the patched blocks as they are and eager torch, in
alternating rounds (the host's speed drifts on these machines).

    python attention_probe.py [--rounds 7]
"""
import argparse
import copy
import statistics
import sys
import time

import torch

sys.path.insert(0, "examples")
import gpt2_block  # noqa: E402
import llama_block  # noqa: E402

import autotune.torch as att  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--rounds", type=int, default=7)
parser.add_argument("--models", nargs="+", default=["gpt2", "llama"])
args = parser.parse_args()
dt = torch.bfloat16


def ours(q, k, v, is_causal=False, enable_gqa=False):
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    op = torch.ops.autotune.attention_causal if is_causal else torch.ops.autotune.attention
    return op(q, k, v)[0]


class GptAttn(gpt2_block.Block):
    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = ours(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.ln_2(x))


class LlamaAttn(llama_block.Block):
    def forward(self, x, cache=None):
        b, t, d = x.shape
        h = self.attn_norm(x)
        start = 0 if cache is None else cache[0].shape[2]
        q = self.rotary(self.q(h).view(b, t, self.heads, self.head_dim).transpose(1, 2), start)
        k, v = self.kv(h).view(b, t, 2, self.kv_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        k = self.rotary(k, start)
        if cache is not None:
            k, v = torch.cat((cache[0], k), dim=2), torch.cat((cache[1], v), dim=2)
        y = ours(q, k, v, is_causal=cache is None)
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


def ab(label, fns, steps):
    for fn in fns.values():
        for _ in range(5):
            fn()
    torch.cuda.synchronize()
    results = {k: [] for k in fns}
    for r in range(args.rounds):
        for name, fn in fns.items():
            results[name].append(timed(fn, steps))
    base = results["eager"]
    for name in fns:
        ratios = [e[0] / p[0] for e, p in zip(base, results[name])]
        print(f"{label:12} {name:14} step {statistics.median(s for s, _ in results[name]):.3f} ms, host "
              f"{statistics.median(h for _, h in results[name]):.3f} ms; eager/this median "
              f"{statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f})", flush=True)


def gpt2():
    torch.manual_seed(0)
    base = gpt2_block.Block().cuda().to(dt)
    models = {"eager": base, "patched": copy.deepcopy(base), "patched+attn": GptAttn().cuda().to(dt)}
    models["patched+attn"].load_state_dict(base.state_dict())
    att.patch(models["patched"])
    att.patch(models["patched+attn"])
    x = torch.randn(8, 1024, 768, device="cuda", dtype=dt)
    optims = {k: torch.optim.AdamW(m.parameters(), lr=1e-4) for k, m in models.items()}
    with torch.no_grad():
        ref = models["eager"](x).float()
        print("gpt2 patched+attn output relative error",
              float((models["patched+attn"](x).float() - ref).norm() / ref.norm()))

    def train(name):
        def step():
            optims[name].zero_grad(set_to_none=True)
            models[name](x).float().pow(2).mean().backward()
            optims[name].step()
        return step

    ab("gpt2 bf16", {k: train(k) for k in models}, 25)


def llama():
    torch.manual_seed(0)
    base = llama_block.Block().cuda().to(dt).eval()
    lmodels = {"eager": base, "patched": copy.deepcopy(base), "patched+attn": LlamaAttn().cuda().to(dt).eval()}
    lmodels["patched+attn"].load_state_dict(base.state_dict())
    print(att.patch(lmodels["patched"]))
    att.patch(lmodels["patched+attn"])
    cases = [("prefill", torch.randn(1, 2048, 4096, device="cuda", dtype=dt), None)]
    for b in (1, 16):
        cache = tuple(torch.randn(b, 8, 2048, 128, device="cuda", dtype=dt) for _ in range(2))
        cases.append((f"decode b{b}", torch.randn(b, 1, 4096, device="cuda", dtype=dt), cache))
    with torch.no_grad():
        for label, xin, cache in cases:
            ref = lmodels["eager"](xin, cache).float()
            for name in ("patched", "patched+attn"):
                err = float((lmodels[name](xin, cache).float() - ref).norm() / ref.norm())
                print(f"llama {label}: {name} output relative error {err:.2e}")
            ab(f"llama {label}", {k: (lambda m=m: m(xin, cache)) for k, m in lmodels.items()}, 20)


for model in args.models:
    {"gpt2": gpt2, "llama": llama}[model]()
