#!/usr/bin/env bash
# One call on the GPU machine: build the extension, run the whole test suite, run the benchmark.
# Logs and results go to $OUT (the device tool's folder) or ./results.
#   STEPS   which steps, in this order (default: "build test bench"):
#     build    compile the extension in place (setup.py build_ext --inplace), or unpack
#              .prebuilt/ (benchmarks/prebuild.sh) when it was built from this very tree
#     before   also build the tree in $BEFORE_DIR (default .before: e.g. `git archive <rev>` of the
#              code before a change) in parallel with `build`, and benchmark it into $OUT/before
#     test     the whole pytest suite (pytest-xdist's -n 8 when installed)
#     bench    benchmarks/run.py into $OUT; with `before`, benchmarks/compare.py of the two runs
#     small    benchmarks/small_sums.py (full reductions from 1K to 1M elements in CUDA graphs)
#     sweep    benchmarks/sweep.py, gpukern against torch at every size 1..2^28 ($SWEEP_ARGS, e.g.
#              --quick or --families sum mv), stopping new points after $SWEEP_BUDGET seconds
#              (default: $SWEEP_TIMEOUT - 60) and killed at $SWEEP_TIMEOUT (default 540)
#     algos    benchmarks/algos.py: every reduce / mv algorithm forced on the sweep's slow shapes
#              ($ALGOS_ARGS; e.g. "--from-sweep benchmarks/results/h100_sweep_quick9.json
#              --dtypes bf16" for every 2-D point of a sweep)
#     models   benchmarks/models.py ($MODELS_ARGS)
#     igemm    benchmarks/igemm_layers.py (the tensor-core path's tile configurations, $IGEMM_ARGS)
#     census   benchmarks/layers.py, the layer census ($CENSUS_ARGS), with GPUKERN_CONV_RACE_LOG=1:
#              census.log has each first-call race against cuDNN (csrc/conv/vendor.h)
#     dwgrid   benchmarks/dw_sweep.py, depthwise conv2d across 1,432 shapes ($DWGRID_ARGS; new
#              points stop after $DWGRID_BUDGET seconds, default 380, killed at $DWGRID_TIMEOUT,
#              default 450)
#     variants benchmarks/gemm_variants.py, the bf16 1x1 GEMM tuning experiment (needs a build
#              with GPUKERN_GEMM_VARIANTS=1 in the environment)
#     fuzz     tests/test_fuzz.py with a larger budget: $FUZZ_CASES cases (default 30000) from seed
#              $FUZZ_SEED (default 100000, a range the suite's default run does not draw)
#     multi    the two-GPU tests (tests/test_multi_gpu.py; they skip with one GPU)
#     sanitize compute-sanitizer's memcheck, racecheck, synccheck and initcheck over $SAN_TESTS
#              (a pytest selection; default: the sanitizer-sized tests, `-m sanitize`, and for
#              memcheck and initcheck also the > 2^31-element tests, `-m large_index`), each tool
#              bounded by $SAN_TIMEOUT seconds; the summary lines go to sanitize.txt
#   CUTLASS: when .whl/ holds the nvidia-cutlass wheel (the GPU machine has no network), it is
#   installed into /tmp/site first so that the build has the igemm path.
#   PYTEST_ARGS, BENCH_ARGS (run.py arguments, e.g. --cases dw2), SWEEP_ARGS, *_TIMEOUT (seconds).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-results}
mkdir -p "$OUT"
STEPS=${STEPS:-"build test bench"}
BEFORE_DIR=${BEFORE_DIR:-.before}
export PYTHONUNBUFFERED=1
# pytest -n 8 on 16 cores: each worker's CPU float64 references would otherwise use every core.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
rc=0
if compgen -G ".whl/nvidia_cutlass-*.whl" > /dev/null; then
  [[ -d /tmp/site/cutlass_library ]] || \
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/nvidia_cutlass-*.whl
  [[ -d /tmp/site/cutlass_library ]] && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0a}
fi

build_tree() {  # build_tree DIR LOG JOBS
  local t0=$(date +%s)
  (cd "$1" && MAX_JOBS=$3 python3 setup.py build_ext --inplace > "$2" 2>&1) \
    || { echo "BUILD FAILED in $1"; grep -E "error|Error" "$2" | head -40; return 1; }
  echo "build of $1: $(( $(date +%s) - t0 )) s"
}

