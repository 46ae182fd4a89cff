"""Weights for a network: our own (shipped as safetensors) or the course's files, behind one `load_weights`.

`--weights` takes `own` (ours, trained by `convbench train`), `high` / `low` (fa17's two, like the course) or a
path: `*.safetensors` (ours), `PREFIX-NNNN.params` (MXNet, graph from `PREFIX-symbol.json` beside it) or
`*.bin` (mini-dnn's `weights-86.bin`).
"""

from __future__ import annotations

import math
from importlib import resources
from pathlib import Path

import torch

from convbench.core.errors import UsageError
from convbench.core.spec import NETWORKS, NetSpec, get_network
from convbench.network.import_minidnn import load_minidnn
from convbench.network.import_mxnet import load_mxnet
from convbench.network.params import Weights, check_params

__all__ = ["Weights", "check_params", "load_weights", "save_safetensors", "load_safetensors", "own_weights_file"]

OWN_DIR = resources.files("convbench") / "weights"
VARIANTS = {"fa17": ("high", "low")}  # networks with more than one shipped set; the first is `own`


def own_weights_file(net: str, variant: str | None = None) -> str:
    variants = VARIANTS.get(net)
    if variant is None:
        return f"{net}-{variants[0]}.safetensors" if variants else f"{net}.safetensors"
    if not variants or variant not in variants:
        raise UsageError(f"network {net} has no {variant!r} weights; use --weights own (only fa17 ships high and low)")
    return f"{net}-{variant}.safetensors"


# Shipped weights are stored as float16 values: half the size (fa17's FC alone is 3.6 M weights) for a repository
# that must travel to the GPU machine. `for_storage` rounds them first, and the Correctness recorded in a file is
# measured with the rounded weights, so the file is exactly the network it describes. They load as float32.
STORAGE_DTYPE = torch.float16
MAX_SAFETENSORS_ELEMENTS = 1 << 26  # values in one weights file (fa17, the largest network: 3.6 M)


def for_storage(params: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """float32 tensors holding exactly the values the file will store."""
    out = {k: v.detach().to(STORAGE_DTYPE).to(torch.float32) for k, v in params.items()}
    bad = [k for k, v in out.items() if not torch.isfinite(v).all()]
    if bad:
        raise ValueError(f"{', '.join(bad)} overflow {STORAGE_DTYPE}")
    return out


def save_safetensors(path: Path, spec: NetSpec, params: dict[str, torch.Tensor], metadata: dict[str, str],
                     dtype: torch.dtype = torch.float32) -> None:
    from safetensors.torch import save_file

    meta = {"net": spec.name, "input_size": str(spec.input_size), **{k: str(v) for k, v in metadata.items()}}
    tmp = path.with_name(path.name + ".tmp")
    save_file({k: v.to(dtype).contiguous() for k, v in params.items()}, str(tmp), metadata=meta)
    tmp.chmod(0o644)
    tmp.replace(path)  # never leave a half-written weights file


def load_safetensors(path: Path, label: str) -> Weights:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as f:
            metadata = dict(f.metadata() or {})
            total = sum(math.prod(f.get_slice(k).get_shape()) for k in f.keys())  # noqa: SIM118 (a safe_open handle, not a dict)
        if total > MAX_SAFETENSORS_ELEMENTS:  # declared shapes, checked before any tensor is read
            raise UsageError(f"weights {path} declare {total} values, more than the {MAX_SAFETENSORS_ELEMENTS} any "
                             "network here has; pass a safetensors file made by `convbench train`")
        params = load_file(str(path))
    except (SafetensorError, OSError, ValueError, RuntimeError, TypeError) as e:
        raise UsageError(f"cannot read weights {path}: {str(e).splitlines()[0]}; pass a safetensors file made by `convbench train`") from None
    net = metadata.get("net")
    if net not in NETWORKS:
        raise UsageError(f"weights {path} name no known network (metadata net={net!r}); pass a file made by `convbench train`")
    spec = NETWORKS[net]
    return Weights(spec, check_params(spec, params, str(path)), label, metadata)


def load_weights(arg: str, net: str | None = None, image_size: int | None = None) -> Weights:
    """Resolve `--weights` (and the optional `--net`, `--image-size`) to a network and its parameters."""
    if arg in ("own", "high", "low"):
        spec = get_network(net or DEFAULT_NET)
        fname = own_weights_file(spec.name, None if arg == "own" else arg)
        res = OWN_DIR / fname
        if not res.is_file():
            raise UsageError(f"no shipped weights {fname} for {spec.name}; make them with `convbench train {spec.name}`")
        with resources.as_file(res) as p:
            w = load_safetensors(Path(p), f"{fname.removesuffix('.safetensors')} (convbench weights)")
        return _fit(w, net, image_size, arg)

    path = Path(arg)
    if not path.is_file():
        raise UsageError(f"weights file {arg} not found; use own, high, low or the path of a .safetensors, .params or .bin file")
    suffix = path.suffix.lower()
    if suffix == ".safetensors":
        w = load_safetensors(path, path.name)
    elif suffix == ".params":
        w = load_mxnet(path, image_size=image_size)
    elif suffix == ".bin":
        w = load_minidnn(path)
    else:
        raise UsageError(f"weights file {arg}: unknown format {suffix or '(no suffix)'}; use .safetensors, MXNet .params or mini-dnn .bin")
    return _fit(w, net, image_size, arg)


def _fit(w: Weights, net: str | None, image_size: int | None, source: str) -> Weights:
    """Apply --net (the weights must fit it) and --image-size (the layers must still fit)."""
    if net is not None and net != w.spec.name:
        spec = get_network(net)
        if image_size is not None:
            spec = spec.with_input_size(image_size)
        params = check_params(spec, w.params, source)
        return Weights(spec, params, w.label, w.metadata)
    if image_size is not None and image_size != w.spec.input_size:
        spec = w.spec.with_input_size(image_size)
        return Weights(spec, check_params(spec, w.params, source), w.label, w.metadata)
    return w


DEFAULT_NET = "minidnn"
