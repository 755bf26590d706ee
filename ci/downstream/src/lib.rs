//! What a dependent crate writes: the README's calls, through `sparsek` alone (its
//! `rand` and `cudarc` re-exports, no versions of its own).

use sparsek::cudarc::driver::CudaContext;
use sparsek::rand::{rngs::StdRng, Rng, SeedableRng};
use sparsek::{
    f16, spmm, BlockMask, BlockShape, BsrMatrix, Dense, DenseMut, DeviceBsr, Error, Layout,
    SpmmOptions,
};
use std::sync::Arc;

/// A 256 x 512 matrix of 64 x 64 blocks, 2 random blocks per block-row.
pub fn matrix() -> Result<BsrMatrix<f16>, Error> {
    let mut rng = StdRng::seed_from_u64(1);
    let mask = BlockMask::random_per_row(4, 8, 2, &mut rng)?;
    Ok(BsrMatrix::from_block_mask(
        &mask,
        BlockShape::new(64, 64),
        |_, _| f16::from_f32(rng.random_range(-1.0..1.0)),
    )?)
}

/// `A · ones` on the CPU backend, `n` columns.
pub fn cpu_product(a: &BsrMatrix<f16>, n: usize) -> Result<Vec<f32>, Error> {
    let b = vec![f16::from_f32(1.0); a.k() * n];
    let mut c = vec![0f32; a.m() * n];
    spmm(
        a,
        Dense::host(&b, a.k(), n, Layout::RowMajor),
        DenseMut::host(&mut c, a.m(), n, Layout::RowMajor),
        &SpmmOptions::new(),
    )?;
    Ok(c)
}

/// The same on the GPU.
pub fn gpu_product(
    ctx: &Arc<CudaContext>,
    a: &BsrMatrix<f16>,
    n: usize,
) -> Result<Vec<f32>, Error> {
    let stream = ctx.default_stream();
    let da = DeviceBsr::upload(a, &stream)?;
    let db = stream.clone_htod(&vec![f16::from_f32(1.0); a.k() * n])?;
    let mut dc = stream.alloc_zeros::<f32>(a.m() * n)?;
    spmm(
        &da,
        Dense::device(&db, a.k(), n, Layout::RowMajor),
        DenseMut::device(&mut dc, a.m(), n, Layout::RowMajor),
        &SpmmOptions::new(),
    )?;
    let c = stream.clone_dtoh(&dc)?;
    stream.synchronize()?;
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_and_gpu_agree() {
        let a = matrix().unwrap();
        let c = cpu_product(&a, 16).unwrap();
        // Row sums of A, each repeated over the 16 columns.
        let dense = a.to_dense().unwrap();
        for i in 0..a.m() {
            let sum: f32 = dense[i * a.k()..][..a.k()].iter().map(|v| v.to_f32()).sum();
            assert!(
                (c[i * 16] - sum).abs() <= 1e-3 * (1.0 + sum.abs()),
                "row {i}"
            );
        }
        assert!(sparsek::HAS_CUDA);
        match sparsek::gpu::open_device() {
            Ok(ctx) => {
                let g = gpu_product(&ctx, &a, 16).unwrap();
                for (x, y) in g.iter().zip(&c) {
                    assert!((x - y).abs() <= 1e-3 * (1.0 + y.abs()), "{x} vs {y}");
                }
            }
            Err(why) => eprintln!("no GPU ({why}): the GPU path is compiled, not run"),
        }
    }
}
