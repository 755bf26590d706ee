// The checked problem: what the launch layer (cpp/core/registry.hpp and the kernel families)
// takes. Not installed; users see include/sparsek/sparsek.hpp.
//
// A `Problem` is made in exactly two places, each the validation of one entry point:
//   - `validate()` in cpp/spmm/api.cu, for the C++ API (sparsek::spmm / can_implement);
//   - `Problem::from_rust()` in cpp/spmm/bridge.cc, for the Rust API, whose `spmm` validated
//     the same invariants on the Rust side (src/spmm/check.rs) and whose `DeviceBsr` comes
//     only from validated host data.
// Nothing downstream re-checks the invariants below; families check only what is theirs
// (architecture, block-shape range, alignment, grid limits).
//
// Invariants of every Problem:
//   - m, k, n >= 0; 1 <= bm, bk <= INT32_MAX; m % bm == 0 and k % bk == 0;
//     m/bm and k/bk fit int32; 0 <= nnzb <= (m/bm)*(k/bk) and nnzb fits int32;
//     nnzb*bm*bk fits int64 (so values has that many elements);
//   - row_ptr is non-null; col_idx and values are non-null when nnzb > 0;
//   - B is k x n and C is m x n (gated: m/2 x n, m a multiple of 2*bm, beta = 0, op(A) = A);
//     data is non-null when the view is non-empty;
//     ld >= max(1, contiguous extent) and (outer - 1)*ld + extent fits int64 (elements);
//   - C's bytes overlap none of A's arrays (values, row_ptr, col_idx, and for op(A) = A^T
//     the transpose index), B or the bias;
//   - A and B are F16 or BF16 and equal, and C is the input type or F32; or A is FP8 (E4M3),
//     B of A's type or F16/BF16, C F16, BF16 or F32, and op(A) = A; scales only on FP8
//     operands, of a kind the operand takes, null exactly with ScaleKind::None, 16-byte
//     aligned, and (like the bias, which has C's dtype with FP8 A) not overlapping C;
//     layouts are RowMajor or ColMajor; the backend is a Backend value, the activation
//     an Activation value; bias is null or 16-byte aligned (m values of the input type);
//   - every pointer is aligned to its element: row_ptr, col_idx and the transpose index to 4
//     bytes, values, B and C to their dtype's size (wider vector accesses are the families'
//     to check);
//   - the BSR index arrays are valid (row_ptr from 0, non-decreasing, ends at nnzb;
//     col_idx sorted, unique, < k/bk per block-row): validated on the host (Rust), on the
//     device (C++ with options.check_indices), or trusted (documented in the C++ header);
//   - `device` describes the current device, which is the launch stream's;
//   - op(A) = A^T (a_transposed): `a` describes A^T as a BSR of the same blocks, listed by
//     A's transpose index (transposed_view): m = A's k, k = A's m, bm = A's bk, bk = A's
//     bm, row_ptr = col_ptr, col_idx = row_idx; the j-th listed block is A's block
//     a_block_id[j] (each in [0, nnzb)), stored row-major bk x bm, i.e. column-major as a
//     block of A^T. Every invariant above holds of that view, so the families see an
//     ordinary problem whose blocks are read through a_block_id and transposed; a family
//     that cannot read them so refuses a_transposed in supports().
#pragma once

#include <sparsek/sparsek.hpp>

#include <cstdint>

#include "core/result.hpp"

namespace sparsek {
struct MlpView;  // include/sparsek/mlp.hpp
Result sparse_mlp(const MlpView&, const DenseView&, const DenseMutView&, const DenseMutView&, cudaStream_t);
}  // namespace sparsek

