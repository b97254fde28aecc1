"""The wheel holds every package: pyproject lists its packages by hand, so a new folder must be added there."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def listed_packages() -> set[str]:
    """`[tool.setuptools] packages` of pyproject.toml (read by pattern: tomllib is not in Python 3.10)."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    block = re.search(r"^\[tool\.setuptools\]$.*?^packages = \[(.*?)^\]", text, re.M | re.S)
    assert block, "pyproject.toml has no [tool.setuptools] packages list"
    return set(re.findall(r'"([\w.]+)"', block.group(1)))


def test_pyproject_lists_every_package_of_src():
    listed = listed_packages()
    source = ROOT / "src" / "psp_hf"
    packages = {".".join(("psp_hf", *init.parent.relative_to(source).parts)) for init in source.rglob("__init__.py")}
    assert packages - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
    # The two folders outside src/ come in through package-dir.
    assert listed - packages == {"psp_hf.modeling", "psp_hf.hub_cards"}
