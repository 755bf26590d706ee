// sparsek: block-sparse (BSR) x dense matrix multiplication on NVIDIA GPUs.
//
//   C = alpha * op(A) * B + beta * C      op(A) = A, or A^T (SpmmOptions::transpose_a)
//
// A is block-sparse in BSR form (row_ptr, col_idx, dense bm x bk blocks, each block
// row-major, blocks stored in col_idx order), B (k x n) and C (m x n) are dense, row- or
// column-major. Inputs are fp16 or bf16, accumulation is fp32, C is the input type or
// fp32. Every pointer in the views is a device pointer, aligned to its element: the int32
// index arrays to 4 bytes, values and dense data to their dtype's size (a kernel family that
// reads wider vectors says so with NotSupported; a pointer misaligned for its type is
// InvalidArgument). When beta == 0, C is not read (it may hold NaN).
//
// Every call runs on the current device (cudaGetDevice) and its current CUDA context: `stream`
// must be a live stream of that context or a default stream (0, cudaStreamLegacy,
// cudaStreamPerThread); a stream of another device or of another context (a driver-API
// context of the same device included) is InvalidArgument, with nothing enqueued.
//
// FP8 (E4M3 / E5M2 A, with scales, see ScaleKind):
//   C = act(alpha * sum over A's blocks (sa * A_blk * B_blk) * sb + bias + beta * C)
// where sa is A's scale (its block's with PerBlock) and sb B's (its column's with PerColumn),
// each product accumulated in fp32 and scaled once per block. Two kinds:
//   - A and B FP8 of one type (W8A8): the Hopper family; B column-major (K-major, which is
//     x row-major in y = x * W^T: FP8 WGMMA reads K-major operands only), op(A) = A;
//   - A FP8, B f16 or bf16 (W8A16, sb = 1, B takes no scale): the Decode family; from n = 64
//     e4m3 A with column-major f16 B runs on the Hopper family (sm_90) where it fits.
// C is f16, bf16 or f32; the bias, if any, has C's dtype. Non-FP8 operands take no scale.
//
// This header is the public C++ API and the one definition of the problem: the Rust
// crate's bridge (src/device/sys.rs) declares these enums as cxx shared enums, and cxx
// checks at compile time that every value below matches the Rust side. It uses no
// CUTLASS type; it needs only the CUDA runtime header for cudaStream_t.
#pragma once

#include <cstdint>
#include <cuda_runtime_api.h>

namespace sparsek {

enum class Status : int32_t {
  Success = 0,
  InvalidArgument = 1,   // a view is malformed (null or misaligned pointer, bad dims, bad indices),
                         // or the stream is another device's or another context's
  NotSupported = 2,      // valid, but no kernel (of the chosen backend) takes this case
  CudaError = 3,         // a CUDA call failed; the message says which and why, cuda_error its code
  PendingCudaError = 4,  // a CUDA error was already pending when the call began (cudaPeekAtLastError):
                         // nothing ran, and the error is left pending for its owner; cuda_error is it.
                         // Every entry but block_topk_nnzb (which asks nothing of CUDA) checks first.
                         // A runtime that cannot start (no driver, no device) is a CudaError instead.
};

// Element types. E4M3 and E5M2 are the 8-bit floats of NVIDIA's FP8 (OCP FP8: e4m3 finite
// to +-448 with NaN 0x7f/0xff, e5m2 IEEE-like to +-57344), each read as `stored * scale` (ScaleKind).
enum class DType : int32_t { F16 = 0, BF16 = 1, F32 = 2, E4M3 = 3, E5M2 = 4 };

// How an FP8 operand's values scale: value = stored * scale, with `scales` f32 device values
//   None      - no scale (1);
//   PerTensor - one value for the operand;
//   PerBlock  - A only: one per nonzero block, in the order of `values` (nnzb values);
//   PerColumn - B only: one per column of B (n values; a token of x in y = x * W^T).
// Only FP8 operands take scales; any other dtype takes None.
enum class ScaleKind : int32_t { None = 0, PerTensor = 1, PerBlock = 2, PerColumn = 3 };
enum class Layout : int32_t { RowMajor = 0, ColMajor = 1 };

// Which kernel family runs. Auto picks by the registry's rule (cpp/core/registry.hpp): the
// first family, in the order Decode, Hopper, Wmma, that supports the problem.
//   Wmma    - tensor cores through WMMA, sm_80+;
//   Hopper  - the sm_90a family (TMA + WGMMA, CUTLASS/CuTe); `Cutlass` is its old name;
//   Decode  - memory-bound kernels for few columns of B (decode-sized batches), sm_80+.
enum class Backend : int32_t {
  Auto = 0,
  Wmma = 1,
  Hopper = 2,
  Cutlass [[deprecated("Backend::Cutlass is Backend::Hopper")]] = 2,
  Decode = 3
};

// The activation of the fused linear-layer epilogue (see SpmmOptions).
enum class Activation : int32_t { None = 0, Relu = 1, GeluTanh = 2, Silu = 3 };

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
  // FP8 values' scales (see ScaleKind): null with None.
  const float* scales = nullptr;
  ScaleKind scale_kind = ScaleKind::None;
  // The caller's promise that no kernel still running when a call that reads this matrix
  // launches writes its arrays (row_ptr, col_idx, values, scales): weights copied to the
  // device and not written since are settled; a matrix a kernel wrote is settled once that
  // kernel has completed (the host synchronized with it, say). On sm_90 a call may launch
  // while the kernel before it in the stream is still finishing (programmatic dependent
  // launch); the Decode family then starts reading a settled A before that kernel completes
  // (B, C and the bias still wait for it): about 1 us less per launch at decode sizes.
  // False (the default): A is read after it, like B.
  bool settled = false;
};

