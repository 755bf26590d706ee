// quantize's half of the cxx bridge (src/device/sys.rs, cpp/bridge_common.hpp).
#include "bridge_common.hpp"
#include "sparsek/cpp/quantize/bridge.h"
#include "quantize/operation.hpp"

namespace sparsek::ffi {

// FP8 quantization of the Rust entry (DeviceBsr::quantize_fp8_from validated the counts and
// bound the stream's context).
FfiStatus quantize_fp8(const QuantizeProblem& x) {
  detail::QuantizeProblem q;
  q.values = reinterpret_cast<const void*>(x.values);
  q.in = x.dtype;
  q.nnzb = x.nnzb;
  q.block_len = x.block_len;
  q.out_values = reinterpret_cast<void*>(x.out);
  q.out = x.out_dtype;
  q.scales = reinterpret_cast<float*>(x.scales);
  q.granularity = x.granularity;
  const cudaStream_t stream = reinterpret_cast<cudaStream_t>(x.stream);
  detail::DeviceInfo device;
  Result r = detail::pending_cuda_error();
  if (r.ok()) r = detail::DeviceSource::of_stream(stream).resolve(&device);
  if (r.ok()) r = detail::select_and_launch(q, stream);
  r = detail::settle(r);
  return FfiStatus{r.status, rust::String(r.message), Backend::Auto, rust::String(r.ok() ? "quantize" : "")};
}

}  // namespace sparsek::ffi