prebuilt_ok() {  # .prebuilt (benchmarks/prebuild.sh) built from exactly this tree
  [[ -f .prebuilt/_C.so.xz || -f .prebuilt/_C.so.gz ]] || return 1
  [[ -f .prebuilt/tree.sha && -f .prebuilt/name ]] || return 1
  [[ "$(cat .prebuilt/tree.sha)" == "$(bash benchmarks/tree_hash.sh)" ]]
}
if [[ $STEPS == *build* ]] && [[ $STEPS != *before* ]] && prebuilt_ok; then
  if [[ -f .prebuilt/_C.so.xz ]]; then  # python's lzma: no xz binary needed there
    python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" \
      .prebuilt/_C.so.xz "torch_ops/$(cat .prebuilt/name)"
  else
    gunzip -c .prebuilt/_C.so.gz > "torch_ops/$(cat .prebuilt/name)"
  fi
  echo "build: prebuilt extension unpacked (tree hash $(cat .prebuilt/tree.sha | cut -c1-12))" \
    | tee "$OUT/build.log"
elif [[ $STEPS == *build* ]]; then
  [[ -f .prebuilt/tree.sha ]] && echo "build: .prebuilt is stale (tree hash differs); building"
  if [[ $STEPS == *before* ]]; then
    build_tree "$BEFORE_DIR" "$OUT/build_before.log" 8 & bpid=$!
    build_tree . "$OUT/build.log" 8 || exit 1
    wait $bpid || exit 1
  else
    build_tree . "$OUT/build.log" ${BUILD_JOBS:-16} || exit 1
  fi
fi
if [[ $STEPS == *test* ]]; then
  xdist=""
  python3 -c "import xdist" 2>/dev/null && xdist="-n 8"
  timeout ${TEST_TIMEOUT:-480} python3 -m pytest -q $xdist -rfE ${PYTEST_ARGS:-tests} > "$OUT/pytest.log" 2>&1 || rc=1
  grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -40
  tail -n 3 "$OUT/pytest.log"
fi
if [[ $STEPS == *bench* ]]; then
  if [[ $STEPS == *before* ]]; then
    mkdir -p "$OUT/before"
    t0=$(date +%s)
    timeout ${BENCH_TIMEOUT:-400} python3 "$BEFORE_DIR/benchmarks/run.py" --out "$OUT/before" ${BENCH_ARGS:-} \
      > "$OUT/bench_before.log" 2>&1 || rc=1
    echo "bench before: $(( $(date +%s) - t0 )) s"
  fi
  t0=$(date +%s)
  timeout ${BENCH_TIMEOUT:-400} python3 benchmarks/run.py --out "$OUT" --name bench ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log" || rc=1
  echo "bench: $(( $(date +%s) - t0 )) s"
  if [[ $STEPS == *before* ]]; then
    python3 benchmarks/compare.py "$OUT/before/bench.json" "$OUT/bench.json" | tee "$OUT/compare.txt"
  fi
fi
if [[ $STEPS == *small* ]]; then
  timeout ${SMALL_TIMEOUT:-200} python3 benchmarks/small_sums.py --out "$OUT" > "$OUT/small.log" 2>&1 || rc=1
  grep -cE "BELOW|BAD" "$OUT/small.log"; grep -E "BELOW|BAD" "$OUT/small.log" | head -20
fi
if [[ $STEPS == *sweep* ]]; then
  t0=$(date +%s)
  st=${SWEEP_TIMEOUT:-540}
  timeout $st python3 benchmarks/sweep.py --out "$OUT" --budget ${SWEEP_BUDGET:-$(( st - 60 ))} \
    ${SWEEP_ARGS:-} > "$OUT/sweep.log" 2>&1 || rc=1
  grep -E "^(summary|skipped|[0-9]+ points in)" "$OUT/sweep.log"; tail -n 1 "$OUT/sweep.log"
  echo "sweep: $(( $(date +%s) - t0 )) s"
fi
if [[ $STEPS == *algos* ]]; then
  timeout ${ALGOS_TIMEOUT:-300} python3 benchmarks/algos.py --json "$OUT/algos.json" ${ALGOS_ARGS:-} \
    > "$OUT/algos.log" 2>&1 || rc=1
  cat "$OUT/algos.log"
fi
if [[ $STEPS == *models* ]]; then
  timeout ${MODELS_TIMEOUT:-500} python3 benchmarks/models.py --out "$OUT" ${MODELS_ARGS:-} 2>&1 | tee "$OUT/models.log" || rc=1
fi
if [[ $STEPS == *igemm* ]]; then
  timeout ${IGEMM_TIMEOUT:-200} python3 benchmarks/igemm_layers.py --json "$OUT/igemm_layers.json" \
    ${IGEMM_ARGS:-} > "$OUT/igemm_layers.log" 2>&1 || rc=1
  tail -n 40 "$OUT/igemm_layers.log"
