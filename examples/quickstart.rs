//! `cargo run --release --features cuda --example quickstart`: the whole set-up (build.rs
//! installs the CUDA toolchain if it finds none) and one pruned linear layer on the GPU,
//! checked against the CPU backend and timed. Without a GPU, or without `--features cuda`,
//! it says so and runs the CPU backend.
//!
//! y = x · Wᵀ, W 4096 x 4096 in 128 x 128 blocks at 1/4 density (8 random blocks per
//! block-row), x 2048 x 4096, f16 in, f32 out.

use std::error::Error;
use std::time::Instant;

use sparsek::rand::{rngs::StdRng, Rng, SeedableRng};
use sparsek::{f16, spmm, BlockMask, BlockShape, BsrMatrix, Dense, DenseMut, Layout, SpmmOptions};

const OUT: usize = 4096;
const IN: usize = 4096;
const BATCH: usize = 2048;

/// `y[..rows]` on the CPU backend: y = x·Wᵀ, i.e. yᵀ = W·xᵀ with the row-major x and y
/// passed as column-major xᵀ and yᵀ (see `sparsek::dense`). Returns y and the seconds.
fn cpu(w: &BsrMatrix<f16>, x: &[f16], rows: usize) -> Result<(Vec<f32>, f64), Box<dyn Error>> {
    let mut y = vec![0f32; rows * OUT];
    let t = Instant::now();
    spmm(
        w,
        Dense::host(&x[..rows * IN], IN, rows, Layout::ColMajor),
        DenseMut::host(&mut y, OUT, rows, Layout::ColMajor),
        &SpmmOptions::new(),
    )?;
    Ok((y, t.elapsed().as_secs_f64()))
}

fn main() -> Result<(), Box<dyn Error>> {
    let mut rng = StdRng::seed_from_u64(7);
    let block = BlockShape::new(128, 128);
    let mask = BlockMask::random_per_row(OUT / 128, IN / 128, 8, &mut rng)?;
    let w = BsrMatrix::from_block_mask(&mask, block, |_, _| {
        f16::from_f32(rng.random_range(-1.0..1.0))
    })?;
    let x: Vec<f16> = (0..BATCH * IN)
        .map(|_| f16::from_f32(rng.random_range(-1.0..1.0)))
        .collect();
    println!(
        "W: {}x{} BSR, {} blocks of {block} ({:.0}% dense); x: {BATCH}x{IN}; y = x·Wᵀ, f16 in, f32 out",
        w.m(),
        w.k(),
        w.nnz_blocks(),
        100.0 * w.density()
    );

    #[cfg(feature = "cuda")]
    match sparsek::gpu::open_device() {
        Ok(ctx) => return gpu::run(&ctx, &w, &x),
        Err(why) => println!("device: none ({why}); running the CPU backend"),
    }
    #[cfg(not(feature = "cuda"))]
    println!(
        "device: none (built without the `cuda` feature: `cargo run --release --features cuda \
         --example quickstart` for the GPU); running the CPU backend"
    );

    let (y, secs) = cpu(&w, &x, BATCH)?;
    println!("backend: Cpu");
    println!("y[0][0..4] = {:?}", &y[..4]);
    println!(
        "time: {:.1} ms, {:.3} TFLOPS (nonzero blocks only)",
        secs * 1e3,
        w.flops(BATCH) / secs / 1e12
    );
    Ok(())
}

#[cfg(feature = "cuda")]
mod gpu {
    use std::error::Error;
    use std::sync::Arc;

    use sparsek::cudarc::driver::sys::CUevent_flags;
    use sparsek::cudarc::driver::{CudaContext, CudaSlice};
    use sparsek::{f16, gpu, spmm, BsrMatrix, Dense, DenseMut, DeviceBsr, Layout, SpmmOptions};

    use super::{cpu, BATCH, IN, OUT};

    /// Rows of y the CPU backend computes to check the GPU's.
    const CHECK_ROWS: usize = 64;
    /// Timed calls, after the checked one.
    const REPS: usize = 20;

    pub fn run(
        ctx: &Arc<CudaContext>,
        w: &BsrMatrix<f16>,
        x: &[f16],
    ) -> Result<(), Box<dyn Error>> {
        let (major, minor) = ctx.compute_capability()?;
        println!("device: {} (sm_{major}{minor})", ctx.name()?);
        let stream = ctx.default_stream();
        let dw = DeviceBsr::upload(w, &stream)?;
        let dx = stream.clone_htod(x)?;
        let mut dy = stream.alloc_zeros::<f32>(BATCH * OUT)?;
        let opts = SpmmOptions::new();
        let x_view = || Dense::device(&dx, IN, BATCH, Layout::ColMajor);
        let backend = gpu::can_implement(
            &dw,
            &x_view(),
            &DenseMut::device(&mut dy, OUT, BATCH, Layout::ColMajor),
            &opts,
        )?;
        println!(
            "backend: {backend:?} (Auto's choice for this problem; kernels built with CUTLASS {})",
            gpu::CUTLASS_VERSION
        );

        // y = W·x, the call that is checked and then timed.
        let forward = |dy: &mut CudaSlice<f32>| {
            spmm(
                &dw,
                x_view(),
                DenseMut::device(dy, OUT, BATCH, Layout::ColMajor),
                &opts,
            )
        };
        forward(&mut dy)?;
        let y = stream.clone_dtoh(&dy)?;
        stream.synchronize()?;
        // The first CHECK_ROWS rows of y (contiguous in row-major y) against the CPU backend.
        let (y_cpu, _) = cpu(w, x, CHECK_ROWS)?;
        let (mut num, mut den) = (0f64, 0f64);
        for (g, r) in y.iter().zip(&y_cpu) {
            num += (*g as f64 - *r as f64).powi(2);
            den += (*r as f64).powi(2);
        }
        let rel = (num / den).sqrt();
        let ok = rel <= 1e-3;
        println!(
            "check against the CPU backend (first {CHECK_ROWS} rows of y): rel. error {rel:.2e}, {}",
            if ok { "ok" } else { "FAILED" }
        );
        println!("y[0][0..4] = {:?}", &y[..4]);

        let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let mut ms = Vec::with_capacity(REPS);
        for _ in 0..REPS {
            let start = stream.record_event(flags)?;
            forward(&mut dy)?;
            let end = stream.record_event(flags)?;
            ms.push(start.elapsed_ms(&end)? as f64);
        }
        ms.sort_by(f64::total_cmp);
        let median = ms[REPS / 2];
        println!(
            "time: {:.3} ms per call (median of {REPS}), {:.1} TFLOPS (nonzero blocks only)",
            median,
            dw.flops(BATCH) / (median * 1e-3) / 1e12
        );
        if !ok {
            return Err(
                format!("the GPU result differs from the CPU backend's ({rel:.2e})").into(),
            );
        }
        Ok(())
    }
}
