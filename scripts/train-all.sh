#!/usr/bin/env bash
# Re-make every shipped weights file (src/convbench/weights/) on the CPU: about 20-25 minutes on 2 cores.
# Needs the virtual environment of scripts/setup.sh (a fresh clone: run that first) and the Fashion-MNIST train set.
set -euo pipefail
cd "$(dirname "$0")/.."
cb=.venv/bin/convbench
if [ ! -x "$cb" ]; then
    echo "train-all: $cb not found; run scripts/setup.sh first (it makes .venv)" >&2
    exit 2
fi
out=src/convbench/weights
"$cb" train fa17 --variant high --out "$out"
"$cb" train fa17 --variant low --out "$out"
for net in sp18 fa18 sp19 fa19 minidnn; do
    "$cb" train "$net" --out "$out"
done
