"""Several configurations of one template in one nvcc front end: the translation unit that holds them, and its PTX
split back into one module per configuration. Each nvcc process pays about 0.25 CPU-s for the forced
``cuda_runtime.h`` whatever it compiles (issue 23); a unit of N configurations pays it once.

The unit includes the template's headers once (each has ``#pragma once``), with the first configuration's defines.
Then, per configuration, it opens a namespace, defines the configuration's macros, renames the template's
``extern "C"`` kernels with a suffix, includes the template, and undefines every macro the template defined.
ptxas (``-arch=… -m64 -v``, as nvcc runs it) turns each split module into the cubin that ``nvcc -cubin`` makes of
that configuration alone, byte for byte (measured on 96 configurations of six GEMM algorithms:
docs/results/2026-11-28b/batch_compile_research.md).

That holds where the configurations differ only in macros that neither choose the template's headers nor are read
by them, and where every macro the headers read that the template defines is given by the defines:
`TemplateLayout.batchable` checks both, by reading the sources. It also needs each configuration's code to be its
kernels alone (device functions inlined, no globals of its own): a split module that still names the unit's
namespace would not give the configuration's own cubin, and the compiler then compiles that template alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Collection, Mapping, Sequence

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
_CONDITION = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif)\b(.*)$")
_END = re.compile(r"^\s*#\s*endif\b")
_DEFINE = re.compile(r"^\s*#\s*define\s+(\w+)(.*)$")
_KERNEL = re.compile(r'extern "C"\s+__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s*)?(?:[A-Z_]+\s+)*(\w+)\s*\(')
_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_ENTRY = re.compile(r"^\.(?:visible\s+)?\.entry\s+(\w+)\(", re.M)
SUFFIX = "__batch"
NAMESPACE = "autotune_batch_"  # configuration i's code is in namespace autotune_batch_<i>


@dataclass(frozen=True)
class TemplateLayout:
    """What batching needs to know of a template (with the ``.cu`` files it includes): its kernels, the macros it
    defines, the macros that choose its headers (and those they are derived from), the identifiers its headers use,
    and the macros it defines before including a header that reads them (the unit includes the headers before any
    of the template's own definitions)."""

    kernels: tuple[str, ...]
    macros: frozenset[str]
    include_guards: frozenset[str]
    header_names: frozenset[str]
    defined_for_headers: frozenset[str]

    def batchable(self, varying: Collection[str], given: Collection[str]) -> bool:
        """Whether configurations whose defines (names ``given``) differ only in ``varying`` can share a unit."""
        return (bool(self.kernels) and not set(varying) & (self.include_guards | self.header_names)
                and self.defined_for_headers <= set(given) - set(varying))  # fmt: skip


@lru_cache(maxsize=None)
def layout_of(template: Path) -> TemplateLayout:
    kernels: list[str] = []
    macros: set[str] = set()
    guards: set[str] = set()
    derived: dict[str, set[str]] = {}
    headers: set[Path] = set()
    defined_for_headers: set[str] = set()
    for path in _sources(template):
        text = path.read_text()
        kernels += _KERNEL.findall(_COMMENT.sub("", text))
        stack: list[set[str]] = []
        for line in _COMMENT.sub("", text).splitlines():
            if (condition := _CONDITION.match(line)) is not None:
                names = set(_IDENTIFIER.findall(condition.group(2))) - {"defined"}
                if condition.group(1) == "elif" and stack:
                    stack[-1] |= names
                else:
                    stack.append(names)
            elif _END.match(line) and stack:
                stack.pop()
            elif (define := _DEFINE.match(line)) is not None:
                macros.add(define.group(1))
                derived.setdefault(define.group(1), set()).update(_IDENTIFIER.findall(define.group(2)))
            elif (include := _INCLUDE.match(line)) is not None:
                guards.update(*stack)
                if include.group(1).endswith(".cuh"):
                    included = _headers(path.parent / include.group(1))
                    headers |= included
                    defined_for_headers |= macros & _identifiers(included)
    return TemplateLayout(tuple(kernels), frozenset(macros), frozenset(_closure(guards, derived)),
                          frozenset(_identifiers(headers)), frozenset(defined_for_headers))  # fmt: skip


def _identifiers(files: set[Path]) -> set[str]:
    names: set[str] = set()
    for path in files:
        names.update(_IDENTIFIER.findall(_COMMENT.sub("", path.read_text())))
    return names


def _sources(template: Path) -> list[Path]:
    """The template and the ``.cu`` files it includes (its body may be another template's)."""
    found = [template]
    for line in template.read_text().splitlines():
        include = _INCLUDE.match(line)
        if include is not None and include.group(1).endswith(".cu"):
            found += _sources(template.parent / include.group(1))
    return found


def _headers(header: Path, seen: frozenset[Path] = frozenset()) -> set[Path]:
    found = {header}
    for line in header.read_text().splitlines():
        include = _INCLUDE.match(line)
        if include is not None and (header.parent / include.group(1)) not in seen | found:
            found |= _headers(header.parent / include.group(1), seen | found)
    return found


def _closure(names: set[str], derived: Mapping[str, set[str]]) -> set[str]:
    """``names`` and every macro their definitions refer to, transitively (TF32X3 → DTYPE)."""
    out: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name not in out:
            out.add(name)
            todo += derived.get(name, ())
    return out


def unit_source(template: Path, headers: Sequence[str], configs: Sequence[Mapping[str, object]]) -> str:
    """The unit of ``configs`` (their defines) of ``template``; ``headers``: what the first alone includes, in
    order (`header_list`)."""
    layout = layout_of(template)
    lines = [f"#define {k} {v}" for k, v in configs[0].items()]
    lines += [f'#include "{h}"' for h in headers]
    lines += [f"#undef {k}" for k in configs[0]]
    for i, config in enumerate(configs):
        lines.append(f"namespace {NAMESPACE}{i} {{")
        lines += [f"#define {k} {v}" for k, v in config.items()]
        lines += [f"#define {name} {name}{SUFFIX}{i}" for name in layout.kernels]
        lines.append(f'#include "{template.name}"')
        lines += [f"#undef {m}" for m in sorted(set(layout.kernels) | layout.macros | set(config))]
        lines.append("}")
    return "\n".join(lines) + "\n"


def split_ptx(ptx: str, index: int, kernels: Sequence[str]) -> str:
    """Configuration ``index``'s module: the unit's text outside entries, the headers' kernels (each configuration
    alone has them too), and its own entries renamed back."""
    starts = [m.start() for m in _ENTRY.finditer(ptx)]
    if not starts:
        return ptx
    pieces = [ptx[: starts[0]]]
    for a, b in zip(starts, starts[1:] + [len(ptx)]):
        body = ptx[a:b]
        mark = re.search(rf"{SUFFIX}(\d+)\($", body[: body.index("(") + 1])
        if mark is None:
            pieces.append(body)
        elif int(mark.group(1)) == index:
            for kernel in kernels:
                body = body.replace(f"{kernel}{SUFFIX}{index}", kernel)
            pieces.append(body)
    return "".join(pieces)


def header_list(dependencies: str, folder: Path) -> list[str]:
    """The headers of ``folder`` that an ``nvcc -M`` rule lists, in its order."""
    names = re.findall(r"(\S+\.cuh)\b", dependencies.replace("\\\n", " "))
    return [Path(n).name for n in names if Path(n).resolve().parent == folder.resolve()]
