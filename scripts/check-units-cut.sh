#!/usr/bin/env bash
# The units generator's cut (cpp/units/units.cpp): for every feature set a builder may ask
# (none, each feature alone, all), with sm_90a, every row unit carries 1 to 12 rows, no row
# stands in two units, and the units of the rows every build has (`base`) are the same files
# in every set that has them. Usage: scripts/check-units-cut.sh UNITS (the compiled generator:
# scripts/units-tool.sh, or CMake's sparsek-units). Run from anywhere.
set -euo pipefail
(( $# == 1 )) || { echo "usage: scripts/check-units-cut.sh UNITS" >&2; exit 2; }
units="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail=0
for features in - bf16 transpose any-block tuning sddmm attention fp8 bf16,transpose,any-block,tuning,sddmm,attention,fp8; do
  gen="$scratch/${features//,/_}"
  mkdir -p "$gen"
  "$units" units cpp "$gen" "$features" 90a 0 > /dev/null  # the unit lines; the files are what is checked
  for unit in "$gen"/*.cu; do
    rows=$(grep -c '^SPARSEK_[A-Z0-9_]*INSTANTIATE(' "$unit" || true)
    if (( rows < 1 || rows > 12 )); then
      echo "check-units-cut: $features: ${unit##*/} carries $rows rows" >&2
      fail=1
    fi
  done
  dups=$({ grep -h '^SPARSEK_[A-Z0-9_]*INSTANTIATE(' "$gen"/*.cu || true; } | sort | uniq -d)
  if [[ -n "$dups" ]]; then
    echo "check-units-cut: $features: rows in two units: $dups" >&2
    fail=1
  fi
done
declare -A first  # a base unit's name -> the first set's copy
for gen in "$scratch"/*/; do
  for unit in "$gen"*_base_*.cu; do
    name=${unit##*/}
    if [[ -z "${first[$name]:-}" ]]; then
      first[$name]=$unit
    elif ! cmp -s "$unit" "${first[$name]}"; then
      echo "check-units-cut: ${unit#"$scratch"/} differs from ${first[$name]#"$scratch"/}" >&2
      fail=1
    fi
  done
done
(( fail == 0 )) && echo "check-units-cut: $(ls "$scratch"/*/ | grep -c '\.cu$') row units over 9 feature sets, each of 1 to 12 rows"
exit "$fail"
