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
# (default 90a: every CUTLASS-using unit is Hopper code; each unit's architectures follow
# the build's rule, cpp/units/units.cpp), JOBS (default: the cores),
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

# The units of the full feature set and their nvcc arguments (the units generator,
# cpp/units/units.cpp: the one reader of the lists, as for build.rs and CMake).
scripts/units-tool.sh "$nvcc" "$out/units" || exit 2
unit_lines="$("$out/units" units cpp "$out/gen" bf16,transpose,any-block,tuning,sddmm,attention \
  "${SPARSEK_CUDA_ARCHS:-90a}" 0)" || exit 2
srcs=()
unit_args=()  # each unit's nvcc arguments, tab-separated
declare -A seen_family
while IFS= read -r line; do
  [[ "$line" == "features "* ]] && continue
  path="${line%%$'\t'*}"
  if [[ "${UNITS:-}" != all && "$path" == "$out/gen/"* ]]; then
    # One row unit per family and feature group (e.g. spmm_sm90_base, spmm_sm90_transpose).
    group=$(basename "$path" .cu); group="${group%_*}"
    [[ -n "${seen_family[$group]:-}" ]] && continue
    seen_family[$group]=1
  fi
  srcs+=("$path")
  unit_args+=("${line#*$'\t'}")
done <<< "$unit_lines"
echo "check-cutlass: ${#srcs[@]} units x ${#trees[@]} trees (${names[*]}), $jobs at a time, nvcc: $("$nvcc" --version | tail -n 2 | head -n 1)"

# One job per (unit, tree); each writes its status file.
run_one() {  # unit-index tree-index
  local i="$1" t="$2" src="${srcs[$1]}" tree="${trees[$2]}"
  local stem; stem="$(basename "${src%.*}")-${names[$t]}"
  local args
  IFS=$'\t' read -r -a args <<< "${unit_args[$i]}"
  local start=$SECONDS
  if "$nvcc" "${args[@]}" -I include -I cpp -I "$tree/include" \
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
