"""The import graph of `psp_hf` as it runs, read from the source: every import, at the top or inside a function
(except under `if TYPE_CHECKING:`), with what the interpreter also runs:

* `from package import name` where `name` is no module: the module the package takes `name` from (its own
  imports, a lazy table of names such as `_LAZY = {"load": "psp_hf.encoder"}`, or a module-level `__getattr__`);
* `importlib.import_module(...)` with a computed name: every module named by a string in the same file (absolute
  `"psp_hf.encoder"`, or relative to the package, as `cli/__init__.py`'s command table is);
* importing `a.b.c` runs the `__init__.py` of `a.b` first, unless the importer is itself inside `a.b` (then it has
  run already).

`layer_of` places each module in the layer table of docs/layout.md; `upward_edges` lists the imports that climb.
Shared by tests/project/test_import_graph.py and whoever counts cycles by hand.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

# The layer table of docs/layout.md, lowest first. A module may import its own layer and the ones below.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("errors", "io", "logs", "data_folder", "public_data", "devices")),
    ("core", ("modeling", "inference", "persistence", "tokenization")),
    ("face", ("", "encoder")),  # "" is the package's own __init__.py (`psp_hf.load`, `psp_hf.PSPEncoder`)
    ("domain", ("teachers", "training", "evaluation", "data", "hub", "corpus", "serve", "backtranslation")),
    ("experiments", ("experiments",)),
    ("cli", ("cli",)),
]

# The one import allowed to climb: `PSPEncoder.push_to_hub` uploads through `psp_hf.hub` (inside the method, so
# loading and encoding never import it), as `PreTrainedModel.push_to_hub` does in transformers.
ALLOWED_UPWARD = {("psp_hf.encoder", "psp_hf.hub"), ("psp_hf.encoder", "psp_hf.hub.push")}

_MODULE_STRING = re.compile(r"^[A-Za-z_][\w.]*$")


def module_name(path: Path, package_dir: Path) -> str:
    parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _skipped_nodes(tree: ast.AST) -> set[int]:
    """Nodes under `if TYPE_CHECKING:`, which never run."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    return skipped


class _Source:
    """One module's parsed source: its imports (as written, resolved to absolute names) and its strings."""

    def __init__(self, name: str, path: Path):
        self.name = name
        self.is_package = path.name == "__init__.py"
        self.package = name if self.is_package else name.rpartition(".")[0]
        self.tree = ast.parse(path.read_text(encoding="utf-8"))
        skipped = _skipped_nodes(self.tree)
        # A package's module-level `__getattr__` imports only for whoever asks for one of its names: those imports
        # are the asker's (see `_provided_names`), not the package's.
        self.lazy = [
            node for node in self.tree.body if isinstance(node, ast.FunctionDef) and node.name == "__getattr__"
        ]
        skipped.update(id(inner) for node in self.lazy for inner in ast.walk(node))
        self.nodes = [node for node in ast.walk(self.tree) if id(node) not in skipped]

    def absolute(self, node: ast.ImportFrom) -> str:
        base = node.module or ""
        if not node.level:
            return base
        parent = self.package.split(".")
        parent = parent[: len(parent) - node.level + 1]
        return ".".join([*parent, base] if base else parent)

    def uses_import_module(self) -> bool:
        return any(
            isinstance(node, ast.Call) and ast.unparse(node.func).endswith("import_module") for node in self.nodes
        )

    def strings(self) -> set[str]:
        return {
            node.value
            for node in self.nodes
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and _MODULE_STRING.match(node.value)
        }


def _named_modules(source: _Source, strings: set[str], modules: set[str]) -> set[str]:
    """Modules a file names in strings for `importlib.import_module`: absolute, or relative to its package."""
    found = set()
    for text in strings:
        for candidate in (text, f"{source.package}.{text.lstrip('.')}"):
            if candidate in modules:
                found.add(candidate)
    return found