fi
if [[ $STEPS == *variants* ]]; then
  timeout ${VARIANTS_TIMEOUT:-150} python3 benchmarks/gemm_variants.py --json "$OUT/gemm_variants.json" \
    > "$OUT/gemm_variants.log" 2>&1 || rc=1
  cat "$OUT/gemm_variants.log"
fi
if [[ $STEPS == *census* ]]; then
  GPUKERN_CONV_RACE_LOG=1 timeout ${CENSUS_TIMEOUT:-500} python3 benchmarks/layers.py \
    --out "$OUT" ${CENSUS_ARGS:-} > "$OUT/census.log" 2>&1 || rc=1
  tail -n 60 "$OUT/census.log"
fi
if [[ $STEPS == *dwgrid* ]]; then
  timeout ${DWGRID_TIMEOUT:-450} python3 benchmarks/dw_sweep.py --budget ${DWGRID_BUDGET:-380} \
    --out "$OUT" ${DWGRID_ARGS:-} > "$OUT/dw_sweep.log" 2>&1 || rc=1
  tail -n 30 "$OUT/dw_sweep.log"
fi
if [[ $STEPS == *fuzz* ]]; then
  t0=$(date +%s)
  xdist=""
  python3 -c "import xdist" 2>/dev/null && xdist="-n 8"
  GPUKERN_FUZZ_CASES=${FUZZ_CASES:-30000} GPUKERN_FUZZ_SEED=${FUZZ_SEED:-100000} \
    timeout ${FUZZ_TIMEOUT:-400} python3 -m pytest -q $xdist -rfE "tests/test_fuzz.py::test_fuzz" ${FUZZ_K:+-k "$FUZZ_K"} \
    > "$OUT/fuzz.log" 2>&1 || rc=1
  grep -E "^(FAILED|ERROR)|GPUKERN_FUZZ_REPLAY" "$OUT/fuzz.log" | head -20
  echo "fuzz (${FUZZ_CASES:-30000} cases a device, seed ${FUZZ_SEED:-100000}): $(tail -n 1 "$OUT/fuzz.log"), $(( $(date +%s) - t0 )) s"
fi
if [[ $STEPS == *multi* ]]; then
  nvidia-smi -L
  timeout ${MULTI_TIMEOUT:-300} python3 -m pytest -q -rfEs tests/test_multi_gpu.py \
    > "$OUT/multi_gpu.log" 2>&1 || rc=1
  grep -E "^(FAILED|ERROR|SKIPPED)" "$OUT/multi_gpu.log" | head -20; tail -n 1 "$OUT/multi_gpu.log"
fi
if [[ $STEPS == *sanitize* ]]; then
  : > "$OUT/sanitize.txt"
  san_one() {  # san_one TOOL: one sanitizer over its selection; its summary line to sanitize.txt
    local tool=$1 t0=$(date +%s) sel
    if [[ -n ${SAN_TESTS:-} ]]; then sel=($SAN_TESTS)
    elif [[ $tool == memcheck || $tool == initcheck ]]; then sel=(-m "sanitize or large_index" tests)
    else sel=(-m sanitize tests); fi
    timeout ${SAN_TIMEOUT:-240} compute-sanitizer --tool $tool --error-exitcode 3 \
      --target-processes all python3 -m pytest -q -p no:xdist -p no:cacheprovider \
      "${sel[@]}" > "$OUT/sanitize_$tool.log" 2>&1
    local status=$?
    echo "$tool: exit $status, $(( $(date +%s) - t0 )) s; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' \
      "$OUT/sanitize_$tool.log" | tail -n 2 | tr '\n' ' ')" >> "$OUT/sanitize.txt"
    return $status
  }
  # SAN_PARALLEL=1 runs the four tools at once (e.g. one per GPU: SAN_GPUS="0 1" spreads them)
  if [[ ${SAN_PARALLEL:-0} == 1 ]]; then
    gpus=(${SAN_GPUS:-0}); i=0; pids=()
    for tool in memcheck racecheck synccheck initcheck; do
      CUDA_VISIBLE_DEVICES=${gpus[$(( i % ${#gpus[@]} ))]} san_one $tool & pids+=($!); i=$((i+1))
    done
    for p in "${pids[@]}"; do wait $p || rc=1; done
  else
    for tool in memcheck racecheck synccheck initcheck; do san_one $tool || rc=1; done
  fi
  cat "$OUT/sanitize.txt"
fi
exit $rc
