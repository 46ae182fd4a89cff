"""The class at a milestone, for the staff: how fast every team's latest correct submission is, layer by layer, and
what their feedback says they did (the optimizations it found, the bound of each layer). One pure function of the
submissions' results (store.latest_correct's), so a test can hand it made-up results; the staff's page, its JSON
twin and the box plots all show what it returns.

Op Times are compared only within a board (a network on a GPU kind, as the leaderboard ranks them: a time on another
card or network answers another question) and at that board's largest size; a submission not timed at that size
(graded before the staff changed `serve --sizes`) is counted apart, never mixed in. The feedback's counts are of
teams: a team that lists an optimization twice counts once.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter


def five_numbers(values: list[float]) -> dict:
    """min, the quartiles (linear between the points, as numpy's default), median and max of one or more values."""
    ordered = sorted(values)
    if len(ordered) == 1:
        q1 = median = q3 = ordered[0]
    else:
        q1, median, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
    return {"min_s": ordered[0], "q1_s": q1, "median_s": median, "q3_s": q3, "max_s": ordered[-1]}


def _op_times(result: dict) -> dict[int, list[float]]:
    """A result's Op Times per size (images -> per conv layer), only where every one is a finite number."""
    found = {}
    for images, times in ((result.get("grade") or {}).get("op_times") or {}).items():
        if str(images).isdigit() and isinstance(times, list) and times and all(
                isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) for t in times):
            found[int(images)] = [float(t) for t in times]
    return found


def class_summary(milestone: str, entries: list[dict]) -> dict:
    """The class at `milestone`, from each team's latest correct submission (`entries`: {"team", "board", "result"},
    as store.latest_correct gives them):

    layers         per board and conv layer, at the board's largest size: the Op Times' count, five numbers
                   (five_numbers, seconds) and the times themselves, fastest first (no team names)
    other_sizes    submissions not timed at their board's largest size (left out of `layers`)
    with_feedback  submissions whose grade carries feedback (the counts below are of those)
    optimizations  [{"name", "teams"}]: how many teams' feedback lists each optimization, most first
    bounds         [{"layer", "what", "teams"}]: per layer, how many teams' feedback finds each bound"""
    timed = [(e["board"], _op_times(e.get("result") or {})) for e in entries]
    largest: dict[str, int] = {}
    for board, times in timed:
        if times:
            largest[board] = max(largest.get(board, 0), max(times))
    per_layer: dict[tuple[str, int], list[float]] = {}
    other_sizes = 0
    for board, times in timed:
        at = times.get(largest.get(board, -1))
        if at is None:
            other_sizes += bool(times)
            continue
        for index, t in enumerate(at):
            per_layer.setdefault((board, index), []).append(t)
    layers = [{"board": board, "layer": f"conv{index + 1}", "images": largest[board], "count": len(values),
               **five_numbers(values), "op_times_s": sorted(values)}
              for (board, index), values in sorted(per_layer.items())]

    optimizations, bounds, with_feedback = Counter(), Counter(), 0
    for e in entries:
        feedback = ((e.get("result") or {}).get("grade") or {}).get("feedback")
        if not isinstance(feedback, dict) or not feedback:
            continue
        with_feedback += 1
        optimizations.update({str(name) for name in feedback.get("optimizations") or [] if isinstance(name, str)})
        bounds.update({(str(b.get("layer", "")), str(b.get("what", ""))) for b in feedback.get("bound") or []
                       if isinstance(b, dict) and b.get("what")})
    return {"milestone": milestone, "teams": len(entries), "layers": layers, "other_sizes": other_sizes,
            "with_feedback": with_feedback,
            "optimizations": [{"name": name, "teams": n} for name, n in
                              sorted(optimizations.items(), key=lambda kv: (-kv[1], kv[0]))],
            "bounds": [{"layer": layer, "what": what, "teams": n} for (layer, what), n in
                       sorted(bounds.items(), key=lambda kv: (kv[0][0], -kv[1], kv[0][1]))]}
