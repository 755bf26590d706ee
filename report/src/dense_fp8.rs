//! Dense FP8 through cuBLASLt: the compute ceiling of the FP8 rows (`bench_report fp8`).
//!
//! `C (m x n, f16) = A (m x k, e4m3, row-major) · B (k x n, e4m3, column-major)`, per-tensor
//! scales of 1, f32 accumulation: cuBLASLt's "TN" FP8 layout (both operands K-major), the
//! layout sparsek's W8A8 reads too. cuBLASLt is column-major, so it computes
//! `Cᵀ (n x m) = Bᵀ · A` with `Bᵀ` (n x k) from B's column-major storage transposed (`OP_T`).
//! `fast_accum` selects `CUBLASLT_MATMUL_DESC_FAST_ACCUM` (no periodic promotion of the
//! FP8 tensor cores' partial sums: faster, less precise); sparsek promotes every k-tile.

use std::ffi::c_void;
use std::sync::Arc;

use anyhow::{bail, Result};
use cudarc::cublaslt::{result, sys};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use half::f16;
use sparsek::F8E4M3;

/// cuBLASLt's objects for one FP8 product shape, destroyed on drop.
pub struct DenseFp8 {
    handle: sys::cublasLtHandle_t,
    desc: sys::cublasLtMatmulDesc_t,
    a: sys::cublasLtMatrixLayout_t,
    b: sys::cublasLtMatrixLayout_t,
    c: sys::cublasLtMatrixLayout_t,
    pref: sys::cublasLtMatmulPreference_t,
    algo: sys::cublasLtMatmulAlgo_t,
    workspace: CudaSlice<u8>,
    dims: (usize, usize, usize),
}

/// cuBLASLt's workspace on Hopper (NVIDIA's recommendation, as cudarc's `Workspace`).
const WORKSPACE_BYTES: usize = 32 << 20;

impl DenseFp8 {
    /// Plans `C (m x n) = A (m x k) · B (k x n)` (the layouts above) on `stream`'s device.
    pub fn new(
        stream: &Arc<CudaStream>,
        (m, n, k): (usize, usize, usize),
        fast_accum: bool,
    ) -> Result<Self> {
        let dim = |v: usize| -> Result<u64> {
            if v == 0 || i32::try_from(v).is_err() {
                bail!("cuBLASLt takes dimensions in 1..2^31, not {v}");
            }
            Ok(v as u64)
        };
        let (m64, n64, k64) = (dim(m)?, dim(n)?, dim(k)?);
        let workspace = stream.alloc_zeros::<u8>(WORKSPACE_BYTES)?;
        let handle = result::create_handle()?;
        // Each object is owned by `this` as soon as it exists, so an error frees the earlier ones.
        let mut this = DenseFp8 {
            handle,
            desc: std::ptr::null_mut(),
            a: std::ptr::null_mut(),
            b: std::ptr::null_mut(),
            c: std::ptr::null_mut(),
            pref: std::ptr::null_mut(),
            // SAFETY: cublasLtMatmulAlgo_t is plain data (an array of u64); all-zero is a
            // valid "no algorithm yet" value, overwritten by the heuristic below.
            algo: unsafe { std::mem::zeroed() },
            workspace,
            dims: (m, n, k),
        };
        this.desc = result::create_matmul_desc(
            sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            sys::cudaDataType::CUDA_R_32F,
        )?;
        let op_t = cudarc::cublas::sys::cublasOperation_t::CUBLAS_OP_T;
        let fast: i8 = fast_accum.into();
        // SAFETY: `desc` is live; each buffer is the attribute's documented type
        // (cublasOperation_t for TRANSA, int8_t for FAST_ACCUM), read during the call only.
        unsafe {
            result::set_matmul_desc_attribute(
                this.desc,
                sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA,
                (&op_t) as *const _ as *const c_void,
                std::mem::size_of_val(&op_t),
            )?;
            result::set_matmul_desc_attribute(
                this.desc,
                sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_FAST_ACCUM,
                (&fast) as *const _ as *const c_void,
                1,
            )?;
        }
        // Column-major: op(A_lt) = Bᵀ (n x k), stored k x n (ld k); B_lt = A stored k x m
        // (ld k, = A row-major); C_lt (n x m, ld n) = C row-major.
        let e4m3 = sys::cudaDataType::CUDA_R_8F_E4M3;
        this.a = result::create_matrix_layout(e4m3, k64, n64, k64 as i64)?;
        this.b = result::create_matrix_layout(e4m3, k64, m64, k64 as i64)?;
        this.c = result::create_matrix_layout(sys::cudaDataType::CUDA_R_16F, n64, m64, n64 as i64)?;
        this.pref = result::create_matmul_pref()?;
        let ws = WORKSPACE_BYTES as u64;
        // SAFETY: `pref` is live; the buffer is the attribute's type (uint64_t).
        unsafe {
            result::set_matmul_pref_attribute(
                this.pref,
                sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                (&ws) as *const _ as *const c_void,
                std::mem::size_of_val(&ws),
            )?;
        }
        // SAFETY: every handle above is live and describes this product.
        let heuristic = unsafe {
            result::get_matmul_algo_heuristic(
                this.handle,
                this.desc,
                this.a,
                this.b,
                this.c,
                this.c,
                this.pref,
            )
        }?;
        if heuristic.workspaceSize > WORKSPACE_BYTES {
            bail!(
                "cuBLASLt's FP8 algorithm wants {} bytes of workspace",
                heuristic.workspaceSize
            );
        }
        this.algo = heuristic.algo;
        Ok(this)
    }

