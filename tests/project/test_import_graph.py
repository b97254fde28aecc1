"""The package's import graph: no module imports another that imports it back, lazily inside functions included,
and no path is computed from where the package's files sit (installed as a wheel, that is site-packages)."""

from __future__ import annotations

import ast
from pathlib import Path

import psp_hf

PACKAGE = Path(psp_hf.__file__).resolve().parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """Nodes under `if TYPE_CHECKING:`, which never run."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    return skipped


def import_graph() -> dict[str, set[str]]:
    """Each psp_hf module -> the psp_hf modules it imports (at the top or inside functions)."""
    paths = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in paths.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skipped = _type_checking_nodes(tree)
        found = set()
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package[: len(package) - node.level + 1]
                    base = ".".join([*parent, base] if base else parent)
                submodules = [f"{base}.{alias.name}" for alias in node.names]
                found.update(module for module in submodules if module in paths)
                # `from package import function` imports the package itself.
                if any(module not in paths for module in submodules):
                    found.add(base)
        graph[name] = {module for module in found if module in paths and module != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_lazy_cycle_and_ignores_a_one_way_chain():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def test_the_package_has_no_import_cycle():
    graph = import_graph()
    # The graph is real: the encoder's own imports are seen, the lazy ones inside functions too.
    assert {"psp_hf.inference.pooling", "psp_hf.persistence"} <= graph["psp_hf.encoder"]
    assert "psp_hf.inference.similarity" in graph["psp_hf.encoder"]  # imported inside `similarity()` only
    assert cycles(graph) == []


def test_no_path_is_computed_from_the_package_files_location():
    """Data, caches and outputs are found from arguments, the environment or the working directory; only files
    shipped inside the package (package data) may be found beside a module."""
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if "__file__" in line and ".parents[" in line or "parents[" in line and "Path(__file__)" in line:
                offenders.append(f"{path.relative_to(PACKAGE)}:{number}")
    assert offenders == []
