//! `cargo run --release --example linear_backward`: forward and backward of one pruned
//! linear layer with sparsek's three products, checked against a naive f64 computation.
//!
//! W (`out x in`, 64 x 64 blocks at 1/4 density) is the pruned weight, x (`batch x in`) the
//! input, dY (`batch x out`) the gradient arriving from above; all row-major f16.
//! - forward:  y  = x·Wᵀ                 `spmm` (yᵀ = W·xᵀ on column-major views)
//! - backward: dX = dY·W                 `dense_spmm` (dense times sparse)
//! - backward: dW = (dYᵀ·x) ⊙ pattern(W)  `sddmm` (only W's blocks are computed)
//!
//! The three run on the CPU backend, and with `--features cuda` on a machine with a GPU
//! also on the device (`DeviceBsr`, the Hopper or WMMA kernels), each checked against the
//! same f64 reference; the GPU's f32 results must agree with the CPU's.

use std::error::Error;

use sparsek::rand::{rngs::StdRng, Rng, SeedableRng};
use sparsek::{
    dense_spmm, f16, sddmm, spmm, BlockMask, BlockShape, BsrMatrix, Dense, DenseMut, Layout,
    SpmmOptions,
};

const OUT: usize = 512;
const IN: usize = 768;
const BATCH: usize = 96;

/// ‖got − want‖ / ‖want‖.
fn rel_err(got: &[f32], want: &[f64]) -> f64 {
    let (mut num, mut den) = (0f64, 0f64);
    for (g, w) in got.iter().zip(want) {
        num += (f64::from(*g) - w).powi(2);
        den += w * w;
    }
    (num / den).sqrt()
}

/// Prints the three products' differences to f64; whether all are within 1e-3.
fn report(backend: &str, errors: [f64; 3]) -> bool {
    let names = [
        "y  = x·Wᵀ (spmm)",
        "dX = dY·W (dense_spmm)",
        "dW = dYᵀ·x on W's pattern (sddmm)",
    ];
    let mut ok = true;
    for (what, err) in names.iter().zip(errors) {
        let pass = err.is_finite() && err <= 1e-3;
        ok &= pass;
        println!(
            "{backend} {what}: rel. difference to f64 {err:.2e} {}",
            if pass { "PASS" } else { "FAIL" }
        );
    }
    ok
}

/// The same three products on the GPU (f32 out): y, dX and dW's values.
#[cfg(feature = "cuda")]
fn on_device(
    ctx: &std::sync::Arc<sparsek::cudarc::driver::CudaContext>,
    w: &BsrMatrix<f16>,
    x: &[f16],
    dy: &[f16],
) -> Result<[Vec<f32>; 3], Box<dyn Error>> {
    use sparsek::DeviceBsr;
    let stream = ctx.default_stream();
    let opts = SpmmOptions::new();
    let dw_ = DeviceBsr::upload(w, &stream)?;
    let (dx_in, ddy) = (stream.clone_htod(x)?, stream.clone_htod(dy)?);
    let mut y = stream.clone_htod(&vec![f32::NAN; BATCH * OUT])?;
    spmm(
        &dw_,
        Dense::device(&dx_in, IN, BATCH, Layout::ColMajor),
        DenseMut::device(&mut y, OUT, BATCH, Layout::ColMajor),
        &opts,
    )?;
    let mut dx = stream.clone_htod(&vec![f32::NAN; BATCH * IN])?;
    dense_spmm(
        Dense::device(&ddy, BATCH, OUT, Layout::RowMajor),
        &dw_,
        DenseMut::device(&mut dx, BATCH, IN, Layout::RowMajor),
        &opts,
    )?;
    let grad = BsrMatrix::from_parts(
        w.m(),
        w.k(),
        w.block(),
        w.row_ptr().to_vec(),
        w.col_idx().to_vec(),
        vec![f32::NAN; w.values().len()],
    )?;
    let mut dgrad = DeviceBsr::upload(&grad, &stream)?;
    sddmm(
        Dense::device(&ddy, BATCH, OUT, Layout::RowMajor).t(),
        Dense::device(&dx_in, BATCH, IN, Layout::RowMajor),
        &mut dgrad,
        &opts,
    )?;
    let (y, dx) = (stream.clone_dtoh(&y)?, stream.clone_dtoh(&dx)?);
    let dw = dgrad.download()?.values().to_vec();
    stream.synchronize()?;
    Ok([y, dx, dw])
}

