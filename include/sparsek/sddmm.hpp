// sparsek: the sampled dense-dense product (SDDMM) on NVIDIA GPUs.
//
//   S = alpha * (A * B) ⊙ mask + beta * S
//
// A (m x k) and B (k x n) are dense, row- or column-major, fp16 or bf16; S is block-sparse
// (BSR, m x n in bm x bn blocks) and is both the mask and the output: only its stored
// blocks are computed, its pattern is kept, its values (the input dtype or fp32) are
// overwritten. Accumulation is fp32. When beta == 0, S's values are not read (they may hold
// NaN). Every pointer is a device pointer. The backward pass of a pruned linear layer
// (dW = dY^T * X on W's pattern) and block-sparse attention scores (Q * K^T on the mask)
// are SDDMMs.
#pragma once

#include <sparsek/sparsek.hpp>

namespace sparsek {

// The sparse output: a BsrView whose values are written. `row_ptr` has m/bm + 1 entries,
// `col_idx` nnzb entries (sorted, unique, < n/bn within each block-row), `values`
// nnzb * bm * bn elements of `dtype`, each block row-major.
struct BsrMutView {
  int64_t m = 0, n = 0;
  int32_t bm = 0, bn = 0;
  int64_t nnzb = 0;
  const int32_t* row_ptr = nullptr;
  const int32_t* col_idx = nullptr;
  void* values = nullptr;
  DType dtype = DType::F16;
};

struct SddmmOptions {
  float alpha = 1.0f;
  float beta = 0.0f;
  // Auto: Hopper (sm_90a) where one of its rows takes the problem, else Wmma (sm_80+).
  // Decode has no SDDMM.
  Backend backend = Backend::Auto;
  // As SpmmOptions::check_indices: S's row_ptr/col_idx checked on the device first.
  bool check_indices = false;
};

// Whether `sddmm` would run this problem, and with which backend. Launches nothing and
// reads no device memory.
Result can_implement(const DenseView& a, const DenseView& b, const BsrMutView& s, const SddmmOptions& options,
                     Backend* chosen = nullptr);

// Enqueues S = alpha * (A*B) ⊙ mask + beta * S on `stream`. Validates everything first
// (once); on any error nothing is launched and S is untouched. S's values must overlap
// neither A, B nor S's row_ptr and col_idx (InvalidArgument). S's indices are trusted
// unless options.check_indices is set.
Result sddmm(const DenseView& a, const DenseView& b, const BsrMutView& s, const SddmmOptions& options,
             cudaStream_t stream);

}  // namespace sparsek
