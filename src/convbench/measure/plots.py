"""The three plots of a results set, as matplotlib Figures (Agg, no display, no pyplot state) and PNG files.

    optime_figure    Σ Op Time of the conv layers vs number of images, one line per implementation, log-log, one
                     panel per network: where an implementation stops being launch-bound and starts to scale
    ratio_figure     speed-up over the library reference (cudnn / onednn) per implementation, one bar per network,
                     at the largest batch: who beats the library, and on which network
    roofline_figure  achieved GFLOP/s vs arithmetic intensity (FLOP per byte moved) for each implementation x layer,
                     under the machine's measured ceilings (measure/ceilings.py): how far each is from the roof,
                     and whether memory or arithmetic is the wall for that layer
    feedback_roofline_figure  one submission's layers at each graded size under its card's roofs (the feedback's
                     plot, measure/feedback/)

The figures are built by functions (tests inspect their axes) and saved by `save`, atomically.
"""

from __future__ import annotations

import importlib.util
import io
from collections import defaultdict
from typing import TYPE_CHECKING

from convbench.core.errors import UsageError
from convbench.measure import outfiles
from convbench.measure.ceilings import THREE_PRODUCT
from convbench.measure.results import totals

if TYPE_CHECKING:
    from matplotlib.figure import Figure

OPTIME_XLABEL, OPTIME_YLABEL = "images", "Σ Op Time of the conv layers (s)"
ROOF_XLABEL, ROOF_YLABEL = "arithmetic intensity (FLOP / byte)", "achieved GFLOP/s"


def require() -> None:
    """matplotlib is imported only where a plot is drawn; a missing one is bad setup, said before any work."""
    if importlib.util.find_spec("matplotlib") is None:
        raise UsageError("matplotlib is not installed, and plots need it; pip install 'convbench[plots]' "
                         "(in a checkout: pip install -e '.[plots]')")


def figure(width: float, height: float):
    """A Figure on the Agg canvas: no display, no pyplot state shared between figures."""
    require()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    return fig


