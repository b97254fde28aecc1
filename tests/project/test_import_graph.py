"""The package's layers and import graph: no import climbs the layer table of docs/layout.md (one named exception),
no module imports another that imports it back (lazily inside functions, through a package's lazy names or an
`importlib` string included), no package imports another that imports it back, and no path is computed from where
the package's files sit (installed as a wheel, that is site-packages)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import import_graph
from import_graph import LAYERS, cycles, layer_of, package_graph, upward_edges

import psp_hf

PACKAGE = Path(psp_hf.__file__).resolve().parent
LAYOUT = PACKAGE.parents[1] / "docs" / "layout.md"


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "psp_hf" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "psp_hf"


def test_the_cycle_finder_finds_a_lazy_cycle_and_ignores_a_one_way_chain():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def test_the_graph_follows_lazy_names_importlib_strings_and_package_inits(tmp_path):
    package = _write(
        tmp_path,
        {
            "__init__.py": '_LAZY = {"load": "psp_hf.encoder"}\ndef __getattr__(name):\n    import importlib\n',
            "encoder.py": "",
            "errors.py": "",
            "evaluation/__init__.py": "from .tasks import run\n",
            "evaluation/tasks.py": "def run():\n    from .. import load\n",
            "evaluation/task_names.py": "",
            "hub/__init__.py": "",
            "hub/card.py": "from ..evaluation.task_names import NAMES\n",
            "cli/__init__.py": 'import importlib\nCOMMANDS = {"eval": ("evaluate", "help")}\n'
            "def module(name):\n    return importlib.import_module(f'{__name__}.{COMMANDS[name][0]}')\n",
            "cli/evaluate.py": "",
        },
    )
    graph = import_graph.import_graph(package)
    assert graph["psp_hf.evaluation.tasks"] == {"psp_hf.encoder"}  # `from .. import load`: the lazy name's module
    assert graph["psp_hf"] == set()  # the lazy table is the asker's import, not the package's
    assert graph["psp_hf.cli"] == {"psp_hf.cli.evaluate"}  # the command table's string
    # Importing a module of evaluation runs evaluation/__init__.py, which imports tasks.
    assert graph["psp_hf.hub.card"] == {"psp_hf.evaluation", "psp_hf.evaluation.task_names"}
    assert graph["psp_hf.evaluation"] == {"psp_hf.evaluation.tasks"}


def test_a_planted_upward_import_is_found(tmp_path):
    """The layer check fails on an import that climbs: a base module importing the encoder inside a function."""
    copy = tmp_path / "psp_hf"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    assert upward_edges(import_graph.import_graph(copy)) == []
    files = copy / "io" / "reading.py"
    files.write_text(files.read_text(encoding="utf-8") + "\n\ndef planted():\n    from .. import load\n")
    assert upward_edges(import_graph.import_graph(copy)) == [
        "psp_hf.io.reading -> psp_hf.encoder (base -> face)",
    ]


def test_no_import_climbs_the_layer_table():
    graph = import_graph.import_graph(PACKAGE)
    # The graph is real: the encoder's own imports are seen, the lazy ones inside functions too.
    assert {"psp_hf.inference.pooling", "psp_hf.persistence"} <= graph["psp_hf.encoder"]
    assert "psp_hf.inference.similarity" in graph["psp_hf.encoder"]  # imported inside `similarity()` only
    assert "psp_hf.cli.embed" in graph["psp_hf.cli"]  # through the command table's importlib string
    assert all(layer_of(module) is not None for module in graph)  # every module has a place in the table
    assert upward_edges(graph) == []


def test_the_package_has_no_import_cycle():
    graph = import_graph.import_graph(PACKAGE)
    assert cycles(graph) == []
    assert cycles(package_graph(graph)) == []


def test_the_layer_table_of_the_layout_page_is_the_one_tested():
    """docs/layout.md's layer table names the packages of each layer as `LAYERS` does, in the same order."""
    text = LAYOUT.read_text(encoding="utf-8")
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d) `(\w+)` \| (.+?) \|", section, flags=re.M)
    documented = [(name, tuple(sorted(re.findall(r"`([\w_]+)/?(?:\.py)?`", members)))) for _, name, members in rows]
    tested = [(name, tuple(sorted(member or "__init__" for member in members))) for name, members in LAYERS]
    assert documented == tested


def test_no_path_is_computed_from_the_package_files_location():
    """Data, caches and outputs are found from arguments, the environment or the working directory; only files
    shipped inside the package (package data) may be found beside a module."""
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if "__file__" in line and ".parents[" in line or "parents[" in line and "Path(__file__)" in line:
                offenders.append(f"{path.relative_to(PACKAGE)}:{number}")
    assert offenders == []
