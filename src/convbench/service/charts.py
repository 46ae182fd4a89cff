"""The pages' plots, as PNG bytes (Agg figures: the pages are served from several threads, and pyplot's state is not
theirs to share). Linear scales from 0, so every layer's share is seen; any number of points reads: none (said in
words, no empty axes), one (a day around it), many. A submission's roofline is measure/plots.py's, drawn from its
feedback, so the page shows the figure a student gets from convbench itself."""

from __future__ import annotations

import datetime

from convbench.measure import plots

NO_POINTS = "no graded submissions yet"


def _layer_colors(layers: int) -> list:
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    return [cmap(i % 10) for i in range(layers)]


def layers_png(sub_id: int, grade: dict) -> bytes:
    return plots.png(layers_figure(sub_id, grade))


def history_png(history: dict) -> bytes:
    return plots.png(history_figure(history))


def roofline_png(feedback: dict) -> bytes:
    """Each layer's point at each graded size under the measured roofs (plots.feedback_roofline_figure)."""
    return plots.png(plots.feedback_roofline_figure(feedback))


def class_box_png(layer: dict) -> bytes:
    return plots.png(class_box_figure(layer))


def layers_figure(sub_id: int, grade: dict):
    """Per size, one panel (its own linear scale: sizes span 100x) of two bars, Op Time and Layer Time (ms), each
    stacked by conv layer, its total on top: the Op Times stack up to the Σ Op Time the grade shows."""
    sizes = sorted(grade["op_times"], key=int)
    layers = max(len(grade["op_times"][n]) for n in sizes)
    colors = _layer_colors(layers)
    fig = plots.figure(max(4.0, 2.4 * len(sizes) + 1.6), 3.4)
    axes = fig.subplots(1, len(sizes), squeeze=False)[0]
    for ax, n in zip(axes, sizes):
        bars = [("Op Time", grade["op_times"].get(n) or []), ("Layer Time", (grade.get("layer_times") or {}).get(n)
                                                                or [])]
        top = 0.0
        for x, (_, times) in enumerate(bars):
            bottom = 0.0
            for i, t in enumerate(times):
                ax.bar(x, t * 1000, 0.6, bottom=bottom, color=colors[i], label=f"conv{i + 1}" if x == 0 else None,
                       edgecolor="white", linewidth=0.5)
                bottom += t * 1000
            if times:
                ax.annotate(f"{bottom:,.0f}" if bottom >= 100 else f"{bottom:.3g}", (x, bottom), ha="center", va="bottom", fontsize=7,
                            xytext=(0, 2), textcoords="offset points")
            top = max(top, bottom)
        ax.set_xticks(range(len(bars)), [label for label, _ in bars], fontsize=8)
        ax.set_xlim(-0.6, len(bars) - 0.4)
        ax.set_ylim(0, top * 1.15 if top > 0 else 1)
        ax.set_title(f"{n} images", fontsize=9)
        ax.tick_params(axis="y", labelsize=7)
    axes[0].set_ylabel("ms (stacked by layer)")
    handles, labels = axes[0].get_legend_handles_labels()
    axes[-1].legend(handles[::-1], labels[::-1], loc="upper left", bbox_to_anchor=(1.02, 1), fontsize=7,
                    frameon=False)  # top to bottom as the bars stack
    fig.suptitle(f"submission #{sub_id}: Op Time and Layer Time per conv layer", fontsize=10)
    fig.tight_layout()
    return fig


def history_figure(history: dict):
    """Σ Op Time of each graded submission over time, one series per GPU kind (hollow: correct but not ranked).
    None: the words, no axes; one: a day around it."""
    import matplotlib.dates as mdates

    series: dict[str, list[tuple[datetime.datetime, float, bool]]] = {}
    for s in history["submissions"]:
        if s["op_time_s"] is not None:
            series.setdefault(s["gpu"] or "?", []).append((datetime.datetime.fromisoformat(s["created"]),
                                                           s["op_time_s"] * 1000, bool(s.get("ranked"))))
    fig = plots.figure(7, 3.2)
    if not series:
        fig.text(0.5, 0.5, f"team {history['team']}: {NO_POINTS}", ha="center", va="center", fontsize=12,
                 color="#777777")
        return fig
    ax = fig.add_subplot()
    moments = [p[0] for points in series.values() for p in points]
    for gpu, points in series.items():
        line = ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=gpu)[0]
        unranked = [p for p in points if not p[2]]
        if unranked:
            ax.plot([p[0] for p in unranked], [p[1] for p in unranked], "o", markerfacecolor="white",
                    color=line.get_color())
    first, last = min(moments), max(moments)
    if first == last:  # one point (or several at one moment): a day around it
        ax.set_xlim(first - datetime.timedelta(hours=12), first + datetime.timedelta(hours=12))
    else:  # their span, a margin of at least two minutes each side
        pad = max((last - first) * 0.05, datetime.timedelta(minutes=2))
        ax.set_xlim(first - pad, last + pad)
    locator = mdates.AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    highest = max(p[1] for points in series.values() for p in points)
    ax.set_ylim(0, highest * 1.15)
    ax.set_ylabel("Σ Op Time (ms)")
    ax.set_title(f"team {history['team']}: graded submissions (hollow: not ranked)", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def class_box_figure(layer: dict):
    """One layer of the class (classview.class_summary's "layers" entry): a box of its teams' Op Times (ms) at the
    board's largest size, whiskers to the fastest and slowest (no point is called an outlier), each team's time a dot
    beside it."""
    times = [t * 1000 for t in layer["op_times_s"]]
    fig = plots.figure(4.2, 3.2)
    ax = fig.add_subplot()
    ax.boxplot(times, whis=(0, 100), widths=0.5, medianprops={"color": "#a61b1b"})
    ax.plot([1.45] * len(times), times, "o", color="#1f77b4", alpha=0.6, markersize=4)
    ax.set_xticks([1], [f"{layer['layer']}, {layer['count']} team{'s' if layer['count'] != 1 else ''}"], fontsize=8)
    ax.set_xlim(0.5, 1.8)
    ax.set_ylim(0, max(times) * 1.15 if max(times) > 0 else 1)
    ax.set_ylabel("Op Time (ms)")
    ax.tick_params(axis="y", labelsize=7)
    ax.set_title(f"{layer['board']}: {layer['layer']} at {layer['images']} images", fontsize=9)
    fig.tight_layout()
    return fig
