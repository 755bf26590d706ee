#!/usr/bin/env bash
# Builds dist/spmm_check, a standalone test/benchmark executable, from every unit of the
# kernel library (cpp/core/units.cpp lists them) plus examples/cpp/spmm_check.cpp, with the shared flags of
# cpp/nvcc_flags.txt. No cargo and no CMake involved: the quickest way to run the kernels.
#
#   scripts/build-cpp-check.sh                 # build (objects are reused when up to date)
#   SPARSEK_PTXAS_VERBOSE=1 scripts/build-cpp-check.sh   # also keep ptxas -v reports in dist/obj/*.ptxas.log
#   SPARSEK_CUDA_ARCHS=80 scripts/build-cpp-check.sh     # one architecture: a much shorter build
#
# Each unit has an arch class: `all` builds for every arch of SPARSEK_CUDA_ARCHS, `sm90a`
# for 90a alone, or, when 90a is not in the list, for the first arch with -DSPARSEK_NO_SM90A
# (as build.rs and CMake do).
#
# Environment: NVCC (default third_party/py/nvidia/cu13/bin/nvcc), CUTLASS_DIR (default
# third_party/py/cutlass_library/source), SPARSEK_CUDA_ARCHS (default "90a,80"; commas or
# semicolons), JOBS (default 2): nvcc runs that many translation units at once (each needs
# a few GB of memory on the kernel files).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

nvcc="${NVCC:-$root/third_party/py/nvidia/cu13/bin/nvcc}"
cutlass="${CUTLASS_DIR:-$root/third_party/py/cutlass_library/source}"
jobs="${JOBS:-2}"
if [[ ! -x "$nvcc" ]]; then
  echo "build-cpp-check: no nvcc at $nvcc (run third_party/setup.sh or set NVCC)" >&2
  exit 1
fi
if ! [[ "$jobs" =~ ^[1-9][0-9]*$ ]]; then
  echo "build-cpp-check: JOBS must be a positive integer, not '$jobs'" >&2
  exit 1
fi
cuda_lib="$(cd "$(dirname "$nvcc")/.." && pwd)/lib"

# Shared flags, one per line; '#' starts a comment.
mapfile -t flags < <(sed -e 's/#.*//' -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' cpp/nvcc_flags.txt | grep -v '^$')
[[ "${SPARSEK_LINEINFO:-0}" == 1 ]] && flags+=(-lineinfo)  # source lines for ncu (opt-in, as build.rs)
includes=(-I include -I cpp -I "$cutlass/include" -I "$cutlass/tools/util/include")
verbose=()
[[ "${SPARSEK_PTXAS_VERBOSE:-0}" == 1 ]] && verbose=(-Xptxas=-v)

# Architectures: gencode flags for class `all`, and for class `sm90a`.
IFS=',;' read -r -a archs <<< "${SPARSEK_CUDA_ARCHS:-90a,80}"
gencode_all=()
has_90a=0
for a in "${archs[@]}"; do
  a="${a// /}"
  [[ -z "$a" ]] && continue
  [[ "$a" == 90a ]] && has_90a=1
  gencode_all+=("-gencode=arch=compute_$a,code=sm_$a")
done
if [[ ${#gencode_all[@]} -eq 0 ]]; then
  echo "build-cpp-check: SPARSEK_CUDA_ARCHS names no architecture" >&2
  exit 1
fi
if [[ $has_90a == 1 ]]; then
  gencode_sm90a=(-gencode=arch=compute_90a,code=sm_90a)
else
  gencode_sm90a=("${gencode_all[0]}" -DSPARSEK_NO_SM90A)
fi

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

# Compiles one source; nvcc's messages go to $obj.log (and ptxas -v reports stay there as
# $obj.ptxas.log) and are printed when it fails, so parallel jobs do not interleave.
compile() {  # source object extra-args...
  local src="$1" obj="$2"
  shift 2
  local args=("${flags[@]}" "${includes[@]}" "$@" "${verbose[@]}" -MD -MF "$obj.d" -c "$src" -o "$obj")
  local cmd="$nvcc ${args[*]}"
  if up_to_date "$obj" "$obj.d" "$obj.cmd" "$cmd"; then
    echo "  up to date  $src"
    return 0
  fi
  echo "  nvcc        $src"
  rm -f "$obj.cmd"
  if ! "$nvcc" "${args[@]}" > "$obj.log" 2>&1; then
    echo "build-cpp-check: nvcc failed on $src:" >&2
    cat "$obj.log" >&2
    return 1
  fi
  if [[ ${#verbose[@]} -gt 0 ]]; then
    mv "$obj.log" "$obj.ptxas.log"
  elif [[ -s "$obj.log" ]]; then
    cat "$obj.log" >&2  # warnings
  fi
  rm -f "$obj.log"
  printf '%s' "$cmd" > "$obj.cmd"
}

# The units: cpp/core/units.cpp (the one reader of cpp/sources.txt and the row tables, as
# for build.rs and CMake) writes the row units into dist/obj/gen and lists every unit with
# its arch class, after the -DSPARSEK_FEATURES value. SPARSEK_FEATURES (names, comma-
# separated; default every one) picks the set.
features="${SPARSEK_FEATURES:-bf16,transpose,any-block,tuning,sddmm,attention}"
mkdir -p "$obj_dir/gen"
"$nvcc" -std=c++17 -O1 -x c++ -I include -I cpp cpp/core/units.cpp -o "$obj_dir/units"
srcs=()
classes=()
bits=
while read -r path class; do
  if [[ "$path" == features ]]; then bits="$class"; continue; fi
  srcs+=("$path")
  classes+=("$class")
done < <("$obj_dir/units" cpp "$obj_dir/gen" "$features" "$jobs")
flags+=("-DSPARSEK_FEATURES=${bits}u")
echo "build-cpp-check: ${#srcs[@]} sources, SPARSEK_CUDA_ARCHS=${SPARSEK_CUDA_ARCHS:-90a,80}, $jobs at a time"

# Compile, $jobs at a time (waiting on each job by pid: `wait PID` keeps the status of a job
# that already ended, `wait -n` may not); the first failure stops new jobs.
objects=()
pids=()
failed=0
for i in "${!srcs[@]}"; do
  src="${srcs[$i]}"
  obj="$obj_dir/$(echo "${src%.*}" | tr '/' '_').o"
  objects+=("$obj")
  if [[ "${classes[$i]}" == sm90a ]]; then
    gencode=("${gencode_sm90a[@]}")
  else
    gencode=("${gencode_all[@]}")
  fi
  if (( ${#pids[@]} >= jobs )); then
    wait "${pids[0]}" || failed=1
    pids=("${pids[@]:1}")
  fi
  (( failed )) && break
  compile "$src" "$obj" "${gencode[@]}" &
  pids+=($!)
done
for pid in "${pids[@]}"; do
  wait "$pid" || failed=1
done
if (( failed )); then
  echo "build-cpp-check: compilation failed" >&2
  exit 1
fi

compile examples/cpp/spmm_check.cpp "$obj_dir/spmm_check.o"
echo "  link        dist/spmm_check"
"$nvcc" -o dist/spmm_check "${objects[@]}" "$obj_dir/spmm_check.o" -cudart static -L "$cuda_lib"
echo "build-cpp-check: built dist/spmm_check"
