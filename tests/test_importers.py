"""The course's own files (MXNet symbol/params, mini-dnn .bin) import into the right networks, and bad files fail
with a UsageError rather than garbage weights. Fixtures are read in place from ../shared/fixtures, never copied."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import conftest
import numpy as np
import pytest
import torch

from convbench.core.errors import UsageError
from convbench.core.spec import NETWORKS, Conv
from convbench.network.import_minidnn import load_minidnn, save_minidnn
from convbench.network.import_mxnet import (
    load_mxnet,
    load_symbol,
    read_ndarray_list,
    spec_from_symbol,
)
from convbench.network.weights import load_weights

FIXTURES = conftest.FIXTURES / "course"
MXNET = FIXTURES / "mxnet"
SP19_PARAMS = MXNET / "sp19-ece408-0002.params"
MINIDNN_BIN = FIXTURES / "minidnn" / "weights-86.bin"

# What the fixtures README says of each semester: image size, conv (out, kernel) layers, FC (in, out) layers.
SEMESTERS = {
    "fa17": (28, [(50, 5)], [(7200, 500), (500, 10)]),
    "sp18": (64, [(6, 5), (16, 5)], [(16 * 26 * 26, 140), (140, 10)]),
    "fa18": (72, [(12, 7), (24, 7)], [(24 * 27 * 27, 160), (160, 10)]),
    "sp19": (48, [(6, 5), (16, 5)], [(16 * 18 * 18, 140), (140, 10)]),
    "fa19": (70, [(12, 5), (24, 5)], [(24 * 29 * 29, 160), (160, 10)]),
}


def need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"course fixture {path} is absent (tests read ../shared/fixtures beside the repo)")
    return path


def symbol_files() -> list[Path]:
    return sorted(MXNET.glob("*-symbol.json")) if MXNET.is_dir() else []


# ---------------------------------------------------------------------------------------------------------------
# MXNet


@pytest.mark.parametrize("path", symbol_files() or [MXNET / "(no symbol files)"], ids=lambda p: p.name)
def test_symbol_builds_the_readme_network(path: Path) -> None:
    need(path)
    net = path.name[:4]
    size, convs, fcs = SEMESTERS[net]
    spec, mapping = spec_from_symbol(load_symbol(path), net, image_size=size)
    assert [(layer.out_channels, layer.kernel) for layer in spec.layers if isinstance(layer, Conv)] == convs
    shapes = spec.param_shapes
    assert [shapes[f"fc{i + 1}.weight"][::-1] for i in range(len(fcs))] == fcs
    assert spec.layers == NETWORKS[net].layers
    assert list(mapping) == list(shapes)
    assert mapping["conv1.weight"] == "new0_weight"
    assert mapping["fc1.bias"] == "fullyconnected0_bias"


def test_sp19_params_load_and_derive_image_size() -> None:
    w = load_mxnet(need(SP19_PARAMS))
    assert w.spec is NETWORKS["sp19"]
    assert w.spec.input_size == 48
    assert {k: tuple(v.shape) for k, v in w.params.items()} == NETWORKS["sp19"].param_shapes
    assert all(v.dtype == torch.float32 for v in w.params.values())
    assert w.label == "sp19-ece408-0002.params"
    assert w.metadata == {"source": "mxnet", "symbol": "sp19-ece408-symbol.json"}


def test_read_ndarray_list_strips_prefixes() -> None:
    arrays = read_ndarray_list(need(SP19_PARAMS))
    assert set(arrays) == {
        "new0_weight", "new1_weight", "fullyconnected0_weight", "fullyconnected0_bias",
        "fullyconnected1_weight", "fullyconnected1_bias",
    }
    assert arrays["new1_weight"].shape == (16, 6, 5, 5)
    assert arrays["new1_weight"].dtype == np.float32


def test_sp19_params_do_not_fit_fa19() -> None:
    with pytest.raises(UsageError, match="fa19"):
        load_weights(str(need(SP19_PARAMS)), net="fa19")


def test_sp19_params_with_net_sp19() -> None:
    assert load_weights(str(need(SP19_PARAMS)), net="sp19").spec is NETWORKS["sp19"]


def test_truncated_params(tmp_path: Path) -> None:
    data = need(SP19_PARAMS).read_bytes()
    (tmp_path / "sp19-ece408-symbol.json").write_bytes((MXNET / "sp19-ece408-symbol.json").read_bytes())
    for cut in (10, 100, len(data) // 2, len(data) - 3):
        bad = tmp_path / "sp19-ece408-0002.params"
        bad.write_bytes(data[:cut])
        with pytest.raises(UsageError, match="truncated"):
            read_ndarray_list(bad)
        with pytest.raises(UsageError, match=str(bad)):
            load_mxnet(bad)


def test_params_with_trailing_bytes_or_bad_magic(tmp_path: Path) -> None:
    data = need(SP19_PARAMS).read_bytes()
    bad = tmp_path / "x-0001.params"
    bad.write_bytes(data + b"\0")
    with pytest.raises(UsageError, match="left"):
        read_ndarray_list(bad)
    bad.write_bytes(data[:24] + b"\0\0\0\0" + data[28:])
    with pytest.raises(UsageError, match="magic"):
        read_ndarray_list(bad)


def _ndarray_list(arrays: dict[str, np.ndarray], flag: int = 0) -> bytes:
    """A tiny MXNet NDArray list, so reader cases need no fixture."""
    dtype = {0: "<f4", 1: "<f8", 2: "<f2"}[flag]
    out = [struct.pack("<QQQ", 0x112, 0, len(arrays))]
    for arr in arrays.values():
        out.append(struct.pack("<IiI", 0xF993FAC9, 0, arr.ndim) + struct.pack(f"<{arr.ndim}q", *arr.shape))
        out.append(struct.pack("<iii", 1, 0, flag) + arr.astype(dtype).tobytes())
    out.append(struct.pack("<Q", len(arrays)))
    for name in arrays:
        out.append(struct.pack("<Q", len(name) + 4) + f"arg:{name}".encode())
    return b"".join(out)


@pytest.mark.parametrize("flag", [0, 1, 2])
def test_read_ndarray_list_dtypes(tmp_path: Path, flag: int) -> None:
    arrays = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([0.5, -1.0], dtype=np.float32)}
    path = tmp_path / "t-0000.params"
    path.write_bytes(_ndarray_list(arrays, flag))
    got = read_ndarray_list(path)
    assert list(got) == ["a", "b"]
    for name, arr in arrays.items():
        assert got[name].dtype == np.float32
        np.testing.assert_array_equal(got[name], arr)


def _tiny_symbol(ops: list[dict]) -> dict:
    """A chain symbol: data -> each op (with its weight/bias null nodes) in turn."""
    nodes: list[dict] = [{"op": "null", "name": "data", "inputs": []}]
    for op in ops:
        inputs = [[len(nodes) - 1, 0, 0]]
        for arg in op.pop("args", []):
            nodes.append({"op": "null", "name": f"{op['name']}_{arg}", "inputs": []})
            inputs.append([len(nodes) - 1, 0, 0])
        nodes.append({**op, "inputs": inputs})
    return {"nodes": nodes, "heads": [[len(nodes) - 1, 0, 0]]}


def _fc(name: str, n: int, **attrs: str) -> dict:
    args = ["weight"] if attrs.get("no_bias") == "True" else ["weight", "bias"]
    return {"op": "FullyConnected", "name": name, "attrs": {"num_hidden": str(n), **attrs}, "args": args}


def test_unsupported_op() -> None:
    symbol = _tiny_symbol([{"op": "BatchNorm", "name": "bn0"}, {"op": "Flatten", "name": "f"}, _fc("fc0", 10)])
    with pytest.raises(UsageError, match="BatchNorm"):
        spec_from_symbol(symbol, "x", image_size=8)


@pytest.mark.parametrize(
    "attrs, what",
    [
        ({"no_bias": "False"}, "bias"),
        ({"no_bias": "True", "stride": "(2, 2)"}, "stride"),
        ({"no_bias": "True", "pad": "(1, 1)"}, "pad"),
        ({"no_bias": "True", "num_group": "2"}, "num_group"),
        ({"no_bias": "True", "kernel": "(3, 5)"}, "kernel"),
    ],
)
def test_unsupported_convolution(attrs: dict, what: str) -> None:
    conv = {"op": "Convolution", "name": "c0", "args": ["weight"], "attrs": {"kernel": "(3, 3)", "num_filter": "2", **attrs}}
    symbol = _tiny_symbol([conv, {"op": "Flatten", "name": "f"}, _fc("fc0", 10)])
    with pytest.raises(UsageError, match=what):
        spec_from_symbol(symbol, "x", image_size=8)


def test_plain_convolution_pool_full_and_no_bias_fc() -> None:
    conv = {"op": "Convolution", "name": "c0", "args": ["weight"],
            "param": {"kernel": "(3, 3)", "num_filter": "2", "no_bias": "True", "stride": "(1, 1)", "pad": "(0, 0)"}}
    pool = {"op": "Pooling", "name": "p0", "attr": {"kernel": "(4, 4)", "stride": "(4, 4)", "pool_type": "avg",
                                                     "pooling_convention": "full"}}
    act = {"op": "Activation", "name": "a0", "attrs": {"act_type": "relu"}}
    symbol = _tiny_symbol([conv, act, pool, _fc("fc0", 10, no_bias="True"), {"op": "softmax", "name": "s"}])
    params = {"c0_weight": np.zeros((2, 1, 3, 3)), "fc0_weight": np.zeros((10, 2 * 3 * 3))}
    spec, mapping = spec_from_symbol(symbol, "tiny", params=params)
    assert spec.input_size == 11  # 11 -> conv 9 -> ceil pool 4/4 -> 3
    assert mapping == {"conv1.weight": "c0_weight", "fc1.weight": "fc0_weight"}
    assert spec.layers[2].ceil and spec.layers[2].kind == "avg"


def test_non_chain_symbol() -> None:
    symbol = _tiny_symbol([{"op": "Flatten", "name": "f"}, _fc("fc0", 10)])
    symbol["nodes"][-1]["inputs"][0] = [0, 0, 0]  # FC reads data directly: Flatten's output goes nowhere
    with pytest.raises(UsageError, match="chain"):
        spec_from_symbol(symbol, "x", image_size=8)


def test_image_size_needs_params_or_flag() -> None:
    symbol = load_symbol(need(MXNET / "fa19-ece408-symbol.json"))
    with pytest.raises(UsageError, match="--image-size"):
        spec_from_symbol(symbol, "fa19")
    with pytest.raises(UsageError, match="--image-size"):
        spec_from_symbol(symbol, "fa19", params={"fullyconnected0_weight": np.zeros((160, 7))})


def test_missing_symbol_file(tmp_path: Path) -> None:
    bad = tmp_path / "sp19-ece408-0002.params"
    bad.write_bytes(need(SP19_PARAMS).read_bytes())
    with pytest.raises(UsageError, match="sp19-ece408-symbol.json"):
        load_mxnet(bad)


def test_invalid_symbol_json(tmp_path: Path) -> None:
    bad = tmp_path / "broken-symbol.json"
    bad.write_text("{not json")
    with pytest.raises(UsageError, match="JSON"):
        load_symbol(bad)


def test_unknown_prefix_keeps_built_spec(tmp_path: Path) -> None:
    data = need(SP19_PARAMS).read_bytes()
    (tmp_path / "mine-symbol.json").write_text(json.dumps(load_symbol(MXNET / "sp19-ece408-symbol.json")))
    (tmp_path / "mine-0007.params").write_bytes(data)
    w = load_mxnet(tmp_path / "mine-0007.params")
    assert w.spec.name == "mine" and w.spec.layers == NETWORKS["sp19"].layers and w.spec.input_size == 48


# ---------------------------------------------------------------------------------------------------------------
# mini-dnn


def _random_minidnn(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {name: torch.randn(shape, generator=g) for name, shape in NETWORKS["minidnn"].param_shapes.items()}


def test_minidnn_bin_loads() -> None:
    w = load_minidnn(need(MINIDNN_BIN))
    assert w.spec is NETWORKS["minidnn"]
    assert {k: tuple(v.shape) for k, v in w.params.items()} == NETWORKS["minidnn"].param_shapes
    assert w.label == "weights-86.bin" and w.metadata == {"source": "mini-dnn"}


def test_minidnn_fc_layout() -> None:
    """Element (i, o) of FC 1296->32 sits at o*1296 + i of layer 6's floats, i.e. fc1.weight[o, i]."""
    data = need(MINIDNN_BIN).read_bytes()
    offset = 4 + sum(4 + 4 * n for n in (200, 0, 0, 3152, 0, 0)) + 4
    w = load_minidnn(MINIDNN_BIN).params["fc1.weight"]
    for o, i in ((0, 0), (3, 17), (31, 1295)):
        (value,) = struct.unpack_from("<f", data, offset + 4 * (o * 1296 + i))
        assert w[o, i].item() == value


