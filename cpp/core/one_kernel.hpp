// The registry's questions (core/registry.hpp) answered for an operation with one kernel:
// no backend to choose, no epilogue, no n or row-depth bound, and never an empty output (the
// launch itself skips what it need not do). Its problem derives from this.
#pragma once

#include <cstdint>

#include <sparsek/sparsek.hpp>

namespace sparsek::detail {

struct OneKernelProblem {
  static constexpr Backend backend = Backend::Auto;
  bool has_epilogue() const { return false; }
  bool gated_epilogue() const { return false; }
  int64_t n() const { return 0; }
  bool deeper_than(int64_t) const { return false; }
  bool empty_output() const { return false; }
};

}  // namespace sparsek::detail
