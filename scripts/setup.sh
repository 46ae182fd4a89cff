#!/usr/bin/env bash
# Set up convbench on a fresh Debian 12 / Python 3.11 machine (no GPU needed):
#   1. the Debian package dataset-fashion-mnist, if missing (needs root; without it the bundled t10k set is used
#      and `convbench train` has no train set)
#   2. the Debian packages postgresql, chromium and chromium-driver, if missing (needs root): the service's tests run
#      against a real PostgreSQL server and a real headless browser (scripts/services.sh starts them); without them
#      those tests skip (and fail in CI)
#   3. a virtual environment in .venv with PyTorch (the CPU build) and convbench with the extras in
#      CONVBENCH_EXTRAS (default test,postgres: the test tools, the web service with its PostgreSQL driver and
#      plots). CI adds triton (CONVBENCH_EXTRAS=test,postgres,triton) to run the Triton rungs in its interpreter.
# Safe to run again. What could not be installed is said in the last lines, with what that means. On a GPU machine
# whose Python already has a CUDA build of torch, use   pip install -e '.[test,postgres,cuda,triton]'   there.
set -euo pipefail
cd "$(dirname "$0")/.."

not_installed=()  # what setup could not install, and what that means: said in its last lines

# apt-get, quietly; while another apt or dpkg holds its lock ("Could not get lock"), wait for it (up to 5 minutes,
# said once) rather than give up at once and leave a weaker setup behind.
apt_said= apt_timed_out=
apt_get() {
    local deadline=$((SECONDS + 300)) err
    while :; do
        err=$(DEBIAN_FRONTEND=noninteractive apt-get "$@" 2>&1 >/dev/null) && return 0
        if [[ $err != *"Could not get lock"* ]]; then
            # debconf's note that it has no terminal to ask on is no news
            grep -v '^debconf: delaying package configuration' <<<"$err" >&2
            return 1
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            apt_timed_out=1
            return 1
        fi
        [ -n "$apt_said" ] || echo "setup: apt is busy (another apt or dpkg holds its lock); waiting for it, up to 5 minutes"
        apt_said=1
        sleep 5
    done
}
# install, updating the package lists first where they do not know the package yet
apt_install() {
    [ -z "$apt_timed_out" ] || return 1  # waited once already
    apt_get install -y -q --no-install-recommends "$@" 2>/dev/null \
        || { [ -z "$apt_timed_out" ] && apt_get update -q && apt_get install -y -q --no-install-recommends "$@"; }
}
# why apt_install failed, for the NOT installed line
apt_why() { [ -n "$apt_timed_out" ] && echo "apt stayed busy for 5 minutes" || echo "apt-get failed, see above"; }
as_root() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; }

if [ ! -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    if as_root; then
        echo "setup: installing the Debian package dataset-fashion-mnist"
        apt_install dataset-fashion-mnist \
            || not_installed+=("dataset-fashion-mnist ($(apt_why)): runs use the bundled t10k set; convbench train has no train set")
    else
        not_installed+=("dataset-fashion-mnist (not root; as root: apt-get install dataset-fashion-mnist): runs use the bundled t10k set; convbench train has no train set")
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
    if as_root; then
        echo "setup: installing the Debian packages ${missing[*]} (the service's tests use them)"
        apt_install "${missing[@]}" \
            || not_installed+=("${missing[*]} ($(apt_why)): the service's PostgreSQL / browser tests skip (and fail in CI)")
    else
        not_installed+=("${missing[*]} (not root; as root: apt-get install --no-install-recommends ${missing[*]}): the service's PostgreSQL / browser tests skip")
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
pip_install -e ".[${CONVBENCH_EXTRAS:-test,postgres}]"
build=$(.venv/bin/python -c "import torch; print('CUDA ' + torch.version.cuda if torch.version.cuda else 'CPU')")
echo "setup: done (torch $(.venv/bin/python -c 'import torch; print(torch.__version__)'), $build build)."
echo "setup: try .venv/bin/convbench run   (or: source .venv/bin/activate, then convbench run)"
if [ "${#not_installed[@]}" -gt 0 ]; then
    for what in "${not_installed[@]}"; do echo "setup: NOT installed: $what" >&2; done
fi
