// The opt-in device-side check of a BSR's index arrays (SpmmOptions::check_indices and the
// other operations' check_indices), for C++ callers whose row_ptr / col_idx come from an
// untrusted source.
#pragma once

#include <cstdint>

#include "core/result.hpp"

namespace sparsek::detail {

// Checks on `stream`, then waits for it: row_ptr[0] == 0, row_ptr non-decreasing,
// row_ptr[block_rows] == nnzb, every col_idx in [0, block_cols), strictly increasing
// within its block-row, and (when `block_id` is not null: one entry per listed block) every
// block_id in [0, nnzb). Reads only row_ptr[0 .. block_rows] and col_idx[0 .. nnzb), and
// col_idx entries only through row_ptr values already checked to lie in [0, nnzb].
// InvalidArgument names the first bad block-row, as the `unit` ("block-row") it is to the
// caller, after `what` ("A's indices fail"); CudaError if the check itself failed.
Result check_bsr_indices(const int32_t* row_ptr, const int32_t* col_idx, const int32_t* block_id,
                         int64_t block_rows, int64_t block_cols, int64_t nnzb, cudaStream_t stream, const char* what,
                         const char* unit);

// The same check of any BSR pattern (S of an SDDMM, an attention mask); `name` ("S") names
// it in messages.
Result check_pattern(const int32_t* row_ptr, const int32_t* col_idx, int64_t block_rows, int64_t block_cols,
                     int64_t nnzb, cudaStream_t stream, const char* name);

// Checks on `stream`, then waits for it: cumulative sequence lengths (an attention
// SequenceLayout's cu_seqlens_q or cu_seqlens_k) of `batch` sequences: batch + 1 entries,
// cu_seqlens[0] == 0, non-decreasing, cu_seqlens[batch] == total (the packed view's seq), and
// every length cu_seqlens[b+1] - cu_seqlens[b] at most max_len. Reads cu_seqlens[0 .. batch].
// InvalidArgument names `name` ("cu_seqlens_q") and the first bad sequence; CudaError if the
// check itself failed.
Result check_cu_seqlens(const int32_t* cu_seqlens, int64_t batch, int64_t total, int64_t max_len,
                        cudaStream_t stream, const char* name);

// Checks on `stream`, then waits for it: per-sequence key counts and, when `page_table` is
// not null, the pages they reach (an attention SequenceLayout's seqlens_k and page_table):
// every seqlens_k[b] (b < batch) in [0, max_len], and every page-table entry a sequence
// reads, page_table[b * max_pages + p] for p < ceil(seqlens_k[b] / page_size), in [0,
// num_pages). Entries past a sequence's keys are not read by the kernels and not checked.
// Reads seqlens_k[0 .. batch) and page_table[0 .. batch * max_pages). InvalidArgument names
// the first bad sequence (and page); CudaError if the check itself failed.
Result check_seqlens_and_pages(const int32_t* seqlens_k, const int32_t* page_table, int64_t batch, int64_t max_len,
                               int64_t max_pages, int64_t page_size, int64_t num_pages, cudaStream_t stream);

}  // namespace sparsek::detail
