#!/usr/bin/env bash
# Build the extension here (no GPU needed) and pack it for the GPU machine, so that a device call
# can skip its own build: .prebuilt/_C.so.xz (debug info stripped; xz: 17 MB where gzip made 28,
# which with the tracked files passed the device tool's 64 MiB limit) and .prebuilt/tree.sha, the
# hash of the sources it was built from (benchmarks/tree_hash.sh). gpu_session.sh's build step
# unpacks it when the hash matches the tree it runs on, and builds from source otherwise.
#   bash benchmarks/prebuild.sh      (then pass .prebuilt to the device call's carried paths)
set -euo pipefail
cd "$(dirname "$0")/.."
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0a}
MAX_JOBS=${MAX_JOBS:-2} python3 setup.py build_ext --inplace > /tmp/gpukern_prebuild.log 2>&1 \
  || { tail -30 /tmp/gpukern_prebuild.log; exit 1; }
so=$(ls torch_ops/_C.*.so)
mkdir -p .prebuilt
rm -f .prebuilt/_C.so.gz
strip --strip-debug -o .prebuilt/_C.so "$so"
xz -T2 -6 -f .prebuilt/_C.so
echo "$(basename "$so")" > .prebuilt/name
bash benchmarks/tree_hash.sh > .prebuilt/tree.sha
ls -la .prebuilt
