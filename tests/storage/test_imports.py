"""The storage package stands alone: no import cycles inside it, nothing imported from above it.

Read from the source with ``ast`` (imports inside functions count too), so a
lazy import cannot hide a cycle or a dependency on Ray or the actor layer.
"""
from __future__ import annotations

import ast
import os

import logan_ray.storage as storage_pkg

STORAGE = os.path.dirname(storage_pkg.__file__)
PACKAGE = "logan_ray.storage"
FORBIDDEN = ("ray", "actors", "logan_ray")


def _modules() -> dict[str, str]:
    out = {}
    for dirpath, _dirs, files in os.walk(STORAGE):
        rel = os.path.relpath(dirpath, STORAGE)
        prefix = "" if rel == "." else rel.replace(os.sep, ".") + "."
        for name in files:
            if name.endswith(".py"):
                mod = prefix + name[:-3]
                out[mod[: -len(".__init__")] if mod.endswith(".__init__") else mod] = os.path.join(dirpath, name)
    return out


def _imports(module: str, path: str) -> tuple[set[str], set[str]]:
    """(storage modules imported, outside top-level names imported) by one module."""
    inside, outside = set(), set()
    package = module.rsplit(".", 1)[0] if "." in module else ""
    if path.endswith("__init__.py"):
        package = module if module != "__init__" else ""
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".") if package else []
                base = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
                target = ".".join(base + ([node.module] if node.module else []))
                names = [target] if node.module else [".".join(base + [a.name]) for a in node.names]
                inside.update(n for n in names if n)
            elif node.module.startswith(PACKAGE + "."):
                inside.add(node.module[len(PACKAGE) + 1:])
            else:
                outside.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PACKAGE + "."):
                    inside.add(alias.name[len(PACKAGE) + 1:])
                else:
                    outside.add(alias.name.split(".")[0])
    return inside, outside


def _graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    mods = _modules()
    graph, outside = {}, {}
    for mod, path in mods.items():
        inside, out = _imports(mod, path)
        resolved = set()
        for target in inside:
            while target and target not in mods:  # "records.Record"-style names resolve to their module
                target = target.rpartition(".")[0]
            if target and target != mod:
                resolved.add(target)
        graph[mod], outside[mod] = resolved, out
    return graph, outside


def test_storage_imports_nothing_from_the_layers_above_it():
    _, outside = _graph()
    offending = {mod: sorted(n for n in names if n in FORBIDDEN) for mod, names in outside.items()}
    assert {m: n for m, n in offending.items() if n} == {}


def test_storage_has_no_import_cycles():
    graph, _ = _graph()
    cycles = []
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done

    def visit(mod: str, path: list[str]) -> None:
        state[mod] = 1
        for dep in sorted(graph[mod]):
            if state.get(dep) == 1:
                cycles.append(path[path.index(dep):] + [dep])
            elif dep not in state:
                visit(dep, path + [dep])
        state[mod] = 2

    for mod in sorted(graph):
        if mod not in state:
            visit(mod, [mod])
    assert cycles == []
