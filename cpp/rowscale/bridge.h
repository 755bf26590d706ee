// rowscale's entry of the cxx bridge (src/device/sys.rs includes this header; the definition
// is in bridge.cc beside it): selects a row for the problem Rust validated and, with
// Mode::Launch, launches it on the problem's stream. Compiled by the host compiler, only in
// the Rust build.
#pragma once

#include "rust/cxx.h"

namespace sparsek::ffi {

struct RowscaleProblem;
struct FfiStatus;

FfiStatus rowscale(const RowscaleProblem& problem);

}  // namespace sparsek::ffi
