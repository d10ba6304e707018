"""2026-11-29f/combine_probe.py with more variants and shapes (2026-11-29g, call 4): decoding with grouped-query
attention (32 query heads over 8 kv heads, head_dim 128, bf16) at batch 1, 16 and 64, the rule default against the
splits combined in their cluster (COMBINE=1) at 2 to 16 splits (16: the non-portable cluster size), deeper rings and
fewer warps, and against 8, 16 and 32 splits through the combine kernel; SDPA's fastest backend in the same process.

    python decode_probe.py [--reps 30]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "2026-11-29f"))
import combine_probe  # noqa: E402

combine_probe.SHAPES = [(1, 32, 8, 1, 8192, 128), (1, 32, 8, 1, 32768, 128), (1, 32, 8, 1, 131072, 128),
                        (16, 32, 8, 1, 8192, 128), (16, 32, 8, 1, 32768, 128), (64, 32, 8, 1, 8192, 128)]
combine_probe.VARIANTS = {f"cluster s{s} w{w} st{st}": {"SPLITS": s, "WARPS": w, "STAGES": st, "COMBINE": 1}
                          for s, w, st in ((16, 4, 2), (16, 4, 3), (16, 2, 2), (16, 2, 3), (8, 4, 2), (8, 4, 3),
                                           (8, 2, 3), (4, 4, 2), (2, 4, 2), (2, 4, 3))}  # fmt: skip
combine_probe.VARIANTS.update({f"kernel s{s} w4": {"SPLITS": s, "COMBINE": 0} for s in (8, 16, 32)})

if __name__ == "__main__":
    combine_probe.main()