// The transpose index of a BsrView: its blocks listed by block-column, what op(A) = A^T
// walks (A's values are read in place, each block transposed; nothing is copied).
// `col_ptr` has k/bk + 1 entries (from 0, non-decreasing, ending at nnzb); `row_idx[j]` is
// the block-row of the j-th listed block (ascending within a block-column) and
// `block_id[j]` its position in A's col_idx/values (a permutation of 0..nnzb-1); both have
// nnzb entries. The Rust crate builds it (BsrMatrix::transpose_index; DeviceBsr caches it
// on the device); sparsek::rust::transpose_index (<sparsek/rust.h>) builds it on the host.
struct TransposeIndexView {
  const int32_t* col_ptr = nullptr;
  const int32_t* row_idx = nullptr;
  const int32_t* block_id = nullptr;
};

// A dense matrix on the device that a call reads (B). `ld` is the leading dimension in
// elements (the row stride for RowMajor, the column stride for ColMajor).
struct DenseView {
  const void* data = nullptr;
  int64_t rows = 0, cols = 0, ld = 0;
  Layout layout = Layout::RowMajor;
  DType dtype = DType::F16;
  // FP8 values' scales (see ScaleKind): null with None.
  const float* scales = nullptr;
  ScaleKind scale_kind = ScaleKind::None;
};

// A dense matrix on the device that a call writes (C): DenseView's fields over mutable data.
// It converts to a DenseView, so an output can be the next call's input.
struct DenseMutView {
  void* data = nullptr;
  int64_t rows = 0, cols = 0, ld = 0;
  Layout layout = Layout::RowMajor;
  DType dtype = DType::F16;
  operator DenseView() const { return DenseView{data, rows, cols, ld, layout, dtype, nullptr, ScaleKind::None}; }
};

struct SpmmOptions {
  float alpha = 1.0f;
  float beta = 0.0f;
  Backend backend = Backend::Auto;
  // Check A's index arrays on the device before launching (one small kernel and a 4-byte
  // copy back, so `spmm` synchronizes with `stream`): row_ptr starts at 0, never decreases
  // and ends at nnzb; every col_idx is in [0, k/bk), sorted and unique within its
  // block-row. A defect returns InvalidArgument and launches nothing else, C untouched.
  // Off: the indices are trusted (an out-of-range one reads out of bounds). Use it for
  // indices from an untrusted source; sparsek's Rust side validates on the host instead.
  bool check_indices = false;
  // Fused linear-layer epilogue: C = act(alpha * A*B + bias + beta * C), computed in fp32
  // before C is rounded. `bias` is null or m device values of A's dtype (of C's when A is
  // FP8; one per row of C, i.e. per output feature of y = x * W^T), 16-byte aligned.
  const void* bias = nullptr;
  Activation activation = Activation::None;
  // op(A) = A^T: C = alpha * A^T * B + beta * C, with B m x n and C k x n (bias: k values).
  // `transpose_index` must then describe A (see TransposeIndexView); with check_indices it
  // is checked too (its col_ptr/row_idx as a BSR pattern of A^T, every block_id in
  // [0, nnzb)); that it lists A's own blocks is the caller's promise. The Decode family
  // does not run A^T; the Hopper and Wmma families do.
  bool transpose_a = false;
  TransposeIndexView transpose_index;
  // Gated (GLU) epilogue, the gate and up products of a SwiGLU/GeGLU MLP in one launch: A
  // holds the two weights interleaved by block-row (block-row 2i: gate rows i*bm .. i*bm +
  // bm - 1, block-row 2i+1: the up rows with the same indices), and C, m/2 x n, gets
  //   C[i*bm + r] = act(alpha * (A*B)[2i*bm + r] + bias[2i*bm + r])
  //               * (alpha * (A*B)[(2i+1)*bm + r] + bias[(2i+1)*bm + r])
  // (bias: m values in A's row order, or null; act: `activation`, e.g. Silu for SwiGLU).
  // Needs m a multiple of 2*bm, beta = 0 and op(A) = A; runs on the Decode family (sm_90:
  // the two halves meet in a thread-block cluster).
  bool gated = false;
};

// Status plus a readable message (empty on success). Every message starts "sparsek: ", so
// print it as it is. [[nodiscard]]: a call whose Result is ignored is a compiler warning.
struct [[nodiscard]] Result {
  Status status = Status::Success;
  // The CUDA error behind a CudaError or PendingCudaError status; cudaSuccess otherwise.
  cudaError_t cuda_error = cudaSuccess;
  char message[512] = {0};
  [[nodiscard]] bool ok() const { return status == Status::Success; }
};

// Whether `spmm` would run this problem, and with which backend (*chosen, when non-null, is
// always written: the backend on success, Backend::Auto otherwise). Checks shapes, dtypes, layouts, alignment and the current device. Launches
// nothing and reads no device memory (so it does not run the index check).
Result can_implement(const BsrView& a, const DenseView& b, const DenseMutView& c,
                     const SpmmOptions& options, Backend* chosen = nullptr);

// Enqueues C = alpha*op(A)*B + beta*C on `stream`. Validates everything first (once); on any
// error nothing is launched and C is untouched. C's bytes must not overlap A's arrays (values,
// row_ptr, col_idx, the transpose index), B or the bias (InvalidArgument). The BSR index arrays are trusted unless
// options.check_indices is set (or validate them on the host with
// sparsek::rust::validate_bsr from <sparsek/rust.h>, CMake option SPARSEK_WITH_RUST).
Result spmm(const BsrView& a, const DenseView& b, const DenseMutView& c,
            const SpmmOptions& options, cudaStream_t stream);

}  // namespace sparsek
