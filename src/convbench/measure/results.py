"""Results: the run folders under results/ and the files `report` and `leaderboard` read from them.

A run folder (results/<run>/) holds one measurement run: a `manifest.json` (card, versions, commit, command, date,
device kind; `results` names the folder's results files) and the run's files. Two kinds of results file are read:

    bench    `convbench bench --json` ("format": "convbench-bench/1"): per-layer rows with every unit in the key,
             the ceilings (held to bounds.BOUNDS), and a quick verify of each implementation
    whole    `convbench run --whole-network --json` ("mode": "whole-network"): one document, or a list of them (one
             per network); the card and date come from the manifest beside the file

Without files named (`--results`), the newest run of each card that has results files counts (default_files). A
file that is not JSON, or not one of these, is a UsageError that names the file: a report must not be built from
half of what was asked.
"""

from __future__ import annotations

import json
import math
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from convbench.core.errors import UsageError
from convbench.impls import catalog
from convbench.measure.bounds import out_of_bounds

BENCH_FORMAT = "convbench-bench/1"
WHOLE_MODE = "whole-network"
MANIFEST = "manifest.json"
REFERENCE = {"cpu": "onednn", "cuda": "cudnn"}
COURSE_SIZES = (100, 1000, 10000)


@dataclass
class ResultsFile:
    path: Path
    kind: str  # bench | whole
    device: str  # cpu | cuda
    card: str  # GPU name, or CPU model
    environment: dict  # the bench file's own record; for a whole-network file, its run's manifest
    reference: str
    verify: dict[str, dict] | None  # impl -> {"ok": bool, "max_rel_error": float | None}; None: not recorded
    precision: dict[str, str]
    arithmetic: dict[str, str]  # impl -> what its FLOPs ran on (ConvImpl.ceiling_arithmetic)
    layers: list[dict]  # bench's per-layer rows (impl, net, images, layer, op_time_s, flop, bytes, ...)
    ceilings: dict | None
    whole: list[dict] = field(default_factory=list)  # whole-network runs (net, images, network_time_s, ...)

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


# ------------------------------------------------------------------------------------------------ run folders


@dataclass(frozen=True)
class Run:
    folder: Path
    manifest: dict

    @property
    def card(self) -> str:
        return str(self.manifest.get("card") or "unknown card")

    @property
    def date(self) -> str:
        return str(self.manifest.get("date") or "")

    def results_files(self) -> list[Path]:
        """The files its manifest names under `results`; without that list, every JSON file but the manifest."""
        named = self.manifest.get("results")
        if named is None:
            return sorted(p for p in self.folder.glob("*.json") if p.name != MANIFEST)
        return [self.folder / name for name in named]


def read_manifest(folder: Path) -> dict | None:
    """A run folder's manifest, None where it has none; one that is not a JSON object is a UsageError."""
    path = folder / MANIFEST
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise UsageError(f"{str(path)!r} is not a readable JSON manifest ({e.__class__.__name__}); fix it or move "
                         "the folder out of results/") from None
    if not isinstance(doc, dict):
        raise UsageError(f"{str(path)!r} is not a manifest (a JSON object with card, date, results); fix it")
    named = doc.get("results")
    if named is not None and not (isinstance(named, list) and all(isinstance(n, str) and n for n in named)):
        raise UsageError(f"{str(path)!r}: results is {_describe(named)}, not a list of file names; fix the manifest")
    for key in ("card", "date"):
        if doc.get(key) is not None and not isinstance(doc[key], str):
            raise UsageError(f"{str(path)!r}: {key} is {_describe(doc[key])}, not a string; fix the manifest")
    return doc


def runs(root: Path | None = None) -> list[Run]:
    """Every run folder under ROOT/results (folders with a manifest.json), oldest first."""
    folder = (root or Path.cwd()) / "results"
    found = []
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []:
        manifest = read_manifest(sub)
        if manifest is not None:
            found.append(Run(sub, manifest))
    return sorted(found, key=lambda r: (r.date, r.folder.name))


def newest_runs(root: Path | None = None) -> dict[str, Run]:
    """card -> its newest run (by the manifest's date) that has results files."""
    newest: dict[str, Run] = {}
    for run in runs(root):  # oldest first: a later one replaces an earlier
        if run.results_files():
            newest[run.card] = run
    return newest


def default_files(root: Path | None = None) -> list[Path]:
    """The results files of the newest run of each card under ROOT/results (ROOT: the current folder)."""
    base = root or Path.cwd()
    files = [p for run in newest_runs(base).values() for p in run.results_files()]
    if not files:
        raise UsageError(f"no results files: none given with --results, and no run folder with a manifest.json "
                         f"naming results under {base / 'results'}; pass --results FILE (write one with "
                         "`convbench bench --json bench.json`)")
    return files


