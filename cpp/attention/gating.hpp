// Top-k key-block gating (include/sparsek/attention.hpp, block_topk*): the checked request and
// its launch (cpp/attention/gating.cu). The C++ entry (cpp/attention/api.cu) and the Rust
// bridge (cpp/bridge.cc) build a GatingProblem after their validation; the launch trusts it.
#pragma once

#include <sparsek/attention.hpp>

#include "../problem.hpp"

namespace sparsek::detail {

// Invariants: batch, heads, seq_q, seq_k >= 0; 1 <= block_q, block_k; top_k >= 0;
// q_blocks = ceil(seq_q/block_q) and k_blocks = ceil(seq_k/block_k) fit int32;
// batch*heads*q_blocks + 1 and nnzb fit int32; pooled: q and k are valid HeadsViews of
// [batch, heads, seq_q | seq_k, head_dim] (F16 or BF16, the same), scores null; else
// scores holds batch*heads*q_blocks*k_blocks floats; row_ptr non-null, col_idx non-null
// when nnzb > 0.
struct GatingProblem {
  bool pooled = false;  // scores from q and k (else from `scores`)
  HeadsView q, k;
  const float* scores = nullptr;
  int64_t batch = 0, heads = 0, seq_q = 0, seq_k = 0;
  TopkGatingOptions options;
  int64_t q_blocks = 0, k_blocks = 0, nnzb = 0;
  int32_t* row_ptr = nullptr;
  int32_t* col_idx = nullptr;
  DeviceInfo device;
};

// Blocks kept by query block i (min(top_k, candidates)).
inline int64_t gating_row_keep(const TopkGatingOptions& o, int64_t i, int64_t k_blocks) {
  int64_t cand = k_blocks;
  if (o.causal) {
    const int64_t last = ((i + 1) * o.block_q - 1) / o.block_k;  // the last candidate block
    cand = last + 1 < k_blocks ? last + 1 : k_blocks;
  }
  return o.top_k < cand ? o.top_k : cand;
}

// Why the gating kernel cannot run p (shared memory for the pooled K), or nullptr.
const char* gating_supports(const GatingProblem& p);

// Enqueues the one gating launch (nothing when there is no query block).
Result launch_gating(const GatingProblem& p, cudaStream_t stream);

}  // namespace sparsek::detail
