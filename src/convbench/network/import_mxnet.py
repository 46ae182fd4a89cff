"""The course's 2017-2019 networks from their own MXNet files, read without MXNet.

A checkpoint is two files: `PREFIX-symbol.json` (the graph) and `PREFIX-NNNN.params` (an NDArray list). The graph
becomes a `NetSpec`, so a network the tool has never seen still runs; the arrays are renamed to our parameter names
(`conv1.weight`, `fc1.weight`, ...) through the mapping the graph gives.
"""

from __future__ import annotations

import json
import math
import re
import struct
from pathlib import Path

import numpy as np
import torch

from convbench.core.errors import UsageError
from convbench.core.spec import (
    MAX_IMAGE_SIZE,
    NETWORKS,
    Activation,
    Conv,
    Dense,
    Flatten,
    Layer,
    NetSpec,
    Pool,
    Softmax,
    pool_out,
)
from convbench.network.params import Weights, check_params

LIST_MAGIC = 0x112
ARRAY_MAGIC_V2 = 0xF993FAC9  # with a storage type (MXNet >= 1.0)
ARRAY_MAGIC_V1 = 0xF993FAC8  # without one (MXNet 0.x); same layout otherwise
DTYPES = {0: np.float32, 1: np.float64, 2: np.float16}  # mshadow type flags we can turn into float32
MAX_NDIM = 32  # MXNet's own limit; more means the file is corrupt
# Bounds on what a symbol file may declare, checked before anything is allocated: far above the course's networks
# (fa17's 3.6 M parameters, 32 maps, 10 000 hidden units at most in any of its variants), far below a memory bomb.
MAX_SYMBOL_BYTES = 16 << 20
MAX_NODES = 10_000
MAX_CHANNELS = 4096  # num_filter
MAX_HIDDEN = 1 << 16  # num_hidden
MAX_PARAMS = 1 << 26  # parameters of the whole network (256 MB as float32)
SYMBOL_FIX = "pass the PREFIX-symbol.json saved with the weights"

# ---------------------------------------------------------------------------------------------------------------
# .params: MXNet's NDArray list


class _Reader:
    """A cursor over the file's bytes whose every read says what it wanted when the file runs out."""

    def __init__(self, data: bytes, source: str):
        self.data, self.pos, self.source = data, 0, source

    def fail(self, problem: str) -> UsageError:
        return UsageError(
            f"MXNet weights {self.source}: {problem}; the file is truncated or corrupt, pass an intact PREFIX-NNNN.params"
        )

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            left = len(self.data) - self.pos
            raise self.fail(f"{what} needs {n} bytes at offset {self.pos} but only {left} are left")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, fmt: str, what: str) -> tuple:
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt), what))


def _read_array(r: _Reader, index: int) -> np.ndarray:
    what = f"array {index}"
    (magic,) = r.unpack("I", f"{what} magic")
    if magic == ARRAY_MAGIC_V2:
        (stype,) = r.unpack("i", f"{what} storage type")
        if stype != 0:
            raise UsageError(
                f"MXNet weights {r.source}: {what} is sparse (storage type {stype}); save dense arrays (arr.tostype('default'))"
            )
    elif magic != ARRAY_MAGIC_V1:
        raise r.fail(f"{what} starts with magic {magic:#x}, expected {ARRAY_MAGIC_V2:#x}")
    (ndim,) = r.unpack("I", f"{what} ndim")
    if not 1 <= ndim <= MAX_NDIM:
        raise r.fail(f"{what} has {ndim} dimensions")
    shape = r.unpack(f"{ndim}q", f"{what} shape")
    if min(shape) < 0 or max(shape) > len(r.data):  # a dimension larger than the file: corrupt, even beside a 0
        raise r.fail(f"{what} has shape {shape}")
    r.unpack("ii", f"{what} device")  # where it lived when saved: irrelevant here
    (flag,) = r.unpack("i", f"{what} type flag")
    if flag not in DTYPES:
        raise UsageError(
            f"MXNet weights {r.source}: {what} has type flag {flag}, not a float; save the parameters as float32"
        )
    dtype = np.dtype(DTYPES[flag]).newbyteorder("<")
    count = math.prod(shape)  # Python ints: a corrupt shape cannot wrap around
    data = r.take(count * dtype.itemsize, f"{what} data ({count} x {dtype.name})")
    return np.frombuffer(data, dtype=dtype).astype(np.float32).reshape(shape)


