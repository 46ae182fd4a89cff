"""`convbench leaderboard`: the course's ranking (measure/leaderboard.py) of results files, one board per card
(default: the newest run of each card under results/)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from convbench.core import ui
from convbench.core.errors import UsageError
from convbench.core.spec import get_network
from convbench.measure import results
from convbench.measure.leaderboard import boards


def _ms(s: float | None) -> str:
    return "-" if s is None else f"{s * 1e3:.3f}"


def cmd_leaderboard(args) -> int:
    net = get_network(args.net).name if args.net else None
    files = results.load_all(args.results)
    found, notes = boards(files, args.images, net)
    if not found:  # one line: the notes are the reason
        raise UsageError(f"nothing to rank in {len(files)} results file(s): {'; '.join(notes)}; rank files with "
                         "verify records (`convbench bench --json`) or pick another --images")
    for note in notes:
        ui.note(note)
    console = Console(highlight=False, width=max(120, Console().width))
    for board in found:
        table = Table(title=f"{board.card} · Σ Op Time of the conv layers at {board.images} images "
                            f"({'network ' + net if net else 'summed over ' + ', '.join(board.nets)}) · verified only")
        table.add_column("#", justify="right")
        table.add_column("impl")
        table.add_column("precision")
        for n in board.nets:
            table.add_column(f"{n} ms", justify="right")
        table.add_column("Σ ms", justify="right")
        table.add_column(f"vs {board.reference}", justify="right")
        table.add_column("max rel. err", justify="right")
        for rank, e in enumerate(board.entries, 1):
            speed = board.speedup(e)
            prec = e.precision if e.precision == "fp32" else f"[yellow]{e.precision} (reduced)"
            table.add_row(str(rank) if e.complete else f"({rank})", e.impl, prec,
                          *(_ms(e.per_net_s.get(n)) for n in board.nets), f"[bold]{_ms(e.total_s)}",
                          "-" if speed is None else f"{speed:.2f}x",
                          "-" if e.max_rel_error is None else f"{e.max_rel_error:.1e}")
        captions = [f"sources: {', '.join(sorted({e.source for e in board.entries}))}"]
        if any(not e.complete for e in board.entries):
            captions.append("(n): not measured on every network, ranked after the complete ones")
        if board.left_out:
            captions.append("not ranked: " + ", ".join(f"{i} ({why})" for i, why in board.left_out.items()))
        table.caption = "\n".join(captions)
        console.print(table)
    return 0
