"""Attention forward: O = softmax(Q·Kᵀ·scale [+ causal mask])·V and the log-sum-exp of each row.

Layout (batch, heads, seq, head_dim), contiguous; q (B, H, SQ, D), k and v (B, HKV, SKV, D); SQ and SKV may
differ; scale = 1/√D. Grouped-query attention: HKV divides H and query head h reads kv head h // (H / HKV)
(HKV = 1: multi-query). Shapes: (B, H, SQ, SKV, D) where HKV = H, (B, H, HKV, SQ, SKV, D) where HKV < H
(`autotune.spaces._attention`: every existing multi-head row, command line and call keeps its meaning). Outputs: o (B, H, SQ, D) in the inputs' dtype and lse (B, H, SQ) in float32, the natural
log of each row's sum of exp(scaled logits) (what a backward pass or a split-KV combine needs).

Two kernel names, one family: ``attention`` and ``attention_causal``. The causal mask is aligned bottom-right:
query i sees key j iff j ≤ i + SKV − SQ (the last query sees every key, as in decoding with a KV cache), as
FlashAttention ≥ 2.1 and torch's ``causal_lower_right`` bias align it; torch's ``is_causal=True`` aligns it
top-left, which differs only where SQ ≠ SKV. SQ > SKV is refused: its first rows would see no key.
Causality is part of the kernel's name, not of the shape, because the dispatcher knows a problem from its arrays
alone; so no tuned configuration ever crosses it. Head dimension is a compile-time constant of every template
(`problem_defines`) and the `shape_key`: the dispatcher never falls back across it. So is the group size H / HKV:
whether the problem is grouped is compiled in (KV_GROUPED, kernel_templates/attention_problem.cuh; the size itself
is a run-time argument), and the work per block of split_kv and of the backward grows with it, so a configuration
tuned for one group size never stands in for another (the exact lookup, by the whole shape, tells HKV apart
anyway). dtype is keyed by the core.
`shape_class` separates decoding (SQ ≤ 16) from prefill.

Algorithms (``ALGO``): ``fa2`` (float16, bfloat16: FlashAttention-2 on mma.sync), ``fa3`` (float16, bfloat16,
Hopper only: TMA, warp-specialised wgmma, P in registers; head_dim 64, 96, 128), ``split_kv`` (float16, bfloat16:
flash-decoding for seq_q ≤ 64, KV split across blocks, partial results combined by their LSE), ``simt``
(float32). `rule_default` runs split_kv for decoding shapes (with splits sized to the SM count), fa3 for prefill on
Hopper where it fits (head_dim 64, 96, 128), fa2 otherwise; the space's first configuration stays fa2's (it runs
on every GPU).

Accuracy contract (relative L2 error against float64 attention on the same rounded inputs): o within
`O_TOLERANCE` of its dtype (a few units of its rounding: the output's own rounding and P's rounding to the input
type before P·V), lse within `LSE_TOLERANCE` (fp32 statistics). Validation inputs: uniform in [-1, 1), and
large logits (q and k scaled by `WIDE_SCALE`: logits of tens, nearly one-hot rows, the online max matters).
"""

from __future__ import annotations

import math
from typing import ClassVar, Mapping

import numpy as np

from autotune import dtypes
from autotune.device import DeviceInfo
from autotune.errors import InvalidArgument
from autotune.shape import Shape, format_shape
from autotune.spaces._attention import (
    GQA_DIMS,
    MHA_DIMS,
    AttentionDims,
    attention_dims,
    canonical,
    check_heads,
    parse_attention_shape,
)
from autotune.spaces.attention_fa2 import Fa2Attention
from autotune.spaces.attention_fa3 import Fa3Attention
from autotune.spaces.attention_simt import SimtAttention
from autotune.spaces.attention_split_kv import SplitKvAttention
from autotune.spaces.base import ALGO, UNIFORM, BufferSpec, Config, KernelSpace

