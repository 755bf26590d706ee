//! The GPU backends (`cuda` feature): device-resident BSR matrices and the checked layer
//! between the public `spmm` and the raw bridge in `ffi.rs`.
//!
//! Device memory and streams are cudarc's: bring your `CudaContext`/`CudaStream`, upload
//! with `DeviceBsr::upload`, wrap B and C with `Dense::device`/`DenseMut::device`.

mod ffi;

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DriverError};

use crate::bsr::{BlockShape, BsrMatrix};
use crate::dense::{Dense, DenseMut, DenseShape, Layout, Storage, StorageMut};
use crate::element::{DType, Element};
use crate::error::Error;
use crate::spmm::{Backend, SpmmOptions};

impl From<DriverError> for Error {
    fn from(e: DriverError) -> Self {
        Error::Cuda(e.to_string())
    }
}

/// A validated BSR matrix in device memory. Built only from a `BsrMatrix`, so its index
/// arrays satisfy every BSR invariant the kernels rely on.
pub struct DeviceBsr<T> {
    m: usize,
    k: usize,
    block: BlockShape,
    nnzb: usize,
    row_ptr: CudaSlice<i32>,
    col_idx: CudaSlice<i32>,
    values: CudaSlice<T>,
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
    pub fn m(&self) -> usize {
        self.m
    }
    pub fn k(&self) -> usize {
        self.k
    }
    pub fn block(&self) -> BlockShape {
        self.block
    }
    pub fn nnz_blocks(&self) -> usize {
        self.nnzb
    }
    /// `2 * n * nnzb * bm * bk`.
    pub fn flops(&self, n: usize) -> f64 {
        crate::bsr::spmm_flops(n, self.nnzb, self.block)
    }
}

fn dtype_code(t: DType) -> i32 {
    // sparsek::DType in include/sparsek/sparsek.hpp
    match t {
        DType::F16 => 0,
        DType::Bf16 => 1,
        DType::F32 => 2,
    }
}

fn backend_code(b: Backend) -> i32 {
    // sparsek::Backend in include/sparsek/sparsek.hpp; Cpu never reaches the device.
    match b {
        Backend::Auto | Backend::Cpu => 0,
        Backend::Wmma => 1,
        Backend::Cutlass => 2,
    }
}

fn backend_from_code(code: i32) -> Backend {
    match code {
        1 => Backend::Wmma,
        2 => Backend::Cutlass,
        _ => Backend::Auto,
    }
}