fn main() -> Result<(), Box<dyn Error>> {
    let mut rng = StdRng::seed_from_u64(14);
    let block = BlockShape::new(64, 64);
    let mask = BlockMask::random_per_row(OUT / 64, IN / 64, IN / 64 / 4, &mut rng)?;
    let w = BsrMatrix::from_block_mask(&mask, block, |_, _| {
        f16::from_f32(rng.random_range(-1.0..1.0))
    })?;
    let mut random = |len: usize| -> Vec<f16> {
        (0..len)
            .map(|_| f16::from_f32(rng.random_range(-1.0..1.0)))
            .collect()
    };
    let x = random(BATCH * IN);
    let dy = random(BATCH * OUT);
    let opts = SpmmOptions::new();

    // Forward: y = x·Wᵀ, i.e. yᵀ = W·xᵀ with x and y passed as column-major xᵀ and yᵀ.
    let mut y = vec![f32::NAN; BATCH * OUT];
    spmm(
        &w,
        Dense::host(&x, IN, BATCH, Layout::ColMajor),
        DenseMut::host(&mut y, OUT, BATCH, Layout::ColMajor),
        &opts,
    )?;
    // Backward, input gradient: dX = dY·W (batch x in).
    let mut dx = vec![f32::NAN; BATCH * IN];
    dense_spmm(
        Dense::host(&dy, BATCH, OUT, Layout::RowMajor),
        &w,
        DenseMut::host(&mut dx, BATCH, IN, Layout::RowMajor),
        &opts,
    )?;
    // Backward, weight gradient on W's pattern: dW = dYᵀ·x, dYᵀ the transposed view of dY.
    let mut dw = BsrMatrix::from_block_mask(&mask, block, |_, _| f32::NAN)?;
    sddmm(
        Dense::host(&dy, BATCH, OUT, Layout::RowMajor).t(),
        Dense::host(&x, BATCH, IN, Layout::RowMajor),
        &mut dw,
        &opts,
    )?;

    // The same three in f64 from the dense W.
    let wd: Vec<f64> = w
        .to_dense()?
        .iter()
        .map(|v| f64::from(v.to_f32()))
        .collect();
    let f = |v: &[f16]| -> Vec<f64> { v.iter().map(|v| f64::from(v.to_f32())).collect() };
    let (xf, dyf) = (f(&x), f(&dy));
    let mut y_ref = vec![0f64; BATCH * OUT];
    let mut dx_ref = vec![0f64; BATCH * IN];
    for b in 0..BATCH {
        for o in 0..OUT {
            for i in 0..IN {
                let wv = wd[o * IN + i];
                y_ref[b * OUT + o] += xf[b * IN + i] * wv;
                dx_ref[b * IN + i] += dyf[b * OUT + o] * wv;
            }
        }
    }
    // dW on the pattern, block by block in the order of dw.values().
    let mut dw_ref = Vec::with_capacity(dw.values().len());
    for (r, row) in dw.block_rows().enumerate() {
        for &c in row.col_idx {
            for i in 0..64 {
                for j in 0..64 {
                    let (o, inp) = (r * 64 + i, c as usize * 64 + j);
                    dw_ref.push(
                        (0..BATCH)
                            .map(|b| dyf[b * OUT + o] * xf[b * IN + inp])
                            .sum::<f64>(),
                    );
                }
            }
        }
    }

    #[cfg_attr(not(feature = "cuda"), allow(unused_mut))]
    let mut ok = report(
        "CPU",
        [
            rel_err(&y, &y_ref),
            rel_err(&dx, &dx_ref),
            rel_err(dw.values(), &dw_ref),
        ],
    );
    #[cfg(feature = "cuda")]
    match sparsek::gpu::open_device() {
        Ok(ctx) => {
            let [gy, gdx, gdw] = on_device(&ctx, &w, &x, &dy)?;
            ok &= report(
                "GPU",
                [
                    rel_err(&gy, &y_ref),
                    rel_err(&gdx, &dx_ref),
                    rel_err(&gdw, &dw_ref),
                ],
            );
        }
        Err(why) => println!("GPU: not run ({why})"),
    }
    println!(
        "W {OUT} x {IN}, {} of {} blocks; batch {BATCH}",
        w.nnz_blocks(),
        (OUT / 64) * (IN / 64)
    );
    if ok {
        Ok(())
    } else {
        Err("a product differs from the f64 reference".into())
    }
}
