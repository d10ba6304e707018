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
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Collection, Mapping, Sequence

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
_CONDITION = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif)\b(.*)$")
_END = re.compile(r"^\s*#\s*endif\b")
_DEFINE = re.compile(r"^\s*#\s*define\s+(\w+)(.*)$")
_DEFINE_ANYWHERE = re.compile(r"^\s*#\s*define\s+(\w+)", re.M)
_SYSTEM_INCLUDE = re.compile(r"^\s*#\s*include\s+<")
_KERNEL = re.compile(r'extern "C"\s+__global__\s+void\s+(?:__launch_bounds__\((?:[^()]|\([^()]*\))*\)\s*)?'
                     r"(?:[A-Z_]+\s+)*(\w+)\s*\(")
_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_ENTRY = re.compile(r"^\.(?:visible\s+)?\.entry\s+(\w+)\(", re.M)
SUFFIX = "__batch"
NAMESPACE = "autotune_batch_"  # configuration i's code is in namespace autotune_batch_<i>


@dataclass(frozen=True)
class TemplateLayout:
    """What batching needs to know of a template (with the ``.cu`` files it includes, read in textual order): its
    kernels, the macros it defines, the macros that choose its headers (and those they are derived from), the
    identifiers its headers use, the macros it defines before including a header that reads them (the unit
    includes the headers before any of the template's own definitions), the macros its headers define, and two
    shapes it cannot take: a system header included by the template itself (it would land in a namespace), and a
    header included after the template's code (its kernels would come first in the unit's PTX, and ptxas would
    write other bytes)."""

    kernels: tuple[str, ...]
    macros: frozenset[str]
    include_guards: frozenset[str]
    header_names: frozenset[str]
    defined_for_headers: frozenset[str]
    header_macros: frozenset[str]
    system_includes: bool
    header_after_code: bool
    shared_names: frozenset[str]  # the macros an `extern __shared__` declaration names (its type, its alignment)

    def batchable(self, varying: Collection[str], given: Collection[str]) -> bool:
        """Whether configurations whose defines (names ``given``) differ only in ``varying`` can share a unit. A
        macro both a header and the template define (each a default) must be given: the unit undefines the
        template's macros after each configuration, and the next would take the template's default where, alone,
        the header's came first."""
        fixed = set(given) - set(varying)
        both = self.macros & self.header_macros
        return (bool(self.kernels) and not self.system_includes and not self.header_after_code
                and not set(varying) & (self.include_guards | self.header_names | self.shared_names)
                and self.defined_for_headers <= fixed and both <= fixed)  # fmt: skip


@dataclass
class _Walk:
    kernels: list[str] = field(default_factory=list)
    macros: set[str] = field(default_factory=set)
    guards: set[str] = field(default_factory=set)
    derived: dict[str, set[str]] = field(default_factory=dict)
    headers: set[Path] = field(default_factory=set)
    defined_for_headers: set[str] = field(default_factory=set)
    system_includes: bool = False
    shared: set[str] = field(default_factory=set)  # identifiers of `extern __shared__` declarations
    code_seen: bool = False  # a kernel or an included template body so far
    header_after_code: bool = False


@lru_cache(maxsize=None)
def layout_of(template: Path) -> TemplateLayout:
    walk = _Walk()
    _read(template, walk, [])
    header_macros = {m for h in walk.headers for m in _DEFINE_ANYWHERE.findall(_COMMENT.sub("", h.read_text()))}
    # nvcc merges the units' block-scope `extern __shared__` arrays into one symbol: the first configuration's
    # alignment would be every configuration's, so one that a tunable shapes cannot share a unit.
    return TemplateLayout(tuple(walk.kernels), frozenset(walk.macros), frozenset(_closure(walk.guards, walk.derived)),
                          frozenset(_identifiers(walk.headers)), frozenset(walk.defined_for_headers),
                          frozenset(header_macros), walk.system_includes, walk.header_after_code,
                          frozenset(_closure(walk.shared, walk.derived)))  # fmt: skip


def _read(path: Path, walk: _Walk, stack: list[set[str]]) -> None:
    """One template source, line by line; an included ``.cu`` is read where it is included."""
    text = _COMMENT.sub("", path.read_text())
    walk.kernels += _KERNEL.findall(text)
    for line in text.splitlines():
        if (condition := _CONDITION.match(line)) is not None:
            names = set(_IDENTIFIER.findall(condition.group(2))) - {"defined"}
            if condition.group(1) == "elif" and stack:
                stack[-1] |= names
            else:
                stack.append(names)
        elif _END.match(line) and stack:
            stack.pop()
        elif (define := _DEFINE.match(line)) is not None:
            walk.macros.add(define.group(1))
            walk.derived.setdefault(define.group(1), set()).update(_IDENTIFIER.findall(define.group(2)))
        elif _SYSTEM_INCLUDE.match(line):
            walk.system_includes = True
        elif (include := _INCLUDE.match(line)) is not None:
            walk.guards.update(*stack)
            if include.group(1).endswith(".cu"):
                _read(path.parent / include.group(1), walk, stack)
                walk.code_seen = True
            else:
                included = _headers(path.parent / include.group(1))
                walk.headers |= included
                walk.defined_for_headers |= walk.macros & _identifiers(included)
                walk.header_after_code |= walk.code_seen
        else:
            if "__global__" in line:
                walk.code_seen = True
            if "extern" in line and "__shared__" in line:
                walk.shared.update(_IDENTIFIER.findall(line))


def _identifiers(files: set[Path]) -> set[str]:
    names: set[str] = set()
    for path in files:
        names.update(_IDENTIFIER.findall(_COMMENT.sub("", path.read_text())))
    return names


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


def faithful(module: str, kernels: Sequence[str]) -> bool:
    """Whether a split module can be the configuration's own: each of its kernels there, and nothing of the unit's
    namespaces (a device function kept out of line, a global of the template)."""
    return NAMESPACE not in module and all(re.search(rf"\.entry\s+{k}\(", module) for k in kernels)


def header_list(dependencies: str, folder: Path) -> list[str]:
    """The headers of ``folder`` that an ``nvcc -M`` rule lists, in its order."""
    names = re.findall(r"(\S+\.cuh)\b", dependencies.replace("\\\n", " "))
    return [Path(n).name for n in names if Path(n).resolve().parent == folder.resolve()]
