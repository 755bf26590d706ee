// spmm's entry of the cxx bridge (src/device/sys.rs includes this header; the definition is
// in bridge.cc beside it): selects a row for the problem Rust validated and, with
// Mode::Launch, launches it on the problem's stream. Compiled by the host compiler, only in
// the Rust build.
#pragma once

#include "rust/cxx.h"

namespace sparsek::ffi {

struct SpmmProblem;
struct FfiStatus;

FfiStatus spmm(const SpmmProblem& problem);

}  // namespace sparsek::ffi
