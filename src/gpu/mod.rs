//! The GPU backends (`cuda` feature).
//!
//! Three layers, as in cudarc: `sys` is the raw cxx seam to the C++ kernel registry (every
//! `unsafe` block of the library is there; the FP8 element types' `unsafe impl`s of cudarc's
//! marker traits are in `element::fp8`), `result` the checked calls over it (conversions,
//! statuses, the context check), and the safe RAII types (`DeviceBsr`, and each
//! operation's device path in its own folder: `spmm/gpu.rs`, `sddmm/gpu.rs`,
//! `attention/gpu.rs` with `DeviceBlockPatterns`). Device memory and streams are cudarc's (re-exported as
//! [`sparsek::cudarc`](crate::cudarc)): bring your `CudaContext`/`CudaStream`, upload with
//! [`DeviceBsr::upload`] (or take buffers already on the GPU with
//! [`DeviceBsr::from_device_parts`]), wrap B and C with `Dense::device`/`DenseMut::device`.
//!
//! ```no_run
//! use sparsek::gpu;
//!
//! match gpu::open_device() {
//!     Ok(ctx) => println!("GPU: {}", ctx.name()?),
//!     Err(why) => println!("no GPU ({why}): use host operands (Backend::Cpu)"),
//! }
//! # Ok::<(), sparsek::cudarc::driver::DriverError>(())
//! ```

pub(crate) mod device_bsr;
pub(crate) mod result;
pub(crate) mod sys;

use std::sync::Arc;

use cudarc::driver::{CudaContext, DriverError};

use crate::error::Error;

pub use crate::attention::gpu::{block_topk, block_topk_scores, DeviceBlockPatterns};
pub use crate::sddmm::gpu::can_implement_sddmm;
pub use crate::spmm::gpu::{can_implement, can_implement_fp8};
pub use device_bsr::{DeviceBlockScales, DeviceBsr};

impl From<DriverError> for Error {
    fn from(e: DriverError) -> Self {
        Error::Cuda(e.to_string())
    }
}

/// The CUTLASS the kernels were compiled against (`include/cutlass/version.h` of the tree
/// the build used: the pinned wheel, or `CUTLASS_DIR`).
pub const CUTLASS_VERSION: &str = env!("SPARSEK_CUTLASS_VERSION");

/// Opens device 0, or says why there is none (no driver library, no device). Never
/// panics, so a program can fall back to the CPU backend on machines without a GPU.
pub fn open_device() -> Result<Arc<CudaContext>, String> {
    // cudarc panics if libcuda cannot be loaded at all: look for it first.
    if !sys::driver_present() {
        return Err("no CUDA driver library (libcuda) on this machine".into());
    }
    match CudaContext::device_count() {
        Ok(0) => Err("the CUDA driver reports no device".into()),
        Ok(_) => CudaContext::new(0).map_err(|e| format!("cannot open device 0: {e}")),
        Err(e) => Err(format!("the CUDA driver cannot list devices: {e}")),
    }
}