HEAD_DIMS = (32, 64, 96, 128)
WIDE = "wide"
WIDE_SCALE = 8.0  # q, k uniform in ±8: logits with a standard deviation near 20 (|logit| up to ~100)
O_TOLERANCE = {"float32": 5e-5, "float16": 2e-3, "bfloat16": 1.6e-2}
LSE_TOLERANCE = {"float32": 1e-5, "float16": 1e-4, "bfloat16": 1e-4}
DECODE_MAX_SQ = 16
# Above this many score elements (B·H·SQ·SKV·D) the inputs repeat with a period of `HEAD_PERIOD` (batch, head)
# pairs and the float64 reference computes one period: a 4x16x16384x16384x128 reference would otherwise take
# hours. The ragged validation cases, checked before every target, keep every head distinct.
PERIODIC_ABOVE = 2**33
HEAD_PERIOD = 3


class AttentionSpace(KernelSpace):
    name = "attention"
    causal: ClassVar[int] = 0
    dims = MHA_DIMS
    other_dims = (GQA_DIMS,)  # where HKV < H (`parse_shape`)
    default_shape = (4, 16, 4096, 4096, 128)
    metric_unit = "TFLOP/s"
    algorithms = (Fa2Attention, Fa3Attention, SplitKvAttention, SimtAttention)

    # --- problem --------------------------------------------------------------------------------------------
    @staticmethod
    def scale_log2(head_dim: int) -> float:
        """The softmax scale 1/√D with log2(e) folded in: the kernels exponentiate with exp2."""
        return math.log2(math.e) / math.sqrt(head_dim)

    def problem_defines(self, shape: Shape) -> dict[str, int | str]:
        p = attention_dims(shape)
        defines: dict[str, int | str] = {"HEAD_DIM": p.d, "CAUSAL": self.causal}
        if p.grouped:
            defines["KV_GROUPED"] = 1  # absent for multi-head problems: their defines (and code) stay as they were
        return defines

    def shape_key(self, shape: Shape) -> tuple:
        p = attention_dims(shape)
        return (p.d, p.group)

    def shape_class(self, shape: Shape) -> tuple:
        return ("decode",) if attention_dims(shape).sq <= DECODE_MAX_SQ else ("prefill",)

    def parse_shape(self, text: str) -> Shape:
        return parse_attention_shape(text)

    def format_shape(self, shape: Shape) -> str:
        return format_shape(canonical(attention_dims(shape)))

    def check_shape(self, shape: Shape) -> None:
        """`InvalidArgument` for a problem no kernel of this family computes."""
        b, h, hkv, sq, skv, d = attention_dims(shape)
        if d not in HEAD_DIMS:
            raise InvalidArgument(f"head_dim {d} is not supported; {self.name} supports {', '.join(map(str, HEAD_DIMS))}")
        check_heads(h, hkv)
        if self.causal and sq > skv:
            raise InvalidArgument(f"causal attention with seq_q {sq} > seq_kv {skv}: the first {sq - skv} queries "
                                  "would see no key (bottom-right alignment)")  # fmt: skip

    def constraints(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        b, h, hkv, sq, skv, d = attention_dims(shape)
        if d not in HEAD_DIMS:
            return [f"head_dim {d} is not supported ({', '.join(map(str, HEAD_DIMS))})"]
        if hkv > h or h % hkv:
            return [f"{h} heads are not a multiple of {hkv} kv heads"]
        if self.causal and sq > skv:
            return [f"causal with seq_q {sq} > seq_kv {skv}"]
        return super().constraints(config, shape, device)

    def input_specs(self, shape: Shape) -> dict[str, BufferSpec]:
        b, h, hkv, sq, skv, d = attention_dims(shape)
        return {"q": BufferSpec((b, h, sq, d), self.dtype), "k": BufferSpec((b, hkv, skv, d), self.dtype),
                "v": BufferSpec((b, hkv, skv, d), self.dtype)}  # fmt: skip

    def outputs(self, shape: Shape) -> dict[str, BufferSpec]:
        b, h, hkv, sq, skv, d = attention_dims(shape)
        return {"o": BufferSpec((b, h, sq, d), self.dtype), "lse": BufferSpec((b, h, sq), "float32")}

    def infer_shape(self, inputs: Mapping[str, tuple[int, ...]]) -> Shape:
        """The canonical shape of q (B, H, SQ, D), k and v (B, HKV, SKV, D): HKV from k."""
        for name in ("q", "k", "v"):
            if len(inputs[name]) != 4:
                raise InvalidArgument(f"{name} must be 4-D (batch, heads, seq, head_dim), got shape {tuple(inputs[name])}")
        q, k, v = (tuple(inputs[n]) for n in ("q", "k", "v"))
        if k != v:
            raise InvalidArgument(f"k has shape {k} but v has {v}: they must match")
        if q[3] != k[3]:
            raise InvalidArgument(f"q has head_dim {q[3]} but k and v have {k[3]}")
        if q[0] != k[0]:
            raise InvalidArgument(f"q has batch {q[0]} but k and v have {k[0]}")
        if k[2] == 0:
            raise InvalidArgument("seq_kv is 0: attention over no key is undefined")
        if 0 in q:
            raise InvalidArgument(f"q is empty (shape {q})")
        if k[1] == 0 or q[1] % k[1]:
            raise InvalidArgument(f"q has {q[1]} heads but k and v have {k[1]}: the query heads must be a multiple "
                                  "of the kv heads (grouped-query attention)")  # fmt: skip
        shape = canonical(attention_dims((q[0], q[1], k[1], q[2], k[2], q[3])))
        self.check_shape(shape)
        return shape

    def work(self, shape: Shape) -> float:
        b, h, hkv, sq, skv, d = attention_dims(shape)
        return 4.0 * b * h * sq * skv * d / (2 if self.causal else 1)

    def rule_default(self, shape: Shape, device: DeviceInfo) -> Config:
        p = attention_dims(shape)
        if p.sq > DECODE_MAX_SQ:
            # Prefill on Hopper: fa3 (wgmma + TMA) where it runs the shape; on the H100 its default ran 1.00x /
            # 1.02x cuDNN (bf16, d128, 4x16x4096^2, non-causal / causal) where fa2's ran 0.40-0.55x.
            fa3 = self.algos.get("fa3")
            if fa3 is not None and "fa3" in self.domain(ALGO) and fa3.unfit(shape, device) is None:
                config = {ALGO: "fa3", **fa3.default_config}
                if not self.violations(config, shape, device):
                    return config
            return dict(self.default_config)
        if "split_kv" not in self.domain(ALGO):
            return dict(self.default_config)
        return self.decode_rule(shape, device)

    def decode_rule(self, shape: Shape, device: DeviceInfo) -> Config:
        """split_kv's first rule configuration (`SplitKvAttention.rule_configs`) that fits the device (one of less
        shared memory may not hold the cluster's rings); else the family's default, as where no rule applies."""
        for candidate in self.algos["split_kv"].rule_configs(shape, device):
            candidate = {ALGO: "split_kv", **candidate}
            if not self.violations(candidate, shape, device):
                return candidate
        return dict(self.default_config)

    # --- correctness ----------------------------------------------------------------------------------------
    def inputs(self, shape: Shape, rng: np.random.Generator, kind: str = UNIFORM) -> dict[str, np.ndarray]:
        """q, k, v uniform in [-1, 1) (``WIDE``: q and k ·`WIDE_SCALE`). Above `PERIODIC_ABOVE` score elements
        the kv heads repeat every `HEAD_PERIOD` and the query heads every `HEAD_PERIOD`·group (`head_periods`), so
        that each query head still reads the kv head of its own period."""
        p = attention_dims(shape)
        q_period, kv_period = head_periods(p)
        out = {}
        for name, seq, heads, made in (("q", p.sq, p.b * p.h, q_period), ("k", p.skv, p.b * p.hkv, kv_period),
                                       ("v", p.skv, p.b * p.hkv, kv_period)):  # fmt: skip
            x = rng.uniform(-1.0, 1.0, size=(made, seq, p.d)).astype(np.float32)
            if kind == WIDE and name != "v":
                x *= WIDE_SCALE
            elif kind not in (UNIFORM, WIDE):
                raise ValueError(f"unknown input kind {kind!r}")
            # Encoded before the repeat (the encoding is elementwise: the same values): repeating in float32 first
            # held 4 bytes per element plus the encoding's temporaries, and a decoding step of 64 x 8 kv heads x 128K
            # keys had its worker killed for host memory.
            x = dtypes.encode(x, self.dtype)
            if made != heads:
                x = np.tile(x, (math.ceil(heads / made), 1, 1))[:heads]
            out[name] = x.reshape(p.b, heads // p.b, seq, p.d)
        return out

    def reference(self, inputs: Mapping[str, np.ndarray], shape: Shape) -> dict[str, np.ndarray]:
        b, h, hkv, sq, skv, d = p = attention_dims(shape)
        # Float64 arrays (`decoded_inputs`), or `EncodedHeads` (`references`): either way widened a head at a time.
        q = inputs["q"].reshape(b * h, sq, d)
        k, v = (inputs[n].reshape(b * hkv, skv, d) for n in ("k", "v"))
        heads = b * h
        period = reference_period(p, q, k, v)
        o = np.empty((period, sq, d))
        lse = np.empty((period, sq))
        scale = 1.0 / math.sqrt(d)
        chunk = max(1, (1 << 24) // skv)  # rows per step: the score block stays ~128 MiB
        kv_head = -1
        for i in range(period):
            if i // p.group != kv_head:  # the flat kv head of flat query head i: (b·H + h) // G = b·HKV + h // G
                kv_head = i // p.group
                kh, vh = np.asarray(k[kv_head], np.float64), np.asarray(v[kv_head], np.float64)
            qh = np.asarray(q[i], np.float64)
            for r0 in range(0, sq, chunk):
                s = (qh[r0 : r0 + chunk] @ kh.T) * scale
                if self.causal:
                    rows = np.arange(r0, r0 + s.shape[0])[:, None] + (skv - sq)
                    s[np.arange(skv)[None, :] > rows] = -np.inf
                m = s.max(axis=1, keepdims=True)
                e = np.exp(s - m)
                total = e.sum(axis=1, keepdims=True)
                o[i, r0 : r0 + chunk] = (e @ vh) / total
                lse[i, r0 : r0 + chunk] = (m + np.log(total))[:, 0]
        if period != heads:
            o = np.tile(o, (math.ceil(heads / period), 1, 1))[:heads]
            lse = np.tile(lse, (math.ceil(heads / period), 1))[:heads]
        return {"o": o.reshape(b, h, sq, d), "lse": lse.reshape(b, h, sq)}

    def references(self, inputs: Mapping[str, np.ndarray],
                   shape: Shape) -> tuple[dict[str, np.ndarray], dict[str, float]]:  # fmt: skip
        # `reference` widens one head at a time: all of k and v in float64 at once is 16 bytes per element, 137 GB
        # of host memory for a decoding step of 64 x 8 kv heads x 128K keys x 128 (its worker was killed).
        specs = self.input_specs(shape)
        refs = self.reference({name: EncodedHeads(x, specs[name].dtype) for name, x in inputs.items()}, shape)
        return refs, {name: self.tolerance(name, shape) for name in self.outputs(shape)}

    def tolerance(self, output: str, shape: Shape) -> float:
        return (LSE_TOLERANCE if output == "lse" else O_TOLERANCE)[self.dtype]

    def validation_cases(self, shape: Shape) -> list[tuple[Shape, str]]:
        # Lengths ragged against every tile (1, 77, 1000, 1031, 4097), seq_q ≠ seq_kv (causal: bottom-right),
        # several batches and heads; large logits; all at the target's head_dim and, grouped or not, its
        # KV_GROUPED (both compiled in: `problem_defines`).
        d = attention_dims(shape).d
        if attention_dims(shape).grouped:
            return grouped_cases(d)
        return [
            ((1, 1, 1, 1, d), UNIFORM),
            ((2, 3, 77, 77, d), UNIFORM),
            ((1, 2, 77, 1031, d), UNIFORM),
            ((3, 1, 5, 1000, d), UNIFORM),
            ((1, 2, 1000, 1000, d), WIDE),
            ((1, 1, 129, 4097, d), WIDE),
            ((2, 3, 16, 4097, d), WIDE),  # decoding shapes (split_kv runs only these two and the two above)
            ((1, 2, 3, 1031, d), UNIFORM),
        ]


def grouped_cases(d: int) -> list[tuple[Shape, str]]:
    """Validation cases of a grouped target (every one grouped: KV_GROUPED is compiled in, the group size is an
    argument): groups of 2, 3, 4 and multi-query (HKV = 1, a group of 8), ragged lengths, decoding shapes whose
    packed group·seq_q rows (split_kv) are ragged against its 16-row tile (9, 24, 64, 8), large logits."""
    return [
        ((1, 2, 1, 1, 1, d), UNIFORM),  # one query, one key, a group of 2
        ((2, 8, 2, 77, 1031, d), UNIFORM),  # group 4
        ((1, 6, 2, 1000, 1000, d), WIDE),  # group 3
        ((2, 8, 1, 1, 4097, d), WIDE),  # multi-query decoding: 8 heads share one K/V read
        ((1, 6, 2, 3, 1031, d), UNIFORM),  # group 3, seq_q 3: 9 packed rows
        ((3, 4, 2, 12, 1000, d), UNIFORM),  # group 2, seq_q 12: 24 rows
        ((1, 8, 2, 16, 4097, d), WIDE),  # group 4, seq_q 16: 64 rows
    ]


def head_periods(p: AttentionDims) -> tuple[int, int]:
    """(query heads, kv heads) drawn for inputs of these dimensions: all of them, or where the problem has more
    than `PERIODIC_ABOVE` score elements, `HEAD_PERIOD`·group query heads and `HEAD_PERIOD` kv heads, repeated
    (flat query head i reads flat kv head i // group, so the pairs repeat with the query heads' period)."""
    if p.b * p.hkv > HEAD_PERIOD and p.b * p.h * p.sq * p.skv * p.d > PERIODIC_ABOVE:
        return HEAD_PERIOD * p.group, HEAD_PERIOD
    return p.b * p.h, p.b * p.hkv


class EncodedHeads:
    """A host input of an attention problem in its dtype's encoding (`dtypes.encode`), flat or (batch, heads, seq,
    d), whose heads `reference` reads one at a time as float64 (``x[i]``) and `reference_period` compares as
    stored."""

    def __init__(self, array: np.ndarray, dtype: str) -> None:
        self.array, self.dtype = array, dtype

    def reshape(self, *shape: int) -> "EncodedHeads":
        return EncodedHeads(self.array.reshape(*shape), self.dtype)

    def __len__(self) -> int:
        return len(self.array)

    def __getitem__(self, head: int) -> np.ndarray:
        return dtypes.decode(self.array[head], self.dtype)


def _repeats(x: "np.ndarray | EncodedHeads", period: int) -> bool:
    """Whether the flat heads of ``x`` repeat every ``period`` (compared head by head: no full-size temporary)."""
    heads = x.array if isinstance(x, EncodedHeads) else x
    return all(np.array_equal(heads[i], heads[i - period]) for i in range(period, len(heads)))


def reference_period(p: AttentionDims, q: np.ndarray, *kv: np.ndarray, more: tuple[np.ndarray, ...] = ()) -> int:
    """Query heads the float64 reference computes: one period where the inputs repeat as `head_periods` draws
    them (q and ``more``, flat per query head, every `HEAD_PERIOD`·group; ``kv`` every `HEAD_PERIOD`), else all."""
    q_period = HEAD_PERIOD * p.group
    if (p.b * p.hkv > HEAD_PERIOD and all(_repeats(x, q_period) for x in (q, *more))
            and all(_repeats(x, HEAD_PERIOD) for x in kv)):  # fmt: skip
        return q_period
    return p.b * p.h


class AttentionCausalSpace(AttentionSpace):
    name = "attention_causal"
    causal = 1
