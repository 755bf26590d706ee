//! The ceilings every speed figure is rated against, measured in the same run: HBM read
//! bandwidth, L2 read bandwidth (kernels/bandwidth.cu) and dense cuBLAS.

use std::sync::Arc;

use anyhow::{bail, Result};
use cudarc::driver::{sys::CUevent_flags, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};

const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/bandwidth.ptx"));

/// Bytes per second of the best of `repeats` timed launches of the read kernel over
/// `bytes` of device memory, each launch reading it `passes` times.
fn read_rate(stream: &Arc<CudaStream>, bytes: usize, passes: i32, repeats: usize) -> Result<f64> {
    if PTX.is_empty() {
        bail!("bench_report was built without the bandwidth kernel (no nvcc)");
    }
    let ctx = stream.context();
    let module = ctx.load_module(cudarc::nvrtc::Ptx::from_src(PTX))?;
    let kernel = module.load_function("read_bandwidth")?;
    let n16 = (bytes / 16) as i64;
    let data: CudaSlice<u8> = stream.alloc_zeros(bytes)?;
    let sink: CudaSlice<i32> = stream.alloc_zeros(1)?;
    let sms = ctx.attribute(
        cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
    )? as u32;
    let cfg = LaunchConfig {
        grid_dim: (sms * 8, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    let launch = || -> Result<()> {
        let mut b = stream.launch_builder(&kernel);
        b.arg(&data).arg(&n16).arg(&passes).arg(&sink);
        // SAFETY: the kernel reads n16 16-byte vectors of `data` (bytes / 16 of them, all
        // inside the allocation) and may write one i32 to `sink`; both live on this stream.
        unsafe { b.launch(cfg) }?;
        Ok(())
    };
    launch()?; // warm-up (and module load)
    let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let mut best = 0f64;
    for _ in 0..repeats {
        let start = stream.record_event(timing)?;
        launch()?;
        let end = stream.record_event(timing)?;
        end.synchronize()?;
        let s = start.elapsed_ms(&end)? as f64 * 1e-3;
        best = best.max((n16 as f64 * 16.0) * passes as f64 / s);
    }
    Ok(best)
}

/// A kernel of kernels/bandwidth.cu (e.g. the dense MLP's `silu_mul_f16`), loaded on
/// `stream`'s context.
pub fn kernel(stream: &Arc<CudaStream>, name: &str) -> Result<cudarc::driver::CudaFunction> {
    if PTX.is_empty() {
        bail!("bench_report was built without kernels/bandwidth.cu (no nvcc)");
    }
    let module = stream
        .context()
        .load_module(cudarc::nvrtc::Ptx::from_src(PTX))?;
    Ok(module.load_function(name)?)
}

/// HBM read bandwidth, bytes/s: one pass over 2 GiB (40× an H100's L2).
pub fn hbm_read(stream: &Arc<CudaStream>) -> Result<f64> {
    read_rate(stream, 2 << 30, 1, 5)
}

/// L2 read bandwidth, bytes/s: 64 passes over 16 MiB, which stays in L2.
pub fn l2_read(stream: &Arc<CudaStream>) -> Result<f64> {
    read_rate(stream, 16 << 20, 64, 5)
}
