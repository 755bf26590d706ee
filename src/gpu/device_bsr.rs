//! `DeviceBsr`: a validated BSR matrix in device memory (cudarc buffers, RAII).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};

use crate::element::Element;
use crate::error::Error;
use crate::format::{BlockShape, BsrMatrix};

/// A validated BSR matrix in device memory. Built only from a `BsrMatrix`, so its index
/// arrays satisfy every BSR invariant the kernels rely on.
pub struct DeviceBsr<T> {
    pub(crate) m: usize,
    pub(crate) k: usize,
    pub(crate) block: BlockShape,
    pub(crate) nnzb: usize,
    pub(crate) row_ptr: CudaSlice<i32>,
    pub(crate) col_idx: CudaSlice<i32>,
    pub(crate) values: CudaSlice<T>,
}

/// Uploads `data`, allocating at least one element (CUDA refuses empty allocations).
fn upload_slice<T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits>(
    data: &[T],
    stream: &Arc<CudaStream>,
) -> Result<CudaSlice<T>, Error> {
    if data.is_empty() {
        Ok(stream.alloc_zeros::<T>(1)?)
    } else {
        Ok(stream.clone_htod(data)?)
    }
}

impl<T: Element> DeviceBsr<T> {
    /// Copies `a` to the device on `stream` (asynchronously with respect to the host).
    pub fn upload(a: &BsrMatrix<T>, stream: &Arc<CudaStream>) -> Result<Self, Error> {
        Ok(Self {
            m: a.m(),
            k: a.k(),
            block: a.block(),
            nnzb: a.nnz_blocks(),
            row_ptr: stream.clone_htod(a.row_ptr())?,
            col_idx: upload_slice(a.col_idx(), stream)?,
            values: upload_slice(a.values(), stream)?,
        })
    }
}

impl<T> DeviceBsr<T> {
    /// Rows of the matrix.
    pub fn m(&self) -> usize {
        self.m
    }
    /// Columns of the matrix.
    pub fn k(&self) -> usize {
        self.k
    }
    /// The block shape `bm x bk`.
    pub fn block(&self) -> BlockShape {
        self.block
    }
    /// Number of stored blocks.
    pub fn nnz_blocks(&self) -> usize {
        self.nnzb
    }
    /// Floating-point operations of `A * B` with `n` columns: `2 * n * nnzb * bm * bk`.
    pub fn flops(&self, n: usize) -> f64 {
        crate::format::bsr::spmm_flops(n, self.nnzb, self.block)
    }
}