fn to_i64(v: usize) -> i64 {
    // Every usize that reaches here indexes an allocation, so it fits i64.
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The bridge's args for a problem, pointers left null (filled by `ffi::spmm`).
fn args<T: Element, O: Element>(
    m: usize,
    k: usize,
    block: BlockShape,
    nnzb: usize,
    b: &DenseShape,
    c: &DenseShape,
    options: &SpmmOptions,
) -> ffi::SpmmArgs {
    ffi::SpmmArgs {
        m: to_i64(m),
        k: to_i64(k),
        n: to_i64(c.cols),
        bm: block.rows as i32,
        bk: block.cols as i32,
        nnzb: to_i64(nnzb),
        row_ptr: 0,
        col_idx: 0,
        values: 0,
        in_dtype: dtype_code(T::DTYPE),
        out_dtype: dtype_code(O::DTYPE),
        b: 0,
        b_ld: to_i64(b.ld),
        b_col_major: b.layout == Layout::ColMajor,
        c: 0,
        c_ld: to_i64(c.ld),
        c_col_major: c.layout == Layout::ColMajor,
        alpha: options.get_alpha(),
        beta: options.get_beta(),
        backend: backend_code(options.get_backend()),
        stream: 0,
    }
}

/// Turns the C++ status into a `Result`, naming the requested backend in errors.
fn check(status: ffi::FfiStatus, requested: Backend) -> Result<Backend, Error> {
    match status.status {
        0 => Ok(backend_from_code(status.backend)),
        1 => Err(Error::InvalidArgument(status.message)),
        2 => Err(Error::NotSupported {
            backend: requested,
            reason: status.message,
        }),
        _ => Err(Error::Cuda(status.message)),
    }
}

/// Device `spmm`, after `crate::spmm` checked shapes, buffer lengths and types. Runs on
/// C's stream.
pub(crate) fn spmm<T: Element, O: Element>(
    a: &DeviceBsr<T>,
    b: &CudaSlice<T>,
    b_shape: &DenseShape,
    c: &mut CudaSlice<O>,
    c_shape: &DenseShape,
    options: &SpmmOptions,
) -> Result<(), Error> {
    let stream = c.stream().clone();
    stream.context().bind_to_thread()?;
    let args = args::<T, O>(a.m, a.k, a.block, a.nnzb, b_shape, c_shape, options);
    let bufs = ffi::SpmmBuffers {
        row_ptr: &a.row_ptr,
        col_idx: &a.col_idx,
        values: &a.values,
        b,
        c,
    };
    check(ffi::spmm(args, bufs, &stream), options.get_backend()).map(|_| ())
}

/// Which backend `spmm` would run for these operands on their device (`Auto` resolved),
/// or why none can. Launches nothing and reads no device memory.
pub fn can_implement<T: Element, O: Element>(
    a: &DeviceBsr<T>,
    b: &Dense<'_, T>,
    c: &DenseMut<'_, O>,
    options: &SpmmOptions,
) -> Result<Backend, Error> {
    let (Storage::Device(b_data), StorageMut::Device(c_data)) = (&b.data, &c.data) else {
        return Err(Error::MixedLocations("can_implement takes device B and C"));
    };
    if !crate::spmm::gpu_types_supported(T::DTYPE, O::DTYPE) {
        return Err(Error::UnsupportedTypes {
            backend: options.get_backend(),
            input: T::DTYPE,
            output: O::DTYPE,
        });
    }
    let stream = c_data.stream().clone();
    stream.context().bind_to_thread()?;
    let args = args::<T, O>(a.m, a.k, a.block, a.nnzb, &b.shape, &c.shape, options);
    let bufs = ffi::SpmmBufferRefs {
        row_ptr: &a.row_ptr,
        col_idx: &a.col_idx,
        values: &a.values,
        b: b_data,
        c: c_data,
    };
    check(
        ffi::can_implement(args, bufs, &stream),
        options.get_backend(),
    )
}

/// Proves the build chain: a kernel compiled by build.rs's nvcc, reached through the cxx
/// bridge, computes `Σ data[i]·(i+1) mod 2^64` on the device.
pub fn chain_checksum(data: &CudaSlice<u32>) -> Result<u64, Error> {
    let stream = data.stream().clone();
    stream.context().bind_to_thread()?;
    let mut out = stream.alloc_zeros::<u64>(1)?;
    check(ffi::chain_checksum(data, &mut out, &stream), Backend::Auto)?;
    let host = stream.clone_dtoh(&out)?;
    stream.synchronize()?;
    Ok(host[0])
}

/// Opens device 0, or says why there is none (no driver library, no device). Never
/// panics, so tests can skip loudly on machines without a GPU.
pub fn open_device() -> Result<Arc<CudaContext>, String> {
    // cudarc panics if libcuda cannot be loaded at all: look for it first.
    if !ffi::culib_present() {
        return Err("no CUDA driver library (libcuda) on this machine".into());
    }
    match CudaContext::device_count() {
        Ok(0) => Err("the CUDA driver reports no device".into()),
        Ok(_) => CudaContext::new(0).map_err(|e| format!("cannot open device 0: {e}")),
        Err(e) => Err(format!("the CUDA driver cannot list devices: {e}")),
    }
}

/// Dense baselines that sparsek is measured against (benches and reports).
pub mod baseline {
    use cudarc::cublas::{CudaBlas, Gemm};
    use cudarc::driver::CudaSlice;

    use crate::element::Element;
    use crate::error::Error;

    /// Dense row-major `C (m x n) = A (m x k) · B (k x n)` through cuBLAS, f16 or bf16 in,
    /// f32 compute, same type out, on `blas`'s stream.
    pub fn dense_gemm<T: Element>(
        blas: &CudaBlas,
        shape: (usize, usize, usize),
        a: &CudaSlice<T>,
        b: &CudaSlice<T>,
        c: &mut CudaSlice<T>,
    ) -> Result<(), Error>
    where
        CudaBlas: Gemm<T>,
    {
        super::ffi::cublas_gemm(blas, shape, a, b, c)
            .map_err(|e| Error::Cuda(format!("cuBLAS: {e:?}")))
    }
}
