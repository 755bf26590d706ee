// The C++ side of the cxx bridge (src/gpu/ffi.rs): converts the bridge's flat structs
// into the public views of include/sparsek/sparsek.hpp. Compiled by the host compiler,
// only in the Rust build.
#pragma once

#include "rust/cxx.h"

namespace sparsek::ffi {

struct SpmmArgs;
struct FfiStatus;

FfiStatus spmm(const SpmmArgs& args);
FfiStatus can_implement(const SpmmArgs& args);
FfiStatus chain_checksum(uint64_t data, int64_t n, uint64_t out, uint64_t stream);

}  // namespace sparsek::ffi
