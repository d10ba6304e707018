"""The compiled kernels of a `TunedKernel`: each configuration compiled at most once per process (a cubin from the
binary store, else nvcc, else NVRTC: the runtime needs no toolkit), loaded into the device's primary context."""

from __future__ import annotations

from autotune.errors import ToolchainError
from autotune.runtime.cuda_driver import Driver
from autotune.shape import Shape
from autotune.spaces.base import Config, KernelSpace, config_key


class KernelModules:
    """The loaded modules of one `TunedKernel`, by dtype and defines (see the module)."""

    def __init__(self, driver: Driver, context: int, compile_arch: str) -> None:
        self._driver = driver
        self._context = context
        self._arch = compile_arch
        self._modules: dict[str, tuple[int, dict[str, int]]] = {}  # dtype:defines → (module, kernel → function)

    def function(self, space: KernelSpace, config: Config, shape: Shape, kernel: str, shared_bytes: int) -> int:
        """The CUfunction of ``kernel`` in the module of ``config`` rendered for ``shape``, its dynamic shared
        memory limit raised to ``shared_bytes`` where needed."""
        defines = space.compile_defines(config, shape)
        key = space.dtype + ":" + config_key(defines)
        if key not in self._modules:
            from autotune.runtime.binaries import load_cubin

            try:  # a cubin from the binary store, else nvcc, else NVRTC: the runtime needs no toolkit
                image, _route = load_cubin(space.template_for(config), defines, self._arch)
            except ToolchainError as exc:
                raise ToolchainError(f"{space.name}: configuration {key}: {exc}") from None
            self._driver.make_current(self._context)
            self._modules[key] = (self._driver.load_module(image), {})
        module, functions = self._modules[key]
        if kernel not in functions:
            self._driver.make_current(self._context)
            functions[kernel] = self._driver.function(module, kernel)
            self._driver.prepare(functions[kernel], shared_bytes)
        return functions[kernel]
