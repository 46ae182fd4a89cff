"""Terminal output shared by every command: results on stdout, progress and notes on stderr (rich).

Progress never changes the work it reports on: a bar advances between separate steps, and one long call (a conv
layer is exactly one call of its implementation) gets a heartbeat, a line that a thread redraws with the seconds
elapsed while the call runs."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

err = Console(stderr=True, highlight=False, soft_wrap=True)


def note(message: str) -> None:
    """One line on stderr: on a terminal wrapped at spaces to its width (a terminal's own wrap cuts words and
    numbers), elsewhere (a pipe, a log) left whole."""
    err.print(message, markup=False, soft_wrap=not err.is_terminal)


class _Bar:
    def __init__(self, progress: Progress | None, task: int | None):
        self._progress, self._task = progress, task

    def advance(self, n: int = 1) -> None:
        if self._progress is not None:
            self._progress.advance(self._task, n)

    def describe(self, text: str) -> None:
        if self._progress is not None:
            self._progress.update(self._task, description=text)


@contextlib.contextmanager
def progress_bar(description: str, total: int, enabled: bool = True) -> Iterator[_Bar]:
    """A progress bar on stderr; invisible when disabled or when stderr is not a terminal (tests, pipes)."""
    if not enabled:
        yield _Bar(None, None)
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=err, transient=True) as progress:
        yield _Bar(progress, progress.add_task(description, total=total))



HEARTBEAT_AFTER_S = 1.0  # a call that ends sooner shows nothing (no flicker on quick layers)
HEARTBEAT_EVERY_S = 1.0


@contextlib.contextmanager
def heartbeat(what: str, enabled: bool = True) -> Iterator[None]:
    """While the block runs: from HEARTBEAT_AFTER_S on, a live line on stderr, `what: 12 s`, redrawn every
    HEARTBEAT_EVERY_S by a thread and erased at the end; nothing when disabled or when stderr is not a terminal.
    The thread needs the GIL to redraw: a call that holds it (numba without nogil) freezes the line, not the work."""
    if not enabled or not err.is_terminal:
        yield
        return
    done = threading.Event()
    start = time.perf_counter()
    shown = False

    def beat() -> None:
        nonlocal shown
        if done.wait(HEARTBEAT_AFTER_S):
            return
        while True:
            err.file.write(f"\r{what}: {time.perf_counter() - start:.0f} s\x1b[K")
            err.file.flush()
            shown = True
            if done.wait(HEARTBEAT_EVERY_S):
                return

    thread = threading.Thread(target=beat, name="convbench-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        if shown:
            err.file.write("\r\x1b[K")
            err.file.flush()
