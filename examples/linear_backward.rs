//! `cargo run --release --example linear_backward`: forward and backward of one pruned
//! linear layer with sparsek's three products, checked against a naive f64 computation.
//!
//! W (`out x in`, 64 x 64 blocks at 1/4 density) is the pruned weight, x (`batch x in`) the
//! input, dY (`batch x out`) the gradient arriving from above; all row-major f16.
//! - forward:  y  = x·Wᵀ                 `spmm` (yᵀ = W·xᵀ on column-major views)
//! - backward: dX = dY·W                 `dense_spmm` (dense times sparse)
//! - backward: dW = (dYᵀ·x) ⊙ pattern(W)  `sddmm` (only W's blocks are computed)
//!
//! The three run on the CPU backend here; the GPU kernels for the last two are not built
//! yet (issue 14), so `DeviceBsr` operands get `Error::NotSupported` for them.

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

    let errors = [
        ("y  = x·Wᵀ (spmm)", rel_err(&y, &y_ref)),
        ("dX = dY·W (dense_spmm)", rel_err(&dx, &dx_ref)),
        (
            "dW = dYᵀ·x on W's pattern (sddmm)",
            rel_err(dw.values(), &dw_ref),
        ),
    ];
    let mut ok = true;
    for (what, err) in errors {
        let pass = err.is_finite() && err <= 1e-3;
        ok &= pass;
        println!(
            "{what}: rel. difference to f64 {err:.2e} {}",
            if pass { "PASS" } else { "FAIL" }
        );
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
