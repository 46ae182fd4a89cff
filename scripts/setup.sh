#!/usr/bin/env bash
# Set up convbench on a fresh Debian 12 / Python 3.11 machine (no GPU needed):
#   1. the Fashion-MNIST Debian package, if missing (needs root; without it the bundled t10k set is used,
#      and `convbench train` has no train set)
#   2. a virtual environment in .venv with convbench, its test tools and the CPU build of PyTorch.
# Safe to run again. On a GPU machine whose Python already has a CUDA build of torch, use
#   pip install -e '.[test]'   in that environment instead.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "setup: installing the Debian package dataset-fashion-mnist"
        { apt-get install -y -q dataset-fashion-mnist || { apt-get update -q && apt-get install -y -q dataset-fashion-mnist; }; } >/dev/null \
            || echo "setup: could not install dataset-fashion-mnist; using the bundled t10k set (training needs the train set)"
    else
        echo "setup: dataset-fashion-mnist is not installed (run as root: apt-get install dataset-fashion-mnist); using the bundled t10k set"
    fi
fi

python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# torch==2.13.0 is the CPU build (a wheel on disk on the project's machines); an unpinned torch pulls a CUDA build.
.venv/bin/python -m pip install -q torch==2.13.0 -e '.[test]'
echo "setup: done. Try: .venv/bin/convbench run"
