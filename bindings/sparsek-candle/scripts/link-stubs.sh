#!/usr/bin/env bash
# Link-time stand-ins for the CUDA libraries candle-core's `cuda` links (cudarc's
# dynamic-linking: libcuda, cuBLAS, cuBLASLt, cuRAND, NVRTC; candle-kernels: the CUDA
# runtime), for a machine with no CUDA toolkit and no driver (this repository's build
# machines: the pip nvcc has neither). Each stub is a shared library with the real one's
# SONAME and an empty function for every name cudarc declares, so the executables record
# the real libraries as needed and the loader binds them where they run (the GPU machine's
# driver and toolkit; scripts/gpu-bundle-run.sh puts the toolkit's and the wheels' lib
# folders on LD_LIBRARY_PATH). The CUDA runtime is the pip wheel's real one.
#
#   bindings/sparsek-candle/scripts/link-stubs.sh DIR   # writes DIR/lib64/lib*.so
#
# Then build with CUDA_ROOT=DIR (cudarc's build script adds DIR/lib64 to the link search).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
out="${1:?usage: link-stubs.sh DIR}"
mkdir -p "$out/lib64"
cudarc=$(cargo metadata --manifest-path "$here/../Cargo.toml" --features cuda --format-version 1 2>/dev/null |
  python3 -c 'import json, os, sys
for p in json.load(sys.stdin)["packages"]:
    if p["name"] == "cudarc":
        print(os.path.dirname(p["manifest_path"]))')
[ -d "$cudarc/src" ] || { echo "link-stubs.sh: cudarc's source not found ($cudarc)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# module  library       SONAME (CUDA 13)
while read -r module lib soname; do
  grep -ohE 'pub unsafe fn [A-Za-z_][A-Za-z0-9_]*' "$cudarc/src/$module/sys/mod.rs" |
    awk '{ print "void " $4 "(void) {}" }' | sort -u >"$tmp/$lib.c"
  cc -shared -fPIC -o "$out/lib64/$lib.so" -Wl,-soname,"$soname" "$tmp/$lib.c"
done <<'LIBS'
driver   libcuda      libcuda.so.1
cublas   libcublas    libcublas.so.13
cublaslt libcublasLt  libcublasLt.so.13
curand   libcurand    libcurand.so.10
nvrtc    libnvrtc     libnvrtc.so.13
LIBS
cudart="$root/third_party/py/nvidia/cu13/lib/libcudart.so.13"
[ -f "$cudart" ] || { echo "link-stubs.sh: no $cudart (run third_party/setup.sh)" >&2; exit 1; }
ln -sf "$cudart" "$out/lib64/libcudart.so"
echo "link-stubs.sh: $(ls "$out/lib64" | tr '\n' ' ')in $out/lib64"
