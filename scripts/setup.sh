#!/usr/bin/env bash
# Set up convbench on a fresh Debian 12 / Python 3.11 machine (no GPU needed):
#   1. the Debian package dataset-fashion-mnist, if missing (needs root; without it the bundled t10k set is used
#      and `convbench train` has no train set)
#   2. the Debian packages postgresql, chromium and chromium-driver, if missing (needs root): the service's tests run
#      against a real PostgreSQL server and a real headless browser (scripts/services.sh starts them); without them
#      those tests skip (and fail in CI)
#   3. a virtual environment in .venv with convbench, its test tools, the web service's packages and the CPU build
#      of PyTorch.
# Safe to run again. On a GPU machine whose Python already has a CUDA build of torch, use
#   pip install -e '.[test,service]'   in that environment instead.
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

# The service's tests: a real PostgreSQL server and a real headless Chromium with its driver (scripts/services.sh
# starts a throwaway cluster; the system one is never used). --no-install-recommends: chromium's recommends pull in
# systemd, avahi and samba, none of which headless tests need.
missing=()
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || missing+=(postgresql)
command -v chromium >/dev/null || missing+=(chromium)
command -v chromedriver >/dev/null || missing+=(chromium-driver)
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "setup: installing the Debian packages ${missing[*]} (the service's tests use them)"
        # noninteractive: debconf has no terminal to ask on here; its note that apt-utils is missing is no news
        apt_install() {
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" \
                2> >(grep -v '^debconf: delaying package configuration' >&2)
        }
        { apt_install "${missing[@]}" || { apt-get update -q && apt_install "${missing[@]}"; }; } >/dev/null \
            || echo "setup: could not install ${missing[*]}; the service's PostgreSQL / browser tests will skip (and fail in CI)"
    else
        echo "setup: ${missing[*]} not installed (run as root: apt-get install ${missing[*]}); the service's PostgreSQL / browser tests will skip"
    fi
fi

# pip, quietly: its warnings about this machine's own pip configuration (extra index folders that do not exist) are
# not about convbench; anything else it says still shows.
pip_install() {
    .venv/bin/python -m pip install -q "$@" 2> >(grep -v "^WARNING: Location '.*' is ignored" >&2)
}

python3 -m venv .venv
pip_install --upgrade pip
# The torch build: TORCH_SPEC (default torch==2.13.0) from TORCH_INDEX_URL if set. On the project's machines
# torch==2.13.0 is a CPU wheel on disk; from PyPI alone it is the CUDA build (several GB). For the CPU build from
# PyTorch's own index: TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu bash scripts/setup.sh
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
if [ -n "${TORCH_INDEX_URL:-}" ]; then
    pip_install "$TORCH_SPEC" --index-url "$TORCH_INDEX_URL"
else
    pip_install "$TORCH_SPEC"
fi
pip_install -e '.[test,service]'
build=$(.venv/bin/python -c "import torch; print('CUDA ' + torch.version.cuda if torch.version.cuda else 'CPU')")
echo "setup: done (torch $(.venv/bin/python -c 'import torch; print(torch.__version__)'), $build build)."
echo "setup: try .venv/bin/convbench run   (or: source .venv/bin/activate, then convbench run)"
