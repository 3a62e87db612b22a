"""Print pip constraints that pin each of pyproject.toml's dependencies to the oldest release line it admits.

``name>=1.24`` becomes ``name~=1.24.0`` (the newest 1.24.x), ``name>=2.2.1`` becomes ``name~=2.2.1``; environment
markers are kept, and pip evaluates them. `.ci/floor` installs shoal under these constraints and runs its core tests,
so the lower bounds that pyproject.toml promises users are ones that work.
"""

from __future__ import annotations

import re
import sys
import tomllib

FLOOR = re.compile(r"^\s*([A-Za-z0-9_.\-\[\]]+)\s*>=\s*([0-9][0-9.]*)\s*(;.*)?$")


def floor_pins(dependencies: list[str]) -> list[str]:
    pins = []
    for requirement in dependencies:
        match = FLOOR.match(requirement)
        if match is None:
            raise SystemExit(f"{requirement!r}: every dependency should state its lower bound as name>=version")
        name, version, marker = match.group(1).split("[")[0], match.group(2), match.group(3) or ""
        parts = version.split(".")
        pins.append(f"{name}~={version if len(parts) > 2 else '.'.join(parts + ['0'])}{marker}")
    return pins


def dependencies(path: str = "pyproject.toml") -> list[str]:
    """The ``[project] dependencies`` of the ``pyproject.toml`` at ``path``."""
    with open(path, "rb") as f:
        return tomllib.load(f)["project"]["dependencies"]


if __name__ == "__main__":
    print("\n".join(floor_pins(dependencies(*sys.argv[1:2]))))
