"""Reading results files, whatever wrote them, into one shape for the leaderboard, the plots and the report.

Three writers exist, and old files stay valid:

    bench    `convbench bench --json` ("format": "convbench-bench/1"): per-layer rows with every unit in the key,
             the ceilings, and a quick verify of each implementation
    ladder   scripts/ladder.py (results/ladder-*.json): "timing"[net][images][impl] = per-layer Op Times (s), and a
             "verify" record per implementation (ok, max_rel_error)
    cpu      scripts/cpu_optimes.py (results/cpu-*.json): "rows" of per-layer Op Times at one batch size, no verify

Each becomes a `ResultsFile` with bench's per-layer rows; FLOPs and bytes the writer did not record are computed
from the network's spec (they depend only on the shapes). A file that is not JSON, or not one of these, is a
UsageError that names the file: a report must not be built from half of what was asked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from convbench.errors import UsageError
from convbench.impls.registry import all_impls
from convbench.network.spec import NETWORKS

BENCH_FORMAT = "convbench-bench/1"
REFERENCE = {"cpu": "onednn", "cuda": "cudnn"}
COURSE_SIZES = (100, 1000, 10000)


@dataclass
class ResultsFile:
    path: Path
    kind: str  # bench | ladder | cpu
    device: str  # cpu | cuda
    card: str  # GPU name, or CPU model
    environment: dict
    reference: str
    verify: dict[str, dict] | None  # impl -> {"ok": bool, "max_rel_error": float | None}; None: not recorded
    precision: dict[str, str]
    arithmetic: dict[str, str]  # impl -> what its FLOPs ran on (ConvImpl.ceiling_arithmetic)
    layers: list[dict]  # bench's per-layer rows (impl, net, images, layer, op_time_s, flop, bytes, ...)
    ceilings: dict | None

    @property
    def date(self) -> str:
        return str(self.environment.get("date", ""))

    def verified(self, impl: str) -> bool:
        return bool(self.verify and self.verify.get(impl, {}).get("ok"))

    def max_error(self, impl: str) -> float | None:
        v = (self.verify or {}).get(impl, {}).get("max_rel_error")
        try:
            return float(v) if v is not None else None
        except (TypeError, ValueError):
            return None


def default_files(root: Path | None = None) -> list[Path]:
    folder = (root or Path.cwd()) / "results"
    files = sorted(folder.glob("*.json"))
    if not files:
        raise UsageError(f"no results files: none given with --results and no results/*.json in {folder.parent}; "
                         "pass --results FILE (a `convbench bench --json` or scripts/ladder.py JSON)")
    return files


def load_all(paths: list[str] | list[Path] | None) -> list[ResultsFile]:
    return [load(Path(p)) for p in (paths or default_files())]


def load(path: Path) -> ResultsFile:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise UsageError(f"results file {str(path)!r} does not exist; check the path") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read results file {str(path)!r} ({e.__class__.__name__}); pass a JSON results file") from None
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise UsageError(f"results file {str(path)!r} is not valid JSON ({e}); rewrite it with "
                         "`convbench bench --json` or drop it from --results") from None
    try:
        if isinstance(doc, dict) and doc.get("format") == BENCH_FORMAT:
            return _bench(path, doc)
        if isinstance(doc, dict) and {"timing", "verify", "environment"} <= doc.keys():
            return _ladder(path, doc)
        if isinstance(doc, dict) and {"rows", "images", "environment"} <= doc.keys():
            return _cpu(path, doc)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
        raise UsageError(f"results file {str(path)!r} is malformed ({e.__class__.__name__}: {e}); "
                         "rewrite it with `convbench bench --json` or drop it from --results") from None
    raise UsageError(f"{str(path)!r} is not a convbench results file (bench, ladder or cpu_optimes JSON); "
                     "drop it from --results")


def _precisions(names) -> dict[str, str]:
    known = {i.name: i.precision for i in all_impls()}
    return {n: known.get(n, "fp32") for n in names}


def _arithmetics(precision: dict[str, str], recorded: dict[str, str] | None = None) -> dict[str, str]:
    """What each impl's FLOPs ran on: as the file recorded it, else as the impl declares it today, else its
    precision (files from before `arithmetic` existed)."""
    known = {i.name: i.ceiling_arithmetic for i in all_impls()}
    recorded = recorded or {}
    return {n: recorded.get(n) or known.get(n) or p for n, p in precision.items()}


def spec_layer_rows(net: str, images: int, impl: str, op_times: list[float]) -> list[dict]:
    """Per-layer rows for a writer that recorded only Op Times: shapes, FLOPs and bytes from the network spec."""
    spec = NETWORKS[net]
    convs = spec.conv_layers
    if len(op_times) != len(convs):
        raise ValueError(f"{net} has {len(convs)} conv layers but {impl} has {len(op_times)} times")
    rows = []
    for info, t in zip(convs, op_times):
        C, H, W = info.in_shape
        M, Ho, Wo = info.out_shape
        K = H - Ho + 1
        flop = info.flops * images
        nbytes = 4 * (images * C * H * W + M * C * K * K + images * M * Ho * Wo)
        rows.append({"impl": impl, "net": net, "images": images, "layer": info.name,
                     "shape_BCHWMK": [images, C, H, W, M, K], "flop": flop, "bytes": nbytes,
                     "intensity_flop_per_byte": flop / nbytes, "op_time_s": float(t), "layer_time_s": None,
                     "gflop_per_s": flop / float(t) / 1e9, "gbyte_per_s": nbytes / float(t) / 1e9})
    return rows


def _bench(path: Path, doc: dict) -> ResultsFile:
    device = doc["device"]
    precision = {n: v["precision"] for n, v in doc["impls"].items()}
    arithmetic = _arithmetics(precision, {n: v.get("arithmetic") for n, v in doc["impls"].items()})
    return ResultsFile(path, "bench", device, doc.get("card") or _card(doc["environment"], device), doc["environment"],
                       doc["reference"], doc["verify"], precision, arithmetic, list(doc["layers"]), doc.get("ceilings"))


def _ladder(path: Path, doc: dict) -> ResultsFile:
    rows = []
    for net, by_size in doc["timing"].items():
        for size, by_impl in by_size.items():
            for impl, times in by_impl.items():
                rows += spec_layer_rows(net, int(size), impl, times)
    names = {r["impl"] for r in rows} | set(doc["verify"])
    precision = _precisions(names)
    return ResultsFile(path, "ladder", "cuda", _card(doc["environment"], "cuda"), doc["environment"], "cudnn",
                       doc["verify"], precision, _arithmetics(precision), rows, None)


def _cpu(path: Path, doc: dict) -> ResultsFile:
    rows = []
    for r in doc["rows"]:
        rows += spec_layer_rows(r["net"], int(doc["images"]), r["impl"], r["op_times_s"])
    precision = _precisions({r["impl"] for r in rows})
    return ResultsFile(path, "cpu", "cpu", _card(doc["environment"], "cpu"), doc["environment"], "onednn", None,
                       precision, _arithmetics(precision), rows, None)


def _card(env: dict, device: str) -> str:
    return str(env.get("gpu") if device == "cuda" and env.get("gpu") else env.get("cpu", "unknown CPU"))


def totals(rows: list[dict], reference: str) -> list[dict]:
    """Σ over the conv layers of each (impl, net, images): the course's per-network number."""
    sums: dict[tuple, dict] = {}
    for r in rows:
        key = (r["impl"], r["net"], r["images"])
        s = sums.setdefault(key, {"impl": r["impl"], "net": r["net"], "images": r["images"], "op_time_s": 0.0,
                                  "layer_time_s": 0.0, "floor_s": 0.0, "memory_floor_s": 0.0, "flop": 0, "bytes": 0})
        for field in ("op_time_s", "layer_time_s", "floor_s", "memory_floor_s", "flop", "bytes"):
            if s[field] is not None:
                s[field] = None if r.get(field) is None else s[field] + r[field]
    for (impl, net, images), s in sums.items():
        base = sums.get((reference, net, images))
        s["gflop_per_s"] = s["flop"] / s["op_time_s"] / 1e9
        s["of_floor_pct"] = 100.0 * s["floor_s"] / s["op_time_s"] if s["floor_s"] is not None else None
        s["of_memory_floor_pct"] = (100.0 * s["memory_floor_s"] / s["op_time_s"] if s["memory_floor_s"] is not None
                                    else None)
        s["speedup_vs_reference_x"] = base["op_time_s"] / s["op_time_s"] if base else None
    return list(sums.values())


def by_card(files: list[ResultsFile]) -> dict[str, list[ResultsFile]]:
    """Files grouped by the card their numbers came from, newest file first within a card."""
    groups: dict[str, list[ResultsFile]] = {}
    for f in files:
        groups.setdefault(f.card, []).append(f)
    return {card: sorted(fs, key=lambda f: f.date, reverse=True) for card, fs in groups.items()}


def merged_layers(files: list[ResultsFile]) -> list[dict]:
    """The per-layer rows of several files of one card; where two files measured the same (impl, net, images),
    the newest file's numbers count (files must be newest first, as by_card gives them)."""
    seen, rows = set(), []
    for f in files:
        keys = {(r["impl"], r["net"], r["images"]) for r in f.layers}
        rows += [r for r in f.layers if (r["impl"], r["net"], r["images"]) not in seen]
        seen |= keys
    return rows
