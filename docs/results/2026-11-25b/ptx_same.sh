#!/usr/bin/env bash
# PTX identity of the kernel templates across a refactoring of kernel_templates/ (session 2026-11-25b).
#
#   ptx_same.sh record OUT.tsv [KEEP_DIR]    compile every (template, arch, defines) below to PTX, hash it
#   ptx_same.sh compare BEFORE.tsv AFTER.tsv   every configuration that compiled before has the same hash after
#   PTX_ONLY=a.cu,b.cu ptx_same.sh record …    only the configurations of those templates (a quick check while
#                                              editing); compare … --subset then skips what AFTER does not hold
#
# What is compiled: for every kernel space (autotune.spaces.kernel_names()) at every dtype it supports, and for
# each algorithm of a family, the template of
#   * the default configuration (attention: at every head dimension the family supports),
#   * every one-at-a-time variation of the default: each tunable set to each other value of its domain (so
#     every #if-selected path of a tunable is taken at least once), whether or not the space calls it valid,
#   * the rule defaults (the dispatcher's fallback) at a few shapes, and
#   * 6 random configurations valid on an H100-class device (seeded: the same list every run),
# with the -D defines the space renders (`compile_defines`, the same the runtime compiler passes). Arch: sm_90a for every configuration (the machines
# autotune tunes on), and sm_80 as well for the defaults (a configuration that needs sm_90/sm_90a fails there
# and is left out). nvcc flags as autotune/runtime/compiler.py (BASE_FLAGS: -O3 -std=c++17) with -ptx in place
# of -cubin; templates include their headers by relative path (no -I), as there.
# The PTX is hashed after removing `.loc` / `.file` lines, `//` comment lines (nvcc's banner) and anything in
# debug sections (none without -G / -lineinfo, which are not used). A configuration that fails to compile is
# recorded as failed; `compare` leaves it out (and counts it).
# Parallelism: PTX_JOBS nvcc at once (default 2).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
cd "$root"
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
exec python3 - "$@" <<'PY'
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

import autotune
from autotune.device import DeviceInfo
from autotune.spaces import ALGO, get_space, kernel_names
from autotune.spaces.enumeration import random_config
from autotune.templates import template_path

NVCC = os.environ.get("PTX_NVCC", "/usr/local/bin/nvcc")
FLAGS = ["-O3", "-std=c++17"]  # BASE_FLAGS of autotune/runtime/compiler.py without -cubin / -Xptxas -v
JOBS = int(os.environ.get("PTX_JOBS", "2"))
DEVICE = DeviceInfo(name="NVIDIA H100 80GB HBM3", compute_capability=(9, 0), multiprocessors=132,
                    l2_bytes=52428800, total_memory=85_000_000_000, max_threads_per_block=1024,
                    smem_per_block=49152, smem_per_block_optin=232448, smem_per_multiprocessor=233472,
                    registers_per_block=65536, registers_per_multiprocessor=65536, driver_version="",
                    cuda_driver_api="13.0")
RANDOM_PER_ALGO = 6


def strip(ptx: str) -> str:
    out, debug = [], False
    for line in ptx.splitlines():
        s = line.strip()
        if s.startswith(".section") and ".debug" in s:
            debug = True
        if debug:
            if s == "}":
                debug = False
            continue
        if s.startswith((".loc", ".file", "//")):
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def configurations():
    """(template name, arch, defines) for every configuration listed in the header, without duplicates."""
    seen, out = set(), []

    def add(template, arch, defines):
        key = (str(template), arch, json.dumps({k: str(v) for k, v in sorted(defines.items())}))
        if key not in seen:
            seen.add(key)
            out.append(key)

    for name in kernel_names():
        base_space = get_space(name)
        for dtype in base_space.supported_dtypes():
            space = get_space(name, dtype=dtype)
            shapes = [space.default_shape]
            if name.startswith("attention"):
                shapes = [space.default_shape[:4] + (d,) for d in (32, 64, 96, 128)]
            if space.algorithms:
                defaults = [{ALGO: a, **algo.default_config} for a, algo in space.algos.items()]
            else:
                defaults = [dict(space.default_config)]
            for config in defaults:
                for shape in shapes:
                    for arch in ("sm_90a", "sm_80"):
                        add(space.template_for(config), arch, space.compile_defines(config, shape))
                shape = space.default_shape
                for p in space.active_params(config):
                    if p.name == ALGO:
                        continue
                    for v in p.values:
                        if v != config[p.name]:
                            varied = {**config, p.name: v}
                            add(space.template_for(varied), "sm_90a", space.compile_defines(varied, shape))
            for shape in [space.default_shape, *(s for s, _ in space.validation_cases(space.default_shape))][:4]:
                try:
                    config = space.rule_default(shape, DEVICE)
                except Exception:
                    continue
                add(space.template_for(config), "sm_90a", space.compile_defines(config, shape))
            groups = list(space.algos) if space.algorithms else [None]
            for algo in groups:
                narrowed = get_space(name, {ALGO: [algo]}, dtype=dtype) if algo else space
                rng = random.Random(f"{name}/{dtype}/{algo}")
                found, tries = 0, 0
                while found < RANDOM_PER_ALGO and tries < 2000:
                    tries += 1
                    config = random_config(narrowed, rng)
                    if narrowed.violations(config, narrowed.default_shape, DEVICE):
                        continue
                    found += 1
                    add(space.template_for(config), "sm_90a", space.compile_defines(config, space.default_shape))
    return out