def test_minidnn_round_trip(tmp_path: Path) -> None:
    params = _random_minidnn()
    path = tmp_path / "w.bin"
    save_minidnn(path, params)
    assert path.stat().st_size == 4 + 4 * 10 + 4 * (200 + 3152 + 41504 + 330)
    loaded = load_minidnn(path).params
    assert list(loaded) == list(params)
    for name in params:
        torch.testing.assert_close(loaded[name], params[name], rtol=0, atol=0)


def test_minidnn_truncated(tmp_path: Path) -> None:
    path = tmp_path / "w.bin"
    save_minidnn(path, _random_minidnn())
    data = path.read_bytes()
    for cut in (2, 6, 900, len(data) - 1):
        path.write_bytes(data[:cut])
        with pytest.raises(UsageError, match="truncated"):
            load_minidnn(path)
    path.write_bytes(data + b"\0\0\0\0")
    with pytest.raises(UsageError, match="left"):
        load_minidnn(path)


def test_minidnn_wrong_counts(tmp_path: Path) -> None:
    path = tmp_path / "w.bin"
    path.write_bytes(struct.pack("<i", 9) + b"\0" * 36)
    with pytest.raises(UsageError, match="9 layers"):
        load_minidnn(path)
    path.write_bytes(struct.pack("<ii", 10, 196) + b"\0" * (4 * 196))  # conv1 without its biases
    with pytest.raises(UsageError, match="196 values"):
        load_minidnn(path)


def test_minidnn_fixture_truncated(tmp_path: Path) -> None:
    path = tmp_path / "weights-86.bin"
    path.write_bytes(need(MINIDNN_BIN).read_bytes()[:-10])
    with pytest.raises(UsageError, match="truncated"):
        load_minidnn(path)


def test_save_minidnn_checks_shapes(tmp_path: Path) -> None:
    params = _random_minidnn()
    params["fc1.weight"] = torch.zeros(1296, 32)
    with pytest.raises(UsageError, match="fc1.weight"):
        save_minidnn(tmp_path / "w.bin", params)


def test_wrong_image_size_for_params() -> None:
    with pytest.raises(UsageError, match="--image-size 64"):
        load_mxnet(need(SP19_PARAMS), image_size=64)
