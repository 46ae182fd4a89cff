"""Terminal output shared by every command: results on stdout, progress and notes on stderr (rich)."""

from __future__ import annotations

import contextlib
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
    err.print(message, markup=False)


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

