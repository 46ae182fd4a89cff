for tool in memcheck racecheck synccheck; do
  compute-sanitizer --tool $tool --error-exitcode 9 python3 -m pytest -q -m gpu tests/test_whole.py -k "dense_matches and tf32x3" -p no:cacheprovider 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed|Error" | tail -4
  echo "$tool rc=${PIPESTATUS[0]}"
done
