// sparsek: block-sparse (BSR) x dense matrix multiplication on NVIDIA GPUs.
//
//   C = alpha * A * B + beta * C
//
// A is block-sparse in BSR form (row_ptr, col_idx, dense bm x bk blocks, each block
// row-major, blocks stored in col_idx order), B (k x n) and C (m x n) are dense, row- or
// column-major. Inputs are fp16 or bf16, accumulation is fp32, C is the input type or
// fp32. Every pointer in the views is a device pointer. When beta == 0, C is not read
// (it may hold NaN).
//
// This header is the public C++ API. It uses no CUTLASS type; it needs only the CUDA
// runtime header for cudaStream_t.
#pragma once

#include <cstdint>
#include <cuda_runtime_api.h>

namespace sparsek {

enum class Status : int32_t {
  Success = 0,
  InvalidArgument = 1,   // a view is malformed (null pointer, bad dims, misaligned)
  NotSupported = 2,      // valid, but the chosen backend does not take this case
  CudaError = 3,         // a CUDA call failed; the message says which and why
};

enum class DType : int32_t { F16 = 0, BF16 = 1, F32 = 2 };
enum class Layout : int32_t { RowMajor = 0, ColMajor = 1 };

// Which kernel family runs. Auto picks the fastest that can implement the problem.
enum class Backend : int32_t { Auto = 0, Wmma = 1, Cutlass = 2 };

// A BSR matrix on the device. `row_ptr` has m/bm + 1 entries, `col_idx` nnzb entries
// (sorted, unique, < k/bk within each block-row), `values` nnzb * bm * bk elements.
struct BsrView {
  int64_t m = 0, k = 0;
  int32_t bm = 0, bk = 0;
  int64_t nnzb = 0;
  const int32_t* row_ptr = nullptr;
  const int32_t* col_idx = nullptr;
  const void* values = nullptr;
  DType dtype = DType::F16;
};

// A dense matrix on the device. `ld` is the leading dimension in elements (the row
// stride for RowMajor, the column stride for ColMajor).
struct DenseView {
  void* data = nullptr;
  int64_t rows = 0, cols = 0, ld = 0;
  Layout layout = Layout::RowMajor;
  DType dtype = DType::F16;
};

struct SpmmOptions {
  float alpha = 1.0f;
  float beta = 0.0f;
  Backend backend = Backend::Auto;
};

// Status plus a readable message (empty on success).
struct Result {
  Status status = Status::Success;
  char message[512] = {0};
  bool ok() const { return status == Status::Success; }
};

// Whether `spmm` would run this problem, and with which backend (written to *chosen when
// non-null). Checks shapes, dtypes, layouts, alignment and the current device's compute
// capability. Launches nothing and reads no device memory.
Result can_implement(const BsrView& a, const DenseView& b, const DenseView& c,
                     const SpmmOptions& options, Backend* chosen = nullptr);

// Enqueues C = alpha*A*B + beta*C on `stream`. Runs `can_implement` first; on any error
// nothing is launched. The BSR index arrays are trusted to be valid (sparsek's Rust
// side validates them; C++ callers can use sparsek::rust::validate_bsr from
// <sparsek/rust.h>, CMake option SPARSEK_WITH_RUST).
Result spmm(const BsrView& a, const DenseView& b, const DenseView& c,
            const SpmmOptions& options, cudaStream_t stream);

}  // namespace sparsek
