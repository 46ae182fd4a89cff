"""`convbench run`: the course's main job. Load the data and a network, run inference with the chosen convolution
implementation, print per-layer Op Time and Correctness in the course's format:

    Loading fashion-mnist data... done
    Loading model... done
    New Inference
    Op Time: 0.004820 Layer Time: 0.004820
    Op Time: 0.016594 Layer Time: 0.016594
    Correctness: 0.886 Model: minidnn (minidnn, convbench)

Times are seconds. One measured inference after an untimed warm-up of each layer (see network/model.py); `bench`
takes medians over many runs.

`--precision tf32|fp16|bf16` runs the implementation's variant of that precision (registry.impl_for_precision),
then the same images again with the fp32 one of its family (the implementation named by --impl; the library, cudnn
or onednn, where that is itself reduced), untimed, and prints the difference:

    Correctness: 0.885 (fp32: 0.886, delta -0.001) Model: ...

`--fuse` runs each conv with the activation and pool after it as one call of the implementation's fused op; such a
line names the layers its call covered: `Op Time: 0.001234 Layer Time: 0.002345 (conv1+relu+pool1)`.
"""

from __future__ import annotations

import json
import sys

from convbench.cli.devices import apply_build_options, require_cuda, resolve
from convbench.core import ui
from convbench.core.contract import ConvImpl
from convbench.core.errors import UsageError
from convbench.data.fashion_mnist import load_dataset
from convbench.impls.registry import get_impl
from convbench.measure import ceilings as ceilings_mod
from convbench.measure.results import REFERENCE
from convbench.measure.usage import usage
from convbench.network.model import Network, correctness, require_fused
from convbench.network.weights import DEFAULT_NET, load_weights
from convbench.user import find
from convbench.whole.graph import WholeNetwork, arithmetic_for, benchmark


def _say(text: str, quiet: bool) -> None:
    if not quiet:
        print(text, flush=True)


def _report_usage(args, quiet: bool):
    """--time: the whole program's cost so far (like /usr/bin/time), printed; None without --time."""
    cost = usage() if getattr(args, "time", False) else None
    for line in cost.lines() if cost else ():
        _say(line, quiet)
    return cost


def fp32_baseline(impl_name: str | None, impl: ConvImpl, precision: str, device: str) -> ConvImpl | None:
    """What a reduced-precision run's Correctness is compared with: the implementation --impl named where it is fp32
    (its family has two fp32 members: gpu-igemm-tc, gpu-igemm-tc-fp16x3), else the device's library (cudnn /
    onednn). `impl` is the variant that runs (the device's default without --impl). None without a reduced
    --precision."""
    if precision == "fp32":
        return None
    named = impl if impl_name is None else find(impl_name)  # already resolved: a lookup, never a second load
    return named if named.precision == "fp32" else get_impl(REFERENCE[device])


def cmd_run(args) -> int:
    apply_build_options(args)
    if getattr(args, "whole_network", False):
        return run_whole_network(args)
    if getattr(args, "baselines", False):
        raise UsageError("--baselines compares the whole network with PyTorch eager and torch.compile; add "
                         "--whole-network")
    precision = getattr(args, "precision", None) or "fp32"
    fuse = getattr(args, "fuse", False)
    impl, device = resolve(args.impl, args.device, precision)
    if fuse:
        require_fused(impl)
    baseline = fp32_baseline(args.impl, impl, precision, device)
    quiet = args.json
    net = args.net if args.net or args.weights not in ("own", "high", "low") else DEFAULT_NET

    # Validate everything cheap before the slow parts, so bad input fails at once.
    weights = load_weights(args.weights, net, args.image_size)
    spec = weights.spec

    data = load_dataset(spec.input_size, count=args.size, data_dir=args.data_dir, quiet=quiet)
    _say("Loading fashion-mnist data... done", quiet)  # printed whole, after the checks: no half line on an error
    impl.prepare()
    network = Network(weights, impl, device, fuse=fuse)
    _say("Loading model... done", quiet)
    if not quiet:
        ui.note(f"{spec.name} · {spec.input_size}x{spec.input_size} · {args.size} images · impl {impl.name} on {device} "
                f"· data: {data.source.origin}")

    _say("New Inference", quiet)
    result = network.infer(data.images, show_progress=not quiet and sys.stderr.isatty())
    for t in result.conv_timings:
        fused_name = f" ({t.layer})" if fuse and "+" in t.layer else ""  # --fuse: which layers the call covered
        _say(f"Op Time: {t.op_time:.6f} Layer Time: {t.layer_time:.6f}{fused_name}", quiet)
    acc = correctness(result.predictions, data.labels)
    versus = {}
    if baseline is not None:  # --precision tf32/fp16/bf16: the same images through the fp32 implementation
        if not quiet:
            ui.note(f"fp32 baseline for the Correctness delta: the same {args.size} images with {baseline.name}")
        baseline.prepare()
        fuse32 = fuse and baseline.fused is not None
        result32 = Network(weights, baseline, device, fuse=fuse32).infer(data.images, show_progress=False)
        acc32 = correctness(result32.predictions, data.labels)
        versus = {"fp32_impl": baseline.name, "correctness_fp32": acc32, "correctness_delta": round(acc - acc32, 10),
                  "predictions_differing": int((result.predictions != result32.predictions).sum())}
        _say(f"Correctness: {acc!r} (fp32: {acc32!r}, delta {versus['correctness_delta']:+g}) Model: {weights.label}",
             quiet)
    else:
        _say(f"Correctness: {acc!r} Model: {weights.label}", quiet)
    cost = _report_usage(args, quiet)

    if args.json:
        print(json.dumps({
            "net": spec.name,
            "model": weights.label,
            "impl": impl.name,
            "precision": impl.precision,
            "fused": fuse,
            "device": device,
            "images": args.size,
            "image_size": spec.input_size,
            "data": str(data.source.images),
            "layers": [
                {"layer": t.layer, "shape_BCHWMK": list(t.shape), "op_time_s": t.op_time, "layer_time_s": t.layer_time}
                for t in result.conv_timings
            ],
            "op_time_total_s": sum(t.op_time for t in result.conv_timings),
            "correctness": acc,
            "nonfinite_outputs": result.nonfinite,  # conv layers whose output had NaN / Inf (also warned on stderr)
            **versus,
            **({"time": cost.to_json()} if cost else {}),
        }, indent=2))
    return 0


