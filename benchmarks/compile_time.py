"""nvcc seconds per candidate: this checkout's templates against another revision's, one compile at a time.

    PYTHONPATH=. python benchmarks/compile_time.py --against HEAD~3 --count 16 --out compile_time.json

Draws ``--count`` random valid configurations of ``--kernel`` at ``--shape`` (alternating between the algorithms
named by ``--algorithms``), then compiles each with both template trees, alternating, through the search's own
`Compiler` with a fresh cache, so that both see the same flags and the same machine load. The other revision's
templates are read with `git show`; nothing in the checkout changes. It also says in how many candidates both
trees give the same SASS.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from driver_overhead import H100  # only the space's constraints use it: no GPU is needed

from autotune.runtime.compiler import Compiler
from autotune.spaces import get_space
from autotune.spaces.enumeration import random_config

ROOT = Path(__file__).resolve().parent.parent
INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/")  # an instruction's address in a SASS listing
TEMPLATES = "kernel_templates"



def export_templates(revision: str, into: Path) -> Path:
    """The template folder of ``revision`` written under ``into``."""
    names = subprocess.run(["git", "ls-tree", "--name-only", f"{revision}:{TEMPLATES}"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split()  # fmt: skip
    folder = into / revision.replace("/", "_")
    folder.mkdir(parents=True)
    for name in names:
        blob = subprocess.run(["git", "show", f"{revision}:{TEMPLATES}/{name}"], cwd=ROOT, check=True,
                              capture_output=True).stdout  # fmt: skip
        (folder / name).write_bytes(blob)
    return folder


def machine_code(cubin: Path) -> list[str]:
    """The SASS instructions of ``cubin`` by function (`cuobjdump -sass`), without the listing's header."""
    text = subprocess.run(["cuobjdump", "-sass", str(cubin)], check=True, capture_output=True, text=True).stdout
    return [line.strip() for line in text.splitlines() if "Function" in line or INSTRUCTION.search(line)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", required=True, help="git revision whose templates are compared")
    parser.add_argument("--kernel", default="gemm")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--shape", default="4096x4096x4096")
    parser.add_argument("--algorithms", default="simt,tf32x3")
    parser.add_argument("--count", type=int, default=16)
    parser.add_argument("--arch", default="sm_90a")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    space = get_space(args.kernel, dtype=args.dtype)
    shape = space.parse_shape(args.shape)
    algorithms = args.algorithms.split(",")
    rng = random.Random(args.seed)
    configs: list[dict] = []
    for _ in range(200_000):
        if len(configs) == args.count:
            break
        config = random_config(space, rng)
        wanted = algorithms[len(configs) % len(algorithms)]
        if config.get("ALGO", wanted) == wanted and not space.violations(config, shape, H100):
            configs.append(config)
    seconds: dict[str, list[float]] = {"this checkout": [], args.against: []}
    same_sass = 0
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"this checkout": ROOT / TEMPLATES, args.against: export_templates(args.against, Path(tmp))}
        # The search's own compiler (same flags, priority and cache layout); a fresh cache, so nothing is a hit.
        compiler = Compiler(args.arch, cache_dir=Path(tmp) / "cache", jobs=1)
        for config in configs:
            defines = space.compile_defines(config, shape)
            built = [compiler.compile(tree / space.template_for(config), defines) for tree in trees.values()]
            for label, result in zip(trees, built):
                if not result.ok or result.cached:
                    raise SystemExit(f"{label}: {result.error or 'unexpected cache hit'}")
                seconds[label].append(result.seconds)
            same_sass += machine_code(Path(built[0].cubin)) == machine_code(Path(built[1].cubin))
    summary = {
        label: {"mean_s": statistics.mean(ts), "median_s": statistics.median(ts), "count": len(ts)}
        for label, ts in seconds.items()
    }
    ratio = summary["this checkout"]["mean_s"] / summary[args.against]["mean_s"]
    for label, s in summary.items():
        print(f"{label:<16} mean {s['mean_s']:.3f} s  median {s['median_s']:.3f} s  over {s['count']} candidates")
    print(f"this checkout / {args.against}: {ratio:.3f} (nvcc {compiler.version}, {platform.node()})")
    print(f"identical SASS in {same_sass} of {len(configs)} candidates")
    if args.out:
        record = dict(vars(args), out=str(args.out), summary=summary, seconds=seconds, ratio=ratio,
                      nvcc=compiler.version, configs=configs, same_sass=same_sass)  # fmt: skip
        args.out.write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
