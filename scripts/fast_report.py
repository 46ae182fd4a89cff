"""Issue 4's results file and plot, from one device run's files (scripts/device-fast.sh bench):

    python scripts/fast_report.py results/fast COMMIT [MODE]  -> results/fast/README.md + fast-<card>.png

Reads bench-fast.json (`convbench bench`: Σ conv Op Time per network and batch size, cudnn in the same run, the
floors from the ceilings measured in that run) and whole-<net>.json (scripts/whole_network.py: the whole network
as one CUDA graph against PyTorch eager and torch.compile). Writes the target tables: ratios to cudnn and to the
floor at 100 and 10000 images, the reduced-precision modes against the memory floor, and the whole network.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

CODE_COMMIT = "see notes.md"  # argv[2]
MODE = "bench"  # argv[3]: the device-fast.sh mode that made the files
FP32_ACCURATE = ("gpu-igemm-tc", "gpu-igemm-tc-fp16x3", "gpu-wgmma")  # 3xTF32, 3xFP16, 3xFP16 on wgmma (3xTF32
# on its short reductions, C*K*K < 192: its floor, fp16 / 3 throughout, is stricter than what those layers run on)
MODES = ("gpu-igemm-tc-tf32", "gpu-igemm-tc-fp16", "gpu-igemm-tc-bf16", "gpu-wgmma-fp16", "gpu-wgmma-bf16")


def arithmetic(impl: str) -> str:
    from convbench.impls.registry import get_impl

    return get_impl(impl).ceiling_arithmetic


def card(bench) -> str:
    """H100 / H200 / the GPU's name: the plot's file name."""
    gpu = str(bench["environment"].get("gpu", "gpu"))
    return next((c for c in ("H100", "H200") if c in gpu), gpu.replace(" ", "-"))


def load(folder: Path):
    bench = json.loads((folder / "bench-fast.json").read_text())
    whole = {}
    for f in sorted(folder.glob("whole-*.json")):
        for row in json.loads(f.read_text())["rows"]:
            whole[row["net"], row["images"]] = row
    return bench, whole


def total(bench, net, images, impl):
    return next(r for r in bench["totals"] if r["net"] == net and r["images"] == images and r["impl"] == impl)


def has(bench, impl) -> bool:
    """The impl has a total for every (network, batch size) of the run."""
    got = {(r["net"], r["images"]) for r in bench["totals"] if r["impl"] == impl}
    return all((n, s) in got for n in bench["settings"]["nets"] for s in bench["settings"]["sizes"])


def one_product_floor(bench, net, images, impl) -> float:
    """Σ over the conv layers of max(bytes / copy, FLOPs / one product's rate): the floor if every multiply-add took
    one product (TF32 for 3xTF32, FP16 for 3xFP16) — what the exact-zero skipping reaches at best on our weights
    (conv1: 1 product, conv2: 2)."""
    from convbench.measure.ceilings import THREE_PRODUCT

    c = bench["ceilings"]
    rate = c[f"{THREE_PRODUCT.get(arithmetic(impl), 'tf32')}_flop_per_s"]
    return sum(max(r["bytes"] / c["copy_bytes_per_s"], r["flop"] / rate) for r in bench["layers"]
               if r["net"] == net and r["images"] == images and r["impl"] == "cudnn")


def mark(ok: bool) -> str:
    return "yes" if ok else "**no**"


def report(folder: Path) -> str:
    bench, whole = load(folder)
    env, c = bench["environment"], bench["ceilings"]
    nets, sizes = bench["settings"]["nets"], bench["settings"]["sizes"]
    out = [
        "# Issue 4: fast path, fused layers, whole-network inference — results",
        "",
        f"Card: **{env.get('gpu')}** (driver {env.get('driver')}, CUDA {env.get('cuda')}, cuDNN {env.get('cudnn')}, "
        f"torch {env.get('torch')}, CuPy {env.get('cupy')}), {env.get('date', '')}; code: commit "
        f"{CODE_COMMIT} (the device's checkout reports its base, {env.get('commit')}).",
        f"Command: `bash scripts/device-fast.sh {MODE}` (bench: `{env.get('command', 'convbench bench ...')}`).",
        "",
        f"Ceilings measured in the same run: copy {c['copy_bytes_per_s'] / 1e9:.0f} GB/s, fp32 (CUDA cores) "
        f"{c['fp32_flop_per_s'] / 1e12:.1f} TFLOP/s, tf32 {c['tf32_flop_per_s'] / 1e12:.1f}, tf32x3 = tf32 / 3 = "
        f"{c['tf32_flop_per_s'] / 3e12:.1f}, fp16 {c['fp16_flop_per_s'] / 1e12:.1f}, bf16 {c['bf16_flop_per_s'] / 1e12:.1f}.",
        "Floor per layer = max(bytes moved once / copy, FLOPs / ceiling of the arithmetic the impl uses); "
        "Σ over the two conv layers. Op Time: the conv call alone (CUDA events, median of "
        f"{bench['settings']['reps']}, inputs rotated past L2), cudnn fp32 (TF32 off, cudnn.benchmark on) in the same run.",
        "",
        "## Targets 1 and 2: Σ conv Op Time, fp32-accurate ("
        + "; ".join(f"`{i}`: {arithmetic(i)}" for i in FP32_ACCURATE if has(bench, i)) + ")",
        "",
        "Each fp32-accurate impl against its own floor (tf32x3: tf32 / 3, fp16x3: fp16 / 3); per network the fastest "
        "in bold.",
        "",
        "| net | images | cudnn ms | impl | ms | x cudnn (target) | floor ms | x floor (target <= 1.5) | "
        "x one-product floor | max rel. err |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    fp32_impls = [i for i in FP32_ACCURATE if has(bench, i)]
    for net in nets:
        for n in sizes:
            ref = total(bench, net, n, "cudnn")
            best = min(fp32_impls, key=lambda i: total(bench, net, n, i)["op_time_s"])
            for impl in fp32_impls:
                me = total(bench, net, n, impl)
                x = ref["op_time_s"] / me["op_time_s"]
                want = 4 if n >= 10000 else 5
                xf = me["op_time_s"] / me["floor_s"]
                name = f"**{impl}**" if impl == best and len(fp32_impls) > 1 else impl
                out.append(f"| {net} | {n} | {ref['op_time_s'] * 1e3:.4f} | {name} | {me['op_time_s'] * 1e3:.4f} | "
                           f"{x:.2f}x (>= {want}: {mark(x >= want)}) | {me['floor_s'] * 1e3:.4f} | {xf:.2f}x"
                           f"{'' if n < 10000 else ' (' + mark(xf <= 1.5) + ')'} | "
                           f"{me['op_time_s'] / one_product_floor(bench, net, n, impl):.2f}x | "
                           f"{bench['verify'][impl]['max_rel_error']:.1e} |")
    out += [
        "",
        "The floor counts three products per multiply-add (3xTF32: tf32 / 3; 3xFP16: fp16 / 3). On our weights "
        "(float16 values) and pixel inputs the kernel skips the products that are exactly zero, so the x floor column "
        "is generous; the one-product floor (FLOPs at the TF32 rate; FP16 for 3xFP16) is the strict bound. The faster "
        "impl per network is in bold.",
        "",
        "## Target 5: reduced-precision modes (`--precision tf32|fp16|bf16`) against the memory floor",
        "",
        "| net | images | mode | ms | x cudnn | memory floor ms | x memory floor (target <= 1.2) |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for net in nets:
        for impl in [m for m in MODES if has(bench, m)]:
            n = max(sizes)
            ref, me = total(bench, net, n, "cudnn"), total(bench, net, n, impl)
            xm = me["op_time_s"] / me["memory_floor_s"]
            out.append(f"| {net} | {n} | {impl} | {me['op_time_s'] * 1e3:.4f} | "
                       f"{ref['op_time_s'] / me['op_time_s']:.2f}x | {me['memory_floor_s'] * 1e3:.4f} | {xm:.2f}x "
                       f"({mark(xm <= 1.2)}) |")
    out += ["", "Verify (bench, 12 shapes; `verify-*.log` beside this file: 60 shapes) max rel. error: "
            + ", ".join(f"{k} {v['max_rel_error']:.1e}" for k, v in bench["verify"].items()) + ".", ""]
    if whole:
        out += [
            "## Targets 3 and 4: fused layers, whole network (one CUDA graph, device-resident input)",
            "",
            "| net | images | whole ms | eager ms | x eager | compile ms | x compile | floor ms | x floor | "
            "Correctness whole / eager / compile |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for (net, n), r in sorted(whole.items(), key=lambda kv: (nets.index(kv[0][0]) if kv[0][0] in nets else 9,
                                                                 kv[0][1])):
            w, e, cp = r["whole"], r["eager"], r.get("compile") or {}
            out.append(f"| {net} | {n} | {w['time_s'] * 1e3:.4f} | {e['time_s'] * 1e3:.4f} | {w['speedup_vs_eager']:.1f}x | "
                       f"{cp.get('time_s', float('nan')) * 1e3:.4f} | {w.get('speedup_vs_compile', float('nan')):.1f}x | "
                       f"{r['floor']['seconds'] * 1e3:.4f} | {w['x_floor']:.2f}x | {w['correctness']} / "
                       f"{e['correctness']} / {cp.get('correctness')} |")
        out += ["", "Where the whole network's time goes (stages timed alone, 10000 images; the floor of each at the "
                "ceiling of its own arithmetic):", "",
                "| net | stage | kernel, arithmetic | ms | floor ms | x floor |", "|---|---|---|---:|---:|---:|"]
        for (net, n), r in whole.items():
            if n == max(sizes):
                for s in r.get("stages", []):
                    kernel = (s.get("kernel") or s["kind"]) + (f", {s['arithmetic']}" if s.get("arithmetic") else "")
                    out.append(f"| {net} | {s['stage']} | {kernel} | {s['seconds'] * 1e3:.4f} | "
                               f"{s['floor_s'] * 1e3:.4f} | {s['x_floor']:.2f}x |")
    out += correctness_table(folder, nets, whole) + small_batch_table(folder)
    modes = folder / "modes-H100.log"
    if modes.exists():  # dev_fast.py: the same kernels on the 3-product path (arbitrary fp32 weights) per layer
        rows = {}
        for line in modes.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 5 and parts[1] == "10000" and "ms" in parts:
                name = " ".join(parts[3:parts.index("ms") - 1])
                rows[parts[0], parts[2], name] = float(parts[parts.index("ms") - 1])
        out += ["", "## fp32-accurate with arbitrary fp32 weights (all three products), 10000 images",
                "", "`scripts/dev_fast.py` in the `sanitize` call (same card, tuned plans): the kernel skips a product "
                "only when its low parts are exactly zero, so the course's own fp32 weights run the full loop (x cudnn "
                "in brackets; the call's time limit cut the fa18 rows).",
                "", "| net | layer | cudnn ms | 3xTF32, 3 products ms | 3xTF32, skip exact-zero ms | 3xFP16, 3 products ms |",
                "|---|---|---:|---:|---:|---:|"]
        for (net, layer, name), ms in rows.items():
            if name == "cudnn":
                full = rows.get((net, layer, "igemm tf32x3 skip=0"))
                skip = rows.get((net, layer, "igemm tf32x3 skip=1"))
                f16 = rows.get((net, layer, "igemm fp16x3 skip=0"))
                if full and skip:
                    out.append(f"| {net} | {layer} | {ms:.4f} | {full:.4f} ({ms / full:.2f}x) | {skip:.4f} "
                               f"({ms / skip:.2f}x) | "
                               + (f"{f16:.4f} ({ms / f16:.2f}x) |" if f16 else "– |"))
    notes = folder / "notes.md"
    if notes.exists():
        out += ["", notes.read_text().rstrip()]
    return "\n".join(out) + "\n"


def correctness_table(folder: Path, nets, whole) -> list[str]:
    """Targets 3 and 5's Correctness: `convbench run --json` at 10000 images (run-<net>-<impl>-<precision>[-fuse].json):
    each reduced-precision mode against its fp32 variant on the same images, and the fused op (--fuse) against
    PyTorch eager (whole-<net>.json)."""
    runs = {f.stem.removeprefix("run-"): json.loads(f.read_text()) for f in sorted(folder.glob("run-*.json"))}
    if not runs:
        return []
    out = ["", "## Targets 3 and 5: Correctness at 10000 images (`convbench run --json`, same run)", "",
           "| net | eager (cuDNN) | fp32: gpu-wgmma | fp16: gpu-wgmma-fp16 | bf16: gpu-wgmma-bf16 | "
           "tf32: gpu-igemm-tc-tf32 | fused: gpu-igemm-tc --fuse |", "|---|---:|---:|---:|---:|---:|---:|"]
    def cell(run: str) -> str:  # Correctness, and its delta to fp32 where the run has one
        r = runs.get(run)
        if r is None:
            return "–"
        return f"{r['correctness']}" + (f" ({r['correctness_delta']:+g})" if "correctness_delta" in r else "")

    for net in nets:
        fp16 = runs.get(f"{net}-gpu-wgmma-fp16", {})
        eager = whole.get((net, 10000), {}).get("eager", {}).get("correctness", "–")
        out.append(f"| {net} | {eager} | {fp16.get('correctness_fp32', '–')} | "
                   + " | ".join(cell(f"{net}-{key}") for key in ("gpu-wgmma-fp16", "gpu-wgmma-bf16",
                                                                 "gpu-igemm-tc-tf32", "gpu-igemm-tc-fp32-fuse"))
                   + " |")
    out += ["", "In brackets: the Correctness delta to the fp32 variant on the same 10000 images (`--precision`)."]
    return out


def small_batch_table(folder: Path) -> list[str]:
    """Target 2's why: dev_small.py's Op Time / device time / host time per layer at 100 images."""
    f = folder / "dev-small.json"
    if not f.exists():
        return []
    rows = json.loads(f.read_text())["rows"]
    out = ["", "## Where the time goes at 100 images (`scripts/dev_small.py`, same machine)", "",
           "op: bench's Op Time (events around one call, GPU idle before it); device: the same call enqueued behind a "
           "spin kernel, so the events bracket the GPU's work alone; host: the call's Python + driver time.", "",
           "| net | layer | impl | op us | device us | host us |", "|---|---|---|---:|---:|---:|"]
    for r in rows:
        if "op_s" in r and "layer" in r:
            out.append(f"| {r['net']} | {r['layer']} | {r['impl']} | {r['op_s'] * 1e6:.1f} | {r['device_s'] * 1e6:.1f} | "
                       f"{r['host_s'] * 1e6:.1f} |")
    for r in rows:
        if "op_s" in r and "layer" not in r:
            out.append(f"| {r['net']} | whole network | {r['impl']} | {r['op_s'] * 1e6:.1f} | "
                       f"{r['device_s'] * 1e6:.1f} | {r['host_s'] * 1e6:.1f} |")
    return out


def plot(folder: Path, png: Path) -> None:
    bench, whole = load(folder)
    nets, sizes = bench["settings"]["nets"], bench["settings"]["sizes"]
    fig, axes = plt.subplots(1, 4 if whole else 3, figsize=(22 if whole else 17, 4.8))
    width = 0.8 / (2 + len(MODES))
    for ax, n in zip(axes, (min(sizes), max(sizes))):
        shown = [i for i in (*FP32_ACCURATE, *MODES) if has(bench, i)]
        width = 0.8 / len(shown)
        for i, impl in enumerate(shown):
            xs = [k + i * width for k in range(len(nets))]
            ys = [total(bench, net, n, "cudnn")["op_time_s"] / total(bench, net, n, impl)["op_time_s"] for net in nets]
            ax.bar(xs, ys, width, label=impl)
        ax.axhline(1, color="k", lw=0.8)
        ax.axhline(4 if n >= 10000 else 5, color="r", ls="--", lw=0.8, label="target")
        ax.set_xticks([k + 0.4 - width / 2 for k in range(len(nets))], nets)
        ax.set_title(f"Σ conv Op Time, {n} images: x cudnn fp32")
        ax.set_ylabel("speed-up over cudnn (same run)")
    axes[0].legend(fontsize=8)
    if whole:
        ax = axes[2]
        width = 0.2
        for i, (n, key) in enumerate([(n, key) for n in (min(sizes), max(sizes)) for key in ("eager", "compile")]):
            ys = [whole[net, n]["whole"].get(f"speedup_vs_{key}", 0) if (net, n) in whole else 0 for net in nets]
            ax.bar([k + i * width for k in range(len(nets))], ys, width, label=f"x {key}, {n} images")
        ax.axhline(5, color="r", ls="--", lw=0.8, label="target 5x (10x: sp19, minidnn, 100 images)")
        ax.set_xticks([k + 0.3 for k in range(len(nets))], nets)
        ax.set_title("whole network (one CUDA graph): x PyTorch")
        ax.legend(fontsize=7)
    ax = axes[-1]  # how far from the floor, 10000 images: targets 1 (<= 1.5), 5 (<= 1.2 memory floor), 4 (<= 1.5)
    n = max(sizes)
    bars = [(f"{i} x floor", lambda net, i=i: total(bench, net, n, i)["op_time_s"] / total(bench, net, n, i)["floor_s"])
            for i in FP32_ACCURATE if has(bench, i)]
    bars += [(f"{i} x memory floor", lambda net, i=i: total(bench, net, n, i)["op_time_s"]
              / total(bench, net, n, i)["memory_floor_s"]) for i in MODES if has(bench, i)]
    if whole:
        bars.append(("whole network x floor", lambda net: whole[net, n]["whole"]["x_floor"] if (net, n) in whole else 0))
    width = 0.8 / len(bars)
    top = 0.0
    for i, (label, fn) in enumerate(bars):
        ys = [fn(net) for net in nets]
        top = max(top, *ys)
        ax.bar([k + i * width for k in range(len(nets))], ys, width, label=label)
    ax.set_ylim(0, 1.6 * top)  # room for the legend above the bars
    ax.axhline(1.5, color="r", ls="--", lw=0.8, label="target 1.5x (fp32-accurate, whole)")
    ax.axhline(1.2, color="m", ls=":", lw=0.8, label="target 1.2x (reduced precision)")
    ax.axhline(1, color="k", lw=0.8)
    ax.set_xticks([k + 0.4 - width / 2 for k in range(len(nets))], nets)
    ax.set_title(f"{n} images: time / floor (lower is better)")
    ax.legend(fontsize=7, loc="upper left", ncol=2)
    fig.suptitle(f"{bench['environment'].get('gpu')} · convbench {CODE_COMMIT}")
    fig.tight_layout()
    fig.savefig(png, dpi=100)


def main() -> None:
    global CODE_COMMIT, MODE
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "results/fast")
    CODE_COMMIT = sys.argv[2] if len(sys.argv) > 2 else CODE_COMMIT
    MODE = sys.argv[3] if len(sys.argv) > 3 else MODE
    (folder / "README.md").write_text(report(folder))
    png = folder / f"fast-{card(load(folder)[0])}.png"
    plot(folder, png)
    print(f"wrote {folder / 'README.md'} and {png}")


if __name__ == "__main__":
    main()
