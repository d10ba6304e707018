#!/usr/bin/env bash
# Session 2026-11-25 (second), device call 7, on main + the fa3 branch (i-fa3, first GPU contact): the functions'
# per-call cost after binding the overloads; fa3's SASS, GPU tests, and a short tuned prefill against SDPA.
set -u
out=${OUT:-/tmp/out}; mkdir -p "$out"; export PYTHONUNBUFFERED=1
quiet() { grep -v "PyCUDA WARNING\|failed: unspecified\|Deprecat\|cursor.execute\|^{\|autotune: gemm\|autotune: database\|no configuration of .* tuned for\|Warning\|warn\|^$\|_check_inputs"; }
timeout 120 python3 benchmarks/torch_overhead.py --out "$out/torch_overhead.json" 2>&1 | tee "$out/overhead.log" | quiet | tail -14
python3 - > "$out/fa3_sass.log" 2>&1 <<'PY'
import subprocess, tempfile, pathlib
from autotune.spaces import get_space
from autotune.device import query_device
from autotune.runtime.compiler import Compiler
dev = query_device()
for dtype in ("bfloat16",):
    space = get_space("attention", {"ALGO": ["fa3"]}, dtype=dtype)
    config = {"ALGO": "fa3", **space.algos["fa3"].default_config}
    shape = (4, 16, 4096, 4096, 128)
    print(config, space.violations(config, shape, dev))
    comp = Compiler(dev.compile_arch)
    res = comp.compile(space.template_for(config), {**space.defines(config), **space.problem_defines(shape)})
    print(res.ok, res.error, {k: (v.registers, v.spill_stores) for k, v in res.kernels.items()})
    sass = subprocess.run(["cuobjdump", "-sass", str(res.cubin)], capture_output=True, text=True).stdout
    print({op: sass.count(op) for op in ("HGMMA", "UTMALDG", "SYNCS")})
PY
tail -5 "$out/fa3_sass.log"
timeout --signal=INT 200 python3 -m pytest -m gpu -q -p no:cacheprovider -n 8 -x tests/test_gpu_attention.py -k fa3 2>&1 | tee "$out/fa3_tests.log" | quiet | tail -25
timeout 120 python3 benchmarks/attention_vs_torch.py --trials 20 --dtypes bfloat16 --head-dims 128 --seqs 4096 --causal 0 1 --no-decode --db /tmp/att.db --out "$out/attention.json" 2>&1 | tee "$out/attention.log" | quiet | tail -12
