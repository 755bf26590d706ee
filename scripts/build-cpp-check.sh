#!/usr/bin/env bash
# Builds dist/spmm_check, a standalone test/benchmark executable, from every unit of the
# kernel library plus examples/cpp/spmm_check.cpp, each with the nvcc arguments the units
# generator gives (cpp/units/units.cpp, as for build.rs and CMake). No cargo and no CMake
# involved: the quickest way to run the kernels.
#
#   scripts/build-cpp-check.sh                 # build (objects are reused when up to date)
#   SPARSEK_PTXAS_VERBOSE=1 scripts/build-cpp-check.sh   # also keep ptxas -v reports in dist/obj/*.ptxas.log
#   SPARSEK_CUDA_ARCHS=80 scripts/build-cpp-check.sh     # one architecture: a much shorter build
#
# Environment: NVCC (default third_party/py/nvidia/cu13/bin/nvcc), CUTLASS_DIR (default
# third_party/py/cutlass_library/source), SPARSEK_CUDA_ARCHS (default "90a,80"; commas or
# semicolons), SPARSEK_LINEINFO=1 (source lines for ncu, as build.rs), JOBS (default 2): nvcc
# runs that many translation units at once (each needs a few GB of memory on the kernel files).
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

archs="${SPARSEK_CUDA_ARCHS:-90a,80}"
lineinfo=0
[[ "${SPARSEK_LINEINFO:-0}" == 1 ]] && lineinfo=1
includes=(-I include -I cpp -I "$cutlass/include" -I "$cutlass/tools/util/include")
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

# Compiles one source; nvcc's messages go to $obj.log (and ptxas -v reports stay there as
# $obj.ptxas.log) and are printed when it fails, so parallel jobs do not interleave.
compile() {  # source object nvcc-args...
  local src="$1" obj="$2"
  shift 2
  local args=("$@" "${includes[@]}" "${verbose[@]}" -MD -MF "$obj.d" -c "$src" -o "$obj")
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

# The units: the units generator (cpp/units/units.cpp, the one reader of the source lists
# and the row tables, as for build.rs and CMake) writes the row units into dist/obj/gen and
# prints every unit with its nvcc arguments, tab-separated, after the -DSPARSEK_FEATURES
# value. SPARSEK_FEATURES (names, comma-separated; default every one but fp8) picks the set.
features="${SPARSEK_FEATURES:-bf16,transpose,any-block,tuning,sddmm,attention}"
mkdir -p "$obj_dir/gen"
scripts/units-tool.sh "$nvcc" "$obj_dir/units"
unit_lines="$("$obj_dir/units" units cpp "$obj_dir/gen" "$features" "$archs" "$lineinfo")"
srcs=()
unit_args=()  # each unit's nvcc arguments, tab-separated
while IFS= read -r line; do
  [[ "$line" == "features "* ]] && continue
  srcs+=("${line%%$'\t'*}")
  unit_args+=("${line#*$'\t'}")
done <<< "$unit_lines"
echo "build-cpp-check: ${#srcs[@]} sources, SPARSEK_CUDA_ARCHS=$archs, $jobs at a time"

# Compile, $jobs at a time (waiting on each job by pid: `wait PID` keeps the status of a job
# that already ended, `wait -n` may not); the first failure stops new jobs.
objects=()
pids=()
failed=0
for i in "${!srcs[@]}"; do
  src="${srcs[$i]}"
  obj="$obj_dir/$(echo "${src%.*}" | tr '/' '_').o"
  objects+=("$obj")
  IFS=$'\t' read -r -a args <<< "${unit_args[$i]}"
  if (( ${#pids[@]} >= jobs )); then
    wait "${pids[0]}" || failed=1
    pids=("${pids[@]:1}")
  fi
  (( failed )) && break
  compile "$src" "$obj" "${args[@]}" &
  pids+=($!)
done
for pid in "${pids[@]}"; do
  wait "$pid" || failed=1
done
if (( failed )); then
  echo "build-cpp-check: compilation failed" >&2
  exit 1
fi

# A program beside the library: the shared flags and architectures of its units.
program_args="$("$obj_dir/units" nvcc-args cpp "$archs" "$lineinfo")"
mapfile -t program_args <<< "$program_args"
compile examples/cpp/spmm_check.cpp "$obj_dir/spmm_check.o" "${program_args[@]}"
echo "  link        dist/spmm_check"
"$nvcc" -o dist/spmm_check "${objects[@]}" "$obj_dir/spmm_check.o" -cudart static -L "$cuda_lib"
echo "build-cpp-check: built dist/spmm_check"
