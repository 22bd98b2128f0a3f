"""What machine a benchmark ran on, printed at the top of every bench."""
from __future__ import annotations

import os
import platform


def describe() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
            mem = f", {kb / 1048576:.1f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    return (f"{platform.node()}: {platform.system()} {platform.release()}, {cpu}, {os.cpu_count()} CPUs{mem}, "
            f"Python {platform.python_version()}")
