"""The fa3 backward's BLOCK_ORDER (2026-11-29g, not yet run on a GPU): blocks head by head (0, the default) against
key block by key block across every head (1: a causal mask's heaviest blocks first), on grouped (32 query heads over
8 kv heads) and multi-head causal shapes, each head_dim's default otherwise; fa2 and SDPA's backends (the
fastest named) in the same process. 2026-11-29f/gqa_bwd_probe.py with these shapes and variants.

    python order_probe.py [--reps 20]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "2026-11-29f"))
import gqa_bwd_probe  # noqa: E402

gqa_bwd_probe.SHAPES = [(1, 32, 8, 4096, 4096, 128), (4, 32, 8, 2048, 2048, 128), (2, 32, 8, 4096, 4096, 64),
                        (4, 16, 16, 4096, 4096, 128), (8, 16, 16, 1024, 1024, 128)]  # fmt: skip
gqa_bwd_probe.KERNELS = ("attention_causal_backward",)  # BLOCK_ORDER 1 is offered only under a causal mask


def variants(space, shape, device) -> dict:  # noqa: ANN001
    from autotune.spaces import ALGO

    fa3 = {ALGO: "fa3", **space.algos["fa3"].default_for(shape[-1])}
    return {"fa3 head by head": fa3, "fa3 keys first": {**fa3, "BLOCK_ORDER": 1}}


gqa_bwd_probe.variants = variants

if __name__ == "__main__":
    gqa_bwd_probe.main()