def load_all(paths: list[str] | list[Path] | None) -> list[ResultsFile]:
    return [load(Path(p)) for p in (paths or default_files())]


# ------------------------------------------------------------------------------------------------ one file


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
                         f"`convbench bench --json {shlex.quote(str(path))}` or drop it from --results") from None
    try:
        if isinstance(doc, dict) and doc.get("format") == BENCH_FORMAT:
            _check_bench(doc)
            return _bench(path, doc)
        whole = doc if isinstance(doc, list) else [doc]
        if whole and all(isinstance(d, dict) and d.get("mode") == WHOLE_MODE for d in whole):
            for i, d in enumerate(whole):
                _check_fields(d, WHOLE_FIELDS, f"[{i}]." if isinstance(doc, list) else "")
            return _whole(path, whole)
    except _Malformed as e:
        raise UsageError(f"results file {str(path)!r} is malformed: {e}; rewrite it with `convbench bench --json "
                         f"{shlex.quote(str(path))}` or drop it from --results") from None
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
        raise UsageError(f"results file {str(path)!r} is malformed ({e.__class__.__name__}: {e}); "
                         f"rewrite it with `convbench bench --json {shlex.quote(str(path))}` or drop it from "
                         "--results") from None
    raise UsageError(f"{str(path)!r} is not a convbench results file (`convbench bench --json`, or "
                     "`convbench run --whole-network --json`); drop it from --results")


# ------------------------------------------------------------------------------------------------ validation


class _Malformed(Exception):
    """A field of a results file that is missing or of the wrong type or value: the message names it."""


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _describe(v) -> str:
    text = json.dumps(v) if _is_number(v) or v is None or isinstance(v, (str, bool)) else type(v).__name__
    return text if len(text) <= 40 else text[:37] + "..."


# field -> (what it must be, the test, required)
_TIME = ("a positive finite number of seconds", lambda v: _is_number(v) and math.isfinite(v) and v > 0)
_TIME_OR_NONE = ("a positive finite number of seconds or null",
                 lambda v: v is None or (_is_number(v) and math.isfinite(v) and v > 0))
_COUNT = ("a whole number >= 1", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1)
_AMOUNT = ("a finite number >= 0", lambda v: _is_number(v) and math.isfinite(v) and v >= 0)
_NUMBER_OR_NONE = ("a finite number or null", lambda v: v is None or (_is_number(v) and math.isfinite(v)))
_TEXT = ("a non-empty string", lambda v: isinstance(v, str) and v != "")
_OBJECT = ("a JSON object", lambda v: isinstance(v, dict))
_LIST = ("a JSON list", lambda v: isinstance(v, list))
_BOOL = ("true or false", lambda v: isinstance(v, bool))

BENCH_FIELDS = {"device": (("cpu or cuda", lambda v: v in ("cpu", "cuda")), True), "reference": (_TEXT, True),
                "environment": (_OBJECT, True), "impls": (_OBJECT, True), "verify": (_OBJECT, True),
                "layers": (_LIST, True), "ceilings": (("a JSON object or null", lambda v: v is None or isinstance(v, dict)),
                                                      False)}
ROW_FIELDS = {"impl": (_TEXT, True), "net": (_TEXT, True), "images": (_COUNT, True), "layer": (_TEXT, True),
              "op_time_s": (_TIME, True), "layer_time_s": (_TIME_OR_NONE, False), "flop": (_AMOUNT, True),
              "bytes": (_AMOUNT, True), "intensity_flop_per_byte": (_AMOUNT, False), "floor_s": (_NUMBER_OR_NONE, False),
              "memory_floor_s": (_NUMBER_OR_NONE, False), "arithmetic": (_TEXT, False)}
IMPL_FIELDS = {"precision": (_TEXT, True)}
VERIFY_FIELDS = {"ok": (_BOOL, True), "max_rel_error": (_NUMBER_OR_NONE, False)}
_RATE = ("a positive finite number", _TIME[1])
_RATE_OR_NONE = ("a positive finite number or null", _TIME_OR_NONE[1])
CEILING_FIELDS = {"copy_bytes_per_s": (_RATE, True), "fp32_flop_per_s": (_RATE, True),
                  **{f"{p}_flop_per_s": (_RATE_OR_NONE, False) for p in ("tf32", "fp16", "bf16")}}
WHOLE_FIELDS = {"net": (_TEXT, True), "images": (_COUNT, True), "network_time_s": (_TIME, True),
                "floor_s": (_NUMBER_OR_NONE, False), "x_floor": (_NUMBER_OR_NONE, False),
                "correctness": (_NUMBER_OR_NONE, False), "rel_error_vs_fp64": (_NUMBER_OR_NONE, False)}


