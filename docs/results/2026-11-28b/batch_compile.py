"""Research (issue 23, item 1): several configurations of one template in one nvcc front-end run, then ptxas per
configuration — is the PTX (hence the SASS) the same as compiling each alone, and how many CPU-seconds does it save?

    python docs/results/2026-11-28b/batch_compile.py --kernel gemm --dtype bfloat16 --algo wgmma_tma --count 8

The batch translation unit pre-includes the template's headers once (each has `#pragma once`), then for each
configuration opens a namespace, defines its macros, renames the template's `extern "C"` kernels (a suffix), includes
the template, and undefines every macro the template defined. One `nvcc -ptx` compiles it; the PTX is split per
configuration (the module's header and declarations, that configuration's entries renamed back), and ptxas turns
each into a cubin. Compared against `nvcc -ptx` of each configuration alone (PTX text, comments dropped) and timed
as CPU-seconds of the child processes (user + sys), against `nvcc -cubin` of each alone, as the Compiler runs it.
Nothing in the project is changed or used beyond the spaces (to draw valid configurations).
"""

from __future__ import annotations

import argparse
import random
import re
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
TEMPLATES = ROOT / "kernel_templates"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

FLAGS = ["-O3", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a"]


def child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(cmd: list[str], cwd: Path) -> None:
    out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"failed: {' '.join(cmd[:6])} …\n{(out.stdout + out.stderr)[:3000]}")


def headers(template: Path, defines: dict, work: Path) -> list[str]:
    """The kernel_templates headers the template includes with these defines, in nvcc's order."""
    deps = work / "deps.d"
    run(["nvcc", *FLAGS, "-M", "-I", str(TEMPLATES), *[f"-D{k}={v}" for k, v in defines.items()], "-o", str(deps),
         str(template)], work)  # fmt: skip
    names = re.findall(r"(\S+\.cuh)", deps.read_text())
    return [Path(n).name for n in names if Path(n).parent.resolve() == TEMPLATES.resolve()]


def template_macros(template: Path) -> set[str]:
    """Every macro the template (and the .cu files it includes) defines."""
    text, found = template.read_text(), set()
    for inc in re.findall(r'#include "([^"]+\.cu)"', text):
        found |= template_macros(TEMPLATES / inc)
    return found | set(re.findall(r"^\s*#\s*define\s+(\w+)", text, re.M))


def kernel_names(template: Path) -> list[str]:
    text = template.read_text()
    for inc in re.findall(r'#include "([^"]+\.cu)"', text):
        text += (TEMPLATES / inc).read_text()
    return re.findall(r'extern "C"\s+__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s*)?(?:[A-Z_]+\s+)*(\w+)\s*\(',
                      text)


def batch_source(template: Path, configs: list[dict], work: Path) -> str:
    first = configs[0]
    lines = [f"#define {k} {v}" for k, v in first.items()]
    lines += [f'#include "{h}"' for h in headers(template, first, work)]
    lines += [f"#undef {k}" for k in first]
    macros, kernels = template_macros(template), kernel_names(template)
    for i, config in enumerate(configs):
        lines.append(f"namespace autotune_batch_{i} {{")
        lines += [f"#define {k} {v}" for k, v in config.items()]
        lines += [f"#define {name} {name}__batch{i}" for name in kernels]
        lines.append(f'#include "{template.name}"')
        lines += [f"#undef {name}" for name in kernels]
        lines += [f"#undef {m}" for m in sorted(macros | set(config))]
        lines.append("}")
    return "\n".join(lines) + "\n"


ENTRY = re.compile(r"^\.(?:visible\s+)?\.entry\s+(\w+)\(", re.M)


def split_ptx(ptx: str, index: int, kernels: list[str]) -> str:
    """The module's text outside entries, plus configuration ``index``'s entries renamed back."""
    starts = [m.start() for m in ENTRY.finditer(ptx)]
    if not starts:
        return ptx
    head, pieces = ptx[: starts[0]], []
    for a, b in zip(starts, starts[1:] + [len(ptx)]):
        body = ptx[a:b]
        name = ENTRY.match(body).group(1)
        suffix = re.search(r"__batch(\d+)$", name)
        if suffix is None:  # a header's kernel (compiled once): every configuration's cubin has it
            pieces.append(body)
        elif int(suffix.group(1)) == index:
            for k in kernels:
                body = body.replace(f"{k}__batch{index}", k)
            pieces.append(body)
    return head + "".join(pieces)


