// A TMA descriptor that could not be encoded never reaches a launch.
//
// CUTLASS's make_tma_copy (cute/atom/copy_traits_sm90_tma.hpp) value-initializes its
// descriptor and, when cuTensorMapEncodeTiled fails, only prints and asserts (compiled out
// with NDEBUG): the copy it returns holds an all-zero descriptor, which a kernel would use.
// A successful encode always writes the global address (never null for our views), so an
// all-zero descriptor is a failed one. Every Hopper launch of ours checks each descriptor it
// built (tma_encoded) before anything is enqueued and, for a failed one, returns
// tma_encode_error(operand) instead of launching.
//
// The families' launch functions return cudaError_t (cpp/core/registry.hpp). tma_encode_error's
// codes are not CUDA's: cudaError's enumerators end at cudaErrorApiFailureBase = 10000, so
// its values run to 16383 (the smallest bit-field that holds them), and these are 16128 +
// the operand. The registry's launch (core/select.hpp) turns one into InvalidArgument naming
// the operand (tma_encode_failure); nothing else sees them.
//
// Light (no CUTLASS): the descriptor is a CUtensorMap, which is cute::TmaDescriptor with
// CUDA 12+ (cute/arch/copy_sm90_desc.hpp).
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace sparsek::detail {

// The operands whose descriptors we build: the product's A (values), B and C; the SDDMM's
// A, B and S (values); attention's Q, K, V and O.
enum class TmaOperand : int { A = 0, B, C, S, Q, K, V, O };
constexpr int kTmaOperands = 8;
constexpr int kTmaErrorBase = 16128;
static_assert(kTmaErrorBase > int(cudaErrorApiFailureBase) && kTmaErrorBase + kTmaOperands <= 16384,
              "the codes must lie inside cudaError's range of values and outside its enumerators");

inline cudaError_t tma_encode_error(TmaOperand operand) {
  return static_cast<cudaError_t>(kTmaErrorBase + static_cast<int>(operand));
}

// The operand's name when `e` is a tma_encode_error code, else nullptr.
inline const char* tma_encode_failure(cudaError_t e) {
  static constexpr const char* kNames[kTmaOperands] = {"A", "B", "C", "S", "Q", "K", "V", "O"};
  const int i = static_cast<int>(e) - kTmaErrorBase;
  return i >= 0 && i < kTmaOperands ? kNames[i] : nullptr;
}

// Whether cuTensorMapEncodeTiled wrote this descriptor (false: all of its bytes are zero).
inline bool tma_descriptor_encoded(const CUtensorMap* d) {
  const unsigned char* bytes = reinterpret_cast<const unsigned char*>(d);
  unsigned char any = 0;
  for (size_t i = 0; i < sizeof(CUtensorMap); ++i) any |= bytes[i];
  return any != 0;
}

// The same of a TMA copy made by cute's make_tma_copy (its get_tma_descriptor()).
template <class TmaCopy>
bool tma_encoded(const TmaCopy& copy) {
  return tma_descriptor_encoded(copy.get_tma_descriptor());
}

}  // namespace sparsek::detail
