// The kernel registry: every kernel family, each a table of variants (one row per tile
// configuration, see the family's configs.hpp), and the rule that picks one. One registry
// per operation, the same rule for each: the product C = alpha*op(A)*B + beta*C
// (Problem, cpp/spmm/problem.hpp: Decode, Hopper, WMMA), the SDDMM S = alpha*(A*B) ⊙ mask +
// beta*S (SddmmProblem, cpp/sddmm/problem.hpp: Hopper, WMMA) and attention
// (AttentionProblem, cpp/attention/problem.hpp: Hopper).
//
// A family answers two questions about a checked Problem (cpp/spmm/problem.hpp):
//   supports(p)     - why it cannot run p at all (nullptr when it can): architecture,
//                     dtypes, alignment, grid limits, anything common to its rows;
//   fits(p, row)    - why row `row` of its table cannot run p (nullptr when it can);
// and launches:
//   launch(p, row, stream) - enqueues row `row` for p, returning the first CUDA error
//                     (launch errors included), or tma_encode_error(operand) when a TMA
//                     descriptor could not be encoded, having enqueued nothing (cpp/tma_status.hpp;
//                     launch() reports it as InvalidArgument). Called only after supports and fits.
//
// Selection (select() in cpp/core/registry.cu), the documented rule:
//   1. SPARSEK_VARIANT=<row name> in the environment (a measuring knob, read once) forces
//      that row wherever it is supported and fits; where it does not, the problem is
//      refused with the reason (so a sweep never silently measures another row). A row of the
//      other operation's registry leaves this operation to the rule below.
//   2. Otherwise, for Backend::Auto, families are tried in kFamilies order: Decode (its
//      rows fit only below their measured n thresholds), then the Hopper family (the faster
//      one wherever it applies), then WMMA; an explicit backend tries only its family. A
//      problem with a bias or activation skips families without the fused epilogue, a
//      gated one families without the gated epilogue.
//   3. Within a family, the first row in table order that is `automatic`, within its
//      measured bounds (max_n, max_row_depth, the family's auto_skips) and fits wins.
//      Tables are ordered by measured preference; each row cites the run that chose it.
//   4. When no automatic row fits, the `fallback` rows are tried in the same order (e.g. the
//      decode family's column-chunked row, the only one that takes any n with any ld).
#pragma once

#include <cuda_runtime_api.h>

#include "core/features.hpp"

#include "spmm/problem.hpp"
#include "sddmm/problem.hpp"
#include "attention/problem.hpp"

namespace sparsek::detail {

// What the registry knows of one row of a family's table.
struct VariantInfo {
  const char* name;       // unique across families, e.g. "sm90_f16_bm128_rr" or "wmma_w128x256"
  bool automatic;         // Auto may pick it; false = a tuning candidate (SPARSEK_VARIANT only)
  const char* chosen_by;  // the measurement that chose the row
  bool fallback = false;  // Auto tries it only after every automatic row of every family
  int64_t max_n = 0;      // > 0: automatic only for n <= max_n (where it measured faster)
  // > 0: automatic only when the block-rows' average depth (nonzero blocks * bk) is at most
  // this: rows that win on short block-rows (where the epilogue is a large share).
  int64_t max_row_depth = 0;
  // The build features the row needs (core/features.hpp): a row whose features are not all
  // built is not compiled; the registry passes over it and names the feature when only it
  // would have run the problem.
  uint32_t needs = 0;
};

// A family of kernels for problems of type P (Problem or SddmmProblem).
template <class P>
struct FamilyOf {
  Backend backend;
  const char* name;  // "hopper", "wmma": the name in messages
  int rows;          // rows in the family's table
  bool epilogue;     // takes the fused bias/activation epilogue (P::has_epilogue)
  VariantInfo (*info)(int row);
  const char* (*supports)(const P& p);
  const char* (*fits)(const P& p, int row);
  cudaError_t (*launch)(const P& p, int row, cudaStream_t stream);
  // Optional: true where Auto passes over `row` although it fits p, a measured preference
  // beyond max_n and max_row_depth (the Hopper family's split-tile rows, sm90/configs.hpp).
  bool (*auto_skips)(const P& p, int row) = nullptr;
  // Takes the gated (GLU) epilogue (Problem::gated): the Decode family only.
  bool gated = false;
};
using Family = FamilyOf<Problem>;
using SddmmFamily = FamilyOf<SddmmProblem>;
using AttentionFamily = FamilyOf<AttentionProblem>;

// Defined by each family (cpp/spmm/decode/family.cu, cpp/spmm/sm90/family.cu, cpp/spmm/wmma/family.cu;
// cpp/sddmm/sm90/family.cu, cpp/sddmm/wmma/family.cu; cpp/attention/sm90/family.cu).
extern const Family kDecodeFamily;
extern const Family kSm90Family;
extern const Family kWmmaFamily;
extern const SddmmFamily kSddmmSm90Family;
extern const SddmmFamily kSddmmWmmaFamily;
extern const AttentionFamily kAttentionSm90Family;

// The row that will run a problem.
template <class P>
struct SelectionOf {
  const FamilyOf<P>* family = nullptr;
  int row = -1;
};
using Selection = SelectionOf<Problem>;
using SddmmSelection = SelectionOf<SddmmProblem>;
using AttentionSelection = SelectionOf<AttentionProblem>;

// Picks the row for p by the rule above, or says why none can run it (NotSupported, or
// InvalidArgument for an unknown SPARSEK_VARIANT).
Result select(const Problem& p, Selection* out);
Result select(const SddmmProblem& p, SddmmSelection* out);
Result select(const AttentionProblem& p, AttentionSelection* out);

// Enqueues the selected row on `stream` (nothing for an empty output).
Result launch(const Problem& p, const Selection& s, cudaStream_t stream);
Result launch(const SddmmProblem& p, const SddmmSelection& s, cudaStream_t stream);
Result launch(const AttentionProblem& p, const AttentionSelection& s, cudaStream_t stream);

}  // namespace sparsek::detail