def _check_fields(doc, fields: dict, where: str) -> None:
    if not isinstance(doc, dict):
        raise _Malformed(f"{where.rstrip('.') or 'the document'} is {_describe(doc)}, not a JSON object")
    for name, ((must, test), required) in fields.items():
        if name not in doc:
            if required:
                raise _Malformed(f"{where}{name} is missing")
            continue
        if not test(doc[name]):
            raise _Malformed(f"{where}{name} is {_describe(doc[name])}, not {must}")


def _check_bench(doc: dict) -> None:
    """The schema of a bench file, as far as leaderboard and report read it: every time finite and positive."""
    _check_fields(doc, BENCH_FIELDS, "")
    for name, info in doc["impls"].items():
        _check_fields(info, IMPL_FIELDS, f"impls.{name}.")
    for name, v in doc["verify"].items():
        _check_fields(v, VERIFY_FIELDS, f"verify.{name}.")
    if doc.get("ceilings") is not None:
        _check_fields(doc["ceilings"], CEILING_FIELDS, "ceilings.")
        wrong = out_of_bounds(doc["ceilings"], doc["device"])  # no machine has them: every floor would be wrong
        if wrong:
            raise _Malformed(f"ceilings.{wrong}")
    for i, row in enumerate(doc["layers"]):
        _check_fields(row, ROW_FIELDS, f"layers[{i}].")
        if row["impl"] not in doc["impls"]:
            raise _Malformed(f"layers[{i}].impl {row['impl']!r} is not listed under impls")


def _arithmetics(precision: dict[str, str], recorded: dict[str, str] | None = None) -> dict[str, str]:
    """What each impl's FLOPs ran on: as the file recorded it, else as the impl declares it today, else its
    precision (files from before `arithmetic` existed)."""
    known = {i.name: i.arithmetic for i in catalog.declared()}  # what ConvImpl.ceiling_arithmetic gives, without torch
    recorded = recorded or {}
    return {n: recorded.get(n) or known.get(n) or p for n, p in precision.items()}


def _bench(path: Path, doc: dict) -> ResultsFile:
    device = doc["device"]
    precision = {n: v["precision"] for n, v in doc["impls"].items()}
    arithmetic = _arithmetics(precision, {n: v.get("arithmetic") for n, v in doc["impls"].items()})
    env = doc["environment"]
    card = doc.get("card") or str(env.get("gpu") if device == "cuda" and env.get("gpu") else env.get("cpu", "unknown CPU"))
    return ResultsFile(path, "bench", device, card, env, doc["reference"], doc["verify"], precision, arithmetic,
                       list(doc["layers"]), doc.get("ceilings"))


def _whole(path: Path, docs: list[dict]) -> ResultsFile:
    """Whole-network runs: the file carries no machine record, so its run's manifest gives card, date, commit."""
    manifest = read_manifest(path.parent) or {}
    rows = [{"net": d["net"], "images": int(d["images"]), "precision": d.get("precision", ""),
             "network_time_s": float(d["network_time_s"]), "floor_s": d.get("floor_s"), "x_floor": d.get("x_floor"),
             "correctness": d.get("correctness"), "rel_error_vs_fp64": d.get("rel_error_vs_fp64")} for d in docs]
    env = {k: manifest[k] for k in ("date", "commit", "driver", "cuda", "cudnn", "torch", "cupy", "triton")
           if manifest.get(k) is not None}
    if manifest.get("commands"):
        env["command"] = "; ".join(map(str, manifest["commands"]))
    return ResultsFile(path, "whole", "cuda", str(manifest.get("card") or "unknown GPU"), env, REFERENCE["cuda"],
                       None, {}, {}, [], None, rows)


# ------------------------------------------------------------------------------------------------ sums and groups


def totals(rows: list[dict], reference: str) -> list[dict]:
    """Σ over the conv layers of each (impl, net, images): the course's per-network number."""
    sums: dict[tuple, dict] = {}
    for r in rows:
        key = (r["impl"], r["net"], r["images"])
        s = sums.setdefault(key, {"impl": r["impl"], "net": r["net"], "images": r["images"], "op_time_s": 0.0,
                                  "layer_time_s": 0.0, "floor_s": 0.0, "memory_floor_s": 0.0, "flop": 0, "bytes": 0})
        for fld in ("op_time_s", "layer_time_s", "floor_s", "memory_floor_s", "flop", "bytes"):
            if s[fld] is not None:
                s[fld] = None if r.get(fld) is None else s[fld] + r[fld]
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
