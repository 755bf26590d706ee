// FP8 quantization of a BSR matrix's values on the device: the device twin of the Rust
// host's BsrMatrix::quantize_fp8 (src/quantize/mod.rs), bit for bit.
#pragma once

#include <sparsek/sparsek.hpp>

namespace sparsek {

// Where quantize_fp8 writes: `values` receives a.nnzb * bm * bk FP8 values of `dtype` (E4M3
// or E5M2), in a.values' order, so a.row_ptr / a.col_idx with these values and scales are
// the quantized matrix; `scales` receives one f32 per stored block (`granularity` PerBlock)
// or one for the matrix (PerTensor). Both are device memory; `scales` 16-byte aligned (the
// products read it so), neither overlapping A's arrays nor each other.
struct QuantizedBsrOut {
  void* values = nullptr;
  DType dtype = DType::E4M3;
  float* scales = nullptr;
  ScaleKind granularity = ScaleKind::PerBlock;
};

// Quantizes A's values (f16, bf16 or f32, no scales) to FP8, as the host quantizer does:
// each part's (block's or matrix's) scale = amax / the format's largest finite value (448
// for E4M3, 57344 for E5M2), 1 for an all-zero part, never below the smallest normal f32;
// each value = v / scale rounded to the nearest FP8 value, ties to even, saturating finite
// overflow. Deterministic (no order-dependent arithmetic). A part holding a NaN or an
// infinity gets a NaN scale and NaN values (the host quantizer refuses such values; the
// device cannot without a synchronizing read). One to three launches on `stream`, no
// allocation, no host synchronization (CUDA-graph capturable); A's indices are not read.
// Needs the `fp8` build feature (NotSupported without it).
Result quantize_fp8(const BsrView& a, const QuantizedBsrOut& out, cudaStream_t stream);

}  // namespace sparsek
