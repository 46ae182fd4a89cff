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
"""

from __future__ import annotations

import json
import sys

from convbench import ui
from convbench.cli.devices import resolve
from convbench.data.fashion_mnist import load_dataset
from convbench.measure.usage import usage
from convbench.network.model import Network, correctness
from convbench.network.weights import DEFAULT_NET, load_weights


def _say(text: str, quiet: bool) -> None:
    if not quiet:
        print(text, flush=True)


def cmd_run(args) -> int:
    impl, device = resolve(args.impl, args.device)
    quiet = args.json
    net = args.net if args.net or args.weights not in ("own", "high", "low") else DEFAULT_NET

    # Validate everything cheap before the slow parts, so bad input fails at once.
    weights = load_weights(args.weights, net, args.image_size)
    spec = weights.spec

    data = load_dataset(spec.input_size, count=args.size, data_dir=args.data_dir, quiet=quiet)
    _say("Loading fashion-mnist data... done", quiet)  # printed whole, after the checks: no half line on an error
    impl.prepare()
    network = Network(weights, impl, device)
    _say("Loading model... done", quiet)
    if not quiet:
        ui.note(f"{spec.name} · {spec.input_size}x{spec.input_size} · {args.size} images · impl {impl.name} on {device} "
                f"· data: {data.source.origin}")

    _say("New Inference", quiet)
    result = network.infer(data.images, show_progress=not quiet and sys.stderr.isatty())
    for t in result.conv_timings:
        _say(f"Op Time: {t.op_time:.6f} Layer Time: {t.layer_time:.6f}", quiet)
    acc = correctness(result.predictions, data.labels)
    _say(f"Correctness: {acc!r} Model: {weights.label}", quiet)
    cost = usage() if getattr(args, "time", False) else None  # --time: the whole program so far, like /usr/bin/time
    for line in cost.lines() if cost else ():
        _say(line, quiet)

    if args.json:
        print(json.dumps({
            "net": spec.name,
            "model": weights.label,
            "impl": impl.name,
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
            **({"time": cost.to_json()} if cost else {}),
        }, indent=2))
    return 0
