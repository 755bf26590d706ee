//! Dense baselines that sparsek is measured against.

use cudarc::cublas::{sys::cublasOperation_t::CUBLAS_OP_N, CudaBlas, Gemm, GemmConfig};
use cudarc::driver::CudaSlice;
use sparsek::{Element, Error};

/// Dense row-major `C (m x n) = A (m x k) · B (k x n)` through cuBLAS, f16 or bf16 in, f32
/// compute, same type out, on `blas`'s stream. cuBLAS is column-major, so this computes
/// `Cᵀ = Bᵀ·Aᵀ`, which needs no transposes.
pub fn dense_gemm<T: Element>(
    blas: &CudaBlas,
    (m, n, k): (usize, usize, usize),
    a: &CudaSlice<T>,
    b: &CudaSlice<T>,
    c: &mut CudaSlice<T>,
) -> Result<(), Error>
where
    CudaBlas: Gemm<T>,
{
    let fits =
        |len: usize, rows: usize, cols: usize| rows.checked_mul(cols).is_some_and(|n| n <= len);
    if !(fits(a.len(), m, k) && fits(b.len(), k, n) && fits(c.len(), m, n)) {
        return Err(Error::InvalidArgument(
            "dense_gemm: buffers smaller than the shape".into(),
        ));
    }
    let dim = |v: usize| {
        i32::try_from(v)
            .map_err(|_| Error::InvalidArgument(format!("cuBLAS takes i32 dimensions, not {v}")))
    };
    let cfg = GemmConfig {
        transa: CUBLAS_OP_N,
        transb: CUBLAS_OP_N,
        m: dim(n)?,
        n: dim(m)?,
        k: dim(k)?,
        alpha: T::from_f32(1.0),
        lda: dim(n.max(1))?,
        ldb: dim(k.max(1))?,
        beta: T::from_f32(0.0),
        ldc: dim(n.max(1))?,
    };
    // SAFETY: the check above proves A (m x k), B (k x n) and C (m x n) hold their shapes;
    // they are live cudarc allocations and the leading dimensions are the packed row-major
    // ones.
    unsafe { blas.gemm(cfg, b, a, c) }.map_err(|e| Error::Cuda(format!("cuBLAS: {e:?}")))
}
