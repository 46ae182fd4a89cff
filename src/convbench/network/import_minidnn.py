"""The course's 2020-2024 network from mini-dnn's own `weights-86.bin`.

The file is little-endian: an int32 layer count, then per mini-dnn layer an int32 count and that many float32.
mini-dnn has no Flatten layer (its FC flattens), so its layers are ours without Flatten. A conv layer stores its
weights k[m][c][p][q] then one bias per output channel, which the course never adds: we skip them on load and write
zeros on save. An FC layer stores its weights input-major (element (i, o) at o*n_in + i, so the flat run read as
(out, in) is already our layout), then its biases.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from convbench.core.errors import UsageError
from convbench.core.spec import NETWORKS, Conv, Flatten, LayerInfo
from convbench.network.params import Weights, check_params

NET = "minidnn"
FIX = "pass the course's weights-86.bin (mini-dnn's 86x86 network)"


@dataclass(frozen=True)
class _Block:
    """One mini-dnn layer's run of floats: which of our params it holds, in order, and how many conv biases follow."""

    name: str
    params: tuple[tuple[str, tuple[int, ...]], ...]
    skipped: int  # conv biases: stored, never used

    @property
    def count(self) -> int:
        return sum(math.prod(shape) for _, shape in self.params) + self.skipped


def _block(info: LayerInfo) -> _Block:
    params = tuple(info.params.items())
    skipped = info.layer.out_channels if isinstance(info.layer, Conv) else 0
    return _Block(info.name, params, skipped)


def _layout() -> list[_Block]:
    """mini-dnn's layers, derived from our spec so the counts are never typed in by hand."""
    return [_block(info) for info in NETWORKS[NET].layer_info if not isinstance(info.layer, Flatten)]


def _fail(path: Path, problem: str) -> UsageError:
    return UsageError(f"mini-dnn weights {path}: {problem}; {FIX}")


def _read_int(data: bytes, pos: int, path: Path, what: str) -> int:
    if pos + 4 > len(data):
        raise _fail(path, f"file ends at byte {len(data)} before the {what} (truncated)")
    return struct.unpack_from("<i", data, pos)[0]


def load_minidnn(path: Path) -> Weights:
    """Weights for NETWORKS['minidnn'] from mini-dnn's weights file."""
    path = Path(path)
    blocks = _layout()
    expected = 4 + sum(4 + 4 * block.count for block in blocks)
    try:
        size = path.stat().st_size
        if size > expected:  # checked before reading: a huge file is never read into memory
            raise _fail(path, f"{size - expected} bytes are left after the last layer (it is {size} bytes, the "
                              f"minidnn network's file is {expected})")
        data = path.read_bytes()
    except OSError as e:
        raise UsageError(f"cannot read mini-dnn weights {path}: {e.strerror}; {FIX}") from None
    n_layers = _read_int(data, 0, path, "layer count")
    if n_layers != len(blocks):
        raise _fail(path, f"it has {n_layers} layers, the minidnn network has {len(blocks)}")
    params, pos = {}, 4
    for index, block in enumerate(blocks):
        count = _read_int(data, pos, path, f"count of layer {index}")
        if count != block.count:
            raise _fail(path, f"layer {index} ({block.name}) has {count} values, the minidnn network needs {block.count}")
        pos += 4
        if pos + 4 * count > len(data):
            raise _fail(path, f"file ends at byte {len(data)} inside layer {index} ({block.name}) (truncated)")
        values = np.frombuffer(data, dtype="<f4", count=count, offset=pos)
        pos += 4 * count
        params.update(_split(values, block))
    if pos != len(data):
        raise _fail(path, f"{len(data) - pos} bytes are left after the last layer")
    spec = NETWORKS[NET]
    return Weights(spec, check_params(spec, params, str(path)), path.name, {"source": "mini-dnn"})


def _split(values: np.ndarray, block: _Block) -> dict[str, torch.Tensor]:
    out, start = {}, 0
    for name, shape in block.params:
        n = math.prod(shape)
        out[name] = torch.from_numpy(values[start : start + n].astype(np.float32).reshape(shape))
        start += n
    return out  # what is left (block.skipped conv biases) is ignored


def save_minidnn(path: Path, params: dict) -> None:
    """Write minidnn params (tensors or arrays, our names) in mini-dnn's format, conv biases as zeros."""
    path = Path(path)
    spec = NETWORKS[NET]
    checked = check_params(spec, {k: torch.as_tensor(v) for k, v in params.items()}, str(path))
    blocks = _layout()
    chunks = [struct.pack("<i", len(blocks))]
    for block in blocks:
        chunks.append(struct.pack("<i", block.count))
        for name, _ in block.params:
            chunks.append(checked[name].numpy().astype("<f4").tobytes())
        chunks.append(np.zeros(block.skipped, dtype="<f4").tobytes())
    path.write_bytes(b"".join(chunks))
