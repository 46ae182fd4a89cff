"""`report`: the course's final report, built from results files, as Markdown and as one self-contained HTML page.

Both pages come from the same list of blocks (headings, paragraphs, tables, code, images), so they cannot
disagree. Contents:

- the sources: each results file (by default the newest run of each card under results/, measure/results.py)
  with its machine, versions, commit and command (numbers without these are not results);
- per card: the leaderboard (measure/leaderboard.py) and the three plots (measure/plots.py) as PNG files beside
  the pages, and the whole network's times where the files hold `convbench run --whole-network --json` output;
- per implementation: what it does, in its author's words (the docstring of its file in impls/, and the header
  comment of its CUDA kernel, the .cu file beside it, where it has one), its verify record, its Σ Op Time at
  100 / 1000 / 10000 images (and any other batch measured) on every card and network, and, when a profile JSON of it
  is given (`convbench profile --json`), its profile tables.
"""

from __future__ import annotations

import html
import importlib
import inspect
import json
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from convbench.core.errors import UsageError
from convbench.impls.registry import all_impls
from convbench.measure import outfiles, plots
from convbench.measure.leaderboard import boards, source
from convbench.measure.results import (
    COURSE_SIZES,
    ResultsFile,
    by_card,
    merged_layers,
    totals,
)

PROFILE_FORMAT = "convbench-profile/1"


# ------------------------------------------------------------------------------------------------ the blocks


@dataclass(frozen=True)
class Heading:
    level: int
    text: str


@dataclass(frozen=True)
class Para:
    text: str


@dataclass(frozen=True)
class Code:
    text: str


@dataclass(frozen=True)
class TableBlock:
    header: list[str]
    rows: list[list[str]]
    right: tuple[int, ...] = ()  # right-aligned columns (numbers)


@dataclass(frozen=True)
class Image:
    file: str
    alt: str


def to_markdown(blocks) -> str:
    out = []
    for b in blocks:
        if isinstance(b, Heading):
            out.append("#" * b.level + " " + b.text)
        elif isinstance(b, Para):
            out.append(b.text)
        elif isinstance(b, Code):
            out.append("```\n" + b.text + "\n```")
        elif isinstance(b, TableBlock):
            cell = lambda s: str(s).replace("|", "\\|").replace("\n", " ")  # noqa: E731
            lines = ["| " + " | ".join(cell(h) for h in b.header) + " |",
                     "|" + "|".join("---:" if i in b.right else "---" for i in range(len(b.header))) + "|"]
            lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in b.rows]
            out.append("\n".join(lines))
        elif isinstance(b, Image):
            out.append(f"![{b.alt}]({b.file})")
    return "\n\n".join(out) + "\n"


_CSS = """body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:90%}th,td{border:1px solid #ccc;padding:3px 8px}
th{background:#f3f3f3}td.r{text-align:right;font-variant-numeric:tabular-nums}
pre{background:#f7f7f7;padding:.8em;overflow-x:auto;font-size:85%}img{max-width:100%}"""


