"""The README's quickstart on a stock Debian/Ubuntu Python, as a newcomer runs it.

Why: Debian 12's and Ubuntu 23.04+'s ``/usr/bin/python3`` refuse ``pip install``
into themselves (PEP 668, "externally-managed-environment"); logan-ray's setup
must make a virtual environment and every README command must use it. This CI
machine's own Python (first on the suite's PATH) hides that, so here the clone is
copied fresh into a temporary folder (the files ``git clone`` would give, with this
checkout's uncommitted edits: tracked and untracked files that are not ignored, so
no .venv, no built extensions) and the README's blocks run there (test_readme.py's
runner) in ``env -i`` with ``PATH=/usr/bin:/bin`` and a new HOME: ``./scripts/start.sh``
makes ``.venv`` from ``/usr/bin/python3`` and installs the base dependencies into it,
and the second shell's commands find the venv through the README's activation line.

Beyond ``env -i PATH HOME`` the environment names two folders, so that the test is
quick and leaves nothing: ``PIP_CACHE_DIR`` (the machine's pip cache; a new HOME's is
empty and every wheel would be downloaded again) and ``RAY_TMPDIR`` (this Ray's
session files go into the temporary folder, not next to the test session's Ray in
/tmp/ray). Afterwards no process of that folder is left and the folder is removed.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time

import pytest
from test_readme import ROOT, run_quickstart

pytestmark = pytest.mark.slow  # about 90 s: most of it pip installing the base dependencies from its cache

STOCK_PYTHON = "/usr/bin/python3"


def fresh_clone(dest: str) -> None:
    """What a clone of this checkout would hold: files git tracks or would track (not ignored)."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = os.path.join(ROOT, rel)
        if not os.path.lexists(src):  # deleted but not yet committed
            continue
        os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
        shutil.copy2(src, os.path.join(dest, rel), follow_symlinks=False)


def processes_under(folder: str) -> list[int]:
    """Pids whose executable, working directory or command line names ``folder``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().decode(errors="replace")
            where = [cmdline]
            for link in ("exe", "cwd"):
                try:
                    where.append(os.readlink(f"/proc/{pid}/{link}"))
                except OSError:
                    pass
        except OSError:  # gone meanwhile
            continue
        if int(pid) != os.getpid() and any(folder in w for w in where):
            found.append(int(pid))
    return found


def pip_cache() -> str:
    return os.environ.get("PIP_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "pip")


def test_readme_quickstart_on_the_stock_debian_python_from_a_fresh_clone():
    # The machine's Python is the stock one this test is about: Debian's, marked externally managed.
    stdlib = subprocess.run([STOCK_PYTHON, "-c", "import sysconfig; print(sysconfig.get_path('stdlib'))"],
                            capture_output=True, text=True, check=True).stdout.strip()
    assert os.path.exists(os.path.join(stdlib, "EXTERNALLY-MANAGED")), f"{STOCK_PYTHON} is not PEP 668-managed"
    assert os.path.realpath(shutil.which("python3", path="/usr/bin:/bin")) == os.path.realpath(STOCK_PYTHON)

    top = tempfile.mkdtemp(prefix="lr-stock-", dir="/tmp")  # short: Ray's socket paths live under it
    try:
        clone, home, ray_tmp = (os.path.join(top, d) for d in ("clone", "home", "ray"))
        os.makedirs(home)
        os.makedirs(ray_tmp)
        fresh_clone(clone)
        assert not os.path.exists(os.path.join(clone, ".venv"))
        env = {"PATH": "/usr/bin:/bin", "HOME": home, "PIP_CACHE_DIR": pip_cache(), "RAY_TMPDIR": ray_tmp}
        started = time.monotonic()
        broker_output = run_quickstart(clone, env, start_timeout=900)

        # setup.sh made the venv from the stock Python and installed logan-ray there, nowhere else.
        with open(os.path.join(clone, ".venv", "pyvenv.cfg")) as f:
            assert "home = /usr/bin\n" in f.read()
        where = subprocess.run([os.path.join(clone, ".venv", "bin", "python"), "-c",
                                "import logan_ray, ray, sys; print(logan_ray.__file__); print(sys.prefix)"],
                               env=env, cwd=home, capture_output=True, text=True, check=True).stdout.split()
        assert where == [os.path.join(clone, "logan_ray", "__init__.py"), os.path.join(clone, ".venv")], where
        missing = subprocess.run([STOCK_PYTHON, "-c", "import logan_ray"], env=env, capture_output=True, cwd=home)
        assert missing.returncode != 0, "logan_ray must not be installed into the system Python"
        assert "externally-managed-environment" not in broker_output, broker_output

        # Nothing left behind: no process of this folder (broker, Ray, workers) outlives the stop.
        deadline = time.monotonic() + 30
        while processes_under(top) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not processes_under(top), [open(f"/proc/{p}/cmdline").read() for p in processes_under(top)]
        print(f"stock quickstart: {time.monotonic() - started:.0f} s")
    finally:
        for pid in processes_under(top):  # only after a failure: ours, by pid
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(top, ignore_errors=True)
    assert not os.path.exists(top)
