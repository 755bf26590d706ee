#include "sparsek/cpp/bridge.h"

#include <sparsek/sparsek.hpp>

#include "attention/gating.hpp"
#include "spmm/problem.hpp"
#include "core/registry.hpp"
#include "sparsek/src/gpu/sys.rs.h"

namespace sparsek::ffi {
namespace {

// Rust validated the problem (src/spmm.rs, and DeviceBsr holds only validated arrays), so
// this is the Rust entry's Problem: no check is repeated here (cpp/problem.hpp).
detail::Problem to_problem(const SpmmProblem& x, const detail::DeviceInfo& device) {
  BsrView a;
  a.m = x.m;
  a.k = x.k;
  a.bm = x.bm;
  a.bk = x.bk;
  a.nnzb = x.nnzb;
  a.row_ptr = reinterpret_cast<const int32_t*>(x.row_ptr);
  a.col_idx = reinterpret_cast<const int32_t*>(x.col_idx);
  a.values = reinterpret_cast<const void*>(x.values);
  a.dtype = x.input;
  // op(A) = A^T: B is m x n and C k x n, and the families see A^T's view (problem.hpp).
  const bool t = x.transpose_a;
  const DenseView b{reinterpret_cast<void*>(x.b), t ? x.m : x.k, x.n, x.b_ld, x.b_layout, x.input};
  const DenseView c{reinterpret_cast<void*>(x.c), t ? x.k : x.m, x.n, x.c_ld, x.c_layout, x.output};
  TransposeIndexView ti;
  ti.col_ptr = reinterpret_cast<const int32_t*>(x.t_col_ptr);
  ti.row_idx = reinterpret_cast<const int32_t*>(x.t_row_idx);
  ti.block_id = reinterpret_cast<const int32_t*>(x.t_block_id);
  return detail::Problem::from_rust(t ? detail::Problem::transposed_view(a, ti) : a, b, c, x.alpha, x.beta, x.backend,
                                    reinterpret_cast<const void*>(x.bias), x.activation, device, t,
                                    t ? ti.block_id : nullptr);
}

// The SDDMM of the Rust entry (src/spmm.rs validated it; S comes from a DeviceBsr).
detail::SddmmProblem to_problem(const SddmmProblem& x, const detail::DeviceInfo& device) {
  BsrMutView s;
  s.m = x.m;
  s.n = x.n;
  s.bm = x.bm;
  s.bn = x.bn;
  s.nnzb = x.nnzb;
  s.row_ptr = reinterpret_cast<const int32_t*>(x.row_ptr);
  s.col_idx = reinterpret_cast<const int32_t*>(x.col_idx);
  s.values = reinterpret_cast<void*>(x.values);
  s.dtype = x.output;
  const DenseView a{reinterpret_cast<void*>(x.a), x.m, x.k, x.a_ld, x.a_layout, x.input};
  const DenseView b{reinterpret_cast<void*>(x.b), x.k, x.n, x.b_ld, x.b_layout, x.input};
  return detail::SddmmProblem::from_rust(a, b, s, x.alpha, x.beta, x.backend, device);
}

HeadsView to_heads(const HeadsDesc& d, DType t) {
  HeadsView v;
  v.data = reinterpret_cast<void*>(d.data);
  v.batch = d.batch;
  v.heads = d.heads;
  v.seq = d.seq;
  v.head_dim = d.head_dim;
  v.stride_b = d.stride_b;
  v.stride_h = d.stride_h;
  v.stride_s = d.stride_s;
  v.dtype = t;
  return v;
}

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
                                             to_heads(x.o, x.dtype), reinterpret_cast<float*>(x.lse),
                                             x.has_mask ? &m : nullptr, x.causal, x.scale, x.backend, device);
}

template <class P>
FfiStatus status(const Result& r, const detail::SelectionOf<P>& s) {
  const bool chosen = r.ok() && s.family != nullptr;
  return FfiStatus{r.status, rust::String(r.message), chosen ? s.family->backend : Backend::Auto,
                   rust::String(chosen ? s.family->info(s.row).name : "")};
}

// Selects a row for the problem and, when `run`, launches it on the problem's stream.
template <class X>
FfiStatus select_and_run(const X& x, bool run) {
  using P = decltype(to_problem(x, detail::DeviceInfo{}));
  detail::SelectionOf<P> s;
  detail::DeviceInfo device;
  Result r = detail::current_device(&device);
  if (!r.ok()) return status(r, s);
  const P p = to_problem(x, device);
  r = detail::select(p, &s);
  if (r.ok() && run) r = detail::launch(p, s, reinterpret_cast<cudaStream_t>(x.stream));
  return status(r, s);
}

}  // namespace

FfiStatus select(const SpmmProblem& problem) { return select_and_run(problem, false); }

FfiStatus spmm(const SpmmProblem& problem) { return select_and_run(problem, true); }

FfiStatus select_sddmm(const SddmmProblem& problem) { return select_and_run(problem, false); }

FfiStatus sddmm(const SddmmProblem& problem) { return select_and_run(problem, true); }

FfiStatus select_attention(const AttentionProblem& problem) { return select_and_run(problem, false); }

FfiStatus attention(const AttentionProblem& problem) { return select_and_run(problem, true); }

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
  Result r = detail::current_device(&g.device);
  if (r.ok())
    if (const char* why = detail::gating_supports(g)) r = detail::make_result(Status::NotSupported, "%s", why);
  if (r.ok()) r = detail::launch_gating(g, reinterpret_cast<cudaStream_t>(x.stream));
  return FfiStatus{r.status, rust::String(r.message), Backend::Auto, rust::String(r.ok() ? "gating" : "")};
}

}  // namespace sparsek::ffi
