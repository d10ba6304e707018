"""What the one-pass attention algorithms share (``fa2`` and ``simt``; ``split_kv`` has a launch plan of its own):
one launch of a block per BR query rows of one (batch, head), reading q, k and v and writing o and lse.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from autotune.device import DeviceInfo
from autotune.shape import Shape
from autotune.spaces.algorithm import Algorithm
from autotune.spaces.base import Config, Launch, Step, ceil_div


class OnePassAttention(Algorithm):
    """An attention algorithm whose kernel ``kernel`` runs a (ceil(SQ / BR), H, B) grid; ``geometry(config,
    head_dim)`` gives its ``BR``, ``threads`` and ``smem_bytes``."""

    kernel: ClassVar[str]

    @staticmethod
    def geometry(config: Config, head_dim: int) -> dict[str, int]:
        raise NotImplementedError

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        b, h, sq, skv, d = shape
        g = self.geometry(config, d)
        return [
            Launch(
                kernel=self.kernel,
                grid=(ceil_div(sq, g["BR"]), h, b),
                block=(g["threads"], 1, 1),
                shared_bytes=g["smem_bytes"],
                args=("q", "k", "v", "o", "lse", np.int32(sq), np.int32(skv), np.float32(self.space.scale_log2(d))),
            )
        ]
