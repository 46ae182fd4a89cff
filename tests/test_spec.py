"""The course networks as data: shapes, parameter shapes and costs follow from the spec."""

import pytest

from convbench.core.errors import UsageError
from convbench.core.spec import NETWORKS, Conv, NetSpec, Pool, get_network, pool_out

# (input size, conv outputs (M, H_out), first FC's input features), worked out by hand from the course's tables.
EXPECTED = {
    "fa17": (28, [(50, 24)], 50 * 12 * 12),
    "sp18": (64, [(6, 60), (16, 26)], 16 * 26 * 26),
    "fa18": (72, [(12, 66), (24, 27)], 24 * 27 * 27),
    "sp19": (48, [(6, 44), (16, 18)], 16 * 18 * 18),
    "fa19": (70, [(12, 66), (24, 29)], 24 * 29 * 29),
    "minidnn": (86, [(4, 80), (16, 34)], 16 * 9 * 9),
}


@pytest.mark.parametrize("name", NETWORKS)
def test_network_shapes(name):
    spec = get_network(name)
    size, convs, fc_in = EXPECTED[name]
    assert spec.input_size == size
    assert [(i.out_shape[0], i.out_shape[1]) for i in spec.conv_layers] == convs
    assert spec.param_shapes["fc1.weight"] == (spec.param_shapes["fc1.weight"][0], fc_in)
    assert spec.layer_info[-1].out_shape == (10,)
    assert all(not any(n.endswith("bias") for n in i.params) for i in spec.conv_layers), "course convs have no bias"


def test_conv_flops_and_bytes():
    conv2 = get_network("minidnn").conv_layers[1]
    assert conv2.in_shape == (4, 40, 40) and conv2.out_shape == (16, 34, 34)
    assert conv2.flops == 2 * 16 * 34 * 34 * 4 * 7 * 7
    assert conv2.bytes == 4 * (4 * 40 * 40 + 16 * 4 * 7 * 7 + 16 * 34 * 34)


def test_minidnn_ceil_pool_keeps_the_partial_window():
    assert pool_out(34, 4, 4, ceil=True) == 9
    assert pool_out(34, 4, 4, ceil=False) == 8
    assert pool_out(33, 2, 2, ceil=True) == 17  # a window starting at 32 still starts inside the input
    assert pool_out(4, 2, 2, ceil=True) == 2  # no window may start past the edge


def test_bad_specs_are_usage_errors():
    with pytest.raises(UsageError, match="unknown network"):
        get_network("sp20")
    with pytest.raises(UsageError, match="larger than"):
        NetSpec("tiny", 6, (Conv(2, 7),))
    with pytest.raises(UsageError, match="10 classes"):
        NetSpec("noclasses", 8, (Conv(2, 3), Pool(2, 2)))


def test_with_input_size_reshapes_the_network():
    assert get_network("sp18").with_input_size(48).layers == get_network("sp19").layers
    assert get_network("sp18").with_input_size(48).param_shapes == get_network("sp19").param_shapes
