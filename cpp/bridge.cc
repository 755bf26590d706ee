#include "sparsek/cpp/bridge.h"

#include <sparsek/sparsek.hpp>

#include <cstdio>

#include "chain/checksum.hpp"
#include "sparsek/src/gpu/ffi.rs.h"

namespace sparsek::ffi {
namespace {

struct Views {
  BsrView a;
  DenseView b, c;
  SpmmOptions options;
};

Views views(const SpmmArgs& x) {
  Views v;
  v.a.m = x.m;
  v.a.k = x.k;
  v.a.bm = x.bm;
  v.a.bk = x.bk;
  v.a.nnzb = x.nnzb;
  v.a.row_ptr = reinterpret_cast<const int32_t*>(x.row_ptr);
  v.a.col_idx = reinterpret_cast<const int32_t*>(x.col_idx);
  v.a.values = reinterpret_cast<const void*>(x.values);
  v.a.dtype = static_cast<DType>(x.in_dtype);
  v.b = DenseView{reinterpret_cast<void*>(x.b), x.k, x.n, x.b_ld,
                  x.b_col_major ? Layout::ColMajor : Layout::RowMajor, static_cast<DType>(x.in_dtype)};
  v.c = DenseView{reinterpret_cast<void*>(x.c), x.m, x.n, x.c_ld,
                  x.c_col_major ? Layout::ColMajor : Layout::RowMajor, static_cast<DType>(x.out_dtype)};
  v.options.alpha = x.alpha;
  v.options.beta = x.beta;
  v.options.backend = static_cast<Backend>(x.backend);
  return v;
}

FfiStatus convert(const Result& r, Backend chosen) {
  return FfiStatus{static_cast<int32_t>(r.status), rust::String(r.message), static_cast<int32_t>(chosen)};
}

}  // namespace

FfiStatus can_implement(const SpmmArgs& args) {
  Views v = views(args);
  Backend chosen = Backend::Auto;
  Result r = sparsek::can_implement(v.a, v.b, v.c, v.options, &chosen);
  return convert(r, chosen);
}

FfiStatus spmm(const SpmmArgs& args) {
  Views v = views(args);
  Backend chosen = Backend::Auto;
  Result r = sparsek::can_implement(v.a, v.b, v.c, v.options, &chosen);
  if (r.ok()) r = sparsek::spmm(v.a, v.b, v.c, v.options, reinterpret_cast<cudaStream_t>(args.stream));
  return convert(r, chosen);
}

FfiStatus chain_checksum(uint64_t data, int64_t n, uint64_t out, uint64_t stream) {
  cudaError_t e = sparsek::detail::chain_checksum(reinterpret_cast<const uint32_t*>(data), n,
                                                  reinterpret_cast<uint64_t*>(out),
                                                  reinterpret_cast<cudaStream_t>(stream));
  Result r;
  if (e != cudaSuccess) {
    r.status = Status::CudaError;
    snprintf(r.message, sizeof(r.message), "chain_checksum: %s", cudaGetErrorString(e));
  }
  return convert(r, Backend::Auto);
}

}  // namespace sparsek::ffi
