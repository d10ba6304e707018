"""Compile CPU time of 40 random fp32 SIMT gemm configurations (4096^3, seed 3) with nvcc on this machine, with
ptxas registers and spills: which candidates make compiles slow (issue 23).

    PYTHONPATH=. python3 simt_compile_study.py SEED COUNT
"""
import sys, random, subprocess, tempfile, re, concurrent.futures as cf
sys.path.insert(0, 'tests')
from pathlib import Path
from conftest import H200
from autotune.spaces import get_space
from autotune.spaces.enumeration import random_config
from autotune.templates import template_path
space = get_space("gemm", domains={"ALGO": ["simt"]})
alg = space.algos["simt"] if hasattr(space, "algos") else None
shape = (4096, 4096, 4096)
rng = random.Random(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
cfgs = []
while len(cfgs) < int(sys.argv[2]) if len(sys.argv) > 2 else 40:
    c = random_config(space, rng)
    if not space.violations(c, shape, H200):
        cfgs.append(c)
arch = H200.compile_arch
def comp(c):
    tpl = space.template_for(c); d = space.defines(c)
    src = template_path(tpl)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "k.cubin"
        cmd = ["bash", "-c", "TIMEFORMAT=%U+%S; time (" + " ".join(["nvcc", "-cubin", "-O3", "-std=c++17", f"-gencode=arch=compute_{arch[3:]},code={arch}", f"-I{src.parent}", "-Xptxas", "-v", *(f"-D{k}={v}" for k, v in sorted(d.items())), "-o", str(out), str(src)]) + ")"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        t = r.stderr.strip().splitlines()[-1]
        cpu = sum(float(x) for x in t.split("+"))
        regs = re.search(r"Used (\d+) registers", r.stderr); spill = re.search(r"(\d+) bytes spill stores", r.stderr)
        return cpu, out.stat().st_size, int(regs.group(1)) if regs else -1, int(spill.group(1)) if spill else -1
with cf.ThreadPoolExecutor(2) as ex:
    res = list(ex.map(comp, cfgs))
for c, (cpu, size, regs, spill) in sorted(zip(cfgs, res), key=lambda z: -z[1][0]):
    thr = 32 * c["WARPS_M"] * c["WARPS_N"]
    loads = (c["BM"] + c["BN"]) * c["BK"] // (thr * c["VEC"])
    print(f"{cpu:5.2f} s {size//1024:5d} KB regs {regs:3d} spill {spill:4d} thr {thr:4d} loads/thr/stage {loads:4d} acc {c['BM']*c['BN']//thr:4d} {c['BM']}x{c['BN']}x{c['BK']} {c['PIPELINE']} VEC{c['VEC']}")
print("mean", sum(r[0] for r in res) / len(res))
