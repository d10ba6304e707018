"""The gemm SIMT space's spilling candidates (issue 23: compile time; issue 19: wasted trials): 40 random valid fp32
SIMT configurations for 4096³ (seed 3, as the development-machine compile study), timed on the GPU, with each
one's accumulators per thread, threads and ptxas spill bytes. Does any configuration with 128 accumulators, or
any that spills, come near the best?

    python simt_probe.py
"""
import random

from autotune.device import query_device
from autotune.spaces import get_space
from autotune.spaces.enumeration import random_config
from autotune.tuning.evaluation.gpu import GpuEvaluator

space = get_space("gemm", domains={"ALGO": ["simt"]})
shape = (4096, 4096, 4096)
device = query_device()
rng = random.Random(3)
configs = []
while len(configs) < 40:
    c = random_config(space, rng)
    if not space.violations(c, shape, device):
        configs.append(c)
configs.append(dict(space.rule_default(shape, device)))
with GpuEvaluator(space, shape, seed=0, min_time_ms=5, max_reps=50) as ev:
    results = [f.result() for f in [ev.submit(c) for c in configs]]
rows = []
for c, m in zip(configs, results):
    thr = 32 * c["WARPS_M"] * c["WARPS_N"]
    acc = c["BM"] * c["BN"] // thr
    tf = 2 * 4096 ** 3 / (m.time_ms * 1e-3) / 1e12 if m.ok else 0.0
    spill = getattr(m, "spill_bytes", None)
    rows.append((tf, acc, thr, spill, c, m))
for tf, acc, thr, spill, c, m in sorted(rows, key=lambda r: -r[0]):
    print(f"{tf:6.2f} TFLOP/s acc {acc:4d} thr {thr:4d} spill {spill} {c['BM']}x{c['BN']}x{c['BK']} {c['PIPELINE']} VEC{c['VEC']} "
          f"MIN_BLOCKS{c['MIN_BLOCKS']} SPLIT_K{c['SPLIT_K']}" + ("" if m.ok else f" FAILED {m.failure}"), flush=True)
