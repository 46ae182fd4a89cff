"""Our shipped weights: every network has them, they carry their provenance, they give the Correctness they
claim through a convbench implementation, and `convbench train` reproduces them."""

import pytest
from safetensors import safe_open

from convbench.cli.main import main
from convbench.core.errors import UsageError
from convbench.core.spec import NETWORKS
from convbench.data.fashion_mnist import load_dataset, locate
from convbench.impls.registry import get_impl
from convbench.network.model import Network, correctness
from convbench.network.weights import OWN_DIR, load_weights, own_weights_file

SHIPPED = [(net, None) for net in NETWORKS] + [("fa17", "high"), ("fa17", "low")]


def metadata(net, variant=None) -> dict:
    with safe_open(str(OWN_DIR / own_weights_file(net, variant)), framework="pt") as f:
        return dict(f.metadata())


@pytest.mark.parametrize("net,variant", SHIPPED)
def test_shipped_weights_load_with_provenance(net, variant):
    w = load_weights(variant or "own", net)
    assert w.spec is NETWORKS[net]
    meta = w.metadata
    for key in ("seed", "recipe", "command", "date", "torch", "correctness_100", "correctness_1000", "correctness_10000"):
        assert meta.get(key), f"{net} {variant}: metadata lacks {key}"
    assert meta["command"].startswith(f"convbench train {net}")


@pytest.mark.parametrize("net", list(NETWORKS))
def test_shipped_weights_give_their_correctness(net):
    """Through our own kernel (cpu-parallel), not the library the trainer evaluated with."""
    w = load_weights("own", net)
    data = load_dataset(w.spec.input_size, count=1000, quiet=True)
    impl = get_impl("cpu-parallel")
    impl.prepare()
    pred = Network(w, impl, "cpu").infer(data.images, show_progress=False).predictions
    assert correctness(pred[:100], data.labels[:100]) == float(w.metadata["correctness_100"])
    assert correctness(pred, data.labels) == float(w.metadata["correctness_1000"])


@pytest.mark.parametrize("net,variant", SHIPPED)
def test_trained_well_or_deliberately_not(net, variant):
    acc = float(metadata(net, variant)["correctness_10000"])
    if variant == "low":
        assert 0.6 <= acc <= 0.7, "fa17-low is the course's deliberately brief training"
    else:
        assert acc >= 0.85


def test_variants_only_for_fa17():
    with pytest.raises(UsageError, match="no 'low' weights"):
        load_weights("low", "sp19")


def test_train_reproduces_the_shipped_low_weights(tmp_path, capsys):
    """`convbench train` again gives the shipped Correctness within +-0.005 (the brief fa17-low recipe: seconds)."""
    try:
        locate("train")
    except UsageError as e:
        pytest.skip(f"no Fashion-MNIST train set here ({e})")
    assert main(["train", "fa17", "--variant", "low", "--out", str(tmp_path)]) == 0
    out = tmp_path / "fa17-low.safetensors"
    shipped, fresh = metadata("fa17", "low"), dict(safe_open(str(out), framework="pt").metadata())
    for n in (100, 1000, 10000):
        assert abs(float(fresh[f"correctness_{n}"]) - float(shipped[f"correctness_{n}"])) <= 0.005
    assert f"Correctness at 10000: {fresh['correctness_10000']}" in capsys.readouterr().out
