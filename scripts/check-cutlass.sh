#!/usr/bin/env bash
# Compiles the kernel library's units against each CUTLASS tree given, and prints a table:
# one row per unit, one column per tree, `ok` or `FAIL` (the failures' first errors follow).
# A tree is a CUTLASS source tree (the directory holding include/cutlass/), of any tag:
# fetch NVIDIA/cutlass and `git archive vX.Y.Z include | tar -x -C DIR`; never commit one.
#
#   scripts/check-cutlass.sh DIR...            # every hand-written unit + one row unit a family
#   UNITS=all scripts/check-cutlass.sh DIR...  # every unit of the `full` feature set
#
# Environment: NVCC (default third_party/py/nvidia/cu13/bin/nvcc), SPARSEK_CUDA_ARCHS
# (default 90a: every CUTLASS-using unit is Hopper code), JOBS (default: the cores),
# OUT (default dist/check-cutlass: objects, logs, table.md). Exit status 1 if any unit
# fails on any tree, 2 on bad arguments.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
(( $# > 0 )) || { echo "usage: scripts/check-cutlass.sh CUTLASS_DIR..." >&2; exit 2; }
nvcc="${NVCC:-$root/third_party/py/nvidia/cu13/bin/nvcc}"
[[ -x "$nvcc" ]] || { echo "check-cutlass: no nvcc at $nvcc (run third_party/setup.sh or set NVCC)" >&2; exit 2; }
jobs="${JOBS:-$(nproc)}"
out="${OUT:-$root/dist/check-cutlass}"
mkdir -p "$out/gen"

trees=()
names=()
for dir in "$@"; do
  h="$dir/include/cutlass/version.h"
  [[ -f "$h" ]] || { echo "check-cutlass: $dir has no include/cutlass/version.h" >&2; exit 2; }
  v=$(awk '$1 == "#define" && $2 ~ /^CUTLASS_(MAJOR|MINOR|PATCH)$/ { printf "%s%s", sep, $3; sep = "." }' "$h")
  trees+=("$(cd "$dir" && pwd)")
  names+=("$v")
done

mapfile -t flags < <(sed -e 's/#.*//' -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' cpp/nvcc_flags.txt | grep -v '^$')
IFS=',;' read -r -a archs <<< "${SPARSEK_CUDA_ARCHS:-90a}"
gencode_all=()
for a in "${archs[@]}"; do [[ -n "${a// /}" ]] && gencode_all+=("-gencode=arch=compute_${a// /},code=sm_${a// /}"); done
gencode_sm90a=(-gencode=arch=compute_90a,code=sm_90a)

# The units of the full feature set (cpp/core/units.cpp: the one reader of the lists).
"$nvcc" -std=c++17 -O1 -x c++ -I include -I cpp cpp/core/units.cpp -o "$out/units" || exit 2
srcs=()
classes=()
bits=
declare -A seen_family
while read -r path class; do
  if [[ "$path" == features ]]; then bits="$class"; continue; fi
  if [[ "${UNITS:-}" != all && "$path" == "$out/gen/"* ]]; then
    # One row unit per family and feature group (e.g. spmm_sm90_base, spmm_sm90_transpose).
    group=$(basename "$path" .cu); group="${group%_*}"
    [[ -n "${seen_family[$group]:-}" ]] && continue
    seen_family[$group]=1
  fi
  srcs+=("$path")
  classes+=("$class")
done < <("$out/units" cpp "$out/gen" bf16,transpose,any-block,tuning,sddmm,attention "$jobs")
flags+=("-DSPARSEK_FEATURES=${bits}u")
echo "check-cutlass: ${#srcs[@]} units x ${#trees[@]} trees (${names[*]}), $jobs at a time, nvcc: $("$nvcc" --version | tail -n 2 | head -n 1)"

# One job per (unit, tree); each writes its status file.
run_one() {  # unit-index tree-index
  local i="$1" t="$2" src="${srcs[$1]}" tree="${trees[$2]}"
  local stem; stem="$(basename "${src%.*}")-${names[$t]}"
  local gencode=("${gencode_all[@]}")
  [[ "${classes[$i]}" == sm90a ]] && gencode=("${gencode_sm90a[@]}")
  local start=$SECONDS
  if "$nvcc" "${flags[@]}" "${gencode[@]}" -I include -I cpp -I "$tree/include" \
       -c "$src" -o "$out/$stem.o" > "$out/$stem.log" 2>&1; then
    echo "ok $((SECONDS - start))" > "$out/$stem.status"
  else
    echo "FAIL $((SECONDS - start))" > "$out/$stem.status"
  fi
  rm -f "$out/$stem.o"
}

for t in "${!trees[@]}"; do
  for i in "${!srcs[@]}"; do
    while (( $(jobs -rp | wc -l) >= jobs )); do sleep 1; done
    run_one "$i" "$t" &
  done
done
wait

failed=0
{
  printf '| unit |'; printf ' %s |' "${names[@]}"; echo
  printf '|---|'; printf -- '---|%.0s' "${names[@]}"; echo
  for i in "${!srcs[@]}"; do
    src="${srcs[$i]}"
    label="$src"; [[ "$src" == "$out/gen/"* ]] && label="gen/$(basename "$src")"
    printf '| %s |' "$label"
    for t in "${!trees[@]}"; do
      stem="$(basename "${src%.*}")-${names[$t]}"
      read -r st secs < "$out/$stem.status"
      [[ "$st" == ok ]] || failed=1
      printf ' %s (%ss) |' "$st" "$secs"
    done
    echo
  done
} | tee "$out/table.md"
if (( failed )); then
  for f in "$out"/*.status; do
    read -r st _ < "$f"
    [[ "$st" == ok ]] && continue
    echo; echo "== ${f%.status}.log (first errors)"; grep -m 5 -E 'error' "${f%.status}.log"
  done
fi
exit "$failed"
