"""Exit 0 when this checkout is installed and every dependency it declares is satisfied.

setup.sh asks this first so that running it again costs a second instead of a
pip resolve and an editable rebuild: ``python scripts/deps_ok.py [EXTRA ...]``.
Any doubt (no tomllib on Python 3.10, no packaging, a missing or too old
package, logan_ray imported from elsewhere) answers "no", and setup.sh runs pip.
"""
from __future__ import annotations

import os
import shutil
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
    for text in reqs:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate():
            continue
        try:
            version = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            return 1
        if not req.specifier.contains(version, prereleases=True):
            return 1
    try:
        import logan_ray
    except ImportError:
        return 1
    if os.path.dirname(os.path.dirname(os.path.abspath(logan_ray.__file__))) != root:
        return 1
    return 0 if shutil.which("logan-ray") else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
