// FP8 quantization of BSR values on the device (include/sparsek/quantize.hpp): the checked
// request. The C++ entry (cpp/quantize/api.cu) and the Rust bridge (cpp/quantize/bridge.cc)
// build a QuantizeProblem after their validation and run it through the registry
// (quantize/operation.hpp; its kernel: cpp/quantize/kernel.cu); the launch trusts it.
#pragma once

#include <cstdint>

#include <sparsek/quantize.hpp>

#include "core/dtype.hpp"
#include "core/one_kernel.hpp"
#include "core/result.hpp"

namespace sparsek::detail {

class DeviceSource;  // core/validate.hpp

// Invariants: `in` is F16, BF16 or F32 and `out` E4M3 or E5M2; granularity is PerBlock or
// PerTensor; 0 <= nnzb <= INT32_MAX, block_len = bm * bk >= 1 and nnzb * block_len * 4
// fit int64; `values` and `out_values` hold nnzb * block_len elements (non-null when
// nnzb > 0), `values` aligned to its type; `scales` holds nnzb (PerBlock) or 1 (PerTensor)
// floats and is non-null and 16-byte aligned; no output overlaps an input or the other
// output.
struct QuantizeProblem : OneKernelProblem {
  const void* values = nullptr;
  DType in = DType::F16;
  int64_t nnzb = 0, block_len = 0;
  void* out_values = nullptr;
  DType out = DType::E4M3;
  float* scales = nullptr;
  ScaleKind granularity = ScaleKind::PerBlock;

  // One kernel (core/one_kernel.hpp); with no block, a per-tensor quantization still writes
  // its scale, so the output is never empty.
};

// The C++ entry's validation (cpp/quantize/api.cu): A's view (check_bsr: its values aligned
// to their type), the outputs, the types, then the device from `devices` (core/validate.hpp:
// a stream of another device refused); every invariant above, into *p.
Result validate_quantize(const BsrView& a, const QuantizedBsrOut& out, const DeviceSource& devices,
                         QuantizeProblem* p);

// The types quantize_fp8 reads and writes (core/dtype.hpp).
using QuantizeInputs = DTypeList<DType::F16, DType::BF16, DType::F32>;

}  // namespace sparsek::detail