def _provided_names(source: _Source, modules: set[str]) -> dict[str, set[str]]:
    """For a package's `__init__.py`: each name it gives to `from package import name` -> the modules behind it."""
    provides: dict[str, set[str]] = {}
    for node in source.nodes:
        if isinstance(node, ast.ImportFrom):
            base = source.absolute(node)
            for alias in node.names:
                target = f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                provides.setdefault(alias.asname or alias.name, set()).add(target)
    for node in ast.walk(source.tree):
        if isinstance(node, ast.Dict):
            # A lazy table: {"load": "psp_hf.encoder"} or {"prepare_bitext": "prepare"}.
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(value, ast.Constant) and isinstance(value.value, str):
                    named = _named_modules(source, {value.value}, modules)
                    if named and isinstance(key.value, str):
                        provides.setdefault(key.value, set()).update(named)
    # A module-level __getattr__ that returns from modules it imports: a name it answers for and no table names
    # may come from any of them.
    lazily = set()
    for node in source.lazy:
        for inner in ast.walk(node):
            if isinstance(inner, ast.ImportFrom):
                base = source.absolute(inner)
                lazily.update(
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in inner.names
                )
    for name in _all_names(source):
        if name not in provides:
            provides[name] = set(lazily)
    return provides


def _all_names(source: _Source) -> list[str]:
    for node in source.tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            try:
                return list(ast.literal_eval(node.value))
            except ValueError:
                return []
    return []


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def import_graph(package_dir: Path) -> dict[str, set[str]]:
    """Each module of the package -> the modules of the package that importing or running it imports."""
    paths = {module_name(path, package_dir): path for path in package_dir.rglob("*.py")}
    modules = set(paths)
    sources = {name: _Source(name, path) for name, path in paths.items()}
    provides = {name: _provided_names(source, modules) for name, source in sources.items() if source.is_package}
    graph: dict[str, set[str]] = {}
    for name, source in sources.items():
        found: set[str] = set()
        for node in source.nodes:
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = source.absolute(node)
                found.add(base)
                for alias in node.names:
                    submodule = f"{base}.{alias.name}"
                    if submodule in modules:
                        found.add(submodule)
                    else:
                        found.update(provides.get(base, {}).get(alias.name, set()))
        if source.uses_import_module():
            found.update(_named_modules(source, source.strings(), modules))
        # Importing a.b.c runs a.b's __init__ first, unless this module lives inside a.b (it has run then).
        own = set(_ancestors(name)) | ({name} if source.is_package else set())
        for target in list(found):
            found.update(ancestor for ancestor in _ancestors(target) if ancestor not in own)
        graph[name] = {module for module in found if module in modules and module != name and module not in own}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm, iteratively)."""
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
                    work.append((child, iter(sorted(graph.get(child, ())))))
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


def package_of(module: str) -> str:
    """`psp_hf.data.sources.bible` -> `psp_hf.data`; a top-level module is its own package."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph with every module folded into its package under `psp_hf` (less the allowed upward
    import, which folds into a cycle by definition: hub imports the encoder it publishes)."""
    folded: dict[str, set[str]] = {}
    for module, targets in graph.items():
        kept = {t for t in targets if (module, t) not in ALLOWED_UPWARD}
        folded.setdefault(package_of(module), set()).update(package_of(t) for t in kept)
    return {package: targets - {package} for package, targets in folded.items()}


def layer_of(module: str) -> int:
    """The index in `LAYERS` of a module; KeyError for a module the table does not place."""
    top = module.split(".")[1] if "." in module else ""
    for number, (_, members) in enumerate(LAYERS):
        if top in members:
            return number
    raise KeyError(f"{module}: no layer in LAYERS (docs/layout.md); place its package there")


def upward_edges(graph: dict[str, set[str]]) -> list[str]:
    """Imports from a module to one in a higher layer, as `importer -> imported (layer -> layer)`."""
    found = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            if layer_of(target) > layer_of(module) and (module, target) not in ALLOWED_UPWARD:
                found.append(f"{module} -> {target} ({LAYERS[layer_of(module)][0]} -> {LAYERS[layer_of(target)][0]})")
    return found
