"""Whether a tuned row of an older template still describes the machine code it was tuned with.

A row is stored with the sha256 of the cubin its configuration compiled to (`autotune.results.storage.CodeHash`).
When the template has changed since (its hash differs), the dispatcher asks `CodeCheck`: the configuration is
compiled with the template as it is now, for the row's own shape, by nvcc (the compiler the search used), and the
cubin's hash compared. Equal: the edit did not touch this configuration's machine code (a comment, a header it
does not use), and the row is used as tuned. Different, no stored hash, or no nvcc: the row stays stale. NVRTC is
not asked: it builds other code from the same source. Each row is checked once per process; reading never
writes (the row keeps its old template hash).
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Mapping

from autotune.errors import AutotuneError
from autotune.spaces.base import KernelSpace

log = logging.getLogger("autotune")


class CodeCheck:
    """``check(row)``: whether the stale ``row`` builds the cubin it was tuned with (see the module)."""

    def __init__(self, hashes: Mapping[int, str], arch: str, space_for: Callable[[str], KernelSpace]) -> None:
        self.hashes = dict(hashes)  # stored row id → code hash
        self.arch = arch
        self.space_for = space_for  # the kernel's space for a dtype
        self._checked: dict[int, bool] = {}
        self._compiler: Any = None

    def __call__(self, row: Any) -> bool:
        if row.id not in self._checked:
            self._checked[row.id] = self._same_code(row)
        return self._checked[row.id]

    def _same_code(self, row: Any) -> bool:
        stored = self.hashes.get(row.id)
        if not stored:
            return False
        try:
            if self._compiler is None:
                from autotune.runtime.compiler import Compiler

                self._compiler = Compiler(self.arch)
            space = self.space_for(row.dtype)
            config, shape = row.config, space.parse_shape(row.shape)
            now = self._compiler.code_hash(space.template_for(config), space.compile_defines(config, shape))
        except AutotuneError as exc:  # no nvcc, or a configuration the space no longer has: cannot tell
            log.info("autotune: %s %s: the template changed and its machine code cannot be checked (%s)",
                     row.kernel, row.shape, exc)  # fmt: skip
            return False
        if now == stored:
            log.info("autotune: %s %s: the template changed, but not this configuration's machine code: the tuned "
                     "row is used", row.kernel, row.shape)  # fmt: skip
        return now == stored
