"""`convbench leaderboard`: the course's ranking (measure/leaderboard.py) of results files, one board per card
(default: the newest run of each card under results/)."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.text import Text

from convbench.core import ui
from convbench.core.errors import UsageError
from convbench.core.spec import get_network
from convbench.core.tables import NAME, FitTable
from convbench.measure import results
from convbench.measure.leaderboard import boards


def _ms(s: float | None, digits: int = 3) -> str:
    """Milliseconds to `digits` significant digits (0.595, 2.51, 10.7, 147): narrow columns, one unit."""
    if s is None:
        return "-"
    ms = s * 1e3
    return f"{ms:.{max(0, digits - len(str(int(ms))))}f}" if ms >= 1 else f"{ms:.{digits}f}"


def cmd_leaderboard(args) -> int:
    net = get_network(args.net).name if args.net else None
    files = results.load_all(args.results)
    found, notes = boards(files, args.images, net)
    if not found:  # one line: the notes are the reason
        raise UsageError(f"nothing to rank in {len(files)} results file(s): {'; '.join(notes)}; rank files with "
                         "verify records (`convbench bench --json bench.json` writes one) or pick another --images")
    for note in notes:
        ui.note(note)
    console = Console(highlight=False)
    for board in found:
        table = FitTable(title=f"{board.card} · Σ Op Time (ms) of the conv layers at {board.images} images "
                               f"({'network ' + net if net else 'summed over ' + ', '.join(board.nets)}) · verified only",
                         style={"box": box.SIMPLE_HEAD, "pad_edge": False, "collapse_padding": True,
                                "show_edge": False})
        table.add_column("#")
        table.add_column("impl", NAME, key=True)
        table.add_column("prec.", NAME)
        for n in board.nets:
            table.add_column(n)
        table.add_column("Σ")
        table.add_column(f"x {board.reference}", short="x", means=f"speed-up over {board.reference}")
        table.add_column("err")
        for rank, e in enumerate(board.entries, 1):
            speed = board.speedup(e)
            prec = e.precision if e.precision == "fp32" else f"[yellow]{e.precision}*"
            table.add_row(str(rank) if e.complete else f"({rank})", Text(e.impl), prec,
                          *(_ms(e.per_net_s.get(n)) for n in board.nets), f"[bold]{_ms(e.total_s, 4)}",
                          "-" if speed is None else f"{speed:.2f}x",
                          "-" if e.max_rel_error is None else f"{e.max_rel_error:.0e}")
        captions = [f"sources: {', '.join(sorted({e.source for e in board.entries}))}"]
        if any(e.precision != "fp32" for e in board.entries):
            captions.append("*: reduced precision")
        captions.append("err: the largest relative error verify measured against float64")
        if any(not e.complete for e in board.entries):
            captions.append("(n): not measured on every network, ranked after the complete ones")
        if board.left_out:
            captions.append("not ranked: " + ", ".join(f"{i} ({why})" for i, why in board.left_out.items()))
        table.caption = "\n".join(captions)
        console.print(table)
    return 0