def compile_one(key, keep):
    template, arch, defines_json = key
    defines = json.loads(defines_json)
    source = template_path(template)
    virtual = arch.replace("sm_", "compute_")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "k.ptx")
        src = str(source)
        cmd = [NVCC, "-ptx", *FLAGS, f"-arch={virtual}"]
        cmd += [f"-D{k}={v}" for k, v in sorted(defines.items())] + ["-o", out, src]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0 or not os.path.isfile(out):
            first = next((l for l in (proc.stdout + proc.stderr).splitlines() if "error" in l.lower()), "failed")
            return key, "fail", first.strip()[:200]
        text = strip(open(out).read())
    digest = hashlib.sha256(text.encode()).hexdigest()
    if keep:
        with open(os.path.join(keep, digest[:16] + ".ptx"), "w") as f:
            f.write(text)
    return key, "ok", digest


def record(path, keep=None):
    print(f"autotune from {autotune.__file__}; nvcc {NVCC}", file=sys.stderr)
    if keep:
        os.makedirs(keep, exist_ok=True)
    keys = configurations()
    only = [t for t in os.environ.get("PTX_ONLY", "").split(",") if t]
    if only:
        keys = [k for k in keys if k[0] in only]
    print(f"{len(keys)} (template, arch, defines) configurations, {JOBS} nvcc at once", file=sys.stderr)
    with ThreadPoolExecutor(JOBS) as pool:
        results = list(pool.map(lambda k: compile_one(k, keep), keys))
    with open(path, "w") as f:
        for (template, arch, defines), status, value in results:
            f.write(f"{template}\t{arch}\t{defines}\t{status}\t{value}\n")
    ok = sum(1 for r in results if r[1] == "ok")
    print(f"{ok} compiled, {len(results) - ok} failed -> {path}", file=sys.stderr)


def load(path):
    rows = {}
    for line in open(path):
        template, arch, defines, status, value = line.rstrip("\n").split("\t")
        rows[(template, arch, defines)] = (status, value)
    return rows


def compare(before_path, after_path, subset=False):
    before, after = load(before_path), load(after_path)
    if subset:
        before = {k: v for k, v in before.items() if k in after}
    checked = same = 0
    failed_before = [k for k, (s, _) in before.items() if s != "ok"]
    problems = []
    for key, (status, digest) in before.items():
        if status != "ok":
            continue
        checked += 1
        got = after.get(key)
        if got is None:
            problems.append(("missing", key, ""))
        elif got[0] != "ok":
            problems.append(("fails now", key, got[1]))
        elif got[1] != digest:
            problems.append(("PTX differs", key, f"{digest[:16]} -> {got[1][:16]}"))
        else:
            same += 1
    templates = sorted({k[0] for k, (s, _) in before.items() if s == "ok"})
    print(f"{checked} (template, arch, defines) configurations compiled before; {same} identical PTX after; "
          f"{len(problems)} differ or fail; {len(failed_before)} failed to compile before (left out)")
    print(f"templates covered ({len(templates)}): {' '.join(templates)}")
    for kind, key, detail in problems:
        print(f"{kind}: {key[0]} {key[1]} {key[2]} {detail}")
    return 0 if not problems else 1


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["record"] and len(args) in (2, 3):
        record(*args[1:])
    elif args[:1] == ["compare"] and len(args) in (3, 4) and args[3:] in ([], ["--subset"]):
        sys.exit(compare(args[1], args[2], subset=args[3:] == ["--subset"]))
    else:
        sys.exit(__doc__ or "usage: ptx_same.sh record OUT.tsv [KEEP_DIR] | compare BEFORE.tsv AFTER.tsv")
PY
