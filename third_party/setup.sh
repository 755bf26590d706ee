#!/usr/bin/env bash
# Installs the CUDA 13.0 compiler, the CUTLASS headers and CMake from PyPI wheels
# (third_party/wheels.txt) into third_party/py (git-ignored). Idempotent: a second run
# checks the stamp and returns. For CMake users and CI; cargo builds need none of it
# (build.rs installs what it needs into its own cache when nothing else is found).
#
#   third_party/setup.sh          # install (or verify) the pinned toolchain
#
# build.rs finds nvcc at third_party/py/nvidia/cu13/bin/nvcc and CUTLASS at
# third_party/py/cutlass_library/source/include unless NVCC / CUDA_HOME / CUTLASS_DIR say
# otherwise.
#   third_party/setup.sh --nccl   # the pinned NCCL wheel (wheels-nccl.txt) into
#                                 # third_party/py-nccl, for the `nccl` feature at run time
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dest="$here/py"

if [[ "${1:-}" == "--nccl" ]]; then
  nccl_dest="$here/py-nccl"
  mapfile -t nccl < <(sed 's/#.*//' "$here/wheels-nccl.txt" | awk 'NF { print $1 }')
  nccl_stamp="$nccl_dest/.sparsek-nccl-$(printf '%s\n' "${nccl[@]}" | sha256sum | cut -c1-16)"
  if [[ ! -f "$nccl_stamp" ]]; then
    rm -rf "$nccl_dest"
    "${PYTHON:-python3}" -m pip install --quiet --disable-pip-version-check --no-deps --no-compile \
      --target "$nccl_dest" "${nccl[@]}"
    lib="$nccl_dest/nvidia/nccl/lib"
    test -f "$lib/libnccl.so.2"
    # cudarc loads libnccl.so (and a few versioned names, not .so.2).
    ln -sf libnccl.so.2 "$lib/libnccl.so"
    touch "$nccl_stamp"
  fi
  echo "sparsek setup: NCCL in $nccl_dest/nvidia/nccl/lib (export LD_LIBRARY_PATH=$nccl_dest/nvidia/nccl/lib:\$LD_LIBRARY_PATH)"
  exit 0
fi

# Pinned: third_party/wheels.txt (the one list; build.rs reads it too), every line.
mapfile -t pkgs < <(sed 's/#.*//' "$here/wheels.txt" | awk 'NF { print $1 }')
(( ${#pkgs[@]} > 0 )) || { echo "sparsek setup: $here/wheels.txt lists no wheel" >&2; exit 1; }
stamp="$dest/.sparsek-setup-$(printf '%s\n' "${pkgs[@]}" | sha256sum | cut -c1-16)"

# pip's cmake, ctest and cpack launchers are Python scripts needing the wheel's dir on
# PYTHONPATH: link the binaries instead, so third_party/py/bin/{cmake,ctest,cpack} run as is.
link_cmake_tools() {
  local tool
  for tool in cmake ctest cpack; do
    ln -sf "../cmake/data/bin/$tool" "$dest/bin/$tool"
  done
}

if [[ -f "$stamp" && -x "$dest/nvidia/cu13/bin/nvcc" ]]; then
  link_cmake_tools   # an install made before ctest and cpack were linked
  echo "sparsek setup: toolchain already installed in $dest"
  exit 0
fi

py="${PYTHON:-python3}"
rm -rf "$dest"
mkdir -p "$dest"
echo "sparsek setup: installing ${pkgs[*]} into $dest"
"$py" -m pip install --quiet --disable-pip-version-check --no-deps --no-compile \
  --target "$dest" "${pkgs[@]}"

cu="$dest/nvidia/cu13"
# nvcc expects lib64/ in places; the wheels ship lib/.
[[ -e "$cu/lib64" ]] || ln -s lib "$cu/lib64"
# CMake's FindCUDAToolkit looks for the unversioned shared runtime.
[[ -e "$cu/lib/libcudart.so" ]] || ln -s libcudart.so.13 "$cu/lib/libcudart.so"
"$cu/bin/nvcc" --version | tail -n 2
test -f "$dest/cutlass_library/source/include/cutlass/cutlass.h"
test -f "$cu/lib/libcudart_static.a"
link_cmake_tools
"$dest/bin/cmake" --version | head -n 1
"$dest/bin/ctest" --version | head -n 1
touch "$stamp"
echo "sparsek setup: done (nvcc: $cu/bin/nvcc, CUTLASS: $dest/cutlass_library/source/include)"