def _colors(names: list[str]) -> dict[str, tuple]:
    from matplotlib import colormaps

    cmap = colormaps["tab20"]
    return {n: cmap((2 * i) % 20 + (i // 10) % 2) for i, n in enumerate(names)}  # dark shades first


def _impl_order(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys(r["impl"] for r in rows))


def optime_figure(rows: list[dict], title: str = "") -> Figure:
    sums = totals(rows, reference="")
    nets = list(dict.fromkeys(s["net"] for s in sums))
    impls = _impl_order(rows)
    colors = _colors(impls)
    fig = figure(5.2 * max(1, len(nets)) + 2.2, 4.6)
    axes = fig.subplots(1, max(1, len(nets)), squeeze=False)[0]
    for ax, net in zip(axes, nets):
        for impl in impls:
            pts = sorted((s["images"], s["op_time_s"]) for s in sums if s["net"] == net and s["impl"] == impl)
            if pts:
                ax.plot(*zip(*pts), marker="o", ms=3, lw=1.2, color=colors[impl], label=impl)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(OPTIME_XLABEL)
        ax.set_ylabel(OPTIME_YLABEL)
        ax.set_title(net)
        ax.grid(True, which="both", alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="center right", fontsize=7, frameon=False)
    fig.suptitle(title or "Op Time vs images")
    fig.subplots_adjust(right=1 - 2.0 / fig.get_figwidth(), top=0.86, wspace=0.3)
    return fig


def ratio_figure(rows: list[dict], reference: str, title: str = "") -> Figure:
    sums = totals(rows, reference)
    nets = list(dict.fromkeys(s["net"] for s in sums))
    largest = {net: max(s["images"] for s in sums if s["net"] == net) for net in nets}
    impls = _impl_order(rows)
    fig = figure(max(6.0, 0.5 * len(impls) + 2), 4.8)
    ax = fig.subplots()
    width = 0.8 / max(1, len(nets))
    for j, net in enumerate(nets):
        vals = []
        for impl in impls:
            s = next((s for s in sums if s["net"] == net and s["impl"] == impl and s["images"] == largest[net]), None)
            vals.append(s["speedup_vs_reference_x"] if s and s["speedup_vs_reference_x"] else 0.0)
        ax.bar([i + (j - (len(nets) - 1) / 2) * width for i in range(len(impls))], vals, width,
               label=f"{net} ({largest[net]} images)")
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_xticks(range(len(impls)))
    ax.set_xticklabels(impls, rotation=60, ha="right", fontsize=8)
    ax.set_xlabel("implementation")
    ax.set_ylabel(f"speed-up over {reference} (x, > 1: faster)")
    ax.set_title(title or f"Σ Op Time of {reference} / the implementation's")
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


ROOF_STYLES = {"fp32": "-", "tf32": "--", "tf32x3": "-.", "fp16": ":", "fp16x3": (0, (5, 2, 1, 2)),
               "bf16": (0, (1, 4))}


def roof_rates(ceilings: dict, arithmetics) -> dict[str, float]:
    """The roofs to draw: fp32 and tf32 where measured, and the roof of each other arithmetic the plotted
    implementations use (tf32x3 = tf32 / 3, fp16, fp16x3 = fp16 / 3, bf16) where the file has its ceiling."""
    rates = {name: ceilings.get(f"{name}_flop_per_s") for name in ("fp32", "tf32", "fp16", "bf16")}
    rates.update({name: rates[base] / 3 if rates[base] else None for name, base in THREE_PRODUCT.items()})
    wanted = {"fp32", "tf32"} | set(arithmetics)
    return {name: rate for name, rate in rates.items() if rate and name in wanted}


def roofline_figure(rows: list[dict], ceilings: dict | None, precisions: dict[str, str], title: str = "",
                    arithmetic: dict[str, str] | None = None) -> Figure:
    """One point per implementation x layer at each network's largest batch; the roofs from the ceilings dict
    (measure/ceilings.Ceilings.to_json()), left out when the results file has none. `arithmetic`: impl -> what its
    FLOPs ran on, where that is not its precision (a 3xTF32 kernel: fp32 precision, tf32x3 arithmetic)."""
    arithmetic = arithmetic or {}
    largest: dict[str, int] = defaultdict(int)
    for r in rows:
        largest[r["net"]] = max(largest[r["net"]], r["images"])
    points = [r for r in rows if r["images"] == largest[r["net"]]]
    impls = _impl_order(points)
    colors = _colors(impls)
    fig = figure(8.5, 5.5)
    ax = fig.subplots()
    markers = "osD^v<>ph*"
    layer_names = sorted({f"{r['net']} {r['layer']}" for r in points})
    for r in points:
        key = f"{r['net']} {r['layer']}"
        ax.scatter(r["intensity_flop_per_byte"], r["flop"] / r["op_time_s"] / 1e9, s=22,
                   color=colors[r["impl"]], marker=markers[layer_names.index(key) % len(markers)])
    xs = [r["intensity_flop_per_byte"] for r in points] or [1.0]
    lo, hi = min(xs) / 4, max(xs) * 4
    if ceilings:
        bw = ceilings["copy_bytes_per_s"]
        used = {arithmetic.get(i) or precisions.get(i, "fp32") for i in impls}
        for name, rate in roof_rates(ceilings, used).items():
            knee = rate / bw
            left = min(lo, knee / 4)  # the slope drawn from left of the knee, wherever the points lie
            ax.plot([left, knee, max(hi, knee * 4)], [bw * left / 1e9, rate / 1e9, rate / 1e9],
                    linestyle=ROOF_STYLES[name], color="black", lw=1,
                    label=f"{name} roof: {rate / 1e9:,.0f} GFLOP/s, {bw / 1e9:,.0f} GB/s"
                    + (f" ({THREE_PRODUCT[name]} / 3)" if name in THREE_PRODUCT else ""))
    for impl in impls:  # legend entries: colour = implementation
        prec = precisions.get(impl, "fp32")
        arith = arithmetic.get(impl) or prec
        label = f"{impl} ({prec})" if arith == prec else f"{impl} ({prec}, {arith} arithmetic)"
        ax.scatter([], [], color=colors[impl], s=22, label=label)
    for i, key in enumerate(layer_names):  # marker = layer
        ax.scatter([], [], color="grey", marker=markers[i % len(markers)], s=22, label=key)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(ROOF_XLABEL)
    ax.set_ylabel(ROOF_YLABEL)
    ax.set_title(title or "roofline")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    fig.tight_layout()
    return fig


def feedback_roofline_figure(feedback: dict) -> Figure:
    """One point per conv layer and graded size of one submission (colour = layer, marker = size), under the roofs
    of the card it was graded on: memory (the measured copy rate) and its arithmetic's measured FLOP rate."""
    if not feedback.get("layers"):
        raise UsageError("this feedback has no per-layer numbers to plot")
    rows, ceil = feedback["layers"], feedback["ceilings"]
    fig = figure(7.5, 4.2)
    ax = fig.subplots()
    layers = list(dict.fromkeys(r["layer"] for r in rows))
    sizes = sorted({r["images"] for r in rows})
    colors = _colors(layers)
    markers = "osD^v<>"
    for r in rows:
        ax.scatter(r["intensity"], r["gflop_per_s"], s=30, color=colors[r["layer"]],
                   marker=markers[sizes.index(r["images"]) % len(markers)])
    xs = [r["intensity"] for r in rows] or [1.0]
    bw, rate = ceil["copy_bytes_per_s"], ceil["flop_per_s"]
    knee = rate / bw
    lo, hi = min(min(xs) / 4, knee / 8), max(max(xs) * 4, knee * 4)
    ax.plot([lo, knee, hi], [bw * lo / 1e9, rate / 1e9, rate / 1e9], color="black", lw=1,
            label=f"{feedback['arithmetic']} roof {rate / 1e9:,.0f} GFLOP/s; memory {bw / 1e9:,.0f} GB/s")
    for layer in layers:
        ax.scatter([], [], color=colors[layer], s=30, label=layer)
    for i, n in enumerate(sizes):
        ax.scatter([], [], color="grey", marker=markers[i % len(markers)], s=30, label=f"{n} images")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(ROOF_XLABEL)
    ax.set_ylabel(ROOF_YLABEL)
    ax.set_title(f"{feedback['net']} on {feedback['card']}", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    fig.tight_layout()
    return fig


def png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return buf.getvalue()


def save(fig: Figure, path) -> None:
    """PNG, written atomically."""
    outfiles.write_bytes(path, png(fig))
