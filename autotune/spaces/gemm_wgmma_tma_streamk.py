"""Stream-K on the Hopper GEMM (`autotune.spaces.gemm_wgmma_tma`'s template with STREAM_K = 1): one persistent
block per SM, each an equal share of all the output tiles' k-tiles, so an output of few tiles (a weight gradient:
768×768 is 36 tiles of 128×128 on 132 SMs) still keeps every SM busy to the end, without split-K's partial
outputs read back by a second launch. A tile's pieces meet in the kernel: each block publishes at most one partial
tile into its slot of the workspace, and the tile's last piece adds its peers' slots in a fixed order before the
usual epilogue (kernel_templates/stream_k.cuh): the same bits on every run of one GPU, though not the bits of
``wgmma_tma`` or of a GPU with another number of SMs (the pieces follow the grid).

Its own algorithm rather than a flag of ``wgmma_tma``: it runs without split-K and without clusters, so as a
flag most of its combinations would be invalid proposals. Tunables: the tile, the consumers and their schedule,
the ring's depth and the rasterisation, as in ``wgmma_tma``.
"""

from __future__ import annotations

import numpy as np

from autotune.device import DeviceInfo
from autotune.shape import Shape
from autotune.spaces.base import BufferSpec, Config, Launch, Step, TensorMap, Zero
from autotune.spaces.gemm_wgmma_tma import BK, WgmmaTmaGemm

# One block per SM, each with a BM×BN fp32 slot for the partial tile it may publish and a flag. The workspace is
# sized before the device is known, so for the most SMs of a compute capability 9.0 part (H100 SXM, H200: 132); a
# device with more SMs launches this many blocks.
STREAM_K_BLOCKS = 132
SK_PARTIAL, SK_FLAGS = "sk_partial", "sk_flags"


class WgmmaTmaStreamKGemm(WgmmaTmaGemm):
    name = "wgmma_tma_streamk"
    parameters = tuple(p for p in WgmmaTmaGemm.parameters if p.name not in ("CLUSTER_M", "SPLIT_K"))
    # 128×128 ping-pong, six stages: 0.86–0.98× cuBLAS at the GPT-2 weight gradients on an H200 (2026-11-28b, call 3).
    default_config = {"BM": 128, "BN": 128, "WG": 2, "PINGPONG": 1, "STAGES": 6, "GROUP_M": 8}
    LAUNCH_ONLY = ()
    LABEL = "wgmma+tma stream-k"

    def defines(self, config: Config) -> dict[str, int | str]:
        return {**super().defines(config), "STREAM_K": 1}

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        """The flags zeroed, then every SM's block at once: a tile's last piece waits on the blocks before it,
        so all must be resident."""
        m, n, k = shape
        c = self.local(config)
        g = self.geometry(c)
        gemm = Launch(
            kernel="gemm_wgmma_tma",
            grid=(min(device.multiprocessors, STREAM_K_BLOCKS), 1, 1),
            block=(g["threads"], 1, 1),
            shared_bytes=g["smem_bytes"],
            args=(
                TensorMap("A", self.dtype, dims=(k, m), box=(BK, c["BM"])),
                TensorMap("B", self.dtype, dims=(n, k), box=(64, BK)),
                "C", np.int32(m), np.int32(n), np.int32(k), SK_PARTIAL, SK_FLAGS,
            ),
        )  # fmt: skip
        return [Zero(SK_FLAGS), gemm]

    def workspace(self, config: Config, shape: Shape) -> dict[str, BufferSpec]:
        return {SK_PARTIAL: BufferSpec((STREAM_K_BLOCKS, config["BM"] * config["BN"]), "float32"),
                SK_FLAGS: BufferSpec((STREAM_K_BLOCKS,), "int32")}  # fmt: skip
