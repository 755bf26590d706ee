#!/usr/bin/env bash
# Builds the GPU test, example and bench executables here (Rust + the pip nvcc; the C++
# tests and examples linked against the same kernel library) and puts them in
# dist/gpu-bundle/ with run.sh, for a machine that has a GPU and the CUDA driver but no
# Rust. Copy the folder there and run `dist/gpu-bundle/run.sh`.
#
# It uses the ordinary target dir and architectures (90a,80), so the kernel objects of the
# other builds (target/sparsek-kernels) are reused; compressed fatbins keep it small.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# The bundle is what ncu and compute-sanitizer run: kernels with source lines (build.rs).
export SPARSEK_LINEINFO="${SPARSEK_LINEINFO:-1}"
third_party/setup.sh >/dev/null
out=dist/gpu-bundle
rm -rf "$out"
mkdir -p "$out"

# Executables of the given cargo command, one "kind target-name path" per line.
executables() {
  "$@" --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    try: msg = json.loads(line)
    except ValueError: continue
    if msg.get("reason") == "compiler-artifact" and msg.get("executable"):
        print(msg["target"]["kind"][0], msg["target"]["name"], msg["executable"])
'
}

# Every GPU test file (run.sh runs each test executable it finds, named or not).
gpu_tests=()
for t in tests/gpu_*.rs tests/device_bsr.rs; do
  t=${t##*/}
  gpu_tests+=(--test "${t%.rs}")
done
{
  executables cargo test --release --features full "${gpu_tests[@]}" --no-run
  executables cargo build --release --features full --examples
  executables cargo bench --features full --bench families --no-run
  executables cargo build --release -p sparsek-report --features cuda --bin bench_report
} | while read -r kind name path; do
  case "$kind" in
    test) dest=${name}_tests ;;
    bench) dest=${name}_bench ;;
    *) dest=$name ;;
  esac
  cp "$path" "$out/$dest"
done

# sparsek-candle (a workspace of its own): its GPU tests and examples (the worked decoder,
# the op overhead timer), with candle's CUDA build (candle-kernels through the pip nvcc, for
# sm_90) linked against stand-ins of the CUDA libraries
# (bindings/sparsek-candle/scripts/link-stubs.sh).
# SPARSEK_BUNDLE_CANDLE=0 leaves them out (candle-kernels' first nvcc build is many minutes).
if [ "${SPARSEK_BUNDLE_CANDLE:-1}" != 0 ]; then
candle_stubs="$PWD/target/cuda-link-stubs"
bindings/sparsek-candle/scripts/link-stubs.sh "$candle_stubs" >/dev/null
(
  cd bindings/sparsek-candle
  export CUDA_ROOT="$candle_stubs" CUDA_COMPUTE_CAP="${CUDA_COMPUTE_CAP:-90}" CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$OLDPWD/target}"
  export CUDAFORGE_THREADS="${CUDAFORGE_THREADS:-$(nproc)}"  # candle-kernels' nvcc on every core
  export NVCC="${NVCC:-$OLDPWD/third_party/py/nvidia/cu13/bin/nvcc}"
  executables cargo test --release --features cuda --test gpu --no-run
  executables cargo build --release --features cuda --examples
) | while read -r kind name path; do
  case "$kind" in
    test) dest=candle_${name}_tests ;;
    *) dest=$name ;;
  esac
  cp "$path" "$out/$dest"
done
fi

# The C++ side: the C++ tests and examples, linked against the very kernel library cargo
# built above (build.rs's libsparsek_kernels.a), so no kernel is compiled twice. CMake
# builds the same programs from source (CI does, for sm_80).
# Its OUT_DIR is found by the root package's id, matched whole: the id's form depends on the
# checkout's directory name (scripts/cargo_out_dir.py), and a wrong or empty directory must
# stop the script here, not hand nvlink "/libsparsek_kernels.a".
pkg_id=$(cargo metadata --format-version 1 --no-deps | python3 scripts/cargo_out_dir.py package-id "$PWD/Cargo.toml")
kernels_dir=$(cargo build --release --features full --message-format=json 2>/dev/null |
  python3 scripts/cargo_out_dir.py out-dir "$pkg_id")
if [ ! -f "$kernels_dir/libsparsek_kernels.a" ]; then
  echo "bundle-gpu.sh: no libsparsek_kernels.a in the build script's OUT_DIR ($kernels_dir) of $pkg_id" >&2
  exit 1
fi
# The nvcc and CUTLASS the library was built with (NVCC / CUTLASS_DIR, as build.rs), and
# its architectures' -gencode arguments (the units generator, cpp/units/units.cpp, as for
# build.rs).
nvcc="${NVCC:-$PWD/third_party/py/nvidia/cu13/bin/nvcc}"
cutlass="${CUTLASS_DIR:-$PWD/third_party/py/cutlass_library/source}"
units_dir=$(mktemp -d)
trap 'rm -rf "$units_dir"' EXIT
scripts/units-tool.sh "$nvcc" "$units_dir/units"
gencode=$("$units_dir/units" gencode "${SPARSEK_CUDA_ARCHS:-90a,80}")
mapfile -t gencode <<< "$gencode"
for prog in examples/cpp/quickstart.cpp:quickstart_cpp examples/cpp/spmm_check.cpp:spmm_check examples/cpp/sddmm_check.cpp:sddmm_check \
            examples/cpp/attention_check.cpp:attention_check examples/cpp/fp8_check.cpp:fp8_check \
            examples/cpp/attention_decode_check.cpp:attention_decode_check \
            tests/cpp/api_errors.cpp:cpp_api_errors tests/cpp/index_check.cpp:cpp_index_check \
            tests/cpp/check_decode.cu:check_decode tests/cpp/tma_status.cu:cpp_tma_status \
            tests/cpp/check_gated.cu:check_gated tests/cpp/time_decode.cu:time_decode; do
  src=${prog%%:*} dest=${prog##*:}
  [ -f "$src" ] || continue
  "$nvcc" -std=c++17 -O2 --expt-relaxed-constexpr -Iinclude -Icpp -I"$cutlass/include" -x cu \
    "${gencode[@]}" -c "$src" -o "$out/$dest.o"
  "$nvcc" "$out/$dest.o" "$kernels_dir/libsparsek_kernels.a" -o "$out/$dest"
  rm "$out/$dest.o"
done

strip --strip-debug "$out"/*
cp scripts/gpu-bundle-run.sh "$out/run.sh"
cp report/peers/*.py "$out/"  # the peers' scripts (PyTorch on the GPU machine)
chmod +x "$out"/*
du -sh "$out"/* "$out"
