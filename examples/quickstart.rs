//! `cargo run --release --example quickstart` (CPU backend), or with `--features cuda`
//! (GPU, falling back to the CPU with a message when there is no GPU).
//!
//! A pruned linear layer: y = x · Wᵀ, W 1024x2048 with 64x64 blocks at 1/4 density.

use anyhow::Result;
use half::f16;
use rand::{rngs::StdRng, Rng, SeedableRng};
use sparsek::{spmm, BlockMask, BlockShape, BsrMatrix, Dense, DenseMut, Layout, SpmmOptions};

fn main() -> Result<()> {
    let (out_f, in_f, batch) = (1024, 2048, 256);
    let block = BlockShape::new(64, 64);
    let mut rng = StdRng::seed_from_u64(7);
    let mask = BlockMask::random_per_row(out_f / 64, in_f / 64, 8, &mut rng)?;
    let w = BsrMatrix::from_block_mask(&mask, block, |_, _| {
        f16::from_f32(rng.random_range(-1.0..1.0))
    })?;
    let x: Vec<f16> = (0..batch * in_f)
        .map(|_| f16::from_f32(rng.random_range(-1.0..1.0)))
        .collect();
    println!(
        "W: {}x{} BSR, {} blocks of {block} ({:.1}% dense); x: {batch}x{in_f}",
        w.m(),
        w.k(),
        w.nnz_blocks(),
        100.0 * w.density()
    );

    // y = x·Wᵀ  <=>  yᵀ = W·xᵀ, and row-major x, y are column-major xᵀ, yᵀ (see sparsek::dense).
    let mut y_cpu = vec![0f32; batch * out_f];
    spmm(
        &w,
        Dense::host(&x, in_f, batch, Layout::ColMajor),
        DenseMut::host(&mut y_cpu, out_f, batch, Layout::ColMajor),
        &SpmmOptions::new(),
    )?;
    println!("backend: CPU reference, y[0..4] = {:?}", &y_cpu[..4]);

    #[cfg(feature = "cuda")]
    gpu(&w, &x, &y_cpu, (out_f, in_f, batch))?;
    #[cfg(not(feature = "cuda"))]
    println!("(built without the `cuda` feature: GPU backends not compiled in)");
    Ok(())
}

#[cfg(feature = "cuda")]
fn gpu(
    w: &BsrMatrix<f16>,
    x: &[f16],
    y_cpu: &[f32],
    (out_f, in_f, batch): (usize, usize, usize),
) -> Result<()> {
    use sparsek::{gpu, DeviceBsr};
    let ctx = match gpu::open_device() {
        Ok(ctx) => ctx,
        Err(why) => {
            println!("no GPU ({why}): the CPU result above is the answer");
            return Ok(());
        }
    };
    let stream = ctx.default_stream();
    let dw = DeviceBsr::upload(w, &stream)?;
    let dx = stream.clone_htod(x)?;
    let mut dy = stream.alloc_zeros::<f32>(batch * out_f)?;
    let opts = SpmmOptions::new();
    let x_view = Dense::device(&dx, in_f, batch, Layout::ColMajor);
    let y_view = DenseMut::device(&mut dy, out_f, batch, Layout::ColMajor);
    let backend = gpu::can_implement(&dw, &x_view, &y_view, &opts)?;
    spmm(&dw, x_view, y_view, &opts)?;
    let y = stream.clone_dtoh(&dy)?;
    stream.synchronize()?;
    let (mut num, mut den) = (0f64, 0f64);
    for (g, r) in y.iter().zip(y_cpu) {
        num += (*g as f64 - *r as f64).powi(2);
        den += (*r as f64).powi(2);
    }
    println!(
        "backend: GPU {:?} on {}, y[0..4] = {:?}, rel. difference to CPU {:.2e}",
        backend,
        ctx.name()?,
        &y[..4],
        (num / den).sqrt()
    );
    Ok(())
}