def to_html(blocks, title: str) -> str:
    e = html.escape
    out = [f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{e(title)}</title>"
           f"<style>{_CSS}</style></head><body>"]
    for b in blocks:
        if isinstance(b, Heading):
            out.append(f"<h{b.level}>{e(b.text)}</h{b.level}>")
        elif isinstance(b, Para):
            text = re.sub(r"`([^`]+)`", r"<code>\1</code>", e(b.text))
            out.append(f"<p>{text}</p>")
        elif isinstance(b, Code):
            out.append(f"<pre>{e(b.text)}</pre>")
        elif isinstance(b, TableBlock):
            head = "".join(f"<th>{e(str(h))}</th>" for h in b.header)
            td = lambda i: '<td class="r">' if i in b.right else "<td>"  # noqa: E731
            body = "".join("<tr>" + "".join(f"{td(i)}{e(str(c))}</td>" for i, c in enumerate(row)) + "</tr>"
                           for row in b.rows)
            out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        elif isinstance(b, Image):
            out.append(f"<p><img src=\"{e(b.file)}\" alt=\"{e(b.alt)}\"></p>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------------------------ the content


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower() or "card"


def describe(name: str) -> tuple[str, str | None, str | None]:
    """(what the impl file says, the kernel file's name, what its header says) for an implementation. The kernel is
    the module's SOURCE, else the .cu file of the module's name beside it (impls/gpu_NN_name.cu)."""
    impl = {i.name: i for i in all_impls()}.get(name)
    if impl is None:
        return f"{name} is not in this checkout's registry (`convbench impls`); no description.", None, None
    module = sys.modules.get(impl.module)
    if module is None:
        try:
            module = importlib.import_module(impl.module)
        except ImportError:
            module = None
    doc = inspect.cleandoc(module.__doc__) if module is not None and module.__doc__ else impl.summary
    here = Path(module.__file__).parent if module is not None and getattr(module, "__file__", None) else None
    candidates = [getattr(module, "SOURCE", None), here / (impl.module.rsplit(".", 1)[-1] + ".cu") if here else None]
    for cand in candidates:
        if isinstance(cand, (str, Path)) and str(cand).endswith(".cu"):
            path = Path(cand) if Path(cand).is_absolute() or here is None else here / cand
            if path.is_file():
                return doc, path.name, kernel_header(path.read_text())
    return doc, None, None


def kernel_header(source: str) -> str:
    """The comment block a kernel file opens with, without the comment markers."""
    lines = []
    for line in source.splitlines():
        s = line.strip()
        if s.startswith("//"):
            lines.append(s[2:][1:] if s[2:].startswith(" ") else s[2:])
        elif s or lines:
            break
    return "\n".join(lines)


def load_profile(path: str) -> dict:
    try:
        doc = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UsageError(f"profile file {path!r} does not exist; write one with `convbench profile --json "
                         f"{shlex.quote(path)}`") from None
    except (OSError, ValueError) as e:
        raise UsageError(f"profile file {path!r} is not a readable JSON file ({e.__class__.__name__}); "
                         f"write one with `convbench profile --json {shlex.quote(path)}`") from None
    if not isinstance(doc, dict) or doc.get("format") != PROFILE_FORMAT:
        raise UsageError(f"{path!r} is not a convbench profile JSON; write one with `convbench profile --json "
                         f"{shlex.quote(path)}`")
    return doc


def _ms(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds * 1e3:.4f}"


def profile_blocks(doc: dict) -> list:
    blocks = [Para(f"Profile of one inference: {doc['net']}, {doc['images']} images, {doc['device']}"
                   f" ({doc.get('environment', {}).get('gpu') or doc.get('environment', {}).get('cpu', '')}); "
                   f"wall {doc['wall_s'] * 1e3:.2f} ms.")]
    for key, title in (("gpu", "GPU kernels"), ("gpu_copies", "GPU copies"), ("host", "host calls (self time)")):
        table = doc.get(key)
        if not table:
            continue
        blocks.append(Para(f"{title}: the names making up {sum(r['time_pct'] for r in table['rows']):.1f} % of "
                           f"{table['total_s'] * 1e3:.3f} ms ({len(table['rows'])} of {table['names']} names)"))
        blocks.append(TableBlock(["Time %", "total ms", "calls", "avg ms", "min ms", "max ms", "name"],
                                 [[f"{r['time_pct']:.2f}", _ms(r["total_s"]), str(r["calls"]), _ms(r["avg_s"]),
                                   _ms(r["min_s"]), _ms(r["max_s"]), r["name"]] for r in table["rows"]],
                                 right=(0, 1, 2, 3, 4, 5)))
    if doc.get("ncu"):
        keys = list(doc["ncu"][0]["metrics"])
        blocks.append(TableBlock(["kernel", "launches", *keys],
                                 [[k["kernel"], str(k["launches"]), *(f"{k['metrics'].get(m, float('nan')):.1f}" for m in keys)]
                                  for k in doc["ncu"]], right=tuple(range(1, 2 + len(keys)))))
    return blocks


def build(files: list[ResultsFile], out_dir: Path, profiles: list[dict] | None = None) -> list[Path]:
    """Write the plots, report.md and report.html into out_dir (created if absent); returns the files written.
    The folder is built whole beside out_dir and swapped in at the end (outfiles.build_dir): an interrupted build
    leaves the old report as it was, and no stale plot of an earlier report survives."""
    final = Path(out_dir)
    with outfiles.build_dir(final) as tmp:
        written = _build(files, tmp, profiles)
    return [final / p.name for p in written]


def _build(files: list[ResultsFile], out_dir: Path, profiles: list[dict] | None = None) -> list[Path]:
    profiles = profiles or []
    written: list[Path] = []
    groups = by_card(files)
    blocks: list = [Heading(1, "convbench report"),
                    Para("Op Time: the implementation's call alone, in seconds (median of the file's runs, each layer "
                         "on its real input activations). Σ Op Time: summed over the network's conv layers. Speed-up: "
                         "the library's Σ Op Time (cudnn on the GPU, onednn on the CPU) divided by the "
                         "implementation's, from the same run (> 1: faster than the library).")]

    blocks += [Heading(2, "Sources"),
               TableBlock(["file", "kind", "card", "versions", "commit", "date", "command"],
                          [[source(f), f.kind, f.card, _versions(f.environment), str(f.environment.get("commit", "")),
                            f.date, str(f.environment.get("command", ""))] for f in files])]

    for card, group in groups.items():
        blocks.append(Heading(2, f"Results on {card}"))
        wholes = [f for f in group if f.whole]
        if wholes:
            blocks += [Heading(3, "Whole network (one CUDA graph, device-resident input)"), whole_table(wholes)]
        group = [f for f in group if f.layers]
        if not group:
            continue
        rows = merged_layers(group)
        ref = group[0].reference
        # the course's batch where this card has it, else its largest
        sizes = {r["images"] for r in rows}
        images = COURSE_SIZES[-1] if COURSE_SIZES[-1] in sizes else max(sizes)
        board_list, notes = boards(group, images)
        blocks.append(Heading(3, f"Leaderboard: Σ Op Time at {images} images, verified implementations"))
        blocks += [leaderboard_table(b) for b in board_list] + [Para(n) for n in notes]
        precisions = {k: v for f in group for k, v in f.precision.items()}
        arithmetic = {k: v for f in group for k, v in f.arithmetic.items()}
        ceilings = next((f.ceilings for f in group if f.ceilings), None)
        figures = [("optime", plots.optime_figure(rows, f"Op Time vs images · {card}"), "Op Time vs images"),
                   ("ratio", plots.ratio_figure(rows, ref, f"speed-up over {ref} · {card}"), f"speed-up over {ref}"),
                   ("roofline", plots.roofline_figure(rows, ceilings, precisions, f"roofline · {card}", arithmetic),
                    "roofline")]
        blocks.append(Heading(3, "Plots"))
        if ceilings is None:
            blocks.append(Para("The roofline has no roof: these results files carry no measured ceilings "
                               "(`convbench bench --json` records them)."))
        elif ceilings.get("doubt"):
            blocks.append(Para(f"The roof is doubtful: the ceilings were measured on a busy or noisy machine "
                               f"({ceilings['doubt']}); they may be too low, and every floor and % of floor from "
                               "them too high."))
        for kind, fig, alt in figures:
            name = f"{kind}-{slug(card)}.png"
            plots.save(fig, out_dir / name)
            written.append(out_dir / name)
            blocks.append(Image(name, f"{alt} · {card}"))

    blocks.append(Heading(2, "Implementations"))
    impl_names = _impl_order(files)
    for name in impl_names:
        blocks += impl_blocks(name, files, groups, [p for p in profiles if p.get("impl") == name])

    orphans = [p for p in profiles if p.get("impl") not in impl_names]
    if orphans:
        blocks.append(Heading(2, "Profiles"))
        for p in orphans:
            blocks += [Heading(3, str(p.get("impl")))] + profile_blocks(p)

    md, page = out_dir / "report.md", out_dir / "report.html"
    outfiles.write_text(md, to_markdown(blocks))
    outfiles.write_text(page, to_html(blocks, "convbench report"))
    return written + [md, page]


def whole_table(files: list[ResultsFile]) -> TableBlock:
    """`convbench run --whole-network --json` rows: the network's time, its floor, and its Correctness."""
    rows = []
    for f in files:
        for r in f.whole:
            rows.append([r["net"], str(r["images"]), r["precision"], _ms(r["network_time_s"]), _ms(r["floor_s"]),
                         "—" if r["x_floor"] is None else f"{r['x_floor']:.2f}x",
                         "—" if r["correctness"] is None else str(r["correctness"]),
                         "—" if r["rel_error_vs_fp64"] is None else f"{r['rel_error_vs_fp64']:.1e}", source(f)])
    return TableBlock(["net", "images", "arithmetic", "network ms", "floor ms", "x floor", "Correctness",
                       "rel. error vs fp64", "file"], rows, right=(1, 3, 4, 5, 6, 7))


def _versions(env: dict) -> str:
    keys = ("gpu", "driver", "cuda", "cudnn", "torch", "cupy", "triton", "numba")
    return ", ".join(f"{k} {env[k]}" for k in keys if env.get(k) not in (None, ""))


def _impl_order(files: list[ResultsFile]) -> list[str]:
    present = {r["impl"] for f in files for r in f.layers}
    known = [i.name for i in all_impls() if i.name in present]
    return known + sorted(present - set(known))


def leaderboard_table(board) -> TableBlock:
    rows = []
    for rank, e in enumerate(board.entries, 1):
        speed = board.speedup(e)
        rows.append([str(rank) if e.complete else f"({rank})", e.impl + ("" if e.precision == "fp32" else f" [{e.precision}]"),
                     *(_ms(e.per_net_s.get(n)) for n in board.nets), _ms(e.total_s),
                     "—" if speed is None else f"{speed:.2f}x",
                     "—" if e.max_rel_error is None else f"{e.max_rel_error:.1e}"])
    for impl, why in board.left_out.items():
        rows.append(["—", impl, *("" for _ in board.nets), "", "", f"not ranked: {why}"])
    header = ["rank", "impl", *(f"{n} ms" for n in board.nets), "Σ ms", f"vs {board.reference}", "verify max err"]
    return TableBlock(header, rows, right=tuple(range(2, 4 + len(board.nets))))


def impl_blocks(name: str, files: list[ResultsFile], groups: dict[str, list[ResultsFile]], profiles: list[dict]) -> list:
    doc, kernel, header = describe(name)
    blocks: list = [Heading(3, name), Code(doc)]
    if kernel:
        blocks += [Para(f"Kernel `impls/{kernel}`:"), Code(header or "(no header comment)")]
    sizes = sorted(set(COURSE_SIZES) | {r["images"] for f in files for r in f.layers if r["impl"] == name})
    rows = []
    for card, group in groups.items():
        sums = [s for s in totals(merged_layers(group), group[0].reference) if s["impl"] == name]
        for net in dict.fromkeys(s["net"] for s in sums):
            by_size = {s["images"]: s for s in sums if s["net"] == net}
            # the verify record of the file these numbers come from (the newest one that measured them)
            src = next(f for f in group if any(r["impl"] == name and r["net"] == net for r in f.layers))
            v = "not recorded" if not src.verify or name not in src.verify else (
                ("ok" if src.verified(name) else "FAIL")
                + (f" ({src.max_error(name):.1e})" if src.max_error(name) is not None else ""))
            rows.append([card, net, *(_ms(by_size[n]["op_time_s"]) if n in by_size else "—" for n in sizes),
                         f"{v}, {source(src)}"])
    if rows:
        blocks.append(TableBlock(["card", "net", *(f"{n} images (ms)" for n in sizes), "verify"], rows,
                                 right=tuple(range(2, 2 + len(sizes)))))
    for p in profiles:
        blocks += profile_blocks(p)
    return blocks
