#!/usr/bin/env bash
# Builds dist/spmm_check, a standalone test/benchmark executable, from every CUDA source in
# cpp/sources.txt plus examples/cpp/spmm_check.cpp, with the shared flags of
# cpp/nvcc_flags.txt. No cargo involved: this is the quickest way to run the kernels.
#
#   scripts/build-cpp-check.sh                 # build (objects are reused when up to date)
#   SPARSEK_PTXAS_VERBOSE=1 scripts/build-cpp-check.sh   # also keep ptxas -v reports in dist/obj/*.ptxas.log
#
# Environment: NVCC (default third_party/py/nvidia/cu13/bin/nvcc), CUTLASS_DIR (default
# third_party/py/cutlass_library/source). Sources are compiled one at a time, on purpose:
# nvcc on the kernel files is memory- and CPU-hungry.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

nvcc="${NVCC:-$root/third_party/py/nvidia/cu13/bin/nvcc}"
cutlass="${CUTLASS_DIR:-$root/third_party/py/cutlass_library/source}"
if [[ ! -x "$nvcc" ]]; then
  echo "build-cpp-check: no nvcc at $nvcc (run third_party/setup.sh or set NVCC)" >&2
  exit 1
fi
cuda_lib="$(cd "$(dirname "$nvcc")/.." && pwd)/lib"

# Shared flags, one per line; '#' starts a comment.
mapfile -t flags < <(sed -e 's/#.*//' -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' cpp/nvcc_flags.txt | grep -v '^$')
includes=(-I include -I cpp -I "$cutlass/include" -I "$cutlass/tools/util/include")
gencode_sm90a=(-gencode=arch=compute_90a,code=sm_90a)
gencode_all=("${gencode_sm90a[@]}" -gencode=arch=compute_80,code=sm_80)
verbose=()
[[ "${SPARSEK_PTXAS_VERBOSE:-0}" == 1 ]] && verbose=(-Xptxas=-v)

obj_dir=dist/obj
mkdir -p "$obj_dir"

# An object is up to date when it is newer than every file of its dependency list (written
# by nvcc -MD) and was built with the same command line.
up_to_date() {  # obj depfile cmdfile cmdline
  local obj="$1" dep="$2" cmdfile="$3" cmd="$4" f
  [[ -f "$obj" && -f "$dep" && -f "$cmdfile" ]] || return 1
  [[ "$(cat "$cmdfile")" == "$cmd" ]] || return 1
  for f in $(sed -e 's/\\$//' -e 's/^[^:]*://' "$dep"); do
    [[ -f "$f" && ! "$f" -nt "$obj" ]] || return 1
  done
}

compile() {  # source object extra-args...
  local src="$1" obj="$2"
  shift 2
  local args=("${flags[@]}" "${includes[@]}" "$@" "${verbose[@]}" -MD -MF "$obj.d" -c "$src" -o "$obj")
  local cmd="$nvcc ${args[*]}"
  if up_to_date "$obj" "$obj.d" "$obj.cmd" "$cmd"; then
    echo "  up to date  $src"
    return
  fi
  echo "  nvcc        $src"
  if [[ ${#verbose[@]} -gt 0 ]]; then
    "$nvcc" "${args[@]}" 2> >(tee "$obj.ptxas.log" >&2)
  else
    "$nvcc" "${args[@]}"
  fi
  printf '%s' "$cmd" > "$obj.cmd"
}

objects=()
while read -r path archs _; do
  [[ -z "$path" || "$path" == \#* ]] && continue
  if [[ ! -f "$path" ]]; then
    echo "  skip        $path (listed in cpp/sources.txt but not present yet)"
    continue
  fi
  case "$archs" in
    all) gencode=("${gencode_all[@]}") ;;
    sm90a) gencode=("${gencode_sm90a[@]}") ;;
    *) echo "build-cpp-check: unknown arch column '$archs' for $path" >&2; exit 1 ;;
  esac
  obj="$obj_dir/$(echo "${path%.*}" | tr '/' '_').o"
  compile "$path" "$obj" "${gencode[@]}"
  objects+=("$obj")
done < cpp/sources.txt

compile examples/cpp/spmm_check.cpp "$obj_dir/spmm_check.o"
echo "  link        dist/spmm_check"
"$nvcc" -o dist/spmm_check "${objects[@]}" "$obj_dir/spmm_check.o" -cudart static -L "$cuda_lib"
echo "build-cpp-check: built dist/spmm_check"
