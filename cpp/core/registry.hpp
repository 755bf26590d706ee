// The kernel registry: how an operation's kernels are described, picked and launched, the same
// for every operation. The core names no operation. Each operation specialises Operation<P>
// for its checked problem P (cpp/<operation>/operation.hpp; top-k gating in
// cpp/attention/gating.hpp): its families in Auto's preference order, the build feature it
// needs, its Auto policy. Each family (cpp/<operation>/<family>/family.cu) defines one
// FamilyOf<P>, declared in its operation's header: a table of variants (one row per kernel
// configuration, see the family's configs.hpp) and three functions. An operation of one
// kernel (FP8 quantization, top-k gating) has one family of one row.
//
// A family answers two questions about a checked problem p (its invariants: the operation's
// problem.hpp; families check only what is theirs):
//   supports(p)     - why it cannot run p at all (nullptr when it can): architecture,
//                     dtypes, alignment, grid limits, anything common to its rows;
//   fits(p, row)    - why row `row` of its table cannot run p (nullptr when it can);
// and launches:
//   launch(p, row, stream) - enqueues row `row` for p, returning the first CUDA error
//                     (launch errors included), or tma_encode_error(operand) when a TMA
//                     descriptor could not be encoded, having enqueued nothing
//                     (core/tma_status.hpp; launch() reports it as InvalidArgument); or, in
//                     its place, launch_worded(p, row, stream), which words its own errors.
//                     Called only after supports and fits.
//
// Selection (select(), core/select.hpp), the documented rule:
//   0. An operation whose build feature is not built is refused with its message; bf16
//      inputs, where the operation's rows need the feature `bf16`, likewise.
//   1. SPARSEK_VARIANT=<row name> in the environment (a measuring knob, read once) forces
//      that row wherever it is supported and fits (under Backend::Auto: and the operation's
//      Auto policy keeps it); where it does not, the problem is refused with the reason (so a
//      sweep never silently measures another row). A row of another operation's registry
//      leaves this operation to the rule below. An operation of one kernel has no row to
//      force: it ignores the variable, and its row is no row of "another operation".
//   2. Otherwise, for Backend::Auto, families are tried in the operation's order
//      (Operation<P>::kFamilies; the product's: Decode, whose rows fit only below their
//      measured n thresholds, then Hopper, the faster one wherever it applies, then WMMA); an
//      explicit backend tries only its family. A problem with a bias or activation skips
//      families without the fused epilogue, a gated one families without the gated epilogue.
//   3. Within a family, the first row in table order that is `automatic`, within its
//      measured bounds (max_n, max_row_depth, the family's auto_skips), fits and is not left
//      to another family by the operation's Auto policy (Operation<P>::auto_leaves) wins.
//      Tables are ordered by measured preference; each row's chosen_by names what chose it.
//   4. When no automatic row fits, the `fallback` rows are tried in the same order (e.g. the
//      decode family's column-chunked row, the only one that takes any n with any ld).
//
// The rows that rule 1 knows: each operation registers the names of its rows at static
// initialisation, from the object that defines its select and launch
// (SPARSEK_DEFINE_OPERATION, core/select.hpp, in the operation's api.cu). Everything that
// selects or launches an operation links that object. libsparsek_kernels is a static
// library, so a C++ program links an operation's objects only when it calls the operation:
// such a program knows the rows of the operations it calls, and SPARSEK_VARIANT naming a row
// of an operation it never links is refused as naming no kernel variant (the program has no
// such kernel). The Rust library's bridge calls every operation, so it knows every row.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/features.hpp"
#include "core/result.hpp"

namespace sparsek::detail {

// What the registry knows of one row of a family's table.
struct VariantInfo {
  const char* name;       // unique across families, e.g. "sm90_f16_bm128_rr" or "wmma_w128x256"
  bool automatic;         // Auto may pick it; false = a tuning candidate (SPARSEK_VARIANT only)
  const char* chosen_by;  // the measurement (or the reason) that chose the row
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

// A family of kernels for the checked problems P of one operation.
template <class P>
struct FamilyOf {
  // The backend that names it (Backend::Auto for the family of an operation of one kernel:
  // nothing to choose between).
  Backend backend;
  const char* name;  // "hopper", "wmma": the name in messages
  int rows;          // rows in the family's table
  bool epilogue;     // takes the fused bias/activation epilogue (P::has_epilogue)
  VariantInfo (*info)(int row);
  const char* (*supports)(const P& p);
  const char* (*fits)(const P& p, int row);
  cudaError_t (*launch)(const P& p, int row, cudaStream_t stream);
  // Optional: true where Auto passes over `row` although it fits p, a measured preference
  // beyond max_n and max_row_depth (the Hopper product family's split-tile rows).
  bool (*auto_skips)(const P& p, int row) = nullptr;
  // Takes the gated (GLU) epilogue (P::gated_epilogue).
  bool gated = false;
  // In place of launch: enqueues row `row` for p and words its own failures (a launch of
  // several CUDA calls, each failure named by its call). Null: launch, worded by the registry.
  Result (*launch_worded)(const P& p, int row, cudaStream_t stream) = nullptr;
};

// The row that will run a problem.
template <class P>
struct SelectionOf {
  const FamilyOf<P>* family = nullptr;
  int row = -1;
};

// What an operation tells the registry, specialised by each operation for its checked
// problem P (see the file comment), deriving from OperationDefaults<P> and restating what
// differs:
//   kNeeds, kNotBuilt  the build feature the operation needs, and the refusal without it;
//   kBf16Feature       bf16 inputs (P::input()) need the feature `bf16`;
//   kForcible          SPARSEK_VARIANT may force its rows;
//   kNamesFamilies     a refusal under Auto lists each family's reason, "no kernel runs this
//                      problem (hopper: ...; wmma: ...)"; false: the reason alone;
//   kFamilies          its families in Auto's preference order (an array of FamilyOf<P>
//                      pointers; a null where the families' feature is not built);
//   auto_leaves(p, f, row)  Auto's policy: why Auto leaves p, which row `row` of family f
//                      fits, to another family, or nullptr.
// P answers: `backend`, has_epilogue(), gated_epilogue(), n(), deeper_than(depth),
// empty_output(), and with kBf16Feature input().
template <class P>
struct Operation;

template <class P>
struct OperationDefaults {
  static constexpr uint32_t kNeeds = 0;
  static constexpr const char* kNotBuilt = "";
  static constexpr bool kBf16Feature = true;
  static constexpr bool kForcible = true;
  static constexpr bool kNamesFamilies = true;
  static const char* auto_leaves(const P&, const FamilyOf<P>&, int) { return nullptr; }
};

// Picks the row for p by the rule above, or says why none can run it (NotSupported, or
// InvalidArgument for an unknown SPARSEK_VARIANT). Defined in core/select.hpp and
// instantiated by each operation in its api.cu (SPARSEK_DEFINE_OPERATION).
template <class P>
Result select(const P& p, SelectionOf<P>* out);

// Enqueues the selected row on `stream` (nothing for an empty output).
template <class P>
Result launch(const P& p, const SelectionOf<P>& s, cudaStream_t stream);

// select, then launch.
template <class P>
Result select_and_launch(const P& p, cudaStream_t stream) {
  SelectionOf<P> s;
  Result r = select(p, &s);
  if (r.ok()) r = launch(p, s, stream);
  return r;
}

}  // namespace sparsek::detail
