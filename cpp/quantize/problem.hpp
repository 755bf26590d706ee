// FP8 quantization of BSR values on the device (include/sparsek/quantize.hpp): the checked
// request and its launch (cpp/quantize/kernel.cu). The C++ entry (cpp/quantize/api.cu) and the
// Rust bridge (cpp/quantize/bridge.cc) build a QuantizeProblem after their validation; the
// launch trusts it.
#pragma once

#include <cstdint>

#include <sparsek/quantize.hpp>

#include "core/dtype.hpp"
#include "core/features.hpp"
#include "spmm/problem.hpp"

namespace sparsek::detail {

// Invariants: `in` is F16, BF16 or F32 and `out` E4M3 or E5M2; granularity is PerBlock or
// PerTensor; 0 <= nnzb <= INT32_MAX, block_len = bm * bk >= 1 and nnzb * block_len * 4
// fit int64; `values` and `out_values` hold nnzb * block_len elements (non-null when
// nnzb > 0), `values` aligned to its type; `scales` holds nnzb (PerBlock) or 1 (PerTensor)
// floats and is non-null and 16-byte aligned; no output overlaps an input or the other
// output.
struct QuantizeProblem {
  const void* values = nullptr;
  DType in = DType::F16;
  int64_t nnzb = 0, block_len = 0;
  void* out_values = nullptr;
  DType out = DType::E4M3;
  float* scales = nullptr;
  ScaleKind granularity = ScaleKind::PerBlock;
};

// The C++ entry's validation (cpp/quantize/api.cu): A's view (check_bsr: its values aligned
// to their type), the outputs, the types, then the device from `devices` (core/validate.hpp:
// a stream of another device refused); every invariant above, into *p.
Result validate_quantize(const BsrView& a, const QuantizedBsrOut& out, const DeviceSource& devices,
                         QuantizeProblem* p);

// The types quantize_fp8 reads and writes (core/dtype.hpp).
using QuantizeInputs = DTypeList<DType::F16, DType::BF16, DType::F32>;

#if SPARSEK_FEATURES & SPARSEK_FEATURE_FP8
// Enqueues the launches of p on `stream` (a memset and three launches per tensor, one launch
// per block).
Result launch_quantize(const QuantizeProblem& p, cudaStream_t stream);
inline const char* quantize_supports(const QuantizeProblem&) { return nullptr; }
#else
// Built without the feature `fp8` (kernel.cu not compiled): every quantization is refused.
inline const char* quantize_supports(const QuantizeProblem&) {
  return "sparsek was built without fp8: enable the feature `fp8` (cargo feature; CMake SPARSEK_WITH_FP8)";
}
inline Result launch_quantize(const QuantizeProblem& p, cudaStream_t) {
  return make_result(Status::NotSupported, "%s", quantize_supports(p));
}
#endif

}  // namespace sparsek::detail
