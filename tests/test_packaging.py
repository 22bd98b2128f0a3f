"""The wheel ships storage/ and actors/ inside logan_ray, and nothing else at top level."""
from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIGHT_DEPS = ["crc32c", "zstandard", "lz4", "cramjam", "msgpack"]  # what logan_ray.storage needs


def test_wheel_installs_into_fresh_venv_and_imports(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                    "-w", str(dist), str(ROOT)], check=True, timeout=300)
    (wheel,) = dist.glob("logan_ray-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names}
    assert "storage" not in top and "actors" not in top, top
    assert "logan_ray/storage/batch_header.py" in names
    assert "logan_ray/actors/partition.py" in names
    assert "logan_ray/protocol/__init__.py" in names
    # the compiled record codec and send path are built into the wheel
    assert any(n.startswith("logan_ray/storage/_codec.") and n.endswith(".so") for n in names), names
    assert any(n.startswith("logan_ray/_send_path.") and n.endswith(".so") for n in names), names
    # every module of the source tree ships, under its logan_ray name
    expected = set()
    for src, dest in (("logan_ray", "logan_ray"), ("storage", "logan_ray/storage"), ("actors", "logan_ray/actors")):
        for path in (ROOT / src).rglob("*.py"):
            expected.add(f"{dest}/{path.relative_to(ROOT / src).as_posix()}")
    missing = sorted(expected - set(names))
    assert not missing, f"modules missing from the wheel (add their packages to pyproject.toml): {missing}"

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    pip = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "--no-deps", str(wheel)], check=True, timeout=300)
    subprocess.run([*pip, *LIGHT_DEPS], check=True, timeout=600)
    code = (
        "import logan_ray, logan_ray.storage.batch_header as b, logan_ray.storage.records as r;"
        "import logan_ray.storage.record_builder as rb;"
        "import importlib.util as u;"
        "assert u.find_spec('storage') is None and u.find_spec('actors') is None;"
        "print(logan_ray.__file__); print(len(rb.build_batch([b'x']))); assert r.compiled()"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    out = subprocess.run([str(py), "-c", code], cwd=str(tmp_path), capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    first = out.stdout.splitlines()[0]
    assert first.startswith(str(venv)), first  # the wheel's copy, not the checkout
