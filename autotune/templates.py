"""Locating kernel templates and fingerprinting them.

Templates ship inside the package as ``autotune/kernel_templates`` (mapped from the repository's
``kernel_templates/``). The template hash covers the template and the headers it includes from beside it:
a stored result is stale once that hash changes.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from autotune.errors import UnknownKernel

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def _template_dirs() -> list[Path]:
    # A source checkout's templates first: the ones beside the package that was imported (an editable install
    # maps autotune.kernel_templates to the checkout it was made from, which may be another one).
    dirs = []
    checkout = Path(__file__).resolve().parent.parent / "kernel_templates"
    if checkout.is_dir():
        dirs.append(checkout)
    try:
        import autotune.kernel_templates as packaged

        dirs.extend(Path(p) for p in packaged.__path__ if Path(p).resolve() != checkout)
    except ImportError:
        pass
    return dirs


def template_path(template: str | Path) -> Path:
    """The file of a template given by name (``gemm.cu``) or by path (test-only templates)."""
    candidate = Path(template)
    if candidate.is_absolute():
        if candidate.is_file():
            return candidate
        raise UnknownKernel(f"template {candidate} does not exist")
    for directory in _template_dirs():
        path = directory / candidate
        if path.is_file():
            return path
    raise UnknownKernel(f"template {template} not found in {', '.join(map(str, _template_dirs()))}")


def _sources(path: Path, seen: set[Path] | None = None) -> list[tuple[str, bytes]]:
    seen = seen if seen is not None else set()
    if path in seen:
        return []
    seen.add(path)
    data = path.read_bytes()
    out = [(path.name, data)]
    for name in _INCLUDE.findall(data.decode("utf-8", "replace")):
        included = path.parent / name
        if included.is_file():
            out.extend(_sources(included, seen))
    return out


def template_hash(template: str | Path) -> str:
    """sha256 of the template and its local includes (hex, 64 characters). Read afresh each time: cheap, and
    an edited header is never missed."""
    digest = hashlib.sha256()
    for name, data in _sources(template_path(template)):
        digest.update(name.encode() + b"\0" + data + b"\0")
    return digest.hexdigest()


def short_hash(full: str) -> str:
    return full[:8]
