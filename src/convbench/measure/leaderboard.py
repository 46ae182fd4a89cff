"""The leaderboard: the course's rule applied to results files.

The course ranked teams by the sum of the Op Times of the network's conv layers at 10000 images, and only
implementations that produced the right answer were ranked. Here:

- one board per card (a GPU model, or a CPU model): times from different machines are not comparable;
- only VERIFIED implementations (the file's verify record says ok; a file with no verify record ranks nothing);
- the score is Σ Op Time of the conv layers at the chosen batch (default 10000), per network, and the rank is by
  its sum over the board's networks (or over one network with `--net`, the course's exact rule); an
  implementation not measured on every network of its board ranks after the complete ones;
- reduced-precision implementations (tf32, fp16, ...) are ranked, and marked with their precision;
- where several files measured the same implementation on the same card, network and batch, the newest verified
  one counts (unless a newer file records a failed verify: then the implementation is out).

Without `--results`, the files are those of the newest run of each card under results/ (measure/results.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from convbench.measure.results import REFERENCE, ResultsFile, by_card, totals


@dataclass
class Entry:
    impl: str
    precision: str
    per_net_s: dict[str, float]  # net -> Σ Op Time of its conv layers
    complete: bool
    max_rel_error: float | None
    source: str

    @property
    def total_s(self) -> float:
        return sum(self.per_net_s.values())


@dataclass
class Board:
    card: str
    device: str
    images: int
    nets: list[str]
    reference: str
    entries: list[Entry]  # ranked
    left_out: dict[str, str] = field(default_factory=dict)  # impl (or 'impl on net') -> why it is not ranked

    def speedup(self, entry: Entry) -> float | None:
        """The reference's Σ over the same networks divided by the entry's (> 1: faster than the library)."""
        ref = next((e for e in self.entries if e.impl == self.reference), None)
        nets = [n for n in entry.per_net_s if ref and n in ref.per_net_s]
        if not ref or not nets:
            return None
        return sum(ref.per_net_s[n] for n in nets) / sum(entry.per_net_s[n] for n in nets)


def source(f: ResultsFile) -> str:
    """A file as the boards name it: its run folder and its name."""
    return f"{f.path.parent.name}/{f.path.name}"


def pick(group: list[ResultsFile], impl: str, net: str, images: int) -> tuple[ResultsFile | None, str]:
    """The file whose measurement of (impl, net, images) counts: the newest verified one, unless a newer file's
    verify says the implementation failed (a fix that broke it must not hide behind old numbers). Returns (file, "")
    or (None, why not)."""
    measured = [f for f in group if any(r["impl"] == impl and r["net"] == net and r["images"] == images
                                        for r in f.layers)]  # newest first
    for f in measured:
        if f.verify and impl in f.verify:
            return (f, "") if f.verified(impl) else (None, f"failed verify in {f.path.name}")
    return None, "no verify record"


def boards(files: list[ResultsFile], images: int = 10000, net: str | None = None) -> tuple[list[Board], list[str]]:
    """The boards, and notes on what could not be ranked (a card with no results at that batch size)."""
    out, notes = [], []
    for card, group in by_card([f for f in files if f.kind == "bench"]).items():  # whole-network files rank nothing
        rows = [r for f in group for r in f.layers if r["images"] == images and (net is None or r["net"] == net)]
        if not rows:
            have = sorted({r["images"] for f in group for r in f.layers if net is None or r["net"] == net})
            notes.append(f"{card}: no results at {images} images" + (f" on {net}" if net else "")
                         + (f" (have {', '.join(map(str, have))}; try --images {have[-1]})" if have else ""))
            continue
        device = group[0].device
        reference = REFERENCE[device]
        impls = list(dict.fromkeys(r["impl"] for r in rows))
        nets_all = list(dict.fromkeys(r["net"] for r in rows))
        chosen: dict[str, dict[str, ResultsFile]] = {}
        left_out: dict[str, str] = {}
        for impl in impls:
            why_not = {}
            for n in nets_all:
                if not any(r["impl"] == impl and r["net"] == n for r in rows):
                    continue
                f, why = pick(group, impl, n, images)
                if f is not None:
                    chosen.setdefault(impl, {})[n] = f
                else:
                    why_not[n] = why
            if impl not in chosen:
                left_out[impl] = "; ".join(dict.fromkeys(why_not.values()))
            else:
                left_out.update({f"{impl} on {n}": why for n, why in why_not.items()})
        if not chosen:
            notes.append(f"{card}: nothing verified to rank at {images} images ("
                         + ", ".join(f"{i}: {why}" for i, why in left_out.items()) + ")")
            continue
        nets = [n for n in nets_all if any(n in by_net for by_net in chosen.values())]
        entries = []
        for impl, by_net in chosen.items():
            per_net = {}
            for n, f in by_net.items():
                per_net[n] = next(s["op_time_s"] for s in totals(f.layers, reference)
                                  if s["impl"] == impl and s["net"] == n and s["images"] == images)
            srcs = list(by_net.values())
            errors = [e for e in (f.max_error(impl) for f in srcs) if e is not None]
            entries.append(Entry(impl, srcs[0].precision.get(impl, "fp32"), per_net, set(per_net) == set(nets),
                                 max(errors) if errors else None, ", ".join(sorted({source(f) for f in srcs}))))
        entries.sort(key=lambda e: (not e.complete, e.total_s))
        out.append(Board(card, device, images, nets, reference, entries, left_out))
    return out, notes
