"""Probe (session 2026-11-26c, issue 23 item 1): do N configurations of one template in ONE nvcc translation unit
cost less CPU than N compiles, and give the same code per kernel? No product code: a measurement for the design.

    python docs/results/2026-11-26c/batch_compile_probe.py [--n 8] [--template gemm_simt.cu]

Each configuration is included into its own namespace with its defines and the kernel renamed by a macro
(`#define sgemm sgemm_b3`); the template's headers are included once, at global scope, first. CPU seconds are the
children's user+sys (one nvcc at a time). "Same code": each kernel's PTX body (from `-ptx`), the kernel name
normalised, against the separate compile's.
"""

from __future__ import annotations

import argparse
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from conftest import H200  # noqa: E402

from autotune.spaces import get_space  # noqa: E402
from autotune.spaces.enumeration import random_config  # noqa: E402

TEMPLATES = ROOT / "kernel_templates"
FLAGS = ["-O3", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", f"-I{TEMPLATES}"]


def cpu_of(cmd: list[str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"failed: {' '.join(cmd[:6])} …\n{proc.stderr[-3000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def kernel_bodies(ptx: str, name_of: dict[str, str]) -> dict[str, str]:
    """Each `.entry` of a PTX file, its text with the kernel's name replaced by its configuration's label."""
    out = {}
    for match in re.finditer(r"\.visible \.entry (\w+)\((.*?)\n}\n", ptx, re.S):
        name = match.group(1)
        body = re.sub(r"\$L__BB\d+_", "$L__BB_", match.group(0).replace(name, "KERNEL"))  # labels count functions
        body = "\n".join(line for line in body.splitlines() if not line.strip().startswith((".loc", "//")))
        out[name_of.get(name, name)] = body
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--template", default="gemm_simt.cu")
    parser.add_argument("--algo", default="simt")
    parser.add_argument("--kernel", default="sgemm", help="the template's kernel name")
    parser.add_argument("--dtype", default="float32")
    args = parser.parse_args()
    space = get_space("gemm", {"ALGO": [args.algo]}, dtype=args.dtype)
    shape = (4096, 4096, 4096)
    rng = random.Random(3)
    configs: list[dict] = []
    while len(configs) < args.n:
        config = random_config(space, rng)
        if not space.violations(config, shape, H200) and config not in configs:
            configs.append(config)
    defines = [space.compile_defines(c, shape) for c in configs]
    template = TEMPLATES / args.template
    headers = re.findall(r'^#include "([^"]+)"', template.read_text(), re.M)
    derived = sorted(set(re.findall(r"^#define (\w+)", template.read_text(), re.M)))
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        separate_cpu = 0.0
        separate_ptx = {}
        for i, d in enumerate(defines):
            flags = [f"-D{k}={v}" for k, v in sorted(d.items())]
            separate_cpu += cpu_of(["nvcc", "-cubin", *FLAGS, *flags, "-o", str(tmp_path / f"s{i}.cubin"), str(template)])
            subprocess.run(["nvcc", "-ptx", *FLAGS, *flags, "-o", str(tmp_path / f"s{i}.ptx"), str(template)], check=True)
            separate_ptx.update(kernel_bodies((tmp_path / f"s{i}.ptx").read_text(), {args.kernel: f"c{i}"}))
        lines = [f"#define {k} {v}" for k, v in sorted(defines[0].items())]
        lines += [f'#include "{h}"' for h in headers]  # the headers once, at global scope
        lines += [f"#undef {k}" for k in sorted(defines[0])]
        for i, d in enumerate(defines):
            lines += [f"namespace b{i} {{", f"#define {args.kernel} {args.kernel}_b{i}"]
            lines += [f"#define {k} {v}" for k, v in sorted(d.items())]
            lines += [f'#include "{template.name}"', f"#undef {args.kernel}"]
            lines += [f"#undef {k}" for k in sorted(set(d) | set(derived))]
            lines += ["}"]
        batch = tmp_path / "batch.cu"
        batch.write_text("\n".join(lines) + "\n")
        start = time.perf_counter()
        batch_cpu = cpu_of(["nvcc", "-cubin", *FLAGS, "-o", str(tmp_path / "batch.cubin"), str(batch)])
        wall = time.perf_counter() - start
        subprocess.run(["nvcc", "-ptx", *FLAGS, "-o", str(tmp_path / "batch.ptx"), str(batch)], check=True)
        names = {f"{args.kernel}_b{i}": f"c{i}" for i in range(len(defines))}
        batch_ptx = kernel_bodies((tmp_path / "batch.ptx").read_text(), names)
    same = sum(separate_ptx.get(f"c{i}") == batch_ptx.get(f"c{i}") for i in range(len(defines)))
    print(f"{args.template} ({args.algo}, {args.dtype}), {len(defines)} configurations at 4096^3:")
    print(f"  separate: {separate_cpu:.2f} CPU-s ({separate_cpu / len(defines):.3f} per configuration)")
    print(f"  one translation unit: {batch_cpu:.2f} CPU-s ({batch_cpu / len(defines):.3f} per configuration), "
          f"{wall:.2f} s wall")
    print(f"  kernels with the same PTX body as their separate compile: {same} of {len(defines)}")


if __name__ == "__main__":
    main()
