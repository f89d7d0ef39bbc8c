#!/usr/bin/env bash
# The hash of what the extension is built from: setup.py, every source file under csrc/ (not its
# READMEs: a docs edit must not force a rebuild on the GPU machine), and the CUDA arch list.
# prebuild.sh records it; gpu_session.sh compares it before using a prebuilt extension.
cd "$(dirname "$0")/.."
{ find csrc setup.py -type f ! -name '*.pyc' ! -name '*.md' | LC_ALL=C sort | xargs sha256sum;
  echo "arch=${TORCH_CUDA_ARCH_LIST:-9.0a}"; } | sha256sum | cut -d' ' -f1
