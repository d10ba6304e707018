"""Where the functional layer_norm's extra host time over the operator goes (issue 21): the operator through its
overload packet and through `.default`, the functional, and the functional's fast path written out, each under
no_grad on 8x768 fp32, the way benchmarks/torch_overhead.py times them (200 calls queued behind a sleeping
kernel, median of batches). Lab script of 2026-11-26b."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

import torch  # noqa: E402
from torch_overhead import per_call_us  # noqa: E402

import autotune.torch as att  # noqa: E402
from autotune.torch import functional  # noqa: E402


def main() -> None:
    x8, w, b = (torch.randn(*s, device="cuda") for s in ((8, 768), (768,), (768,)))
    x = torch.randn(64, 256, device="cuda")
    op = torch.ops.autotune.layernorm
    default = op.default
    F = torch.nn.functional
    contenders = {
        "F.layer_norm": lambda: F.layer_norm(x8, (768,), w, b),
        "op packet": lambda: op(x8, w, b),
        "op.default": lambda: default(x8, w, b),
        "op.default [0]": lambda: default(x8, w, b)[0],
        "functional (768,)": lambda: att.functional.layer_norm(x8, (768,), w, b),
        "functional 768": lambda: att.functional.layer_norm(x8, 768, w, b),
        "module-level fn": lambda: functional.layer_norm(x8, (768,), w, b),
        "softmax op packet": lambda: torch.ops.autotune.softmax(x),
        "softmax op.default": lambda: torch.ops.autotune.softmax.default(x),
        "softmax functional": lambda: att.functional.softmax(x),
    }
    with torch.no_grad():
        for rnd in range(2):
            medians = per_call_us(contenders, 30, torch)
            print(f"round {rnd} on {torch.cuda.get_device_name()} (µs per call):")
            for name, us in medians.items():
                print(f"  {name:24s} {us:7.2f}  over op packet {us - medians['op packet']:+6.2f}")


if __name__ == "__main__":
    main()
