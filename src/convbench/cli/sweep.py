"""`convbench sweep --impl NAME --net NET`: time an implementation's launch parameters per layer, keep the best."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from convbench.cli.devices import require_cuda, resolve
from convbench.core.errors import UsageError
from convbench.core.gpu import tuning
from convbench.core.spec import get_network
from convbench.measure.sweep import sweep


def cmd_sweep(args) -> int:
    # every implementation with launch parameters is a GPU kernel: without a GPU there is nothing to sweep
    require_cuda("sweep", "or list what runs here with `convbench impls`")
    impl, device = resolve(args.impl, None)
    if device != "cuda":
        raise UsageError(f"sweep times GPU implementations and {impl.name} runs on {device}; pick a gpu-* impl")
    if not impl.tunables:
        raise UsageError(f"implementation {impl.name} has no launch parameters to sweep; pick one that lists tunables in `convbench impls`")
    spec = get_network(args.net)
    results = sweep(impl, spec, args.batch, device, args.reps)
    console = Console(highlight=False)
    for layer, trials in results.items():
        good = [t for t in trials if t.seconds is not None]
        best = min(good, key=lambda t: t.seconds) if good else None
        table = Table(title=f"{impl.name} · {spec.name} {layer} · batch {args.batch} · median of {args.reps} runs")
        table.add_column("configuration")
        table.add_column("Op Time (ms)", justify="right")
        table.add_column("vs best", justify="right")
        for t in sorted(trials, key=lambda t: (t.seconds is None, t.seconds or 0)):
            cfg = " ".join(f"{k}={v}" for k, v in t.config.items())
            if t.seconds is None:
                table.add_row(cfg, "-", t.note)
            else:
                table.add_row(("* " if t is best else "  ") + cfg, f"{t.seconds * 1e3:.4f}", f"{t.seconds / best.seconds:.2f}x")
        console.print(table)
    console.print(f"choices recorded in {tuning.user_file()}")
    return 0
