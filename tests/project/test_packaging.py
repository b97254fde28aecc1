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


def test_the_built_wheel_holds_the_compiled_kernels_and_the_sdist_their_sources(tmp_path):
    import subprocess
    import sys
    import tarfile
    import zipfile

    # No build isolation: setuptools is the venv's own (no download), as in `pip install -e .`.
    for kind in ("wheel", "sdist"):
        command = [sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation", "-q", "-w"]
        if kind == "sdist":
            command = [sys.executable, "setup.py", "-q", "sdist", "-d"]
        subprocess.run([*command, str(tmp_path / kind)], cwd=ROOT, check=True, capture_output=True)
    (wheel,) = (tmp_path / "wheel").glob("psp_hf-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    for kernel in ("_pooling", "_words", "_unigram"):
        assert any(re.fullmatch(rf"psp_hf/inference/{kernel}\.[\w.-]+\.(so|pyd)", name) for name in names), kernel
    (sdist,) = (tmp_path / "sdist").glob("psp_hf-*.tar.gz")
    with tarfile.open(sdist) as archive:
        sources = archive.getnames()
    for source in ("_pooling.c", "_words.c", "_unigram.c", "_buffers.h"):
        assert any(name.endswith(f"src/psp_hf/inference/{source}") for name in sources), source
