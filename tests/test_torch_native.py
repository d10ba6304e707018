"""The C++ launcher's sources as Python sees them (no GPU, no build): the backward formulas Python hands to C++ are
the ones torch_autograd.h defines, and the header is part of the build's identity and of the package."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from autotune.runtime import torch_native


def test_native_formulas_are_the_headers_enum():
    path = Path(torch_native.__file__).parent / "torch_autograd.h"
    header = path.read_text()
    enum = re.search(r"enum Formula \{([^}]*)\}", header).group(1)
    values = {name.lower(): int(v) for name, v in re.findall(r"(\w+) = (\d+)", enum)}
    assert values.pop("no_formula") == 0
    assert torch_native.NATIVE_FORMULAS == values
    assert path in torch_native.HEADERS, "an edit of the header must rebuild the launcher"
    assert '#include "torch_autograd.h"' in torch_native.SOURCE.read_text()


def test_the_header_ships_with_the_package():
    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["autotune.runtime"]
    assert all(any(h.match(p) for p in patterns) for h in torch_native.HEADERS)
