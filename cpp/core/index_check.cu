// See index_check.hpp. One thread per block-row; the defect found at the lowest block-row
// wins (a 64-bit atomicMin on row << 8 | kind), so the message is the same on every run.
#include <cuda_runtime.h>

#include <climits>
#include <cstdio>
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
  kBlockIdOutOfRange = 7,
};

const char* describe(unsigned long long kind) {
  switch (kind) {
    case kStartNotZero: return "row_ptr[0] is not 0";
    case kDecreasing: return "row_ptr decreases after this block-row";
    case kEndNotNnzb: return "row_ptr[block_rows] (the last entry) is not nnzb";
    case kRowOutOfRange: return "row_ptr points outside [0, nnzb]";
    case kColumnOutOfRange: return "col_idx holds a column outside [0, k/bk)";
    case kUnsorted: return "col_idx is not sorted and unique";
    case kBlockIdOutOfRange: return "block_id holds a block outside [0, nnzb)";
  }
  return "unknown defect";
}

__device__ void report(unsigned long long* status, int64_t row, unsigned long long kind) {
  atomicMin(status, (static_cast<unsigned long long>(row) << 8) | kind);
}

// block_id: null, or (op(A) = A^T) one entry per listed block, each to lie in [0, nnzb).
__global__ void check_kernel(const int32_t* __restrict__ row_ptr, const int32_t* __restrict__ col_idx,
                             const int32_t* __restrict__ block_id, int64_t block_rows, int64_t block_cols, int64_t nnzb, unsigned long long* status) {
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
      if (block_id != nullptr && (block_id[i] < 0 || block_id[i] >= nnzb)) {
        report(status, r, kBlockIdOutOfRange);
        break;
      }
    }
  }
}

// Cumulative sequence lengths (SequenceLayout's cu_seqlens_*): batch + 1 entries from 0,
// non-decreasing, ending at `total`, each length at most `max_len`.
enum SeqlenDefect : unsigned long long {
  kSeqStartNotZero = 1,
  kSeqDecreasing = 2,
  kSeqEndNotTotal = 3,
  kSeqTooLong = 4,
};

const char* describe_seqlens(unsigned long long kind) {
  switch (kind) {
    case kSeqStartNotZero: return "its first entry is not 0";
    case kSeqDecreasing: return "it decreases after this sequence";
    case kSeqEndNotTotal: return "its last entry is not the packed total (the view's seq)";
    case kSeqTooLong: return "this sequence is longer than the layout's max_seqlen";
  }
  return "unknown defect";
}

__global__ void check_seqlens_kernel(const int32_t* __restrict__ cu, int64_t batch, int64_t total, int64_t max_len,
                                     unsigned long long* status) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; b <= batch; b += stride) {
    const int64_t at = cu[b];
    if (b == 0 && at != 0) report(status, 0, kSeqStartNotZero);
    if (b == batch) {
      if (at != total) report(status, b, kSeqEndNotTotal);
      continue;
    }
    const int64_t len = int64_t(cu[b + 1]) - at;
    if (len < 0) report(status, b, kSeqDecreasing);
    else if (len > max_len) report(status, b, kSeqTooLong);
  }
}

// Per-sequence key counts and the page-table entries they reach (SequenceLayout's seqlens_k
// and page_table). A defect's entry is b * max_pages + p (p = 0 for a count), so the lowest
// sequence's first defect wins, its count before its pages.
enum PagedDefect : unsigned long long {
  kLengthOutOfRange = 1,
  kPageOutOfRange = 2,
};

// One thread per table entry (b, p) (one per sequence, max_pages = 1, without a table).
__global__ void check_paged_kernel(const int32_t* __restrict__ seqlens_k, const int32_t* __restrict__ page_table,
                                   int64_t batch, int64_t max_len, int64_t max_pages, int64_t page_size,
                                   int64_t num_pages, unsigned long long* status) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t entries = batch * max_pages;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < entries; i += stride) {
    const int64_t b = i / max_pages, p = i % max_pages;
    const int64_t len = seqlens_k[b];
    if (len < 0 || len > max_len) {
      if (p == 0) report(status, i, kLengthOutOfRange);
      continue;
    }
    if (page_table == nullptr || p >= (len + page_size - 1) / page_size) continue;
    const int64_t page = page_table[i];
    if (page < 0 || page >= num_pages) report(status, i, kPageOutOfRange);
  }
}

