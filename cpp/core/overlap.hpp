// Byte ranges of the views the C++ entries validate, to refuse an output that overlaps an
// input or another output (the operations' api.cu files). A range is [begin, end) as
// addresses; an empty range overlaps nothing. The caller has checked that the byte count fits
// int64; a range that would run past the end of the address space ends there.
#pragma once

#include <climits>
#include <cstdint>

#include "core/result.hpp"

namespace sparsek::detail {

struct ByteRange {
  uintptr_t begin = 0, end = 0;
  bool empty() const { return begin >= end; }
};

// `bytes` (>= 0) bytes from `ptr`; empty for a null pointer or no bytes.
inline ByteRange byte_range(const void* ptr, int64_t bytes) {
  ByteRange r;
  if (ptr == nullptr || bytes <= 0) return r;
  r.begin = reinterpret_cast<uintptr_t>(ptr);
  if (__builtin_add_overflow(r.begin, static_cast<uint64_t>(bytes), &r.end)) r.end = UINTPTR_MAX;
  return r;
}

// `count` elements of `size` bytes from `ptr` (a product past int64 counts as INT64_MAX
// bytes; the validators refuse such counts before asking).
inline ByteRange elements(const void* ptr, int64_t count, int64_t size) {
  int64_t bytes = 0;
  if (__builtin_mul_overflow(count, size, &bytes)) bytes = INT64_MAX;
  return byte_range(ptr, bytes);
}

inline bool overlap(const ByteRange& a, const ByteRange& b) {
  return !a.empty() && !b.empty() && a.begin < b.end && b.begin < a.end;
}

// The first of `inputs` (named `names`) that the output `out` (named `out_name`) overlaps, as
// an InvalidArgument naming both; success when none does.
template <int N>
Result check_disjoint(const char* out_name, const ByteRange& out, const ByteRange (&inputs)[N],
                      const char* const (&names)[N]) {
  for (int i = 0; i < N; ++i)
    if (overlap(out, inputs[i]))
      return make_result(Status::InvalidArgument,
                         "%s overlaps %s (an output may not share memory with another operand)", out_name, names[i]);
  return Result{};
}

}  // namespace sparsek::detail
