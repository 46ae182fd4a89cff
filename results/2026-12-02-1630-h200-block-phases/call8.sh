# session 25, call 8 (the tree of 96b353e): the shipped 16-byte copies (BULK=0) under memcheck on san_bulk.py's inputs
export PYTHONPATH=$PWD/src CONVBENCH_CACHE=/tmp/cbcache
BULK=0 PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 python3 .devrun/s25/san_bulk.py > $OUT/san-memcheck-copy.txt 2>&1
