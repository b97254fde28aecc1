"""Layering of the publishing and evaluation packages: hub may import evaluation, never the reverse, and
pushing a folder does not load the encoder."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import psp_hf

PACKAGE = Path(psp_hf.__file__).resolve().parent


def _imported_modules(path: Path) -> set[str]:
    """Absolute names of every module a file imports, lazily inside functions too."""
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def test_evaluation_never_imports_hub():
    offenders = {
        path.relative_to(PACKAGE).as_posix(): sorted(name for name in _imported_modules(path) if "psp_hf.hub" in name)
        for path in (PACKAGE / "evaluation").rglob("*.py")
    }
    assert {name: found for name, found in offenders.items() if found} == {}
    # The card side does use the evaluation's mapping of results to model-index rows (one direction only).
    assert "psp_hf.evaluation.model_index" in _imported_modules(PACKAGE / "hub" / "card.py")


def test_importing_the_publishing_code_loads_neither_the_encoder_nor_torch():
    code = (
        "import sys, psp_hf.hub.push, psp_hf.hub.card, psp_hf.evaluation.report; "
        "print(sorted(m for m in ('psp_hf.encoder', 'torch', 'transformers') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
