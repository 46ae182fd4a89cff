"""`convbench verify`: the max relative error of each implementation on random shapes; exit 1 on any failure.

Under the table, each failing implementation's first wrong element and its failing shapes, in lines of at most
80 columns broken at spaces only (a number or a shape is never cut); `--json FILE`: every shape's record."""

from __future__ import annotations

import json
import random
import textwrap

from rich.console import Console
from rich.text import Text

from convbench.cli.devices import (
    all_on,
    apply_build_options,
    require_cuda,
    resolve_many,
)
from convbench.core import ui
from convbench.core.tables import NAME, NUMBER, TEXT, FitTable
from convbench.measure import outfiles, problem
from convbench.measure.environment import environment
from convbench.measure.verify import VERIFY_FORMAT, ImplReport, ShapeResult, verify_fused, verify_impl

WIDTH = 80  # the failure lines fit an 80-column terminal, like the table
LISTED = 10  # failing shapes listed per implementation; the rest are counted


def units(n: float) -> str:
    """A wide-range error in at most five characters: 0.296, 4.4, 37.2, 3.1e3, inf (0.01 and below: 0.00)."""
    if n == float("inf"):
        return "inf"
    if n < 999.5:
        return f"{n:.3g}" if n >= 0.01 else "0.00"
    mantissa, exponent = f"{n:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def cmd_verify(args) -> int:
    apply_build_options(args)
    precision = getattr(args, "precision", None) or "fp32"
    if args.impl == "all":
        device = args.device or "cpu"
        if device == "cuda":
            require_cuda()
        impls = all_on(device, precision)
    else:  # one name, or several separated by commas (one device for all)
        impls, device = resolve_many(args.impl, args.device, "--impl", precision)
    json_path = outfiles.check_output_file(args.json, "--json") if args.json else None  # before the slow work
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    shapes = problem.shapes(args.shapes, seed)
    wide_shapes = min(len(shapes), problem.WIDE_SHAPES if args.wide_shapes is None else args.wide_shapes)
    fused = [i for i in impls if i.fused is not None]
    also = (f"; fused ops of {', '.join(i.name for i in fused)} for {len(problem.fused_cases())} activation x pool "
            "cases each" if fused else "")
    ui.note(f"verify: {len(impls)} implementation(s) on {device}, {len(shapes)} shapes each ({wide_shapes} also "
            f"with wide-range inputs), seed {seed} (repeat with --seed {seed}){also}")

    reports = check_all(impls, device, shapes, seed, wide_shapes)
    print_table(reports, device, wide_shapes, bool(fused))
    for rep in reports:
        if not rep.ok:
            print("\n" + "\n".join(failure_lines(rep)))
    # the table's shape column is the worst ordinary error's: where each wide-range maximum came from, apart
    where = [f"{rep.label} {units(w.wide)} on {w.shape}" for rep in reports if (w := rep.worst_wide) is not None]
    if where:
        ui.note("wide, the largest error per implementation: " + "; ".join(where))
    if json_path is not None:
        doc = {"format": VERIFY_FORMAT, "environment": environment(), "device": device, "seed": seed,
               "precision": precision, "shapes": len(shapes), "wide_shapes": wide_shapes,
               "wide_limit": problem.WIDE_LIMIT, "ok": all(rep.ok for rep in reports),
               "impls": [rep.to_json() for rep in reports]}
        outfiles.write_text(json_path, json.dumps(doc, indent=1) + "\n", "--json")
        ui.note(f"wrote {json_path}")
    return 0 if all(rep.ok for rep in reports) else 1


def check_all(impls, device: str, shapes: list[problem.ConvShape], seed: int, wide_shapes: int) -> list[ImplReport]:
    """Each implementation's convolution, then its fused op where it has one, under one progress bar."""
    reports = []
    fused = sum(1 for i in impls if i.fused is not None)
    with ui.progress_bar("verify", (len(impls) + fused) * len(shapes), enabled=ui.err.is_terminal) as bar:
        for impl in impls:
            for check, is_fused in ((verify_impl, False), (verify_fused, True)):
                if is_fused and impl.fused is None:
                    continue
                results = []
                for r in (check(impl, device, shapes, seed) if is_fused else
                          verify_impl(impl, device, shapes, seed, wide_shapes)):
                    results.append(r)
                    bar.advance()
                reports.append(ImplReport(impl, results, is_fused))
    return reports


