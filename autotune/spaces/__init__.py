"""Kernel spaces, one module per kernel family.

A space is found by its ``name`` among the modules of this package (so adding a family is adding a module), or
by an import reference ``package.module:Class`` / ``path/to/file.py:Class`` for spaces that live elsewhere.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import pkgutil
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from autotune.errors import UnknownKernel
from autotune.spaces.algorithm import Algorithm
from autotune.spaces.base import ALGO, BufferSpec, Config, KernelSpace, Launch, Param, TensorMap, Zero, config_key

__all__ = [
    "ALGO",
    "Algorithm",
    "BufferSpec",
    "Config",
    "KernelSpace",
    "Launch",
    "Param",
    "TensorMap",
    "Zero",
    "config_key",
    "get_space",
    "kernel_names",
    "space_class",
]


def _builtin_classes() -> dict[str, type[KernelSpace]]:
    found: dict[str, type[KernelSpace]] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name in ("base", "algorithm") or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for _, obj in inspect.getmembers(module, inspect.isclass):
            # A kernel declares its own name; intermediate bases (a family's shared code) do not.
            if issubclass(obj, KernelSpace) and "name" in vars(obj) and obj.__module__ == module.__name__:
                found[obj.name] = obj
    return found


_BUILTIN: dict[str, type[KernelSpace]] | None = None


def kernel_names() -> list[str]:
    global _BUILTIN
    if _BUILTIN is None:
        _BUILTIN = _builtin_classes()
    return sorted(_BUILTIN)


def _load_reference(ref: str) -> type[KernelSpace]:
    module_name, _, attr = ref.rpartition(":")
    path = None
    try:
        if module_name.endswith(".py"):
            path = Path(module_name).resolve()
            if not path.is_file():
                raise UnknownKernel(f"cannot load kernel space {ref!r}: {path} does not exist")
            mod_name = f"_autotune_space_{abs(hash(str(path)))}"
            module = sys.modules.get(mod_name)
            if module is None:
                spec = importlib.util.spec_from_file_location(mod_name, path)
                if spec is None or spec.loader is None:
                    raise ImportError(f"cannot load {path}")
                module = importlib.util.module_from_spec(spec)
                sys.modules[mod_name] = module
                try:
                    spec.loader.exec_module(module)
                except BaseException:
                    del sys.modules[mod_name]
                    raise
        else:
            module = importlib.import_module(module_name)
        cls = getattr(module, attr)
    except (ImportError, AttributeError, OSError) as exc:
        raise UnknownKernel(f"cannot load kernel space {ref!r}: {exc}") from None
    except UnknownKernel:
        raise
    except Exception as exc:  # the user's module itself fails: a syntax error, a NameError at import
        raise UnknownKernel(f"cannot load kernel space {ref!r}: {type(exc).__name__}: {exc}") from None
    if not (inspect.isclass(cls) and issubclass(cls, KernelSpace)):
        raise UnknownKernel(f"{ref!r} is not a KernelSpace subclass")
    missing = cls.missing()
    if missing:
        raise UnknownKernel(f"kernel space {ref!r} is incomplete: it lacks {', '.join(missing)}")
    if path is not None:  # a user's file: its templates must be there (module references may be replay-only)
        if "_file_reference" not in vars(cls):
            cls._file_reference = f"{path}:{attr}"  # type: ignore[attr-defined]  # what worker processes load
        _check_templates(cls, ref)
    return cls


def _check_templates(cls: type[KernelSpace], ref: str) -> None:
    """Every template of a user's space exists (beside the space's file or in the library)."""
    from autotune.spaces.rendering import locate_template
    from autotune.templates import template_path

    owners = [(a, a.template) for a in cls.algorithms] if cls.algorithms else [(cls, cls.template)]
    for owner, template in owners:
        try:
            template_path(locate_template(owner, template))
        except UnknownKernel:
            module_file = getattr(sys.modules.get(owner.__module__), "__file__", None)
            where = f"neither beside {module_file} nor " if module_file else "not "
            raise UnknownKernel(f"kernel space {ref!r}: template {str(template)!r} is {where}in the library's "
                                f"kernel_templates/") from None  # fmt: skip


def space_class(name_or_ref: str) -> type[KernelSpace]:
    if ":" in name_or_ref:
        return _load_reference(name_or_ref)
    names = kernel_names()
    assert _BUILTIN is not None
    if name_or_ref not in _BUILTIN:
        raise UnknownKernel(f"unknown kernel {name_or_ref!r}; known kernels: {', '.join(names)}")
    return _BUILTIN[name_or_ref]


def get_space(
    name_or_ref: str, domains: Mapping[str, Sequence[Any]] | None = None, *, dtype: str | None = None
) -> KernelSpace:
    """The space of a kernel, by name (``gemm``) or import reference (``pkg.mod:Class``), for problems of
    ``dtype`` (default: the kernel's first dtype)."""
    return space_class(name_or_ref)(domains, dtype=dtype)
