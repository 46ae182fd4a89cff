"""What the pages and `convbench submit` both say of a submission, in the same words: its progress while it runs, its
ranked time (TIME_RULE). Plain functions of the API's JSON: nothing of the web application or the database loads
here (`submit` imports it)."""

from __future__ import annotations


def progress_line(shown: dict | None) -> str:
    """A running submission's progress (the API's "progress") as one line: "run 1000 images, step 5 of 6, for 12 s
    (running 40 s)"; "" when it is not running."""
    if not shown:
        return ""
    running = f"running {shown['running_s']:.0f} s" if shown.get("running_s") is not None else "running"
    if not shown.get("step"):
        return f"waiting for the grader's first step ({running})"
    for_s = f", for {shown['step_s']:.0f} s" if shown.get("step_s") is not None else ""
    return f"{shown['step']}, step {shown['index']} of {shown['count']}{for_s} ({running})"


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f}"


def time_line(op_time_s: float | None, spread_s: list | tuple | None) -> str:
    """The ranked time and its spread, as the leaderboard shows them: "Σ Op Time 12.345 ms (spread 12.001–13.210
    ms)"; "" without a Σ."""
    if op_time_s is None:
        return ""
    spread = f" (spread {ms(spread_s[0])}–{ms(spread_s[1])} ms)" if spread_s else ""
    return f"Σ Op Time {ms(op_time_s)} ms{spread}"
