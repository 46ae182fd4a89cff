"""`run --time`: what the whole program cost, like /usr/bin/time, from inside.

The course ran its job under /usr/bin/time; Op Time says nothing about the seconds spent importing torch, loading
and resizing the data or compiling kernels, nor about memory. This reads the same four numbers:

    elapsed   wall-clock seconds since the process started (/proc/self/stat; since `main` where there is no /proc)
    user      CPU seconds in user mode, this process and its waited-for children (RUSAGE_SELF + RUSAGE_CHILDREN)
    system    CPU seconds in the kernel, the same way
    max RSS   the largest resident set, in KB (ru_maxrss is KB on Linux), of this process or of a child
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import asdict, dataclass

_STARTED = time.monotonic()  # fallback start: when convbench was imported


@dataclass(frozen=True)
class Usage:
    elapsed_s: float
    user_s: float
    system_s: float
    max_rss_kb: int

    def lines(self) -> list[str]:
        return [f"Elapsed (wall clock) time: {self.elapsed_s:.3f} s",
                f"User time: {self.user_s:.3f} s",
                f"System time: {self.system_s:.3f} s",
                f"Maximum resident set size: {self.max_rss_kb} KB"]

    def to_json(self) -> dict:
        return asdict(self)


def _process_age() -> float | None:
    """Seconds since this process started, from the kernel's own record."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        start_ticks = int(fields[19])  # field 22 of the line, counted after the command name
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def usage() -> Usage:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    age = _process_age()
    elapsed = age if age is not None else time.monotonic() - _STARTED
    return Usage(round(elapsed, 3), round(me.ru_utime + kids.ru_utime, 6), round(me.ru_stime + kids.ru_stime, 6),
                 max(me.ru_maxrss, kids.ru_maxrss))
