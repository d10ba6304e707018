"""What the attention algorithms share: the problem's dimensions (`AttentionDims`, with grouped-query attention's
kv heads), and the one-pass launch of ``fa2`` and ``simt`` (``split_kv`` and ``fa3`` have launch plans of their
own): a block per BR query rows of one (batch, head), reading q, k and v and writing o and lse.

Shapes with kv heads (grouped-query and multi-query attention). A problem is written either as
``(B, H, SQ, SKV, D)``: every query head has its own k and v head (multi-head attention, HKV = H: the form every
shape had before grouped-query attention, so stored rows, command lines and user code keep their meaning), or as
``(B, H, HKV, SQ, SKV, D)`` with HKV < H and H a multiple of HKV: k and v have HKV heads and query head h reads kv
head h // (H / HKV) (Llama, Mistral, Qwen; HKV = 1 is multi-query attention). The two lengths never collide (5
and 6 numbers), and each problem has one canonical form (`canonical`): a 6-tuple whose HKV equals H is written as
the 5-tuple, so a problem has one text in the store (`format_shape`) and the dispatcher's exact lookup finds it.
"""

from __future__ import annotations

import re
from typing import ClassVar, NamedTuple

import numpy as np

from autotune.device import DeviceInfo
from autotune.errors import InvalidArgument
from autotune.shape import Shape, parse_shape
from autotune.spaces.algorithm import Algorithm
from autotune.spaces.base import Config, Launch, Step, ceil_div

MHA_DIMS = ("B", "H", "SQ", "SKV", "D")
GQA_DIMS = ("B", "H", "HKV", "SQ", "SKV", "D")


class AttentionDims(NamedTuple):
    """An attention problem's dimensions, whichever form its shape is written in."""

    b: int
    h: int
    hkv: int
    sq: int
    skv: int
    d: int

    @property
    def group(self) -> int:
        """Query heads per kv head (1: multi-head attention)."""
        return self.h // self.hkv

    @property
    def grouped(self) -> bool:
        """Whether k and v have fewer heads than q: the kernels are compiled with KV_GROUPED and given the group
        size (`kv_args`)."""
        return self.hkv != self.h


def attention_dims(shape: Shape) -> AttentionDims:
    """The dimensions of a 5-tuple (HKV = H) or 6-tuple attention shape; `InvalidArgument` for any other length."""
    shape = tuple(int(x) for x in shape)
    if len(shape) == 5:
        b, h, sq, skv, d = shape
        return AttentionDims(b, h, h, sq, skv, d)
    if len(shape) == 6:
        return AttentionDims(*shape)
    raise InvalidArgument(f"an attention shape is {'x'.join(MHA_DIMS)} or {'x'.join(GQA_DIMS)}, not {len(shape)} "
                          f"numbers {shape}")  # fmt: skip


def canonical(dims: AttentionDims) -> Shape:
    """The shape's one written form: 5 numbers where HKV = H, else 6."""
    b, h, hkv, sq, skv, d = dims
    return (b, h, sq, skv, d) if hkv == h else tuple(dims)


def check_heads(h: int, hkv: int) -> None:
    """`InvalidArgument` unless ``h`` query heads are a multiple of ``hkv`` kv heads."""
    if hkv > h or h % hkv:
        raise InvalidArgument(f"{h} query heads are not a multiple of {hkv} kv heads: grouped-query attention "
                              "needs heads a multiple of kv_heads")  # fmt: skip


def parse_attention_shape(text: str) -> Shape:
    """``BxHxSQxSKVxD`` or ``BxHxHKVxSQxSKVxD`` (the separators of `autotune.shape.parse_shape`), in its canonical
    form; one line of `InvalidArgument` for any other count, a non-positive number or heads that do not divide."""
    count = len(re.split(r"\s*[x×,]\s*", str(text).strip()))
    if count not in (len(MHA_DIMS), len(GQA_DIMS)):
        raise InvalidArgument(f"malformed shape {text!r}: expected {'x'.join(MHA_DIMS)} or {'x'.join(GQA_DIMS)} "
                              "(5 or 6 positive integers), e.g. 4x16x4096x4096x128 or 4x32x8x4096x4096x128")
    p = attention_dims(parse_shape(text, GQA_DIMS if count == len(GQA_DIMS) else MHA_DIMS))
    check_heads(p.h, p.hkv)
    return canonical(p)


def kv_args(dims: AttentionDims) -> tuple[np.int32, ...]:
    """The kernels' trailing group-size argument: present only where compiled with KV_GROUPED (grouped problems),
    so that a multi-head problem launches exactly today's kernels (kernel_templates/attention_problem.cuh)."""
    return (np.int32(dims.group),) if dims.grouped else ()


class OnePassAttention(Algorithm):
    """An attention algorithm whose kernel ``kernel`` runs a (ceil(SQ / BR), H, B) grid; ``geometry(config,
    head_dim)`` gives its ``BR``, ``threads`` and ``smem_bytes``."""

    kernel: ClassVar[str]

    @staticmethod
    def geometry(config: Config, head_dim: int) -> dict[str, int]:
        raise NotImplementedError

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        p = attention_dims(shape)
        g = self.geometry(config, p.d)
        return [
            Launch(
                kernel=self.kernel,
                grid=(ceil_div(p.sq, g["BR"]), p.h, p.b),
                block=(g["threads"], 1, 1),
                shared_bytes=g["smem_bytes"],
                args=("q", "k", "v", "o", "lse", np.int32(p.sq), np.int32(p.skv),
                      np.float32(self.space.scale_log2(p.d)), *kv_args(p)),  # fmt: skip
            )
        ]