def _read_names(r: _Reader, count: int) -> list[str]:
    (n_names,) = r.unpack("Q", "name count")
    if n_names != count:
        raise r.fail(f"{n_names} names for {count} arrays")
    names = []
    for i in range(n_names):
        (length,) = r.unpack("Q", f"name {i} length")
        raw = r.take(length, f"name {i}")
        try:
            names.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise r.fail(f"name {i} is not UTF-8") from None
    return names


def read_ndarray_list(path: Path) -> dict[str, np.ndarray]:
    """The named float32 arrays of an MXNet `.params` file, `arg:`/`aux:` prefixes stripped."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise UsageError(f"cannot read MXNet weights {path}: {e.strerror}; pass a readable .params file") from None
    r = _Reader(data, str(path))
    magic, _reserved, count = r.unpack("QQQ", "header")
    if magic != LIST_MAGIC:
        raise r.fail(f"header magic is {magic:#x}, expected {LIST_MAGIC:#x} (not an MXNet NDArray list)")
    arrays = [_read_array(r, i) for i in range(count)]
    names = _read_names(r, count)
    if r.pos != len(data):
        raise r.fail(f"{len(data) - r.pos} bytes are left after the last name")
    out: dict[str, np.ndarray] = {}
    for full, arr in zip(names, arrays):
        name = re.sub(r"^(arg|aux):", "", full)
        if name in out:
            raise r.fail(f"array {name!r} appears twice")
        out[name] = arr
    return out


# ---------------------------------------------------------------------------------------------------------------
# -symbol.json: MXNet's graph


def load_symbol(path: Path) -> dict:
    """The parsed symbol JSON, or a UsageError saying why it is not one."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_SYMBOL_BYTES:
            raise UsageError(f"MXNet symbol {path} is {size} bytes, more than the {MAX_SYMBOL_BYTES >> 20} MiB a symbol "
                             f"file may have here; {SYMBOL_FIX}")
        symbol = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise UsageError(f"cannot read MXNet symbol {path}: {e.strerror}; pass the PREFIX-symbol.json saved with the weights") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UsageError(f"MXNet symbol {path} is not valid JSON ({e}); pass the PREFIX-symbol.json saved with the weights") from None
    except RecursionError:
        raise UsageError(f"MXNet symbol {path} is nested too deeply to be a symbol file; {SYMBOL_FIX}") from None
    if not isinstance(symbol, dict) or not isinstance(symbol.get("nodes"), list):
        raise UsageError(f"MXNet symbol {path} has no 'nodes' list; pass the PREFIX-symbol.json saved with the weights")
    return symbol


def _attrs(node: dict) -> dict[str, str]:
    """Operator attributes: MXNet 0.x called them `param`, 1.0-1.1 `attr`, 1.2+ `attrs`."""
    for key in ("attrs", "attr", "param"):
        if isinstance(node.get(key), dict):
            return node[key]
    return {}


def _tuple(value: str) -> tuple[int, ...]:
    """`"(5, 5)"` or `"5"` -> ints (a non-string, or a number too long to be sane, is a ValueError)."""
    if not isinstance(value, (str, int)) or isinstance(value, bool) or len(str(value)) > 100:
        raise ValueError(f"attribute value {str(value)[:40]!r} is not a size")
    return tuple(int(v) for v in re.findall(r"-?\d+", str(value)))


