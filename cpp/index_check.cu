// See index_check.hpp. One thread per block-row; the defect found at the lowest block-row
// wins (a 64-bit atomicMin on row << 8 | kind), so the message is the same on every run.
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "index_check.hpp"

namespace sparsek::detail {
namespace {

enum Defect : unsigned long long {
  kStartNotZero = 1,
  kDecreasing = 2,
  kEndNotNnzb = 3,
  kRowOutOfRange = 4,
  kColumnOutOfRange = 5,
  kUnsorted = 6,
};

const char* describe(unsigned long long kind) {
  switch (kind) {
    case kStartNotZero: return "row_ptr[0] is not 0";
    case kDecreasing: return "row_ptr decreases after this block-row";
    case kEndNotNnzb: return "row_ptr[block_rows] (the last entry) is not nnzb";
    case kRowOutOfRange: return "row_ptr points outside [0, nnzb]";
    case kColumnOutOfRange: return "col_idx holds a column outside [0, k/bk)";
    case kUnsorted: return "col_idx is not sorted and unique";
  }
  return "unknown defect";
}

__device__ void report(unsigned long long* status, int64_t row, unsigned long long kind) {
  atomicMin(status, (static_cast<unsigned long long>(row) << 8) | kind);
}

__global__ void check_kernel(const int32_t* __restrict__ row_ptr, const int32_t* __restrict__ col_idx,
                             int64_t block_rows, int64_t block_cols, int64_t nnzb, unsigned long long* status) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; r <= block_rows; r += stride) {
    const int64_t begin = row_ptr[r];
    if (r == 0 && begin != 0) report(status, 0, kStartNotZero);
    if (r == block_rows) {
      if (begin != nnzb) report(status, r, kEndNotNnzb);
      continue;
    }
    const int64_t end = row_ptr[r + 1];
    if (begin < 0 || begin > nnzb || end < 0 || end > nnzb) {
      report(status, r, kRowOutOfRange);
      continue;
    }
    if (end < begin) {
      report(status, r, kDecreasing);
      continue;
    }
    int64_t prev = -1;
    for (int64_t i = begin; i < end; ++i) {
      const int64_t col = col_idx[i];
      if (col < 0 || col >= block_cols) {
        report(status, r, kColumnOutOfRange);
        break;
      }
      if (col <= prev) {
        report(status, r, kUnsorted);
        break;
      }
      prev = col;
    }
  }
}

}  // namespace

Result check_indices(const Problem& p, cudaStream_t stream) {
  // The check waits for its result, which a stream being captured into a graph cannot do.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  cudaError_t e = cudaStreamIsCapturing(stream, &capture);
  if (e != cudaSuccess) return make_result(Status::CudaError, "index check: %s", cudaGetErrorString(e));
  if (capture != cudaStreamCaptureStatusNone)
    return make_result(Status::InvalidArgument,
                       "check_indices waits for its result and cannot run inside a stream capture");
  unsigned long long* d_status = nullptr;
  e = cudaMallocAsync(&d_status, sizeof(unsigned long long), stream);
  if (e != cudaSuccess) return make_result(Status::CudaError, "index check: allocating its status: %s", cudaGetErrorString(e));
  unsigned long long status = ULLONG_MAX;
  e = cudaMemcpyAsync(d_status, &status, sizeof(status), cudaMemcpyHostToDevice, stream);
  if (e == cudaSuccess) {
    const int64_t rows = p.block_rows() + 1;
    const int threads = 256;
    const int64_t want = (rows + threads - 1) / threads;
    const unsigned grid = static_cast<unsigned>(want < 4096 ? want : 4096);
    check_kernel<<<grid, threads, 0, stream>>>(p.a.row_ptr, p.a.col_idx, p.block_rows(), p.block_cols(), p.a.nnzb,
                                               d_status);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) e = cudaMemcpyAsync(&status, d_status, sizeof(status), cudaMemcpyDeviceToHost, stream);
  const cudaError_t e_free = cudaFreeAsync(d_status, stream);
  if (e == cudaSuccess) e = e_free;
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) return make_result(Status::CudaError, "index check: %s", cudaGetErrorString(e));
  if (status == ULLONG_MAX) return Result{};
  const unsigned long long row = status >> 8, kind = status & 0xff;
  if (kind == kEndNotNnzb) return make_result(Status::InvalidArgument, "A's indices fail the device check: %s", describe(kind));
  return make_result(Status::InvalidArgument, "A's indices fail the device check at block-row %llu: %s", row,
                     describe(kind));
}

}  // namespace sparsek::detail
