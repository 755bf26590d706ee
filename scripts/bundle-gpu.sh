#!/usr/bin/env bash
# Builds the GPU test, example and bench executables here (Rust + the pip nvcc, and the
# C++ examples through CMake) and puts them in dist/gpu-bundle/ with run.sh, for a machine
# that has a GPU and the CUDA driver but no Rust. Copy the folder there and run
# `dist/gpu-bundle/run.sh`.
#
# The bundle targets Hopper (SPARSEK_CUDA_ARCHS=90a unless set): one architecture keeps
# the executables small. It builds in target/bundle and build/bundle, apart from the
# default (90a + 80) builds.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
third_party/setup.sh >/dev/null
export SPARSEK_CUDA_ARCHS="${SPARSEK_CUDA_ARCHS:-90a}"
export CARGO_TARGET_DIR="$PWD/target/bundle"
out=dist/gpu-bundle
rm -rf "$out"
mkdir -p "$out"

# Executables of the given cargo command, one "target-name path" per line.
executables() {
  "$@" --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    try: msg = json.loads(line)
    except ValueError: continue
    if msg.get("reason") == "compiler-artifact" and msg.get("executable"):
        print(msg["target"]["name"], msg["executable"])
'
}

{
  executables cargo test --release --features cuda --test gpu --no-run
  executables cargo build --release --features cuda --examples
  executables cargo bench --features cuda --bench spmm --no-run
} | while read -r name path; do
  case "$name" in
    gpu) dest=gpu_tests ;;
    spmm) dest=spmm_bench ;;
    *) dest="$name" ;;
  esac
  cp "$path" "$out/$dest"
done

# The C++ side: the same sources through CMake.
cmake="$PWD/third_party/py/bin/cmake"
"$cmake" -S . -B build/bundle -DCMAKE_BUILD_TYPE=Release -DSPARSEK_CUDA_ARCHS="${SPARSEK_CUDA_ARCHS//,/;}" \
  -DCMAKE_CUDA_COMPILER="$PWD/third_party/py/nvidia/cu13/bin/nvcc" >/dev/null
"$cmake" --build build/bundle -j 2 --target sparsek_quickstart spmm_check >/dev/null
cp build/bundle/sparsek_quickstart "$out/quickstart_cpp"
cp build/bundle/spmm_check "$out/spmm_check"

strip --strip-debug "$out"/*
cp scripts/gpu-bundle-run.sh "$out/run.sh"
chmod +x "$out"/*
du -sh "$out"/* "$out"
