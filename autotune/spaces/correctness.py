"""What a correct answer is: a space's inputs, outputs and float64 reference, its tolerances, and the extra cases
(ragged shapes, other input kinds) a candidate must also pass.

One of the groups of hooks `KernelSpace` is made of (the GPU worker calls these to validate every candidate).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

import numpy as np

from autotune import dtypes

if TYPE_CHECKING:
    from autotune.shape import Shape
    from autotune.spaces.base import BufferSpec, Config

UNIFORM = "uniform"  # the input kind every space has (see `Correctness.inputs`)


class Correctness:
    """Inputs, outputs, reference, tolerances and validation cases of a `KernelSpace` (see the module)."""

    def input_specs(self, shape: Shape) -> dict[str, BufferSpec]:
        """The buffers the kernel reads."""
        raise NotImplementedError

    def inputs(self, shape: Shape, rng: np.random.Generator, kind: str = UNIFORM) -> dict[str, np.ndarray]:
        """Fresh random inputs (never zeros) as host arrays of the buffers' dtypes (`autotune.dtypes.encode`):
        uniform in [-1, 1) unless the space knows better. ``kind`` names other input sets the space validates
        with (`validation_cases`), e.g. wide dynamic range."""
        return {
            name: dtypes.encode(rng.uniform(-1.0, 1.0, size=spec.shape), spec.dtype)
            for name, spec in self.input_specs(shape).items()
        }

    def outputs(self, shape: Shape) -> dict[str, BufferSpec]:
        """The buffers the kernel writes, every element of which is checked."""
        raise NotImplementedError

    def reference(self, inputs: Mapping[str, np.ndarray], shape: Shape) -> dict[str, np.ndarray]:
        """The right answer in float64, computed with numpy from the inputs' exact values (float64 arrays:
        `decoded_inputs`)."""
        raise NotImplementedError

    def decoded_inputs(self, inputs: Mapping[str, np.ndarray], shape: Shape) -> dict[str, np.ndarray]:
        """Host input arrays as the float64 values they hold (ints stay ints): what `reference` is given."""
        specs = self.input_specs(shape)
        return {name: dtypes.decode(array, specs[name].dtype) for name, array in inputs.items()}

    def device_bytes(self, config: Config | None, shape: Shape) -> int:
        """GPU memory a measurement at ``shape`` needs: inputs, outputs, their fp64 references, workspace."""
        total = sum(s.nbytes for s in self.input_specs(shape).values())
        total += sum(s.nbytes + 8 * int(np.prod(s.shape, dtype=np.int64)) for s in self.outputs(shape).values())
        if config is not None:
            total += sum(s.nbytes for s in self.workspace(config, shape).values())
        return total

    def references(self, inputs: Mapping[str, np.ndarray],
                   shape: Shape) -> tuple[dict[str, np.ndarray], dict[str, float]]:  # fmt: skip
        """The float64 references of the host ``inputs`` (as `inputs` draws them, in their dtype's encoding) and
        each output's tolerance: `reference` and `tolerances` over `decoded_inputs`. A space whose inputs are too
        large to widen to float64 all at once overrides it."""
        decoded = self.decoded_inputs(inputs, shape)
        refs = self.reference(decoded, shape)
        return refs, self.tolerances(decoded, refs, shape)

    def tolerance(self, output: str, shape: Shape) -> float:
        """Largest accepted ‖out − ref‖ / ‖ref‖ for ``output``."""
        return 1e-4

    def tolerances(
        self, inputs: Mapping[str, np.ndarray], refs: Mapping[str, np.ndarray], shape: Shape
    ) -> dict[str, float]:
        """The tolerance of each output for these (decoded) inputs and references. By default `tolerance`; a
        space may tie it to what a plain fp32 computation achieves on the same inputs."""
        return {name: self.tolerance(name, shape) for name in self.outputs(shape)}

    def baseline_config(self) -> Config | None:
        """A configuration of this space whose error on each validation input sets the tolerance there (see
        `baseline_tolerance`), e.g. fp32 GEMM's SIMT kernel: an fp32 request is answered only at the accuracy a
        plain fp32 kernel reaches on the same inputs. None: the tolerances are fixed (`tolerances`)."""
        return None

    def baseline_tolerance(self, output: str, error: float, shape: Shape) -> float:
        """The tolerance of ``output`` where the baseline configuration's relative error is ``error``."""
        return self.tolerance(output, shape)

    def zero_tolerance(self, output: str, shape: Shape) -> float:
        """Largest RMS error accepted where the whole reference is exactly zero (a relative error is undefined
        there, e.g. LayerNorm's dx over rows of length 1): an absolute bound on the output's natural scale."""
        return self.tolerance(output, shape)

    def validation_shapes(self, shape: Shape) -> list[Shape]:
        """Small shapes with ragged edges, checked (with fresh inputs) besides the target shape."""
        return []

    def validation_cases(self, shape: Shape) -> list[tuple[Shape, str]]:
        """(shape, input kind) pairs checked with fresh inputs before the target shape is: by default the
        `validation_shapes` with uniform inputs."""
        return [(tuple(s), UNIFORM) for s in self.validation_shapes(shape)]
