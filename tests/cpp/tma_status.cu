// Defect 10 of the hardening issue: a TMA descriptor cuTensorMapEncodeTiled refuses must not
// reach a launch. CUTLASS's make_tma_copy only prints and asserts (compiled out) on a failed
// encode and hands back its value-initialized descriptor; core/tma_status.hpp detects that
// (tma_encoded) and the registry turns tma_encode_error(operand) into InvalidArgument naming
// the operand. The driver may write part of a descriptor it refuses (a 2^40-byte stride
// did on the H100), so core/tma_encode.hpp zeroes a refused one. Here, with the real
// encoder: a valid view encodes; a row stride of 2^40 bytes (beyond TMA's limit) and a
// misaligned base are refused and detected; the error
// codes round-trip. Needs the CUDA driver (the encoder is a driver call): exit 77 (skipped)
// without one. One PASS/FAIL line per case, exit 1 on a failure.
// The library's units build with NDEBUG (cpp/nvcc_flags.txt), as must this: with assertions,
// CUTLASS's make_tma_copy asserts before and after a refused encode instead of returning.
#ifndef NDEBUG
#define NDEBUG
#endif

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdint>

#include <cutlass/cutlass.h>

#include "core/tma_encode.hpp"  // before make_tma_copy is instantiated

#include <cute/tensor.hpp>
#include <cute/atom/copy_traits_sm90_tma.hpp>

#include "core/tma_status.hpp"

namespace {

int failures = 0;

void expect(bool ok, const char* what) {
  std::printf("%s %s\n", ok ? "PASS" : "FAIL", what);
  failures += ok ? 0 : 1;
}

}  // namespace

int main() {
  using namespace cute;
  using sparsek::detail::TmaOperand;
  void* buf = nullptr;
  if (cudaMalloc(&buf, 1 << 20) != cudaSuccess) {
    std::printf("SKIPPED tma_status: no CUDA device (%s)\n", cudaGetErrorString(cudaGetLastError()));
    return 77;
  }
  auto* base = static_cast<half_t*>(buf);
  // 64 x 64 tiles of a 128 x 64 row-major f16 matrix.
  auto smem = make_layout(make_shape(Int<64>{}, Int<64>{}), make_stride(Int<64>{}, Int<1>{}));
  auto valid = make_tensor(make_gmem_ptr(base), make_shape(128, 64), make_stride(int64_t(64), Int<1>{}));
  expect(sparsek::detail::tma_encoded(make_tma_copy(SM90_TMA_LOAD{}, valid, smem)), "a valid view encodes");
  // Row stride 2^39 elements = 2^40 bytes: above cuTensorMapEncodeTiled's limit.
  auto far = make_tensor(make_gmem_ptr(base), make_shape(128, 64), make_stride(int64_t(1) << 39, Int<1>{}));
  expect(!sparsek::detail::tma_encoded(make_tma_copy(SM90_TMA_LOAD{}, far, smem)),
         "a 2^40-byte row stride is refused by the encoder and detected");
  // A base address off 16 bytes.
  auto odd = make_tensor(make_gmem_ptr(base + 1), make_shape(128, 64), make_stride(int64_t(64), Int<1>{}));
  expect(!sparsek::detail::tma_encoded(make_tma_copy(SM90_TMA_LOAD{}, odd, smem)),
         "a base address off 16 bytes is refused by the encoder and detected");
  // The codes a family returns for a failed encode, and the names the registry reports.
  const char* names = "ABCSQKVO";
  bool round_trip = true;
  for (int i = 0; i < sparsek::detail::kTmaOperands; ++i) {
    const cudaError_t e = sparsek::detail::tma_encode_error(static_cast<TmaOperand>(i));
    const char* n = sparsek::detail::tma_encode_failure(e);
    round_trip = round_trip && n != nullptr && n[0] == names[i] && e != cudaSuccess;
  }
  round_trip = round_trip && sparsek::detail::tma_encode_failure(cudaErrorInvalidValue) == nullptr &&
               sparsek::detail::tma_encode_failure(cudaSuccess) == nullptr;
  expect(round_trip, "tma_encode_error codes name their operand; CUDA's own codes name none");
  cudaFree(buf);
  std::printf("%d passed, %d failed\n", 4 - failures, failures);
  return failures == 0 ? 0 : 1;
}
