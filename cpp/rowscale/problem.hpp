// The checked row scaling C = diag(s) * A: what the row-scaling family (cpp/rowscale/simt)
// takes. Made in exactly two places, each the validation of one entry point: validate() in
// cpp/rowscale/api.cu (the C++ API, include/sparsek/rowscale.hpp) and
// RowscaleProblem::from_rust() in cpp/rowscale/bridge.cc (the Rust API, whose `rowscale`
// validated the same invariants in src/rowscale/check.rs). Nothing downstream re-checks them.
//
// Invariants:
//   - A is a valid BsrView (check_bsr: dims, counts, arrays non-null where they hold
//     something, aligned), f16 or bf16, without scales; its index arrays valid (trusted);
//   - s holds m f32 values, non-null when m > 0, 4-byte aligned;
//   - c_values holds nnzb * bm * bk elements of A's dtype, non-null when nnzb > 0, aligned to
//     its element, and overlaps neither A's arrays nor s;
//   - `device` describes the current device, which is the launch stream's.
#pragma once

#include <cstdint>

#include <sparsek/rowscale.hpp>

#include "core/result.hpp"

namespace sparsek::detail {

class DeviceSource;  // core/validate.hpp

class RowscaleProblem {
 public:
  BsrView a;
  const float* s = nullptr;
  void* c_values = nullptr;
  DeviceInfo device;

  // The registry's questions (core/registry.hpp): one family, so no backend to choose; no
  // epilogue, no n or row-depth bound; nothing to write without a stored block.
  static constexpr Backend backend = Backend::Auto;
  DType input() const { return a.dtype; }
  int64_t n() const { return 0; }
  int64_t count() const { return a.nnzb * int64_t(a.bm) * a.bk; }
  bool has_epilogue() const { return false; }
  bool gated_epilogue() const { return false; }
  bool deeper_than(int64_t) const { return false; }
  bool empty_output() const { return a.nnzb == 0; }

  static RowscaleProblem from_rust(const BsrView& a, const float* s, void* c_values, const DeviceInfo& device) {
    return RowscaleProblem(a, s, c_values, device);
  }

  RowscaleProblem() = default;

 private:
  RowscaleProblem(const BsrView& a_, const float* s_, void* c_values_, const DeviceInfo& device_)
      : a(a_), s(s_), c_values(c_values_), device(device_) {}
  friend Result validate_rowscale(const BsrView&, const float*, void*, const DeviceSource&, RowscaleProblem*);
};

// The C++ entry's validation (cpp/rowscale/api.cu): every invariant above, into *out; the
// device last, from `devices` (core/validate.hpp).
Result validate_rowscale(const BsrView& a, const float* s, void* c_values, const DeviceSource& devices,
                         RowscaleProblem* out);

}  // namespace sparsek::detail