// Runs one check kernel (`launch(d_status)` enqueues it on `stream`) and waits for its status
// into *status: ULLONG_MAX when it found nothing, else the lowest (entry << 8 | kind).
template <class Launch>
Result run_check(cudaStream_t stream, Launch launch, unsigned long long* status) {
  // The check waits for its result, which a stream being captured into a graph cannot do.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  cudaError_t e = cudaStreamIsCapturing(stream, &capture);
  if (e != cudaSuccess) return with_cuda_error(e, make_result(Status::CudaError, "index check: %s", cudaGetErrorString(e)));
  if (capture != cudaStreamCaptureStatusNone)
    return make_result(Status::InvalidArgument,
                       "check_indices waits for its result and cannot run inside a stream capture");
  unsigned long long* d_status = nullptr;
  e = cudaMallocAsync(&d_status, sizeof(unsigned long long), stream);
  if (e != cudaSuccess) return with_cuda_error(e, make_result(Status::CudaError, "index check: allocating its status: %s", cudaGetErrorString(e)));
  *status = ULLONG_MAX;
  e = cudaMemcpyAsync(d_status, status, sizeof(*status), cudaMemcpyHostToDevice, stream);
  if (e == cudaSuccess) {
    launch(d_status);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) e = cudaMemcpyAsync(status, d_status, sizeof(*status), cudaMemcpyDeviceToHost, stream);
  const cudaError_t e_free = cudaFreeAsync(d_status, stream);
  if (e == cudaSuccess) e = e_free;
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) return with_cuda_error(e, make_result(Status::CudaError, "index check: %s", cudaGetErrorString(e)));
  return Result{};
}

// A grid of 256-thread blocks over `items` entries (grid-stride beyond 4096 blocks).
unsigned check_grid(int64_t items) {
  const int64_t want = (items + 255) / 256;
  return static_cast<unsigned>(want < 4096 ? want : 4096);
}

}  // namespace

// `what` names the pattern in messages ("A's indices fail", "S's indices fail", ...), `unit`
// its block-rows.
Result check_bsr_indices(const int32_t* row_ptr, const int32_t* col_idx, const int32_t* block_id,
                         int64_t block_rows, int64_t block_cols, int64_t nnzb, cudaStream_t stream, const char* what,
                         const char* unit) {
  unsigned long long status = ULLONG_MAX;
  Result r = run_check(
      stream,
      [&](unsigned long long* d_status) {
        check_kernel<<<check_grid(block_rows + 1), 256, 0, stream>>>(row_ptr, col_idx, block_id, block_rows,
                                                                     block_cols, nnzb, d_status);
      },
      &status);
  if (!r.ok()) return r;
  if (status == ULLONG_MAX) return Result{};
  const unsigned long long row = status >> 8, kind = status & 0xff;
  if (kind == kEndNotNnzb) return make_result(Status::InvalidArgument, "%s the device check: %s", what, describe(kind));
  return make_result(Status::InvalidArgument, "%s the device check at %s %llu: %s", what, unit, row, describe(kind));
}

Result check_pattern(const int32_t* row_ptr, const int32_t* col_idx, int64_t block_rows, int64_t block_cols,
                     int64_t nnzb, cudaStream_t stream, const char* name) {
  char what[64];
  std::snprintf(what, sizeof(what), "%s's indices fail", name);
  return check_bsr_indices(row_ptr, col_idx, nullptr, block_rows, block_cols, nnzb, stream, what, "block-row");
}

Result check_seqlens_and_pages(const int32_t* seqlens_k, const int32_t* page_table, int64_t batch, int64_t max_len,
                               int64_t max_pages, int64_t page_size, int64_t num_pages, cudaStream_t stream) {
  const int64_t per_sequence = page_table != nullptr ? max_pages : 1;
  unsigned long long status = ULLONG_MAX;
  Result r = run_check(
      stream,
      [&](unsigned long long* d_status) {
        check_paged_kernel<<<check_grid(batch * per_sequence), 256, 0, stream>>>(
            seqlens_k, page_table, batch, max_len, per_sequence, page_size, num_pages, d_status);
      },
      &status);
  if (!r.ok()) return r;
  if (status == ULLONG_MAX) return Result{};
  const unsigned long long entry = status >> 8, kind = status & 0xff;
  const unsigned long long b = entry / static_cast<unsigned long long>(per_sequence);
  const unsigned long long page = entry % static_cast<unsigned long long>(per_sequence);
  if (kind == kLengthOutOfRange)
    return make_result(Status::InvalidArgument,
                       "layout.seqlens_k fails the device check at sequence %llu: outside [0, max_seqlen_k = %lld]", b,
                       (long long)max_len);
  return make_result(Status::InvalidArgument,
                     "layout.page_table fails the device check at sequence %llu, page %llu: outside [0, %lld) (the "
                     "pool's pages)",
                     b, page, (long long)num_pages);
}

Result check_cu_seqlens(const int32_t* cu_seqlens, int64_t batch, int64_t total, int64_t max_len,
                        cudaStream_t stream, const char* name) {
  unsigned long long status = ULLONG_MAX;
  Result r = run_check(
      stream,
      [&](unsigned long long* d_status) {
        check_seqlens_kernel<<<check_grid(batch + 1), 256, 0, stream>>>(cu_seqlens, batch, total, max_len, d_status);
      },
      &status);
  if (!r.ok()) return r;
  if (status == ULLONG_MAX) return Result{};
  const unsigned long long b = status >> 8, kind = status & 0xff;
  if (kind == kSeqEndNotTotal)
    return make_result(Status::InvalidArgument, "%s fails the device check: %s (%lld)", name, describe_seqlens(kind),
                       (long long)total);
  return make_result(Status::InvalidArgument, "%s fails the device check at sequence %llu: %s", name, b,
                     describe_seqlens(kind));
}

}  // namespace sparsek::detail
