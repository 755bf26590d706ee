#!/usr/bin/env bash
# Compile checks of the C++ API's use, no GPU and no nvcc needed (g++ and the CUDA runtime
# headers; CI runs it):
#   - every ```cpp block of README.md, as its own file, with -Wall -Wextra -Werror;
#   - tests/cpp/nodiscard_result.cpp: compiles as it is, and fails with
#     -Werror=unused-result naming the ignored sparsek::Result ([[nodiscard]]);
#   - tests/cpp/output_views.cpp: compiles as it is, and fails when a view of const data
#     (DenseView, HeadsView) is passed where a call writes (DenseMutView, HeadsMutView).
# Environment: CXX (default g++), CUDA_INCLUDE (default third_party/py/nvidia/cu13/include).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
cxx="${CXX:-g++}"
cuda_include="${CUDA_INCLUDE:-$root/third_party/py/nvidia/cu13/include}"
[[ -f "$cuda_include/cuda_runtime_api.h" ]] || { echo "check-cpp-api: no cuda_runtime_api.h in $cuda_include (third_party/setup.sh, or set CUDA_INCLUDE)" >&2; exit 2; }
flags=(-std=c++17 -fsyntax-only -I include -I "$cuda_include")
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail=0

# The README's C++ blocks.
awk -v dir="$work" '/^```cpp$/ { n++; f = sprintf("%s/readme_%d.cpp", dir, n); on = 1; next }
                    /^```$/ { on = 0; next }
                    on { print > f }' README.md
blocks=("$work"/readme_*.cpp)
[[ -e "${blocks[0]}" ]] || { echo "check-cpp-api: README.md has no cpp block" >&2; exit 1; }
for f in "${blocks[@]}"; do
  if "$cxx" "${flags[@]}" -Wall -Wextra -Werror -x c++ "$f" 2> "$f.log"; then
    echo "PASS README block $(basename "$f" .cpp) compiles with -Wall -Wextra -Werror"
  else
    echo "FAIL README block $(basename "$f" .cpp):"; cat "$f.log"; sed 's/^/    | /' "$f"; fail=1
  fi
done

# [[nodiscard]] Result: the file is valid C++, and ignoring the Result is the one error.
src=tests/cpp/nodiscard_result.cpp
if ! "$cxx" "${flags[@]}" -Wno-unused-result "$src" 2> "$work/plain.log"; then
  echo "FAIL $src does not compile even without the warning:"; cat "$work/plain.log"; fail=1
elif "$cxx" "${flags[@]}" -Werror=unused-result "$src" 2> "$work/nodiscard.log"; then
  echo "FAIL $src compiled with -Werror=unused-result: an ignored sparsek::Result gives no warning"; fail=1
elif grep -q "sparsek::Result" "$work/nodiscard.log" && grep -q "nodiscard\|unused-result" "$work/nodiscard.log"; then
  echo "PASS ignoring a sparsek::Result is an error under -Werror=unused-result: $(grep -m1 'warning\|error' "$work/nodiscard.log" | sed 's/^.*: error: //')"
else
  echo "FAIL $src failed for another reason:"; cat "$work/nodiscard.log"; fail=1
fi
# Outputs are mutable views: an input view in an output's place is a compile error, one per call.
src=tests/cpp/output_views.cpp
if ! "$cxx" "${flags[@]}" -Wall -Wextra -Werror "$src" 2> "$work/views.log"; then
  echo "FAIL $src does not compile with mutable output views:"; cat "$work/views.log"; fail=1
elif "$cxx" "${flags[@]}" -DPASS_INPUT_VIEW_AS_OUTPUT "$src" 2> "$work/views_bad.log"; then
  echo "FAIL $src compiled with input views as outputs: an output view need not be mutable"; fail=1
else
  calls=$(grep -c "error:.*\(DenseMutView\|HeadsMutView\)" "$work/views_bad.log")
  if [[ "$calls" -eq 3 ]]; then
    echo "PASS an input view where a call writes is a compile error (spmm, dense_spmm, attention: $calls errors)"
  else
    echo "FAIL $src: expected 3 errors naming DenseMutView/HeadsMutView, got $calls:"; cat "$work/views_bad.log"; fail=1
  fi
fi
exit $fail
