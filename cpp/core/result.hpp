// Results and the current device: the plumbing every operation's entry, validator and kernel
// family shares (defined in core/validate.cu). Not installed; users see
// include/sparsek/sparsek.hpp, whose Result and Status these build.
#pragma once

#include <sparsek/sparsek.hpp>

namespace sparsek::detail {

// The current device, queried once per device per process (current_device).
struct DeviceInfo {
  int id = 0;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int smem_optin = 0;  // per-block opt-in shared memory limit, bytes
};

// The current device's DeviceInfo (cached per device).
Result current_device(DeviceInfo* out);

// A Result with `status` and the message printf(fmt, ...). Messages carry no prefix inside
// sparsek; the public C++ functions put "sparsek: " in front once, on the way out, and the
// Rust side shows them as they are.
Result make_result(Status status, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// `r` carrying the CUDA error behind it (Result::cuda_error).
inline Result with_cuda_error(cudaError_t e, Result r) {
  r.cuda_error = e;
  return r;
}

// PendingCudaError when the caller left a CUDA error pending (cudaPeekAtLastError, which
// leaves it so); success otherwise. Every launching entry asks first, so the error a launch
// path reads back afterwards is its own.
Result pending_cuda_error();

// `r`, after consuming the error a failed CUDA call of this entry left as the last error
// (an entry starts with none pending, so it is sparsek's, and must not surface as pending
// in the caller's next call).
Result settle(Result r);

}  // namespace sparsek::detail
