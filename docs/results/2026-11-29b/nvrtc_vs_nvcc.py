"""nvcc against NVRTC (cuda-python, as autotune.runtime.binaries compiles for deployment): CPU seconds per fp32
gemm candidate on the development machine, 15 random configurations after one warm-up (issue 23).

    python nvrtc_vs_nvcc.py   (a Python with cuda-bindings, e.g. the torch venv)
"""
import sys, time, random, resource, subprocess, tempfile
sys.path.insert(0, 'tests')
from pathlib import Path
from conftest import H200
from autotune.spaces import get_space
from autotune.spaces.enumeration import random_config
from autotune.runtime.binaries import nvrtc_compile
from autotune.templates import template_path

space = get_space("gemm")  # fp32
shape = (4096, 4096, 4096)
rng = random.Random(7)
cfgs = []
while len(cfgs) < 16:
    c = random_config(space, rng)
    if not space.violations(c, shape, H200):
        cfgs.append(c)
arch = H200.compile_arch
t_nvcc = t_nvrtc = 0.0
same = 0
first = True
for c in [cfgs[0]] + cfgs:
    tpl = space.template_for(c); d = space.compile_defines(c, shape) if hasattr(space, "compile_defines") else space.defines(c)
    src = template_path(tpl)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "k.cubin"
        cmd = ["nvcc", "-cubin", "-O3", "-std=c++17", f"-gencode=arch=compute_{arch[3:]},code={arch}", f"-I{src.parent}",
               *(f"-D{k}={v}" for k, v in sorted(d.items())), "-o", str(out), str(src)]
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(cmd, check=True, capture_output=True)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        a = out.read_bytes()
    cpu_nvcc = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    p0 = time.process_time()
    b = nvrtc_compile(tpl, d, arch)
    cpu_nvrtc = time.process_time() - p0
    if first: first = False; continue  # warm-up: disk caches, the NVRTC library
    t_nvcc += cpu_nvcc; t_nvrtc += cpu_nvrtc
    # compare the SASS-relevant sections: ptxas output text sections via hashing .text.* bytes is not trivial; compare sizes
    print(f"{c.get('ALGO')} nvcc {cpu_nvcc:.2f} CPU-s ({len(a)} B)  nvrtc {cpu_nvrtc:.2f} CPU-s ({len(b)} B)", flush=True)
print(f"per candidate: nvcc {t_nvcc / len(cfgs):.2f} CPU-s, nvrtc {t_nvrtc / len(cfgs):.2f} CPU-s")

