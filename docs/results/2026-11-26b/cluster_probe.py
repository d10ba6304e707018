"""How many clusters of two blocks of the wgmma_tma GEMM can be resident at once (cuOccupancyMaxActiveClusters),
against the persistent grid the launch plan asks for (one block per SM): if fewer fit, part of the grid runs in
a second wave. Lab script of 2026-11-26b."""

import ctypes
import sys

from autotune.device import query_device
from autotune.runtime.compiler import Compiler
from autotune.runtime.cuda_driver import Driver
from autotune.spaces import ALGO, get_space


class LaunchConfig(ctypes.Structure):
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p), ("attrs", ctypes.c_void_p),
                ("numAttrs", ctypes.c_uint)]


def main() -> None:
    device = query_device()
    driver = Driver.get()
    ctx = driver.primary_context(driver.device(0))
    driver.make_current(ctx)
    space = get_space("gemm", dtype="bfloat16")
    shape = (8192, 8192, 8192)
    compiler = Compiler(device.compile_arch)
    for change in ({"CLUSTER_M": 2}, {"CLUSTER_M": 2, "BN": 128, "STAGES": 6, "PINGPONG": 1},
                   {"CLUSTER_M": 2, "WG": 1, "BN": 128, "STAGES": 6}, {"CLUSTER_M": 2, "STAGES": 3}):
        config = {ALGO: "wgmma_tma", **space.algos["wgmma_tma"].default_config, **change}
        launch = space.launches(config, shape, device)[0]
        built = compiler.compile(space.template_for(config), space.compile_defines(config, shape))
        module = driver.load_module(open(built.cubin, "rb").read())
        fn = driver.function(module, launch.kernel)
        driver.allow_dynamic_shared(fn, launch.shared_bytes)
        cfg = LaunchConfig(*launch.grid, *launch.block, launch.shared_bytes, None, None, 0)
        n = ctypes.c_int()
        code = driver.lib.cuOccupancyMaxActiveClusters(ctypes.byref(n), ctypes.c_void_p(fn), ctypes.byref(cfg))
        print(f"{space.describe(config)}: grid {launch.grid} block {launch.block} smem {launch.shared_bytes}: "
              f"max active clusters {n.value if code == 0 else driver.describe(code)} "
              f"(grid asks {launch.grid[0] // 2}; SMs {device.multiprocessors})", flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
