//! The device layer (`cuda` feature), below the operations: it imports none of them.
//!
//! Three layers, as in cudarc: `sys` is the raw cxx seam to the C++ kernel registry (every
//! `unsafe` block of the library is there; the FP8 element types' `unsafe impl`s of cudarc's
//! marker traits are in `element::fp8`), `result` the checked calls over it (conversions,
//! statuses, the context check), and the safe RAII types ([`DeviceBsr`] with its
//! [`DeviceBlockScales`]). Each operation's device path is in its own folder and builds on
//! these (`spmm/gpu.rs`, `sddmm/gpu.rs`, `attention/gpu.rs` with `DeviceBlockPatterns`,
//! `quantize/gpu.rs`); the public `sparsek::gpu` gathers their device entry
//! points with this layer's items.

pub(crate) mod device_bsr;
pub(crate) mod result;
pub(crate) mod sys;

use std::sync::Arc;

use cudarc::driver::{CudaContext, DriverError};

use crate::error::Error;

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
