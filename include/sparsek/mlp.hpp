// A pruned gated MLP (SwiGLU, GeGLU) on the device: y = down(act(x*G^T) ⊙ (x*U^T)), the
// device twin of the Rust SparseMlp (src/mlp/mod.rs). Two launches: the gate and up
// products as one gated product (SpmmOptions::gated: their weights interleaved by
// block-row, the GLU in the epilogue), then the down product. The gated product runs on the
// Decode family for few columns and on the Hopper family's gated rows (sm_90a, f16/bf16,
// blocks up to 128 high) for many: Auto's threshold is in cpp/spmm/operation.hpp.
#pragma once

#include <sparsek/sparsek.hpp>

namespace sparsek {

// The weights: `gate_up` (2*inter x hidden) holds the gate and up weights interleaved by
// block-row (block-row 2i: gate rows i*bm .., 2i+1: the up rows; the Rust
// BsrMatrix::interleave_block_rows builds it), `down` is out x inter. Both f16 or bf16,
// or both FP8 (E4M3 / E5M2, with their scales: W8A16, x and h f16 or bf16). Mark weights
// that no running kernel writes BsrView::settled: the down product then starts streaming
// its weights while the gated product finishes, and the gated product while the kernel
// before the call does.
struct MlpView {
  BsrView gate_up;
  BsrView down;
  Activation activation = Activation::Silu;  // the gate's: Silu for SwiGLU, GeluTanh for GeGLU
  Backend backend = Backend::Auto;
  bool check_indices = false;  // as SpmmOptions::check_indices, for both weights
  // Optional biases, as SpmmOptions::bias of each product: `gate_up_bias` 2*inter device
  // values in gate_up's row order (the gate's and up's biases interleaved by block-row, as
  // the weights), added before the activation and the product; `down_bias` out values.
  // Each of the weights' dtype, or, with FP8 weights, of its product's output (h's, y's).
  const void* gate_up_bias = nullptr;
  const void* down_bias = nullptr;
};

// With x (hidden x n), h (inter x n, written: the GLU's output) and y (out x n) as
// SpmmOptions's B and C views (column-major x^T is a row-major batch x hidden x):
//   h = act(G*x + bias_g) ⊙ (U*x + bias_u),   y = down*h + bias_down.
// Every check of both products (shapes, types, alignment, overlap, the device, a kernel for
// each) runs before the first launch; a failure names the product and launches nothing.
// Both products are enqueued on `stream`, with no allocation and no host synchronization
// (CUDA-graph capturable) unless check_indices asks for the index check.
Result sparse_mlp(const MlpView& mlp, const DenseView& x, const DenseMutView& h, const DenseMutView& y,
                  cudaStream_t stream);

}  // namespace sparsek