def _check_nodes(nodes: list, source: str) -> None:
    """Every node an object with string op and name, its inputs [index, ...] lists of earlier nodes: what the walk
    relies on, so a hand-edited file is a one-line error rather than a traceback."""
    if len(nodes) > MAX_NODES:
        raise UsageError(f"MXNet symbol {source} has {len(nodes)} nodes, more than {MAX_NODES}; {SYMBOL_FIX}")
    for i, node in enumerate(nodes):
        if not isinstance(node, dict):
            raise UsageError(f"MXNet symbol {source}: node {i} is a {type(node).__name__}, not an object; {SYMBOL_FIX}")
        for key in ("op", "name"):
            if not isinstance(node.get(key), str):
                raise UsageError(f"MXNet symbol {source}: node {i} has no {key!r} string; {SYMBOL_FIX}")
        inputs = node.get("inputs", [])
        ok = isinstance(inputs, list) and all(
            isinstance(x, list) and x and type(x[0]) is int and 0 <= x[0] < i for x in inputs)
        if not ok:
            raise UsageError(f"MXNet symbol {source}: node {i} ({node['name']!r}) has inputs that are not [index, ...] "
                             f"lists of earlier nodes; {SYMBOL_FIX}")
        for key in ("attrs", "attr", "param"):
            if key in node and not isinstance(node[key], dict):
                raise UsageError(f"MXNet symbol {source}: node {i} ({node['name']!r}) has {key} that is not an object; "
                                 f"{SYMBOL_FIX}")


def _bool(value: str) -> bool:
    return str(value).strip().lower() in ("true", "1")


