"""The layers of the tree, read from the source's imports (no import is executed).

Dependencies point one way: storage <- actors <- public face, with the shared pure
packages (wire protocol, group state machine, common errors) usable by both upper
layers (docs/architecture.md draws it). Every import counts, also one inside a
function or under ``TYPE_CHECKING``: a cycle hidden in a function is still a cycle.
"""
from __future__ import annotations

import ast
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STORAGE = "logan_ray.storage"
ACTORS = "logan_ray.actors"
#: Plain Python shared by the actors and the public face (no Ray, no I/O).
SHARED = ("logan_ray.common", "logan_ray.protocol", "logan_ray.groups", "logan_ray.transactions")


@dataclass(frozen=True)
class Import:
    importer: str  # dotted module name, as shipped
    imported: str  # the deepest module of the tree it names, or the raw name outside the tree
    where: str  # file:line


def _shipped_dirs() -> dict[str, Path]:
    """Package name -> source folder, from pyproject's package-dir (storage/ ships as logan_ray.storage)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return {name: ROOT / folder for name, folder in config["tool"]["setuptools"]["package-dir"].items()}


def _modules() -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is package) for every module of the tree."""
    dirs = _shipped_dirs()
    modules: dict[str, tuple[Path, bool]] = {}
    for package, folder in dirs.items():
        for path in folder.rglob("*.py"):
            relative = path.relative_to(folder)
            if (folder / relative.parts[0]).is_symlink():
                continue  # logan_ray/storage -> ../storage in a dev checkout: read once, from its own folder
            parts = [package, *relative.with_suffix("").parts]
            if parts[-1] == "__init__":
                modules[".".join(parts[:-1])] = (path, True)
            else:
                modules[".".join(parts)] = (path, False)
    return modules


def _absolute(name: str) -> str:
    """Top-level names the dev setup also allows (storage.x, actors.x) mean their shipped names."""
    head = name.split(".")[0]
    return f"logan_ray.{name}" if head in ("storage", "actors") else name


def _imports(modules: dict[str, tuple[Path, bool]]) -> list[Import]:
    found: set[Import] = set()
    for module, (path, is_package) in modules.items():
        package = module if is_package else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [_absolute(alias.name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base_parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(base_parts + ([node.module] if node.module else []))
                else:
                    base = _absolute(node.module or "")
                # ``from pkg import sub`` depends on the submodule; ``from mod import name`` on the module
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            for target in targets:
                known = target
                while known and known not in modules:
                    known = known.rpartition(".")[0]
                imported = known or target
                if imported != module:
                    found.add(Import(module, imported, f"{path.relative_to(ROOT)}:{node.lineno}"))
    return sorted(found, key=lambda i: (i.importer, i.imported, i.where))


MODULES = _modules()
IMPORTS = _imports(MODULES)


def _within(name: str, *packages: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for imp in IMPORTS:
        if imp.imported in MODULES:
            graph[imp.importer].add(imp.imported)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
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
                    components.append(sorted(component))
    return components


def test_the_tree_is_read():
    # the checks below would pass vacuously on an empty or mis-read tree
    assert "logan_ray.storage.log" in MODULES and "logan_ray.actors.partition" in MODULES
    assert "logan_ray.gateway.server" in MODULES and "logan_ray.protocol.codec" in MODULES
    assert any(i.importer == "logan_ray.actors.router" and i.imported.startswith(STORAGE) for i in IMPORTS)


def test_no_import_cycles():
    cycles = _cycles()
    detail = [
        f"{' <-> '.join(c)}: " + "; ".join(f"{i.where} {i.importer} -> {i.imported}" for i in IMPORTS
                                          if i.importer in c and i.imported in c)
        for c in cycles
    ]
    assert not cycles, "import cycles:\n" + "\n".join(detail)


def test_storage_imports_neither_ray_nor_the_layers_above():
    bad = [i for i in IMPORTS if _within(i.importer, STORAGE)
           and (_within(i.imported, "ray", "actors", "logan_ray") and not _within(i.imported, STORAGE))]
    assert not bad, "\n".join(f"{i.where}: {i.importer} imports {i.imported}" for i in bad)


def test_actors_import_nothing_from_the_public_face():
    allowed = (STORAGE, ACTORS, *SHARED)
    bad = [i for i in IMPORTS if _within(i.importer, ACTORS)
           and _within(i.imported, "logan_ray") and not _within(i.imported, *allowed)]
    assert not bad, "\n".join(f"{i.where}: {i.importer} imports {i.imported}" for i in bad)


def test_shared_pure_packages_import_neither_ray_nor_actors_nor_the_public_face():
    allowed = (STORAGE, *SHARED)
    bad = [i for i in IMPORTS if _within(i.importer, *SHARED)
           and (_within(i.imported, "ray") or (_within(i.imported, "logan_ray") and not _within(i.imported, *allowed)))]
    assert not bad, "\n".join(f"{i.where}: {i.importer} imports {i.imported}" for i in bad)
