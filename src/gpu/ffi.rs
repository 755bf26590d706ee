//! The FFI seam: the `cxx` bridge to cpp/bridge.cc, and every `unsafe` block of sparsek.
//!
//! Raw layer only: functions here take typed cudarc buffers, extract device pointers on
//! the launch stream and call C++. Checking and converting statuses into `Error`s is
//! `gpu/mod.rs`'s job; the public API above it is safe.

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};

#[cxx::bridge(namespace = "sparsek::ffi")]
mod sys {
    /// One problem, as the C++ API's views take it. Pointers are device addresses.
    struct SpmmArgs {
        m: i64,
        k: i64,
        n: i64,
        bm: i32,
        bk: i32,
        nnzb: i64,
        row_ptr: u64,
        col_idx: u64,
        values: u64,
        in_dtype: i32,
        out_dtype: i32,
        b: u64,
        b_ld: i64,
        b_col_major: bool,
        c: u64,
        c_ld: i64,
        c_col_major: bool,
        alpha: f32,
        beta: f32,
        backend: i32,
        stream: u64,
    }

    /// `sparsek::Result` plus the backend that ran (or would run).
    struct FfiStatus {
        status: i32,
        message: String,
        backend: i32,
    }

    unsafe extern "C++" {
        include!("sparsek/cpp/bridge.h");

        /// Enqueues the problem. Unsafe: every pointer must address a live device
        /// allocation large enough for its view, and the BSR arrays must be valid.
        unsafe fn spmm(args: &SpmmArgs) -> FfiStatus;
        /// Checks the problem without launching or reading device memory.
        fn can_implement(args: &SpmmArgs) -> FfiStatus;
        /// The build-chain kernel: sum of data[i] * (i + 1) into *out. Unsafe: `data`
        /// must hold `n` u32 and `out` one u64 on the device.
        unsafe fn chain_checksum(data: u64, n: i64, out: u64, stream: u64) -> FfiStatus;
    }
}

pub(crate) use sys::{FfiStatus, SpmmArgs};

/// The device buffers of one problem, all to be used on `stream`.
pub(crate) struct SpmmBuffers<'a, T, O> {
    pub row_ptr: &'a CudaSlice<i32>,
    pub col_idx: &'a CudaSlice<i32>,
    pub values: &'a CudaSlice<T>,
    pub b: &'a CudaSlice<T>,
    pub c: &'a mut CudaSlice<O>,
}

/// The same buffers, read-only: `can_implement` looks at their addresses, never at them.
pub(crate) struct SpmmBufferRefs<'a, T, O> {
    pub row_ptr: &'a CudaSlice<i32>,
    pub col_idx: &'a CudaSlice<i32>,
    pub values: &'a CudaSlice<T>,
    pub b: &'a CudaSlice<T>,
    pub c: &'a CudaSlice<O>,
}

/// Device addresses of A's three arrays, B and C, in that order, and the stream, into
/// `args`.
fn set_pointers(
    args: &mut SpmmArgs,
    [row_ptr, col_idx, values, b, c]: [u64; 5],
    stream: &CudaStream,
) {
    args.row_ptr = row_ptr;
    args.col_idx = col_idx;
    args.values = values;
    args.b = b;
    args.c = c;
    args.stream = stream.cu_stream() as u64;
}

/// Fills the pointers of `args` from `bufs` and enqueues the kernel on `stream`.
///
/// The caller (`gpu::spmm`) has checked the scalar fields of `args` against the buffers'
/// lengths: B and C hold their views, `row_ptr`/`col_idx`/`values` come from a validated
/// `DeviceBsr`.
pub(crate) fn spmm<T, O>(
    mut args: SpmmArgs,
    bufs: SpmmBuffers<'_, T, O>,
    stream: &CudaStream,
) -> FfiStatus {
    // The guards record cudarc's read/write events after the launch is enqueued, so other
    // streams that use these buffers wait for it.
    let (row_ptr, _g0) = bufs.row_ptr.device_ptr(stream);
    let (col_idx, _g1) = bufs.col_idx.device_ptr(stream);
    let (values, _g2) = bufs.values.device_ptr(stream);
    let (b, _g3) = bufs.b.device_ptr(stream);
    let (c, _g4) = bufs.c.device_ptr_mut(stream);
    set_pointers(&mut args, [row_ptr, col_idx, values, b, c], stream);
    debug_assert!(args.nnzb as usize <= bufs.col_idx.len());
    // SAFETY: every pointer is a live cudarc allocation borrowed for this call (C mutably),
    // sized for its view as checked by gpu::spmm (B, C) and DeviceBsr's construction from
    // a validated BsrMatrix (row_ptr, col_idx, values); the stream belongs to the same
    // context, which gpu::spmm bound to this thread.
    unsafe { sys::spmm(&args) }
}