def run_whole_network(args) -> int:
    """`run --whole-network`: every layer on the GPU (whole/graph.py), one CUDA graph replay per inference. Prints
    `Network Time: <s> (device-resident input, CUDA graph)` (median of 20 replays; the upload is not in it) and the
    Correctness line; --json adds the upload, upload + replay, and the whole-network floor. --baselines times
    PyTorch eager and torch.compile of the same network on the same device-resident input in this process."""
    if args.impl is not None:
        raise UsageError("--whole-network runs every layer with its own kernels (tensor-core conv and dense); "
                         "leave out --impl, or drop --whole-network to time one convolution implementation")
    if args.device == "cpu":
        raise UsageError("--whole-network runs on the GPU; leave out --device or use --device cuda")
    if getattr(args, "fuse", False):
        raise UsageError("--whole-network always fuses conv + activation + pool; leave out --fuse")
    require_cuda("--whole-network", "or drop --whole-network to run the course's arrangement on the CPU")
    quiet = args.json
    net = args.net if args.net or args.weights not in ("own", "high", "low") else DEFAULT_NET
    weights = load_weights(args.weights, net, args.image_size)
    spec = weights.spec
    data = load_dataset(spec.input_size, count=args.size, data_dir=args.data_dir, quiet=quiet)
    _say("Loading fashion-mnist data... done", quiet)

    precision = arithmetic_for(getattr(args, "precision", None) or "fp32")
    network = WholeNetwork(weights, precision)
    _say("Loading model... done", quiet)
    if not quiet:
        ui.note(f"{spec.name} · {spec.input_size}x{spec.input_size} · {args.size} images · whole network on cuda "
                f"({precision}, CUDA graph) · data: {data.source.origin}")
    _say("New Inference", quiet)
    ceil = ceilings_mod.load("cuda")[0] if args.json else None
    baselines = bool(getattr(args, "baselines", False))
    result = benchmark(network, data.images, data.labels, baselines=baselines, ceilings=ceil)
    whole = result["whole"]
    _say(f"Network Time: {whole['time_s']:.6f} (device-resident input, CUDA graph)", quiet)
    _say(f"Correctness: {whole['correctness']!r} Model: {weights.label}", quiet)
    for name in ("eager", "compile") if baselines else ():
        base = result[name]
        if "time_s" in base:
            _say(f"PyTorch {name}: {base['time_s']:.6f}, Correctness {base['correctness']!r} (the graph: "
                 f"{whole[f'speedup_vs_{name}']:.2f}x its speed)", quiet)
            if "default_error" in base:
                options = ", ".join(f"{k}={v}" for k, v in base["inductor"].items())
                ui.note(f"convbench: warning: PyTorch {name} with its defaults: {base['default_error']}; timed with "
                        f"Inductor's {options}")
        else:  # no number for a baseline that failed or answered wrongly, and never silently
            ui.note(f"convbench: warning: PyTorch {name}: no baseline: {base['error']}")
    cost = _report_usage(args, quiet)
    if args.json:
        print(json.dumps({
            "net": spec.name,
            "model": weights.label,
            "mode": "whole-network",
            "precision": precision,
            "device": "cuda",
            "images": args.size,
            "image_size": spec.input_size,
            "data": str(data.source.images),
            "network_time_s": whole["time_s"],
            "upload_time_s": whole["upload_s"],
            "with_copy_time_s": whole["with_copy_s"],
            "floor_s": result["floor"]["seconds"],
            "x_floor": whole["x_floor"],
            **({"floor_warning": ceilings_mod.doubt_line(ceil.doubt)} if ceil.doubt else {}),
            "correctness": whole["correctness"],
            "rel_error_vs_fp64": whole["rel_error_vs_fp64"],
            "steps": result["steps"],
            **{name: result[name] | ({"speedup_x": whole[f"speedup_vs_{name}"]} if "time_s" in result[name] else {})
               for name in (("eager", "compile") if baselines else ())},
            **({"time": cost.to_json()} if cost else {}),
        }, indent=2))
    return 0