namespace sparsek::detail {

class DeviceSource;  // core/validate.hpp

class Problem {
 public:
  BsrView a;
  DenseView b;
  DenseMutView c;
  float alpha = 1.0f;
  float beta = 0.0f;
  Backend backend = Backend::Auto;
  const void* bias = nullptr;  // m values of the input dtype, or null
  Activation activation = Activation::None;
  DeviceInfo device;
  // op(A) = A^T: `a` is the view of A^T (see the file comment), block j is A's block
  // a_block_id[j]. False and null for op(A) = A.
  bool a_transposed = false;
  const int32_t* a_block_id = nullptr;
  // The gated (GLU) epilogue (SpmmOptions::gated): A's block-rows are (gate, up) pairs, C has
  // m/2 rows, beta = 0, op(A) = A.
  bool gated = false;

  int64_t m() const { return a.m; }
  int64_t k() const { return a.k; }
  int64_t n() const { return c.cols; }
  int64_t block_rows() const { return a.m / a.bm; }
  int64_t block_cols() const { return a.k / a.bk; }
  DType input() const { return a.dtype; }
  DType output() const { return c.dtype; }
  bool empty_output() const { return a.m == 0 || c.cols == 0; }
  bool has_epilogue() const { return bias != nullptr || activation != Activation::None || gated; }
  // The registry's questions (core/registry.hpp) beyond those above: the gated epilogue, and
  // whether the block-rows' average depth (nonzero blocks * bk / block-rows) is above `bound`
  // (no overflow: nnzb < 2^31, bk <= 2^31).
  bool gated_epilogue() const { return gated; }
  bool deeper_than(int64_t bound) const { return block_rows() > 0 && a.nnzb * int64_t(a.bk) > bound * block_rows(); }

  // The Rust bridge's constructor (see the file comment): the views come from a problem
  // that Rust validated (for op(A) = A^T, `a` is already transposed_view's).
  static Problem from_rust(const BsrView& a, const DenseView& b, const DenseMutView& c, float alpha, float beta,
                           Backend backend, const void* bias, Activation activation, const DeviceInfo& device,
                           bool a_transposed, const int32_t* a_block_id, bool gated) {
    Problem p(a, b, c, alpha, beta, backend, bias, activation, device);
    p.a_transposed = a_transposed;
    p.a_block_id = a_block_id;
    p.gated = gated;
    return p;
  }

  // A^T as a BSR of A's blocks listed by the transpose index t (see the file comment).
  static BsrView transposed_view(const BsrView& a, const TransposeIndexView& t) {
    BsrView v = a;
    v.m = a.k;
    v.k = a.m;
    v.bm = a.bk;
    v.bk = a.bm;
    v.row_ptr = t.col_ptr;
    v.col_idx = t.row_idx;
    return v;
  }

 private:
  Problem() = default;
  Problem(const BsrView& a_, const DenseView& b_, const DenseMutView& c_, float alpha_, float beta_, Backend backend_,
          const void* bias_, Activation activation_, const DeviceInfo& device_)
      : a(a_),
        b(b_),
        c(c_),
        alpha(alpha_),
        beta(beta_),
        backend(backend_),
        bias(bias_),
        activation(activation_),
        device(device_) {}
  friend Result validate(const BsrView&, const DenseView&, const DenseMutView&, const SpmmOptions&,
                         const DeviceSource&, Problem*);
  friend Result sparsek::can_implement(const BsrView&, const DenseView&, const DenseMutView&, const SpmmOptions&,
                                       Backend*);
  friend Result sparsek::spmm(const BsrView&, const DenseView&, const DenseMutView&, const SpmmOptions&,
                              cudaStream_t);
  friend Result sparsek::sparse_mlp(const MlpView&, const DenseView&, const DenseMutView&, const DenseMutView&,
                                    cudaStream_t);
};

// The C++ entry's validation (cpp/spmm/api.cu): every invariant above, one message each, into
// *out; the device last, from `devices` (core/validate.hpp: the current device, a stream of
// another device refused).
Result validate(const BsrView& a, const DenseView& b, const DenseMutView& c, const SpmmOptions& options,
                const DeviceSource& devices, Problem* out);

}  // namespace sparsek::detail