/// `can_implement` for the problem: the C++ side checks the addresses (null, alignment)
/// and never dereferences them, so no stream ordering is needed.
pub(crate) fn can_implement<T, O>(
    mut args: SpmmArgs,
    bufs: SpmmBufferRefs<'_, T, O>,
    stream: &CudaStream,
) -> FfiStatus {
    let (row_ptr, _g0) = bufs.row_ptr.device_ptr(stream);
    let (col_idx, _g1) = bufs.col_idx.device_ptr(stream);
    let (values, _g2) = bufs.values.device_ptr(stream);
    let (b, _g3) = bufs.b.device_ptr(stream);
    let (c, _g4) = bufs.c.device_ptr(stream);
    set_pointers(&mut args, [row_ptr, col_idx, values, b, c], stream);
    sys::can_implement(&args)
}

/// Runs the chain kernel over `data` into `out` on `stream`.
pub(crate) fn chain_checksum(
    data: &CudaSlice<u32>,
    out: &mut CudaSlice<u64>,
    stream: &CudaStream,
) -> FfiStatus {
    assert!(!out.is_empty(), "chain_checksum needs one u64 of output");
    let (d, _g0) = data.device_ptr(stream);
    let (o, _g1) = out.device_ptr_mut(stream);
    // SAFETY: `data` holds data.len() u32 and `out` at least one u64, both live device
    // allocations of this stream's context, borrowed for the call.
    unsafe { sys::chain_checksum(d, data.len() as i64, o, stream.cu_stream() as u64) }
}

/// Whether the CUDA driver library can be loaded (cudarc would panic without it).
pub(crate) fn culib_present() -> bool {
    // SAFETY: only attempts to dlopen libcuda's candidate names; no CUDA call is made.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// Dense `C = A·B` through cuBLAS (f16/bf16 in, f32 compute, same type out), all
/// row-major: the baseline sparsek is measured against. cuBLAS is column-major, so this
/// computes `Cᵀ = Bᵀ·Aᵀ`, which needs no transposes.
pub(crate) fn cublas_gemm<T: crate::Element>(
    blas: &cudarc::cublas::CudaBlas,
    (m, n, k): (usize, usize, usize),
    a: &CudaSlice<T>,
    b: &CudaSlice<T>,
    c: &mut CudaSlice<T>,
) -> Result<(), cudarc::cublas::result::CublasError>
where
    cudarc::cublas::CudaBlas: cudarc::cublas::Gemm<T>,
{
    use cudarc::cublas::{sys::cublasOperation_t::CUBLAS_OP_N, Gemm, GemmConfig};
    assert!(
        a.len() >= m * k && b.len() >= k * n && c.len() >= m * n,
        "cublas_gemm: buffers smaller than the shape"
    );
    let dim = |v: usize| i32::try_from(v).expect("cuBLAS takes i32 dimensions");
    let cfg = GemmConfig {
        transa: CUBLAS_OP_N,
        transb: CUBLAS_OP_N,
        m: dim(n),
        n: dim(m),
        k: dim(k),
        alpha: T::from_f32(1.0),
        lda: dim(n),
        ldb: dim(k),
        beta: T::from_f32(0.0),
        ldc: dim(n),
    };
    // SAFETY: the assert above checks that A (m x k), B (k x n) and C (m x n) hold their
    // shapes; they are live cudarc allocations and the leading dimensions match the
    // packed row-major layouts.
    unsafe { blas.gemm(cfg, b, a, c) }
}