def print_table(reports: list[ImplReport], device: str, wide_shapes: int, fused: bool) -> None:
    notes = []
    if wide_shapes:
        notes.append("wide: inputs of magnitudes 1e-4..1e4 with random signs, the largest error of an element in units "
                     "of fp32's bound sqrt(n) * 2^-24 * sum |x||k|, n = C*K*K (fp32-accurate impls fail above "
                     f"{problem.WIDE_LIMIT:g})")
    if any(not rep.ok for rep in reports):
        notes.append("FAIL n/m (k NaN): n of m shapes failed, k of them with unwritten (NaN) outputs; (wrote x): the "
                     "call modified its input x (or k); (wide): over the limit on those inputs only")
    table = FitTable(title=f"verify on {device}: ||y - ref|| / ||ref|| against float64, outputs poisoned with NaN"
                           + ("; (fused): pool(act(conv)), the worst case per shape" if fused else ""),
                     caption="; ".join(notes) or None)
    # the shape count is in the note above and in FAIL n/m: no column for it, so the table fits 80 columns
    for col, kind in (("impl", NAME), ("prec.", NAME), ("max error", NUMBER), ("tol.", NUMBER), ("wide", NUMBER),
                      ("result", TEXT), ("worst shape", TEXT)):
        table.add_column(col, kind)
    for rep in reports:
        worst = rep.worst
        fails = rep.failures
        if fails:
            unwritten = sum(1 for f in fails if f.check.unwritten)
            wrote = sorted({n for f in fails if f.check.wrote_inputs for n in f.check.wrote_inputs.split(", ")})
            verdict = (f"[red]FAIL {len(fails)}/{len(rep.results)}" + (f" ({unwritten} NaN)" if unwritten else "")
                       + (f" (wrote {', '.join(wrote)})" if wrote else "")
                       + (" (wide)" if any(f.wide_failed and f.check.ok for f in fails) else ""))
        else:
            verdict = "[green]ok"
        wide = rep.worst_wide
        shown = wide if wide is not None and wide.wide_failed and worst.check.ok else worst  # the shape to look at
        table.add_row(Text(rep.label), rep.impl.precision, f"{worst.check.rel_error:.2e}", f"{rep.impl.tolerance:.0e}",
                      "–" if wide is None else units(wide.wide), verdict, Text(shown.where()))
    Console(highlight=False).print(table)


def _wrap(text: str, indent: str) -> list[str]:
    """text in lines of at most WIDTH columns, broken at spaces only, so that no number or shape is cut; the
    lines after the first indented two more columns."""
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent + "  ",
                         break_long_words=False, break_on_hyphens=False)


def what_went_wrong(r: ShapeResult) -> str:
    """The shown failure: its first wrong element (grade's line), else why it failed without one."""
    if r.first_wrong:
        return f"first wrong element: {r.first_wrong}"
    if r.check.wrote_inputs:
        return f"on {r.where()} the output is right, but the call wrote to its input {r.check.wrote_inputs}"
    if r.wide_failed:
        return (f"on {r.where()} right on ordinary inputs; on wide-range ones an element is off by {units(r.wide)} "
                f"units of fp32's bound (the limit: {problem.WIDE_LIMIT:g})")
    return f"worst: {r.where()}, error {r.check.rel_error:.2e}"  # a fused op's: no element-wise report


def _flags(r: ShapeResult) -> str:
    return ((f" ({r.check.unwritten} NaN)" if r.check.unwritten else "")
            + (f" (wrote {r.check.wrote_inputs})" if r.check.wrote_inputs else "")
            + (f" (wide {units(r.wide)})" if r.wide_failed else ""))


def failure_lines(rep: ImplReport) -> list[str]:
    """A failing implementation under the table: its first wrong element, then its failing shapes with their
    relative errors (the first LISTED, the rest counted)."""
    fails = rep.failures
    lines = [f"{rep.label}: FAIL on {len(fails)} of {len(rep.results)} shapes (tolerance {rep.impl.tolerance:.0e})"]
    lines += _wrap(what_went_wrong(rep.shown_failure), "  ")
    lines.append("  failing shapes, ||y - ref|| / ||ref||:")
    listed = fails[:LISTED]
    column = max(len(r.where()) for r in listed)
    for r in listed:
        lines += _wrap(f"{r.where():<{column}}  {r.check.rel_error:>8.2e}{_flags(r)}", "    ")
    if len(fails) > LISTED:
        lines.append(f"    … and {len(fails) - LISTED} more")
    return lines