    /// Enqueues `C = A · B` on `stream` (which must be the one `new` planned on).
    pub fn run(
        &self,
        stream: &Arc<CudaStream>,
        a: &CudaSlice<F8E4M3>,
        b: &CudaSlice<F8E4M3>,
        c: &mut CudaSlice<f16>,
    ) -> Result<()> {
        let (m, n, k) = self.dims;
        if a.len() < m * k || b.len() < k * n || c.len() < m * n {
            bail!("dense FP8: buffers smaller than {m}x{n}x{k}");
        }
        let (alpha, beta) = (1f32, 0f32);
        let (pa, _ra) = a.device_ptr(stream);
        let (pb, _rb) = b.device_ptr(stream);
        let (pc, _rc) = c.device_ptr_mut(stream);
        let (pw, _rw) = self.workspace.device_ptr(stream);
        // SAFETY: the buffers hold their shapes (checked above) and live past the call's
        // records; alpha and beta are f32 (the scale type); the layouts, algorithm and
        // workspace are this plan's; the stream is the buffers'.
        unsafe {
            result::matmul(
                self.handle,
                self.desc,
                (&alpha) as *const f32 as *const c_void,
                (&beta) as *const f32 as *const c_void,
                pb as *const c_void,
                self.a,
                pa as *const c_void,
                self.b,
                pc as *const c_void,
                self.c,
                pc as *mut c_void,
                self.c,
                &self.algo,
                pw as *mut c_void,
                WORKSPACE_BYTES,
                stream.cu_stream() as sys::cudaStream_t,
            )
        }?;
        Ok(())
    }
}

impl Drop for DenseFp8 {
    fn drop(&mut self) {
        // SAFETY: each handle was created by this plan (or is null, never created) and is
        // destroyed once; errors on the way out are ignored (nothing left to free).
        unsafe {
            if !self.pref.is_null() {
                let _ = result::destroy_matmul_pref(self.pref);
            }
            for layout in [self.a, self.b, self.c] {
                if !layout.is_null() {
                    let _ = result::destroy_matrix_layout(layout);
                }
            }
            if !self.desc.is_null() {
                let _ = result::destroy_matmul_desc(self.desc);
            }
            let _ = result::destroy_handle(self.handle);
        }
    }
}
