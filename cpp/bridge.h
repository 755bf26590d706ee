// The C++ side of the cxx bridge (src/device/sys.rs): one entry per operation, each defined in
// its operation's cpp/<operation>/bridge.cc, which turns the problem description that Rust
// validated into the operation's checked problem, selects a kernel row and launches it.
// Compiled by the host compiler, only in the Rust build.
#pragma once

#include "rust/cxx.h"

namespace sparsek::ffi {

struct SpmmProblem;
struct SddmmProblem;
struct AttentionProblem;
struct GatingProblem;
struct QuantizeProblem;
struct FfiStatus;

// Each selects a row and, with Mode::Launch, launches it on the problem's stream.
FfiStatus spmm(const SpmmProblem& problem);
FfiStatus sddmm(const SddmmProblem& problem);
FfiStatus attention(const AttentionProblem& problem);
FfiStatus block_topk(const GatingProblem& problem);
FfiStatus quantize_fp8(const QuantizeProblem& problem);

}  // namespace sparsek::ffi
