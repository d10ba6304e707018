"""Why rows of 65536 floats stay below copy bandwidth: do the re-reads of a row come from L2 or from DRAM?

    python benchmarks/long_rows.py

Softmax, block per row, row re-read (no register cache), three passes (3 reads + 1 write of the row) against
online (2 reads + 1 write). If the re-reads hit L2, both take the time of ~1 read + 1 write; if they go to DRAM,
the three-pass one takes ~4/3 as long. Measured at 1024x65536 (rows of 256 KB) and 16384x8192 (rows of 32 KB).
"""

from __future__ import annotations

from autotune.spaces import get_space
from autotune.tuning.evaluation.gpu import GpuEvaluator

SHAPES = [(1024, 65536), (16384, 8192)]


def main() -> None:
    space = get_space("softmax")
    base = {"BLOCK": 1024, "MAPPING": "block", "VEC": 4, "CACHE": 0, "ITEMS": 8, "STREAM": 0}
    print(f"{'shape':>12} {'three-pass ms':>14} {'online ms':>10} {'ratio':>6}  (DRAM re-reads predict 1.33)")
    for shape in SHAPES:
        with GpuEvaluator(space, shape, seed=0) as evaluator:
            three, online = (evaluator.submit({**base, "ONLINE": o}).result() for o in (0, 1))
            assert three.ok and online.ok, (three.reason, online.reason)
            t3, t1 = three.time_ms, online.time_ms
            bytes_min = space.work(shape)
            print(f"{'x'.join(map(str, shape)):>12} {t3:14.4f} {t1:10.4f} {t3 / t1:6.2f}  "
                  f"online at {bytes_min / (t1 * 1e-3) / 1e9:.0f} GB/s of minimal traffic")  # fmt: skip


if __name__ == "__main__":
    main()