class _Graph:
    """Walks a chain-shaped symbol, turning each operator into layers and recording where the weights come from."""

    def __init__(self, symbol: dict, source: str):
        self.nodes, self.source = symbol["nodes"], source
        self.layers: list[Layer] = []
        self.args: dict[str, str] = {}  # our param name -> MXNet arg name
        self.missing_bias: list[str] = []
        self.counts = {"conv": 0, "fc": 0}

    def error(self, node: dict, problem: str, fix: str) -> UsageError:
        return UsageError(f"MXNet symbol {self.source}: node {node.get('name')!r} ({node.get('op')}) {problem}; {fix}")

    def unsupported(self, node: dict, what: str) -> UsageError:
        return self.error(node, f"uses {what}, which convbench does not support", "export the network without it")

    def size(self, node: dict, a: dict, key: str, hi: int, default: str | None = None) -> int:
        """A single whole-number attribute between 1 and `hi` (num_filter, num_hidden)."""
        raw = a.get(key, default)
        if raw is None:
            raise self.error(node, f"has no {key}", SYMBOL_FIX)
        try:
            values = _tuple(raw)
        except ValueError:
            values = ()
        if len(values) != 1 or not 1 <= values[0] <= hi:
            raise self.error(node, f"has {key} {str(raw)[:40]}, not a whole number from 1 to {hi}", SYMBOL_FIX)
        return values[0]

    def window(self, node: dict, what: str, values: tuple[int, ...], raw) -> None:
        """Kernel and stride sizes: positive, and no larger than the largest image."""
        if any(not 1 <= v <= MAX_IMAGE_SIZE for v in values):
            raise self.error(node, f"has {what} {str(raw)[:40]}, not from 1 to {MAX_IMAGE_SIZE}", SYMBOL_FIX)

    def arg(self, node: dict, pos: int, what: str) -> str:
        inputs = node["inputs"]
        if len(inputs) <= pos or self.nodes[inputs[pos][0]].get("op") != "null":
            raise self.error(node, f"has no {what} input", "pass the symbol file MXNet saved with the weights")
        return self.nodes[inputs[pos][0]]["name"]

    def next_name(self, prefix: str) -> str:
        self.counts[prefix] += 1
        return f"{prefix}{self.counts[prefix]}"

    def walk(self) -> None:
        prev = None
        for index, node in enumerate(self.nodes):
            if node.get("op") == "null":
                continue
            inputs = node.get("inputs") or []
            src = inputs[0][0] if inputs else None
            chained = src == prev if prev is not None else src is not None and self.nodes[src].get("op") == "null"
            extras_are_args = all(self.nodes[i[0]].get("op") == "null" for i in inputs[1:])
            if not chained or not extras_are_args:
                raise self.error(node, "does not continue a single chain", "convbench reads chain networks only")
            self.add(node)
            prev = index
        if prev is None:
            raise UsageError(f"MXNet symbol {self.source} has no operators; pass the PREFIX-symbol.json saved with the weights")

    def add(self, node: dict) -> None:
        op, a = node["op"], _attrs(node)
        if op in ("New", "Convolution"):
            self.add_conv(node, a)
        elif op == "Activation":
            self.add_activation(node, a.get("act_type", ""))
        elif op in ("tanh", "relu", "sigmoid"):
            self.add_activation(node, op)
        elif op == "Pooling":
            self.add_pool(node, a)
        elif op in ("Flatten", "flatten"):
            self.layers.append(Flatten())
        elif op == "FullyConnected":
            self.add_dense(node, a)
        elif op in ("SoftmaxOutput", "softmax", "Softmax"):
            self.layers.append(Softmax())
        else:
            raise self.error(
                node, "is an operator convbench does not know",
                "supported: New, Convolution, Activation, Pooling, Flatten, FullyConnected, SoftmaxOutput, softmax",
            )

    def add_conv(self, node: dict, a: dict[str, str]) -> None:
        kernel = _tuple(a.get("kernel", ""))
        if len(kernel) != 2 or kernel[0] != kernel[1]:
            raise self.unsupported(node, f"kernel {a.get('kernel')} (only square 2-D kernels)")
        self.window(node, "kernel", kernel, a.get("kernel"))
        if node["op"] == "Convolution":
            self.check_plain_conv(node, a)
        filters = self.size(node, a, "num_filter", MAX_CHANNELS)
        name = self.next_name("conv")
        self.args[f"{name}.weight"] = self.arg(node, 1, "weight")
        self.layers.append(Conv(filters, kernel[0]))

    def check_plain_conv(self, node: dict, a: dict[str, str]) -> None:
        """Our Conv is stride 1, no padding, no bias: anything else would silently compute something else."""
        if not _bool(a.get("no_bias", "False")):
            raise self.unsupported(node, "a bias (no_bias is not True)")
        for key, plain in (("stride", 1), ("pad", 0), ("dilate", 1)):
            if key in a and any(v != plain for v in _tuple(a[key])):
                raise self.unsupported(node, f"{key} {a[key]} (only {plain})")
        if _tuple(a.get("num_group", "1")) != (1,):
            raise self.unsupported(node, f"num_group {a['num_group']} (only 1)")
        if a.get("layout", "None") not in ("None", "NCHW"):
            raise self.unsupported(node, f"layout {a['layout']} (only NCHW)")

    def add_activation(self, node: dict, fn: str) -> None:
        if fn not in ("tanh", "relu", "sigmoid"):
            raise self.unsupported(node, f"act_type {fn!r} (only tanh, relu, sigmoid)")
        self.layers.append(Activation(fn))

    def add_pool(self, node: dict, a: dict[str, str]) -> None:
        if _bool(a.get("global_pool", "False")):
            raise self.unsupported(node, "global_pool")
        kind = a.get("pool_type", "max")
        if kind not in ("max", "avg"):
            raise self.unsupported(node, f"pool_type {kind!r} (only max, avg)")
        kernel, stride = _tuple(a.get("kernel", "")), _tuple(a.get("stride", "(1, 1)"))
        if len(kernel) != 2 or len(set(kernel)) != 1 or len(stride) != 2 or len(set(stride)) != 1:
            raise self.unsupported(node, f"kernel {a.get('kernel')} stride {a.get('stride')} (only square 2-D windows)")
        self.window(node, "kernel", kernel, a.get("kernel"))
        self.window(node, "stride", stride, a.get("stride"))
        if any(_tuple(a.get("pad", "(0, 0)"))):
            raise self.unsupported(node, f"pad {a['pad']} (only 0)")
        convention = a.get("pooling_convention", "valid")
        if convention not in ("valid", "full"):
            raise self.unsupported(node, f"pooling_convention {convention!r} (only valid, full)")
        self.layers.append(Pool(kernel[0], stride[0], kind, ceil=convention == "full"))

    def add_dense(self, node: dict, a: dict[str, str]) -> None:
        flat_input = any(isinstance(layer, (Flatten, Dense)) for layer in self.layers)
        if not _bool(a.get("flatten", "True")) and not flat_input:
            raise self.unsupported(node, "flatten=False on a feature map")
        hidden = self.size(node, a, "num_hidden", MAX_HIDDEN)
        name = self.next_name("fc")
        self.args[f"{name}.weight"] = self.arg(node, 1, "weight")
        if _bool(a.get("no_bias", "False")):
            self.missing_bias.append(f"{name}.bias")  # our Dense always has a bias: load_mxnet gives it zeros
        else:
            self.args[f"{name}.bias"] = self.arg(node, 2, "bias")
        self.layers.append(Dense(hidden))


