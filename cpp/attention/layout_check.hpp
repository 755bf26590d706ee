// check_indices over an attention problem's serving layout (SequenceLayout,
// include/sparsek/attention.hpp), for both entries (cpp/attention/api.cu, the Rust bridge
// cpp/attention/bridge.cc): the layout's arrays checked on the device before the launch
// (core/index_check.hpp; each waits for the stream). Key counts and the pages they reach, then
// the packed sequences' offsets.
#pragma once

#include "attention/problem.hpp"
#include "core/index_check.hpp"

namespace sparsek::detail {

inline Result check_layout_indices(const AttentionProblem& p, cudaStream_t stream) {
  Result r;
  // batch * max_pages < 2^31 (rules/attention.toml); K's seq is the page size, its batch the
  // pool's pages.
  if (p.layout.seqlens_k != nullptr)
    r = check_seqlens_and_pages(p.layout.seqlens_k, p.layout.page_table, p.layout.batch, p.layout.max_seqlen_k,
                                p.layout.max_pages, p.k.seq, p.k.batch, stream);
  if (r.ok() && p.varlen_q())
    r = check_cu_seqlens(p.layout.cu_seqlens_q, p.layout.batch, p.q.seq, p.layout.max_seqlen_q, stream,
                         "layout.cu_seqlens_q");
  if (r.ok() && p.varlen_k())
    r = check_cu_seqlens(p.layout.cu_seqlens_k, p.layout.batch, p.k.seq, p.layout.max_seqlen_k, stream,
                         "layout.cu_seqlens_k");
  return r;
}

}  // namespace sparsek::detail
