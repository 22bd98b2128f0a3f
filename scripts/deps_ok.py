"""Exit 0 when this checkout is installed and every dependency it declares is satisfied.

setup.sh asks this first so that running it again costs a second instead of a
pip resolve and an editable rebuild: ``python scripts/deps_ok.py [EXTRA ...]``.
Any doubt (no tomllib on Python 3.10, no packaging, a missing or too old
package, logan_ray imported from elsewhere) answers "no", and setup.sh runs pip.
"""
from __future__ import annotations

import os
import sys


def main(extras: list[str]) -> int:
    try:
        import tomllib
        from importlib import metadata

        from packaging.requirements import Requirement
    except ImportError:
        return 1
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    reqs = list(project.get("dependencies", []))
    for extra in extras:
        reqs += project.get("optional-dependencies", {}).get(extra, [])
    reqs = [r for r in reqs if Requirement(r).marker is None or Requirement(r).marker.evaluate()]
    todo, seen = [Requirement(text) for text in reqs], set()
    while todo:  # each requirement, and what its extras (ray[serve] ...) pull in, transitively
        req = todo.pop()
        key = (req.name.lower(), tuple(sorted(req.extras)), str(req.specifier))
        if key in seen:
            continue
        seen.add(key)
        try:
            version = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            return 1
        if not req.specifier.contains(version, prereleases=True):
            return 1
        for extra in req.extras:
            for text in metadata.requires(req.name) or []:
                sub = Requirement(text)
                if sub.marker is not None and "extra" in str(sub.marker) and sub.marker.evaluate({"extra": extra}):
                    todo.append(sub)
    try:
        import logan_ray
    except ImportError:
        return 1
    if os.path.dirname(os.path.dirname(os.path.abspath(logan_ray.__file__))) != root:
        return 1
    # The logan-ray command of this interpreter (the venv's), wherever PATH points.
    return 0 if os.access(os.path.join(os.path.dirname(sys.executable), "logan-ray"), os.X_OK) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
