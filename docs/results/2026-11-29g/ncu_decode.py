"""One batch-1 grouped decoding step (32 query heads over 8 kv heads, head_dim 128, bf16) through autotune's rule
default and through SDPA's cuDNN backend, for Nsight Compute: where split_kv's blocks wait at 32K and 128K keys,
against cuDNN's kernel on the same inputs (issue 20's last decoding gap: 0.94-0.98x cuDNN there).

    ncu --clock-control none --target-processes all -k regex:"attention_split_kv|cudnn|fmha|sm90" -c 6 \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
        --section LaunchStats python3 ncu_decode.py
"""

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention as sdpa

import autotune.torch as att

for skv in (32768, 131072):
    q = torch.randn(1, 32, 1, 128, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(1, 8, skv, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    for _ in range(2):  # the first call builds and loads; both are profiled where -c allows
        att.functional.attention(q, k, v)
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        sdpa(q, k, v, enable_gqa=True)
    torch.cuda.synchronize()
    print(f"keys {skv}: done", flush=True)
