# call 9 (carry .devrun/s7; diagnostic, nothing kept in the code): conv2's time with the consumers' math removed
# (the producer alone) and with the producer's copies and staging removed (the consumers alone)
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -e . --no-deps --no-build-isolation -q >/dev/null 2>&1
t0=$SECONDS
T=src/convbench/impls/gpu_16_wgmma_taps.cu; G=src/convbench/impls/gpu_15_wgmma.cu; H=src/convbench/core/gpu/wgmma_conv.cuh
cp $T /tmp/T; cp $G /tmp/G; cp $H /tmp/H
timeout 120 python3 .devrun/s7/time_conv2.py 10000 shipped
# producer alone: no tile of an item is multiplied or stored (taps: nb = 0; gpu-wgmma: the tile loop never runs)
sed -i 's|const int nb = cur.nt > wg ? (cur.nt - wg + NWG - 1) / NWG : 0;|const int nb = 0;|' $T
sed -i 's|for (int t0 = wg \* TPW; t0 < cur.nt; t0 += NWG \* TPW) {|for (int t0 = wg * TPW; t0 < 0; t0 += NWG * TPW) {|' $G
grep -c "const int nb = 0;" $T; grep -c "t0 < 0;" $G
timeout 120 python3 .devrun/s7/time_conv2.py 10000 producer-only
cp /tmp/T $T; cp /tmp/G $G
# consumers alone: no copy, no max pass, no staging (the planes keep what they held)
python3 - <<'PY'
p = "src/convbench/core/gpu/wgmma_conv.cuh"
s = open(p).read()
s = s.replace("    for (int c = 0; c < C; ++c)\n        for (int i = t; i < rawc; i += nt) {", "    for (int c = 0; c < 0; ++c)\n        for (int i = t; i < rawc; i += nt) {")
s = s.replace("for (int j = ptid; j < rawn / 4; j += PRODUCERS) {", "for (int j = ptid; j < 0; j += PRODUCERS) {")
s = s.replace("for (int plane = 0; plane < st.G; ++plane) {", "for (int plane = 0; plane < 0; ++plane) {")
open(p, "w").write(s)
PY
grep -c "c < 0;\|j < 0;\|plane < 0;" $H
timeout 120 python3 .devrun/s7/time_conv2.py 10000 consumers-only
cp /tmp/H $H
echo "done $((SECONDS-t0)) s"
