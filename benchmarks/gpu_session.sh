#!/usr/bin/env bash
# One call on the GPU machine: build the extension, run the whole test suite, run the benchmark.
# Logs and results go to $OUT (the device tool's folder) or ./results.
#   STEPS="build test bench small probe models" (default: build test bench), PYTEST_ARGS, BENCH_ARGS,
#   MODELS_ARGS (benchmarks/models.py arguments).
set -uo pipefail
OUT=${OUT:-results}
mkdir -p "$OUT"
STEPS=${STEPS:-"build test bench"}
export PYTHONUNBUFFERED=1
# pytest -n 8 on 16 cores: each worker's CPU float64 references would otherwise use every core
# (the conv test files took over 9 minutes instead of 31 s).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
rc=0
if [[ $STEPS == *build* ]]; then
  t0=$(date +%s)
  MAX_JOBS=${MAX_JOBS:-16} python3 -m pip install --no-build-isolation --no-deps -e . \
    > "$OUT/build.log" 2>&1 || { echo "BUILD FAILED"; grep -E "error|Error" "$OUT/build.log" | head -40; exit 1; }
  echo "build: $(( $(date +%s) - t0 )) s"
fi
if [[ $STEPS == *test* ]]; then
  timeout ${TEST_TIMEOUT:-420} python3 -m pytest -q -rfEs ${PYTEST_ARGS:-tests} > "$OUT/pytest.log" 2>&1 || rc=1
  grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -40; grep -E "^SKIPPED" "$OUT/pytest.log" | cut -c1-150 | sort | uniq -c | sort -rn | head -8
  tail -n 3 "$OUT/pytest.log"
fi
if [[ $STEPS == *bench* ]]; then
  timeout ${BENCH_TIMEOUT:-400} python3 benchmarks/run.py --out "$OUT" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log" || rc=1
fi
if [[ $STEPS == *small* ]]; then
  timeout ${SMALL_TIMEOUT:-200} python3 benchmarks/small_sums.py --out "$OUT" > "$OUT/small.log" 2>&1 || rc=1
  grep -cE "BELOW|BAD" "$OUT/small.log"; grep -E "BELOW|BAD" "$OUT/small.log" | head -20
fi
if [[ $STEPS == *probe* ]]; then
  timeout ${PROBE_TIMEOUT:-120} python3 benchmarks/probe.py --out "$OUT" 2>&1 | tee "$OUT/probe.log" || rc=1
fi
if [[ $STEPS == *models* ]]; then
  timeout ${MODELS_TIMEOUT:-500} python3 benchmarks/models.py --out "$OUT" ${MODELS_ARGS:-} 2>&1 | tee "$OUT/models.log" || rc=1
fi
exit $rc
