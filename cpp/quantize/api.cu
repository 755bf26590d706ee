// The C++ entry of FP8 quantization (include/sparsek/quantize.hpp): every view checked once,
// then the registry's select and launch of its one kernel (cpp/quantize/kernel.cu), defined
// for the operation here (SPARSEK_DEFINE_OPERATION), so every caller of them links this
// object.
#include <cstdint>

#include <sparsek/quantize.hpp>

#include "core/select.hpp"
#include "core/validate.hpp"
#include "quantize/operation.hpp"
#include "quantize/problem.hpp"

namespace sparsek {
namespace detail {

// Malformed views (InvalidArgument) first, then what no kernel takes (NotSupported), then the
// device.
Result validate_quantize(const BsrView& a, const QuantizedBsrOut& out, const DeviceSource& devices,
                         QuantizeProblem* p) {
  Result r = check_bsr(a, "A");
  if (r.ok()) r = check_scales("A", a.scale_kind, a.scales);
  if (!r.ok()) return r;
  // The input is read as it is: it carries no scales (only a quantized FP8 matrix does).
  if (a.scale_kind != ScaleKind::None)
    return make_result(Status::InvalidArgument, "A: the values to quantize take no scales (A.scale_kind is not None)");
  if (!valid(out.dtype)) return make_result(Status::InvalidArgument, "out.dtype = %d is not a DType", int(out.dtype));
  if (!valid(out.granularity))
    return make_result(Status::InvalidArgument, "out.granularity = %d is not a ScaleKind", int(out.granularity));
  if (out.granularity != ScaleKind::PerBlock && out.granularity != ScaleKind::PerTensor)
    return make_result(Status::InvalidArgument, "out.granularity must be PerBlock or PerTensor");
  if (a.nnzb > 0 && out.values == nullptr)
    return make_result(Status::InvalidArgument, "out.values is null with nnzb = %lld", (long long)a.nnzb);
  if (out.scales == nullptr) return make_result(Status::InvalidArgument, "out.scales is null");
  if (reinterpret_cast<uintptr_t>(out.scales) % 16 != 0)
    return make_result(Status::InvalidArgument, "out.scales must be 16-byte aligned");
  // check_bsr proved nnzb * bm * bk * 4 (the widest input) fits int64, so the counts below do.
  const int64_t count = a.nnzb * int64_t(a.bm) * a.bk;
  const int64_t scales = out.granularity == ScaleKind::PerBlock ? a.nnzb : 1;
  const int64_t in_bytes = dtype_bytes(a.dtype);
  const ByteRange values = elements(out.values, count, 1), scale_bytes = elements(out.scales, scales, 4);
  // Neither output overlaps A's arrays; the values do not overlap the scales either.
  const ByteRange a_values = elements(a.values, count, in_bytes), a_row_ptr = elements(a.row_ptr, a.m / a.bm + 1, 4),
                  a_col_idx = elements(a.col_idx, a.nnzb, 4);
  {
    const ByteRange inputs[] = {a_values, a_row_ptr, a_col_idx, scale_bytes};
    const char* const names[] = {"A.values", "A.row_ptr", "A.col_idx", "out.scales"};
    r = check_disjoint("out.values", values, inputs, names);
  }
  if (r.ok()) {
    const ByteRange inputs[] = {a_values, a_row_ptr, a_col_idx};
    const char* const names[] = {"A.values", "A.row_ptr", "A.col_idx"};
    r = check_disjoint("out.scales", scale_bytes, inputs, names);
  }
  if (!r.ok()) return r;
  if (!QuantizeInputs::contains(a.dtype))
    return make_result(Status::NotSupported, "quantize_fp8 reads f16, bf16 or f32, not %s", dtype_name(a.dtype));
  if (!is_fp8(out.dtype))
    return make_result(Status::NotSupported, "quantize_fp8 writes e4m3 or e5m2, not %s", dtype_name(out.dtype));
  p->values = a.values;
  p->in = a.dtype;
  p->nnzb = a.nnzb;
  p->block_len = int64_t(a.bm) * a.bk;
  p->out_values = out.values;
  p->out = out.dtype;
  p->scales = out.scales;
  p->granularity = out.granularity;
  DeviceInfo device;
  return devices.resolve(&device);
}

SPARSEK_DEFINE_OPERATION(QuantizeProblem)

}  // namespace detail

Result quantize_fp8(const BsrView& a, const QuantizedBsrOut& out, cudaStream_t stream) {
  detail::QuantizeProblem p;
  Result r = detail::pending_cuda_error();
  if (r.ok()) r = detail::validate_quantize(a, out, detail::DeviceSource::of_stream(stream), &p);
  if (r.ok()) r = detail::select_and_launch(p, stream);
  return detail::finish(r);
}

}  // namespace sparsek
