"""convbench reproduces the course's published Correctness with the course's own model files
(../shared/fixtures, read in place; skipped with a reason where absent)."""

import pytest
from conftest import fixture_file

from convbench.data.fashion_mnist import load_dataset
from convbench.impls.registry import get_impl
from convbench.network.model import Network, correctness
from convbench.network.weights import load_weights


def correctness_at(weights_path, impl_name: str, counts=(100, 1000, 10000)) -> dict[int, float]:
    weights = load_weights(str(weights_path))
    data = load_dataset(weights.spec.input_size, count=max(counts), quiet=True)
    impl = get_impl(impl_name)
    impl.prepare()
    pred = Network(weights, impl, "cpu").infer(data.images, show_progress=False).predictions
    return {n: correctness(pred[:n], data.labels[:n]) for n in counts}


@pytest.mark.parametrize("impl", ["cpu-parallel", "onednn"])
def test_minidnn_course_weights(impl):
    acc = correctness_at(fixture_file("course", "minidnn", "weights-86.bin"), impl, (100, 1000, 5000, 10000))
    assert acc == {100: 0.86, 1000: 0.886, 5000: 0.871, 10000: 0.8714}


@pytest.mark.parametrize("impl", ["cpu-unroll", "onednn"])
def test_sp19_course_weights(impl):
    acc = correctness_at(fixture_file("course", "mxnet", "sp19-ece408-0002.params"), impl)
    assert acc[100] == 0.84 and acc[1000] == 0.852
    assert acc[10000] == pytest.approx(0.8397, abs=1e-4)  # one image sits within 5e-4 of a tie (fixtures README)


def test_course_labels_match_the_test_set():
    """mini-dnn's labels file (the course's IDX variant) holds the same labels as Fashion-MNIST t10k."""
    from convbench.data.idx import read_idx

    labels = read_idx(fixture_file("course", "minidnn", "t10k-86-labels-idx1-ubyte"))
    assert (labels == load_dataset(86, quiet=True).labels).all()
