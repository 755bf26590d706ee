// The checks every operation's C++ entry shares (core/validate.cu): each view by value,
// with checked int64 arithmetic, before anything is queried or launched.
#pragma once

#include <sparsek/sparsek.hpp>

#include "core/overlap.hpp"
#include "core/result.hpp"

namespace sparsek::detail {

// The result of an entry point (settled, core/validate.cu), its message given the one
// "sparsek: " prefix.
Result finish(Result r);

bool valid(DType t);  // a DType with a traits entry (core/dtype.hpp)
bool valid(Layout l);
bool valid(Backend b);
bool valid(Activation a);
bool valid(ScaleKind s);

// A dense view: non-negative dims, non-null data when non-empty, data aligned to its dtype's
// size (kernels address it through typed pointers), ld covering the contiguous extent, and
// its last element's offset (in bytes too) inside int64.
Result check_dense(const char* name, const DenseView& v);

// The bytes of a dense view that passed check_dense (empty when it has no element).
ByteRange dense_bytes(const DenseView& v);

// A BSR view (`name`: "A", or "S" for the SDDMM's output, whose k is n and bk is bn): its
// dims and counts, its arrays non-null where they hold something, row_ptr and col_idx 4-byte
// aligned and values aligned to its dtype's size.
Result check_bsr(const BsrView& a, const char* name = "A");

// InvalidArgument unless `ptr` (null allowed) is a multiple of `alignment` bytes: every
// pointer a kernel reads or writes through a typed pointer needs at least its type's size
// (a misaligned access is a sticky fault that ends the CUDA context). Wider vector accesses
// are the families' own requirement (NotSupported where a family cannot take a pointer).
Result check_aligned(const char* name, const void* ptr, int64_t alignment);

// Refuses a stream of another device than the current one (InvalidArgument). The pure half
// of DeviceSource::resolve: `stream_device` and `current_device` are device ordinals.
Result check_stream_device(int stream_device, int current_device);

// Refuses a stream that is not of the current context (InvalidArgument, naming the stream's
// device where it is another device's). Driver context queries only, which stream capture
// allows (DeviceSource::resolve).
Result check_stream_context(cudaStream_t stream, int current_device);

// The device a call runs on, resolved after its views passed (a malformed call queries
// nothing): the current device's DeviceInfo, once the stream the call launches on is known
// to belong to it. Row selection, the device limits (shared memory, SM count, compute
// capability) and the scratch pool (core/split_workspace.hpp) all come from the current
// device, and the runtime launches into the current device's context, so a stream of another
// device is refused before anything is enqueued rather than followed: following it would mean
// switching the caller's current device around every call. The check is one runtime query
// per call (cuStreamGetCtx against cuCtxGetCurrent: no synchronization, and allowed inside
// CUDA-graph capture, where cudaStreamGetDevice is not),
// and none for the default streams (null, cudaStreamLegacy, cudaStreamPerThread), which are
// the current device's by definition.
class DeviceSource {
 public:
  // The current device and `stream`'s (every launching entry).
  static DeviceSource of_stream(cudaStream_t stream);
  // The current device alone (can_implement: no stream, nothing launched).
  static DeviceSource current();
  // Both given, nothing queried: the validators without a GPU (tests/cpp/fuzz_validators.cpp).
  static DeviceSource given(const DeviceInfo& device, int stream_device);
  // Nothing: resolve() leaves a default DeviceInfo (a caller that resolves the device itself
  // once every view of several products passed: sparse_mlp).
  static DeviceSource deferred();

  // The current device into *out, after refusing a stream of another device.
  Result resolve(DeviceInfo* out) const;

 private:
  enum class Kind { Stream, Current, Given, Deferred };
  Kind kind_ = Kind::Current;
  cudaStream_t stream_ = nullptr;
  DeviceInfo device_;
  int stream_device_ = 0;
};

// An operand's scale fields by value (include/sparsek/sparsek.hpp, ScaleKind): a ScaleKind,
// `scales` null exactly with None and else 16-byte aligned. Which kinds an operand takes, and
// that only FP8 operands take any, are the operations' table rules (rules/<op>.toml).
Result check_scales(const char* name, ScaleKind kind, const float* scales);

// How many f32 values scales of `kind` hold: 0, 1 or `parts` (nnzb or n).
int64_t scale_count(ScaleKind kind, int64_t parts);

}  // namespace sparsek::detail
