#include "sparsek/cpp/bridge.h"

#include <sparsek/sparsek.hpp>

#include "attention/gating.hpp"
#include "quantize/problem.hpp"
#include "spmm/problem.hpp"
#include "core/registry.hpp"
#include "core/validate.hpp"
#include "sparsek/src/gpu/sys.rs.h"

namespace sparsek::ffi {
namespace {

DenseView to_dense(const DenseDesc& d) {
  return DenseView{reinterpret_cast<const void*>(d.data), d.rows,   d.cols, d.ld, d.layout, d.dtype,
                   reinterpret_cast<const float*>(d.scales), d.scale_kind};
}

// An output: the Rust side lent it mutably.
DenseMutView to_dense_mut(const DenseDesc& d) {
  return DenseMutView{reinterpret_cast<void*>(d.data), d.rows, d.cols, d.ld, d.layout, d.dtype};
}

BsrView to_bsr(const BsrDesc& d) {
  BsrView a;
  a.m = d.m;
  a.k = d.k;
  a.bm = d.bm;
  a.bk = d.bk;
  a.nnzb = d.nnzb;
  a.row_ptr = reinterpret_cast<const int32_t*>(d.row_ptr);
  a.col_idx = reinterpret_cast<const int32_t*>(d.col_idx);
  a.values = reinterpret_cast<const void*>(d.values);
  a.dtype = d.dtype;
  a.scales = reinterpret_cast<const float*>(d.scales);
  a.scale_kind = d.scale_kind;
  return a;
}

// The room a BsrDesc keeps for batched matrices: no family takes them yet.
const char* unsupported(const BsrDesc& d) {
  if (d.batch != 1 || d.batch_stride != 0) return "batched BSR matrices are not supported yet";
  return nullptr;
}

// Rust validated the problem (src/spmm/check.rs, and DeviceBsr holds only validated
// arrays), so this is the Rust entry's Problem: no check is repeated here
// (cpp/spmm/problem.hpp).
detail::Problem to_problem(const SpmmProblem& x, const detail::DeviceInfo& device) {
  const BsrView a = to_bsr(x.a);
  // op(A) = A^T: B is m x n and C k x n, and the families see A^T's view (problem.hpp).
  const bool t = x.transpose_a;
  TransposeIndexView ti;
  ti.col_ptr = reinterpret_cast<const int32_t*>(x.t_col_ptr);
  ti.row_idx = reinterpret_cast<const int32_t*>(x.t_row_idx);
  ti.block_id = reinterpret_cast<const int32_t*>(x.t_block_id);
  return detail::Problem::from_rust(t ? detail::Problem::transposed_view(a, ti) : a, to_dense(x.b), to_dense_mut(x.c),
                                    x.alpha, x.beta, x.backend, reinterpret_cast<const void*>(x.bias), x.activation,
                                    device, t, t ? ti.block_id : nullptr, x.gated);
}
const char* unsupported(const SpmmProblem& x) { return unsupported(x.a); }

// The SDDMM of the Rust entry (src/sddmm/check.rs validated it; S comes from a DeviceBsr).
detail::SddmmProblem to_problem(const SddmmProblem& x, const detail::DeviceInfo& device) {
  const BsrView v = to_bsr(x.s);
  BsrMutView s;
  s.m = v.m;
  s.n = v.k;
  s.bm = v.bm;
  s.bn = v.bk;
  s.nnzb = v.nnzb;
  s.row_ptr = v.row_ptr;
  s.col_idx = v.col_idx;
  s.values = const_cast<void*>(v.values);  // written by a launch: the Rust side lent it mutably
  s.dtype = v.dtype;
  return detail::SddmmProblem::from_rust(to_dense(x.a), to_dense(x.b), s, x.alpha, x.beta, x.backend, device);
}
const char* unsupported(const SddmmProblem& x) { return unsupported(x.s); }

// O: the Rust side lent it mutably.
HeadsMutView to_heads_mut(const HeadsDesc& d, DType t) {
  return HeadsMutView{reinterpret_cast<void*>(d.data), d.batch, d.heads, d.seq, d.head_dim, d.stride_b, d.stride_h,
                      d.stride_s, t};
}
HeadsView to_heads(const HeadsDesc& d, DType t) { return to_heads_mut(d, t); }

// The attention of the Rust entry (src/attention validated it; the mask comes from a
// DeviceBlockPatterns).
detail::AttentionProblem to_problem(const AttentionProblem& x, const detail::DeviceInfo& device) {
  BlockMaskView m;
  m.block_q = x.block_q;
  m.block_k = x.block_k;
  m.q_blocks = x.q_blocks;
  m.k_blocks = x.k_blocks;
  m.patterns = x.patterns;
  m.batch = x.mask_batch;
  m.heads = x.mask_heads;
  m.nnzb = x.nnzb;
  m.row_ptr = reinterpret_cast<const int32_t*>(x.row_ptr);
  m.col_idx = reinterpret_cast<const int32_t*>(x.col_idx);
  return detail::AttentionProblem::from_rust(to_heads(x.q, x.dtype), to_heads(x.k, x.dtype), to_heads(x.v, x.dtype),
                                             to_heads_mut(x.o, x.dtype), reinterpret_cast<float*>(x.lse),
                                             x.has_mask ? &m : nullptr, x.causal, x.scale, x.backend, device);
}
const char* unsupported(const AttentionProblem&) { return nullptr; }

template <class P>
FfiStatus status(const Result& r, const detail::SelectionOf<P>& s) {
  const bool chosen = r.ok() && s.family != nullptr;
  return FfiStatus{r.status, rust::String(r.message), chosen ? s.family->backend : Backend::Auto,
                   rust::String(chosen ? s.family->info(s.row).name : "")};
}

// Selects a row for the problem and, with Mode::Launch, launches it on its stream.
template <class X>
FfiStatus select_and_run(const X& x) {
  using P = decltype(to_problem(x, detail::DeviceInfo{}));
  detail::SelectionOf<P> s;
  if (const char* why = unsupported(x)) return status(detail::make_result(Status::NotSupported, "%s", why), s);
  if (x.mode != Mode::Select && x.mode != Mode::Launch)
    return status(detail::make_result(Status::InvalidArgument, "unknown mode %d", int(x.mode)), s);
  // The Rust side binds the stream's context first; a stream of another device (a missed
  // bind) is refused here rather than launched into (core/validate.hpp, DeviceSource).
  const cudaStream_t stream = reinterpret_cast<cudaStream_t>(x.stream);
  const detail::DeviceSource devices =
      x.mode == Mode::Launch ? detail::DeviceSource::of_stream(stream) : detail::DeviceSource::current();
  detail::DeviceInfo device;
  Result r = detail::pending_cuda_error();
  if (r.ok()) r = devices.resolve(&device);
  if (!r.ok()) return status(detail::settle(r), s);
  const P p = to_problem(x, device);
  r = detail::select(p, &s);
  if (r.ok() && x.mode == Mode::Launch) r = detail::launch(p, s, stream);
  return status(detail::settle(r), s);
}

}  // namespace

FfiStatus spmm(const SpmmProblem& problem) { return select_and_run(problem); }

FfiStatus sddmm(const SddmmProblem& problem) { return select_and_run(problem); }

FfiStatus attention(const AttentionProblem& problem) { return select_and_run(problem); }

// Top-k gating of the Rust entry (gpu::block_topk* validated the dims and computed nnzb).
FfiStatus block_topk(const GatingProblem& x) {
  detail::GatingProblem g;
  g.pooled = x.pooled;
  g.q = to_heads(x.q, x.dtype);
  g.k = to_heads(x.k, x.dtype);
  g.scores = reinterpret_cast<const float*>(x.scores);
  g.batch = x.batch;
  g.heads = x.heads;
  g.seq_q = x.seq_q;
  g.seq_k = x.seq_k;
  g.options.top_k = x.top_k;
  g.options.causal = x.causal;
  g.options.block_q = x.block_q;
  g.options.block_k = x.block_k;
  g.q_blocks = x.q_blocks;
  g.k_blocks = x.k_blocks;
  g.nnzb = x.nnzb;
  g.row_ptr = reinterpret_cast<int32_t*>(x.row_ptr);
  g.col_idx = reinterpret_cast<int32_t*>(x.col_idx);
  const cudaStream_t stream = reinterpret_cast<cudaStream_t>(x.stream);
  Result r = detail::pending_cuda_error();
  if (r.ok()) r = detail::DeviceSource::of_stream(stream).resolve(&g.device);
  if (r.ok())
    if (const char* why = detail::gating_supports(g)) r = detail::make_result(Status::NotSupported, "%s", why);
  if (r.ok()) r = detail::launch_gating(g, stream);
  r = detail::settle(r);
  return FfiStatus{r.status, rust::String(r.message), Backend::Auto, rust::String(r.ok() ? "gating" : "")};
}

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
  if (r.ok())
    if (const char* why = detail::quantize_supports(q)) r = detail::make_result(Status::NotSupported, "%s", why);
  if (r.ok()) r = detail::launch_quantize(q, stream);
  r = detail::settle(r);
  return FfiStatus{r.status, rust::String(r.message), Backend::Auto, rust::String(r.ok() ? "quantize" : "")};
}

}  // namespace sparsek::ffi
