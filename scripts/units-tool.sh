#!/usr/bin/env bash
# Builds the units generator (cpp/units/units.cpp) for the scripts, as build.rs and CMake do:
# cpp/units/*.cpp and every family's cpp/<op>/<family>/rows.cpp, compiled for the host by
# nvcc. The generator lists the kernel library's units with their nvcc arguments (see its
# first comment for its modes).
#
#   scripts/units-tool.sh NVCC OUTPUT      # then: OUTPUT units|nvcc-args|gencode ...
set -euo pipefail
(( $# == 2 )) || { echo "usage: scripts/units-tool.sh NVCC OUTPUT" >&2; exit 2; }
nvcc="$1"
output="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
cd "$(dirname "${BASH_SOURCE[0]}")/.."
shopt -s nullglob
"$nvcc" -std=c++17 -O1 -x c++ -I include -I cpp cpp/units/*.cpp cpp/*/*/rows.cpp -o "$output"
