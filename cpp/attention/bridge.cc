// attention's half of the cxx bridge (src/device/sys.rs, cpp/bridge_common.hpp): block-sparse
// attention, and the top-k gating that builds its mask.
#include "attention/gating.hpp"
#include "attention/layout_check.hpp"
#include "attention/problem.hpp"
#include "bridge_common.hpp"
#include "sparsek/cpp/attention/bridge.h"

namespace sparsek::ffi {
namespace {

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
  SequenceLayout l;
  l.cu_seqlens_q = reinterpret_cast<const int32_t*>(x.layout.cu_seqlens_q);
  l.cu_seqlens_k = reinterpret_cast<const int32_t*>(x.layout.cu_seqlens_k);
  l.seqlens_k = reinterpret_cast<const int32_t*>(x.layout.seqlens_k);
  l.page_table = reinterpret_cast<const int32_t*>(x.layout.page_table);
  l.max_pages = x.layout.max_pages;
  l.batch = x.layout.batch;
  l.max_seqlen_q = x.layout.max_seqlen_q;
  l.max_seqlen_k = x.layout.max_seqlen_k;
  return detail::AttentionProblem::from_rust(to_heads(x.q, x.dtype), to_heads(x.k, x.dtype), to_heads(x.v, x.dtype),
                                             to_heads_mut(x.o, x.dtype), reinterpret_cast<float*>(x.lse),
                                             x.has_mask ? &m : nullptr, x.causal, x.causal_alignment, x.scale,
                                             x.backend, device, l);
}

}  // namespace

FfiStatus attention(const AttentionProblem& problem) {
  // check_indices: the layout's device arrays (the Rust entry validated host arrays itself).
  return select_and_run(
      problem, nullptr, [&problem](const detail::DeviceInfo& device) { return to_problem(problem, device); },
      [&problem](const detail::AttentionProblem& p, cudaStream_t stream) {
        return problem.check_indices ? detail::check_layout_indices(p, stream) : Result{};
      });
}

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
  g.options.causal_alignment = x.causal_alignment;
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
  if (r.ok()) r = detail::select_and_launch(g, stream);
  r = detail::settle(r);
  return FfiStatus{r.status, rust::String(r.message), Backend::Auto, rust::String(r.ok() ? "gating" : "")};
}

}  // namespace sparsek::ffi
