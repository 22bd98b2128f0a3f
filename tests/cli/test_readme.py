"""The README's quickstart, run verbatim as a new user would: a fresh shell, nothing exported.

The shell blocks of README.md's Quickstart section are the test script: the
``bash`` block's ``./scripts/start.sh`` starts the broker (in the background
here; the README runs it in the foreground of its own shell), then every
``console`` block's ``$`` commands run in order in ``env -i`` with only PATH and
a new, empty HOME, and each command's output (stdout and stderr) must match the
lines the README shows under it: ``...`` stands for what varies from run to run
and lines may come in another order (records of different partitions do). The
last command stops the broker, which must then exit cleanly. A command that only
changes the shell (``. .venv/bin/activate``, ``source``, ``export``, with no output
shown) is carried over to the commands after it, as the reader's shell keeps it. Edit
the README and this test follows; break a README command and this test fails.
The runner lives here; test_readme_stock.py runs it, in a fresh copy of the clone with the
machine's /usr/bin/python3 (a run in this checkout as well took 50 s and proved nothing more).
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def quickstart_blocks(root: str = ROOT) -> list[tuple[str, str]]:
    """[(language, text)] of the fenced blocks in the README's Quickstart section, in order."""
    with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    section = readme.split("\n## Quickstart\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```(\w+)\n(.*?)^```", section, flags=re.S | re.M)


def console_steps(text: str) -> list[tuple[str, list[str]]]:
    """[(command, expected output lines)] of a ``console`` block."""
    steps: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            assert steps, f"output before any command in a console block: {line!r}"
            steps[-1][1].append(line)
    return steps


def output_matches(expected: list[str], actual: list[str]) -> bool:
    """Each expected line (``...`` = anything) matches a distinct actual line, and nothing is left over."""
    patterns = [re.compile(".*".join(map(re.escape, e.strip().split("..."))) + r"\Z") for e in expected]
    left = [a.strip() for a in actual if a.strip()]
    if len(left) != len(patterns):
        return False
    for p in patterns:
        hit = next((i for i, a in enumerate(left) if p.match(a)), None)
        if hit is None:
            return False
        left.pop(hit)
    return True


def minimal_env(home: str) -> dict[str, str]:
    """What ``env -i PATH=... HOME=...`` leaves: a new user's shell.

    The interpreter running the tests comes first on PATH (it is the one setup.sh
    installed logan-ray into). PYTHONPATH is kept only when the suite runs from a
    checkout that is not the installed one (a developer's worktree), so the code
    under test is this checkout's; CI has none.
    """
    env = {"PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin"),
           "HOME": home}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


class Background:
    """A shell command in its own process group whose output is collected by a thread."""

    def __init__(self, command: str, env: dict[str, str], cwd: str = ROOT) -> None:
        self.proc = subprocess.Popen(["bash", "-c", command], cwd=cwd, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for raw in self.proc.stdout:
            self.lines.append(raw.decode(errors="replace"))

    def wait_for(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(text in line for line in self.lines):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        raise AssertionError(f"{text!r} did not appear:\n{self.output()}")

    def output(self) -> str:
        return "".join(self.lines)

    def end(self) -> None:
        """Leave nothing behind: SIGTERM the group (a clean stop), SIGKILL if it lingers."""
        for sig, wait in ((signal.SIGTERM, 120), (signal.SIGKILL, 30)):
            if self.proc.poll() is not None:
                break
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(wait)
            except subprocess.TimeoutExpired:
                pass
        self._reader.join(10)


def shell_state(command: str, expected: list[str]) -> bool:
    """A command that only changes the shell the next commands run in (activating the venv)."""
    return not expected and command.split(" ", 1)[0] in (".", "source", "export")


def run_quickstart(root: str, env: dict[str, str], start_timeout: float = 300) -> str:
    """Run the README's Quickstart in ``root`` with ``env``, check every output; the broker's output."""
    blocks = quickstart_blocks(root)
    assert blocks and blocks[0][0] == "bash", "the Quickstart starts with the run and test commands"
    run_lines = [ln.split("#", 1)[0].strip() for ln in blocks[0][1].splitlines() if ln.strip()]
    start = [ln for ln in run_lines if ln.startswith("./scripts/start.sh")]
    # test.sh is this suite itself; anything else added to that block must be handled here.
    assert len(start) == 1 and set(run_lines) - set(start) == {"./scripts/test.sh"}, run_lines
    steps = [step for lang, text in blocks[1:] if lang == "console" for step in console_steps(text)]
    assert steps and steps[-1][0].startswith("logan-ray stop"), "the README ends by stopping the broker"

    broker = Background(start[0], env, cwd=root)
    state: list[str] = []  # `. .venv/bin/activate` and the like, in the order the README runs them
    try:
        broker.wait_for("logan-ray is running", timeout=start_timeout)
        for command, expected in steps:
            try:
                r = subprocess.run(["bash", "-c", "\n".join([*state, command])], cwd=root, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   timeout=300)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"$ {command}\ntimed out; broker output:\n{broker.output()}") from None
            out = r.stdout.decode(errors="replace")
            assert r.returncode == 0, f"$ {command}\nexit {r.returncode}:\n{out}\nbroker output:\n{broker.output()}"
            assert output_matches(expected, out.splitlines()), (
                f"$ {command}\nREADME shows:\n" + "\n".join(expected) + f"\nbut it printed:\n{out}")
            if shell_state(command, expected):
                state.append(command)
        broker.proc.wait(120)
    finally:
        broker.end()
    assert broker.proc.returncode == 0, broker.output()
    assert "logan-ray stopped cleanly." in broker.output()
    # The README says the runtime files go away with the broker.
    home = env["HOME"]
    assert not os.path.exists(os.path.join(home, ".logan-ray", "broker.json"))
    assert not os.path.exists(os.path.join(home, ".local", "state", "logan-ray", "broker.json"))
    return broker.output()


def test_output_matching_is_strict_where_the_readme_is():
    assert output_matches(["produced 2 records to events in ... s"], ["produced 2 records to events in 0.20 s"])
    assert output_matches(["a", "b"], ["b", "a"])
    assert not output_matches(["produced 2 records ... s"], ["produced 3 records in 0.2"])
    assert not output_matches(["a"], ["a", "extra"])
    assert not output_matches(["a", "a"], ["a", "b"])
