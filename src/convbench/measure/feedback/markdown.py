"""The feedback as Markdown a student pastes into a milestone report: the layer table, what bounds each layer, the
kernels, the findings with their sources, the nearest rung and the next step, and what was left out and why.

It reads only the feedback dict (measure/feedback/__init__.py), so the CLI and the service render the same text.
Text that came from the submission (kernel names) is put in code spans with backticks removed, so it cannot turn
into links, HTML or table cells in a renderer.
"""

from __future__ import annotations

from convbench.measure.feedback.rules import pct, us


def _code(text: str) -> str:
    return "`" + str(text).replace("`", "'").replace("|", "/").replace("\n", " ") + "`"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def markdown(feedback: dict, title: str = "") -> str:
    f = feedback
    if f.get("error"):
        return f"# {title or 'Feedback'}\n\nNo feedback: {f['error']}\n"
    here = "this card" if f["device"] == "cuda" else "this machine"
    lines = [f"# {title or 'Feedback'}", "",
             f"{f['net']} on {f['card']}: Op Times measured by convbench's clock; roofs from {here}'s measured "
             f"ceilings ({f['ceilings']['copy_bytes_per_s'] / 1e9:,.0f} GB/s copy, "
             f"{f['ceilings']['flop_per_s'] / 1e9:,.0f} GFLOP/s {f['arithmetic']}, knee "
             f"{f['ceilings'].get('knee', 0):g} FLOP/byte).", "", "## Per layer", ""]
    lines += _table(["images", "layer", "Op Time", "GFLOP/s", "GB/s", "% of floor", "roof"],
                    [[str(r["images"]), r["layer"], us(r["op_time_s"]), f"{r['gflop_per_s']:,.4g}",
                      f"{r['gb_per_s']:,.4g}", pct(r["pct_of_floor"]), r["roof"]] for r in f["layers"]])
    if f["bound"]:
        lines += ["", "## What bounds it", ""]
        lines += [f"- **{b['what']}** — {b['text']} _({b['source']})_" for b in f["bound"]]
    if f.get("kernels"):
        lines += ["", f"## Kernels at {f['images']} images (one call)", ""]
        lines += _table(["layer", "kernel", "launches", "grid", "block", "regs", "shared B", "occupancy", "time"],
                        [[k["layer"], _code(k["name"][:80]), f"{k['launches_per_call']:g}",
                          "x".join(map(str, k["grid"])), "x".join(map(str, k["block"])), str(k["registers"]),
                          f"{k['shared_bytes']:,}",
                          f"{k['occupancy_pct']:g} % ({k['occupancy_limit']})" if "occupancy_pct" in k else "",
                          us(k["duration_s"])] for k in f["kernels"]])
    if f["findings"]:
        lines += ["", "## Findings", ""]
        lines += [f"- {x['text']} _({x['source']})_" for x in f["findings"]]
    lad = f.get("ladder")
    if lad:
        lines += ["", f"## The nearest rung and the next step ({lad['images']} images, {here})", ""]
        near, step = lad.get("nearest"), lad.get("next")
        if near:
            lines.append(f"- Nearest rung: **{near['name']}** ({near['idea']}), Σ Op Time {us(near['total_s'])}; "
                         f"yours is {near['ratio']:g}× its time. File: `{near['file']}`.")
        if step:
            lines.append(f"- Next step: **{step['name']}** — {step['idea']}. Σ Op Time {us(step['total_s'])} on "
                         f"{here}: {step['speedup']:g}× faster than yours. File: `{step['file']}`.")
        elif lad.get("why_none"):
            lines.append(f"- Next step: {lad['why_none']}")
    if f.get("optimizations"):
        lines += ["", "## Optimizations seen", "", ", ".join(f["optimizations"]) + "."]
    if f.get("omitted"):
        lines += ["", "## Not measured here", ""]
        lines += [f"- {o}" for o in f["omitted"]]
    return "\n".join(lines) + "\n"