def _flat_features(layers: list[Layer], size: int) -> int | None:
    """Inputs of the first Dense for `size` x `size` images, or None where a layer does not fit."""
    c, h = 1, size
    for layer in layers:
        if isinstance(layer, Conv):
            c, h = layer.out_channels, h - layer.kernel + 1
        elif isinstance(layer, Pool):
            h = pool_out(h, layer.size, layer.stride, layer.ceil)
        elif isinstance(layer, Dense):
            return c * h * h
        if h < 1:
            return None
    return None


def _derive_image_size(layers: list[Layer], fc_in: int, source: str) -> int:
    """The smallest S whose flattened map feeds the first FC exactly (larger S can give the same size when pooling
    drops the last row; the smallest wastes no pixels and is what the course used)."""
    smallest = max((layer.kernel for layer in layers if isinstance(layer, Conv)), default=1)
    for size in range(smallest, MAX_IMAGE_SIZE + 1):
        if _flat_features(layers, size) == fc_in:
            return size
    raise UsageError(
        f"MXNet symbol {source}: no image size up to {MAX_IMAGE_SIZE} gives the {fc_in} inputs of the first "
        "FullyConnected; pass --image-size"
    )


def spec_from_symbol(
    symbol: dict, name: str, image_size: int | None = None, params: dict | None = None, source: str | None = None
) -> tuple[NetSpec, dict[str, str]]:
    """The NetSpec of a chain-shaped MXNet graph, and our param names -> its arg names (in NetSpec order).

    Without `image_size` the input size comes from the first FullyConnected's weight in `params` (MXNet arg names).
    A FullyConnected with no_bias has no entry for its `fcN.bias`: it is zero.
    """
    source = source or name
    if not isinstance(symbol, dict) or not isinstance(symbol.get("nodes"), list):
        raise UsageError(f"MXNet symbol {source} has no 'nodes' list; {SYMBOL_FIX}")
    _check_nodes(symbol["nodes"], source)
    graph = _Graph(symbol, source)
    try:
        graph.walk()
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise UsageError(
            f"MXNet symbol {source} is malformed ({type(e).__name__}: {str(e)[:80]}); pass the PREFIX-symbol.json saved with the weights"
        ) from None
    if image_size is None:
        image_size = _image_size_from_params(graph, params, source)
    spec = NetSpec(name, image_size, tuple(graph.layers), f"imported from MXNet symbol {source}")
    total = sum(math.prod(shape) for shape in spec.param_shapes.values())
    if total > MAX_PARAMS:
        raise UsageError(f"MXNet symbol {source} declares a network of {total} parameters, more than the {MAX_PARAMS} "
                         f"convbench accepts; {SYMBOL_FIX}")
    mapping = {p: graph.args[p] for p in spec.param_shapes if p in graph.args}
    return spec, mapping


