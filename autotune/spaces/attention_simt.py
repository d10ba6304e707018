"""Attention forward in fp32 on the SIMT cores (template: kernel_templates/attention_simt.cu): the float32 answer
and the reference kernel. Lanes own keys for the scores and head dimensions for the output."""

from __future__ import annotations

from autotune.device import DeviceInfo
from autotune.shape import Shape
from autotune.spaces._attention import OnePassAttention, attention_dims
from autotune.spaces.algorithm import smem_problems
from autotune.spaces.base import Config, Param

MAX_LANE_STATE = 128  # scores + output accumulators per lane (the template's static_assert)


class SimtAttention(OnePassAttention):
    name = "simt"
    template = "attention_simt.cu"
    kernel = "attention_simt"
    dtypes = ("float32",)

    parameters = (
        Param("WARPS", (2, 4, 8), "warps per block"),
        Param("ROWS", (1, 2, 4), "query rows per warp (share each K/V tile read)"),
        Param("KPL", (1, 2), "keys per lane per KV tile (BC = 32·KPL)"),
    )
    default_config = {"WARPS": 4, "ROWS": 2, "KPL": 1}

    @staticmethod
    def geometry(config: Config, head_dim: int) -> dict[str, int]:
        br, bc = config["WARPS"] * config["ROWS"], 32 * config["KPL"]
        return {
            "BR": br,
            "threads": 32 * config["WARPS"],
            "smem_bytes": 4 * (br * head_dim + bc * (head_dim + 1) + bc * head_dim),
            "lane_state": config["ROWS"] * (config["KPL"] + head_dim // 32),
        }

    def constraints(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        config = self.local(config)
        d = attention_dims(shape).d
        g = self.geometry(config, d)
        problems = []
        if d % 32:
            problems.append(f"the SIMT kernel needs head_dim a multiple of 32, not {d}")
        if g["lane_state"] > MAX_LANE_STATE:
            problems.append(f"{g['lane_state']} values of state per lane (> {MAX_LANE_STATE}) would spill")
        return problems + smem_problems(g["smem_bytes"], device)
