// The checked SDDMM problem: what the SDDMM kernel families (cpp/sddmm/) take. Made in
// exactly two places, each the validation of one entry point: validate() in
// cpp/sddmm/api.cu (the C++ API, include/sparsek/sddmm.hpp) and SddmmProblem::from_rust()
// in cpp/sddmm/bridge.cc (the Rust API, whose `sddmm` validated the same invariants in
// src/sddmm/check.rs). Nothing downstream re-checks them; families check only what is theirs.
//
// Invariants:
//   - S is m x n in bm x bn blocks: 1 <= bm, bn <= INT32_MAX, m % bm == 0, n % bn == 0,
//     m/bm and n/bn fit int32, 0 <= nnzb <= (m/bm)*(n/bn), nnzb fits int32,
//     nnzb*bm*bn elements fit int64 bytes; row_ptr non-null, col_idx and values non-null
//     when nnzb > 0; the index arrays valid (host-checked by Rust, device-checked with
//     check_indices, or trusted);
//   - A is m x k and B is k x n (k >= 0); views as in cpp/spmm/problem.hpp (ld, spans, data
//     non-null when non-empty); A and B are F16 or BF16 and equal, S is that type or F32;
//   - S's values overlap neither A, B nor S's row_ptr and col_idx;
//   - every pointer aligned to its element (S's row_ptr and col_idx 4 bytes; values, A and
//     B their dtype's size);
//   - `device` describes the current device, which is the launch stream's.
#pragma once

#include <sparsek/sddmm.hpp>

#include "spmm/problem.hpp"  // the product's Problem, DeviceInfo (this directory has its own problem.hpp)

namespace sparsek::detail {

class SddmmProblem {
 public:
  DenseView a;
  DenseView b;
  BsrMutView s;
  float alpha = 1.0f;
  float beta = 0.0f;
  Backend backend = Backend::Auto;
  DeviceInfo device;

  int64_t m() const { return s.m; }
  int64_t n() const { return s.n; }
  int64_t k() const { return a.cols; }
  int64_t block_rows() const { return s.m / s.bm; }
  int64_t block_cols() const { return s.n / s.bn; }
  DType input() const { return a.dtype; }
  DType output() const { return s.dtype; }
  // Nothing to compute or write: no stored block.
  bool empty_output() const { return s.nnzb == 0; }
  // The registry's questions (core/registry.hpp): no fused or gated epilogue, no row-depth
  // bound.
  bool has_epilogue() const { return false; }
  bool gated_epilogue() const { return false; }
  bool deeper_than(int64_t) const { return false; }

  static SddmmProblem from_rust(const DenseView& a, const DenseView& b, const BsrMutView& s, float alpha, float beta,
                                Backend backend, const DeviceInfo& device) {
    return SddmmProblem(a, b, s, alpha, beta, backend, device);
  }

 private:
  SddmmProblem() = default;
  SddmmProblem(const DenseView& a_, const DenseView& b_, const BsrMutView& s_, float alpha_, float beta_,
               Backend backend_, const DeviceInfo& device_)
      : a(a_), b(b_), s(s_), alpha(alpha_), beta(beta_), backend(backend_), device(device_) {}
  friend Result validate(const DenseView&, const DenseView&, const BsrMutView&, const SddmmOptions&,
                         const DeviceSource&, SddmmProblem*);
  friend Result sparsek::can_implement(const DenseView&, const DenseView&, const BsrMutView&, const SddmmOptions&,
                                       Backend*);
  friend Result sparsek::sddmm(const DenseView&, const DenseView&, const BsrMutView&, const SddmmOptions&,
                               cudaStream_t);
};

// The C++ entry's validation (cpp/sddmm/api.cu): every invariant above, into *out; the device
// last, from `devices` (core/validate.hpp).
Result validate(const DenseView& a, const DenseView& b, const BsrMutView& s, const SddmmOptions& options,
                const DeviceSource& devices, SddmmProblem* out);

}  // namespace sparsek::detail
