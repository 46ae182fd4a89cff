#!/usr/bin/env bash
# Re-make every shipped weights file (src/convbench/weights/) on the CPU: about 20-25 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
out=src/convbench/weights
convbench train fa17 --variant high --out "$out"
convbench train fa17 --variant low --out "$out"
for net in sp18 fa18 sp19 fa19 minidnn; do
    convbench train "$net" --out "$out"
done
