"""Few long rows (issue 22, item 2): the split mapping the rule picks against the rule's block/cluster mapping for the
same shape (what ran before) and two neighbours of the split (half / double SPLIT), one GpuEvaluator per shape.

    python split_probe.py [--kernels softmax layernorm rmsnorm] [--dtypes float32 bfloat16]
"""
import argparse

from autotune.device import query_device
from autotune.spaces import get_space
from autotune.tuning.evaluation.gpu import GpuEvaluator

SHAPES = [(1, 131072), (4, 131072), (4, 262144), (2, 1 << 20), (4, 1 << 20), (1, 1 << 24), (4, 32768), (16, 32768),
          (32, 32768), (8, 65536)]
parser = argparse.ArgumentParser()
parser.add_argument("--kernels", nargs="+", default=["softmax", "layernorm", "rmsnorm"])
parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
args = parser.parse_args()
device = query_device()
print(device.name)
for kernel in args.kernels:
    for dtype in args.dtypes:
        space = get_space(kernel, dtype=dtype)
        for shape in SHAPES:
            split = space.rule_default(shape, device)
            configs = {"before": space.row_rule(shape, device)}
            if split["MAPPING"] == "split":
                configs["split"] = split
                for name, factor in (("half", 0.5), ("double", 2)):
                    s = int(split["SPLIT"] * factor)
                    trial = {**split, "SPLIT": s}
                    if s in space.domain("SPLIT"):
                        items = split["ITEMS"]
                        while items > 1 and items // 2 * split["BLOCK"] * s * split["VEC"] >= space.span(shape[1], split["VEC"]):
                            items //= 2
                        while items * split["BLOCK"] * s * split["VEC"] < space.span(shape[1], split["VEC"]) and items < 32:
                            items *= 2
                        trial["ITEMS"] = items
                    if not space.violations(trial, shape, device):
                        configs[name] = trial
            with GpuEvaluator(space, shape, seed=0, min_time_ms=2, max_reps=200) as ev:
                res = {n: ev.submit(c).result() for n, c in configs.items()}
            work = space.work(shape)
            cells = []
            for n, m in res.items():
                c = configs[n]
                tag = f"{c['MAPPING']}{c.get('SPLIT') if c['MAPPING'] == 'split' else ''}/{c['BLOCK']}/c{c['CACHE']}i{c['ITEMS']}"
                cells.append(f"{n} {tag} " + (f"{m.time_ms * 1e3:7.1f} us {work / m.time_ms / 1e6:6.0f} GB/s" if m.ok else f"FAILED {m.failure} {m.reason}"))
            base = res["before"].time_ms if res["before"].ok else float("nan")
            best = res.get("split")
            gain = f"  split {base / best.time_ms:5.2f}x before" if best is not None and best.ok else ""
            print(f"{kernel:9} {dtype:8} {shape[0]:>3}x{shape[1]:<9} " + " | ".join(cells) + gain, flush=True)
