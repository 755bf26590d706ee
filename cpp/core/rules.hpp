// What the generated rule headers (cpp/<op>/rules.hpp, from rules/<op>.toml by
// scripts/gen-rules.py) compute and word their errors with: 128-bit integers, saturating, so no
// fact overflows (x / 0 = 0 and x % 0 = x, as the generator's evaluator and the Rust side,
// src/check.rs, define them); the names the Rust errors print (src/error.rs), so a rule's
// message reads the same from both entries; and the golden cases' parser.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <sparsek/sparsek.hpp>

#include "core/dtype.hpp"
#include "core/result.hpp"

namespace sparsek::detail::rules {

using Int = __int128;

constexpr Int kIntMax = ~(Int(1) << 127);
constexpr Int kIntMin = Int(1) << 127;

inline Int add(Int a, Int b) {
  Int r;
  return __builtin_add_overflow(a, b, &r) ? (b > 0 ? kIntMax : kIntMin) : r;
}
inline Int sub(Int a, Int b) {
  Int r;
  return __builtin_sub_overflow(a, b, &r) ? (b < 0 ? kIntMax : kIntMin) : r;
}
inline Int mul(Int a, Int b) {
  Int r;
  return __builtin_mul_overflow(a, b, &r) ? ((a < 0) != (b < 0) ? kIntMin : kIntMax) : r;
}
inline Int div(Int a, Int b) {
  if (b == 0) return 0;
  if (a == kIntMin && b == -1) return kIntMax;
  return a / b;
}
inline Int rem(Int a, Int b) {
  if (b == 0) return a;
  if (b == -1) return 0;
  return a % b;
}
// A size for a message (the rules' sizes are int64 values or simple functions of them).
inline int64_t clamp(Int x) { return x < 0 ? 0 : x > Int(INT64_MAX) ? INT64_MAX : int64_t(x); }

// As Rust's Display of ScaleKind and Debug of Backend print them.
constexpr const char* scale_kind_name(ScaleKind k) {
  switch (k) {
    case ScaleKind::None:
      return "no";
    case ScaleKind::PerTensor:
      return "per-tensor";
    case ScaleKind::PerBlock:
      return "per-block";
    case ScaleKind::PerColumn:
      return "per-column";
  }
  return "unknown";
}
constexpr const char* backend_debug_name(Backend b) {
  switch (b) {
    case Backend::Auto:
      return "Auto";
    case Backend::Wmma:
      return "Wmma";
    case Backend::Hopper:
      return "Hopper";
    case Backend::Decode:
      return "Decode";
  }
  return "unknown";
}

// The golden cases' words (rules/<op>.golden, tests/cpp/rules_golden.cpp): name=value.
namespace golden {

inline bool same(const char* a, const char* b) { return std::strcmp(a, b) == 0; }
inline bool parse(const char* v, int64_t* out) {
  char* end = nullptr;
  const long long x = std::strtoll(v, &end, 10);
  if (end == v || *end != '\0') return false;
  *out = x;
  return true;
}
inline bool parse(const char* v, bool* out) {
  if (same(v, "true")) return *out = true, true;
  if (same(v, "false")) return *out = false, true;
  return false;
}
inline bool parse(const char* v, DType* out) {
  const struct {
    const char* name;
    DType t;
  } names[] = {{"f16", DType::F16}, {"bf16", DType::BF16}, {"f32", DType::F32}, {"e4m3", DType::E4M3},
               {"e5m2", DType::E5M2}};
  for (const auto& n : names)
    if (same(v, n.name)) return *out = n.t, true;
  return false;
}
inline bool parse(const char* v, ScaleKind* out) {
  const struct {
    const char* name;
    ScaleKind k;
  } names[] = {{"none", ScaleKind::None},
               {"per_tensor", ScaleKind::PerTensor},
               {"per_block", ScaleKind::PerBlock},
               {"per_column", ScaleKind::PerColumn}};
  for (const auto& n : names)
    if (same(v, n.name)) return *out = n.k, true;
  return false;
}
inline bool parse(const char* v, Backend* out) {
  const struct {
    const char* name;
    Backend b;
  } names[] = {{"auto", Backend::Auto}, {"wmma", Backend::Wmma}, {"hopper", Backend::Hopper}, {"decode", Backend::Decode}};
  for (const auto& n : names)
    if (same(v, n.name)) return *out = n.b, true;
  return false;
}

}  // namespace golden
}  // namespace sparsek::detail::rules