def _image_size_from_params(graph: _Graph, params: dict | None, source: str) -> int:
    fc_arg = graph.args.get("fc1.weight")
    if fc_arg is not None and params is not None and fc_arg not in params:  # the weights are short, not the size
        raise UsageError(f"MXNet weights for {source} lack {fc_arg}, the first FullyConnected's weight; pass the "
                         "PREFIX-NNNN.params saved with this symbol")
    if fc_arg is None or params is None:
        why = "has no FullyConnected" if fc_arg is None else "comes without its weights"
        raise UsageError(f"MXNet symbol {source} {why}, so its image size cannot be derived; pass --image-size")
    shape = tuple(params[fc_arg].shape)
    if len(shape) != 2:
        raise UsageError(f"MXNet weights for {source}: {fc_arg} has shape {shape}, expected 2-D; pass the weights saved with this symbol")
    return _derive_image_size(graph.layers, shape[1], source)


# ---------------------------------------------------------------------------------------------------------------
# Both together


def _prefix(path: Path) -> str:
    """`sp19-ece408-0002.params` -> `sp19-ece408` (MXNet's checkpoint naming: PREFIX-EPOCH.params)."""
    match = re.fullmatch(r"(.+)-\d+", path.stem)
    if not match:
        raise UsageError(f"MXNet weights {path} are not named PREFIX-NNNN.params; rename them so PREFIX-symbol.json can be found")
    return match.group(1)


def _known_spec(prefix: str, spec: NetSpec) -> NetSpec:
    """Our NETWORKS entry where the files are one of the course's networks, so `--net sp19` fits trivially."""
    for key, known in NETWORKS.items():
        if prefix.startswith(key) and known.layers == spec.layers and known.input_size == spec.input_size:
            return known
    return spec


def _rename(arrays: dict[str, np.ndarray], mapping: dict[str, str], spec: NetSpec, source: str) -> dict[str, torch.Tensor]:
    missing = [mx for mx in mapping.values() if mx not in arrays]
    unused = [mx for mx in arrays if mx not in mapping.values()]
    if missing or unused:
        problem = f"lack {', '.join(missing)}" if missing else f"hold {', '.join(unused)}, which the symbol does not use"
        raise UsageError(f"MXNet weights {source} {problem}; pass the PREFIX-symbol.json saved with these weights")
    params = {ours: torch.from_numpy(arrays[mx].copy()) for ours, mx in mapping.items()}
    for name, shape in spec.param_shapes.items():
        if name not in params:
            params[name] = torch.zeros(shape)  # a FullyConnected with no_bias
    return params


def _check_image_size(spec: NetSpec, mapping: dict[str, str], arrays: dict[str, np.ndarray], source: str) -> None:
    """A wrong --image-size shows up as a first-FC mismatch: say so, rather than "weights do not fit"."""
    fc_arg = mapping.get("fc1.weight")
    if fc_arg not in arrays or arrays[fc_arg].ndim != 2:
        return  # _rename / check_params report it
    need, have = spec.param_shapes["fc1.weight"][1], arrays[fc_arg].shape[1]
    if need != have:
        raise UsageError(
            f"MXNet weights {source}: --image-size {spec.input_size} gives the first FullyConnected {need} inputs, "
            f"the weights have {have}; leave out --image-size to use the size they were trained for"
        )


def load_mxnet(params_path: Path, image_size: int | None = None) -> Weights:
    """Weights from `PREFIX-NNNN.params` and the network from `PREFIX-symbol.json` beside it."""
    path = Path(params_path)
    prefix = _prefix(path)
    symbol_path = path.with_name(f"{prefix}-symbol.json")
    if not symbol_path.is_file():
        raise UsageError(f"MXNet weights {path} need their graph {symbol_path}, which is missing; put the symbol file beside them")
    symbol = load_symbol(symbol_path)
    arrays = read_ndarray_list(path)
    spec, mapping = spec_from_symbol(symbol, prefix, image_size, arrays, source=str(symbol_path))
    if image_size is not None:
        _check_image_size(spec, mapping, arrays, str(path))
    spec = _known_spec(prefix, spec)
    params = check_params(spec, _rename(arrays, mapping, spec, str(path)), str(path))
    return Weights(spec, params, path.name, {"source": "mxnet", "symbol": symbol_path.name})