def normalise(ptx: str) -> str:
    """Comments and blank lines dropped; basic-block labels numbered within the entry (their module-wide function
    index differs in a batch); the text after the entry's closing brace dropped."""
    ptx = ptx[: ptx.rfind("\n}") + 2] if "\n}" in ptx else ptx
    ptx = re.sub(r"\$L__BB\d+_", "$L__BB_", ptx)
    return "\n".join(line for line in ptx.splitlines() if line.strip() and not line.lstrip().startswith("//"))


def entries(ptx: str) -> dict[str, str]:
    starts = [m.start() for m in ENTRY.finditer(ptx)]
    return {ENTRY.match(ptx[a:b]).group(1): normalise(ptx[a:b]) for a, b in zip(starts, starts[1:] + [len(ptx)])}


def code_sections(cubin: Path) -> dict[str, bytes]:
    """The machine code of a cubin: its ``.text.*`` sections by name (ELF64, little-endian)."""
    import struct

    data = cubin.read_bytes()
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = headers[shstrndx]
    def name(h):
        start = names[4] + h[0]
        return data[start:data.index(b"\0", start)].decode()
    return {name(h): data[h[4]:h[4] + h[5]] for h in headers if name(h).startswith(".text.")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", default="gemm")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--algo", default="wgmma_tma")
    parser.add_argument("--count", type=int, default=8)
    parser.add_argument("--shape", default="4096x4096x4096")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, default=None, help="copy the PTX files here")
    args = parser.parse_args()

    from conftest import H200

    from autotune.spaces import ALGO, config_key, get_space
    from autotune.spaces.enumeration import random_config

    space = get_space(args.kernel, {ALGO: [args.algo]}, dtype=args.dtype)
    shape = space.parse_shape(args.shape)
    rng, picked = random.Random(args.seed), {}
    while len(picked) < args.count:
        c = random_config(space, rng)
        if not space.violations(c, shape, H200):
            picked[config_key(c)] = c
    configs = list(picked.values())
    template = TEMPLATES / space.template_for(configs[0])
    defines = [{k: v for k, v in space.compile_defines(c, shape).items()} for c in configs]
    kernels = kernel_names(template)

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        # Alone, as the Compiler does it (nvcc -cubin), and its PTX for the comparison.
        before = child_cpu()
        for i, d in enumerate(defines):
            run(["nvcc", "-cubin", *FLAGS, "-I", str(TEMPLATES), *[f"-D{k}={v}" for k, v in d.items()],
                 "-o", str(work / f"alone{i}.cubin"), str(template)], work)  # fmt: skip
        alone_cpu = child_cpu() - before
        for i, d in enumerate(defines):
            run(["nvcc", "-ptx", *FLAGS, "-I", str(TEMPLATES), *[f"-D{k}={v}" for k, v in d.items()],
                 "-o", str(work / f"alone{i}.ptx"), str(template)], work)  # fmt: skip
        # Batched: one front end, then ptxas per configuration.
        source = work / "batch.cu"
        source.write_text(batch_source(template, defines, work))
        before = child_cpu()
        run(["nvcc", "-ptx", *FLAGS, "-I", str(TEMPLATES), "-o", str(work / "batch.ptx"), str(source)], work)
        front = child_cpu() - before
        batch = (work / "batch.ptx").read_text()
        same_ptx = same_sass = 0
        for i in range(len(defines)):
            part = work / f"part{i}.ptx"
            part.write_text(split_ptx(batch, i, kernels))
            run(["ptxas", "-arch=sm_90a", "-O3", "-o", str(work / f"part{i}.cubin"), str(part)], work)
            alone, mine = entries((work / f"alone{i}.ptx").read_text()), entries(part.read_text())
            same_ptx += alone == mine
        batched_cpu = child_cpu() - before
        for i in range(len(defines)):  # the machine code against nvcc -cubin's
            code, reference = code_sections(work / f"part{i}.cubin"), code_sections(work / f"alone{i}.cubin")
            same_sass += code == reference
            if code != reference:
                print(f"  config {i}: machine code differs ({sorted(code)} / {sorted(reference)})")
        if args.keep:
            import shutil

            shutil.copytree(work, args.keep, dirs_exist_ok=True)
    n = len(defines)
    print(f"{args.kernel} {args.dtype} {args.algo}, {n} configurations: alone {alone_cpu / n:.3f} CPU-s each; "
          f"batched {batched_cpu / n:.3f} (front end {front / n:.3f} + ptxas); the same machine code as alone "
          f"{same_sass}/{n} (PTX text the same, up to labels, {same_ptx}/{n})")


if __name__ == "__main__":
    main()
