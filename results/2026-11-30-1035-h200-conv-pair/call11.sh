# session 15, call 11 (the committed tree, on call 10's machine, whose pytest ran out of its 100 s after 15 passed):
# the two whole-network GPU tests that time stages and report the floor, alone
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache
timeout 60 python3 -m pytest -q -rf -m gpu -p no:cacheprovider tests/test_whole.py -k "stage_times_cover or benchmark_reports" > $OUT/call11-pytest.txt 2>&1
