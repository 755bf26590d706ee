//! The throwaway dtype F16T (f16's bits under another tag) through the one `spmm`: its
//! product equals f16's bit for bit on the CPU backend, and the rules that name no type
//! (A and B of one 16-bit type, C of A's type or f32) take it.
use half::f16;
use sparsek::element::F16T;
use sparsek::{spmm, BlockMask, BlockShape, BsrMatrix, Dense, DenseMut, Layout, SpmmOptions};

#[test]
fn f16t_product_is_f16s_bit_for_bit() {
    let mask = BlockMask::from_fn(4, 6, |r, c| (r * 5 + c * 3) % 4 != 0).unwrap();
    let v = |i: usize, j: usize| ((i * 37 + j * 11) % 29) as f32 / 7.0 - 2.0;
    let a16 = BsrMatrix::from_block_mask(&mask, BlockShape::new(16, 32), |i, j| {
        f16::from_f32(v(i, j))
    })
    .unwrap();
    let at = BsrMatrix::from_block_mask(&mask, BlockShape::new(16, 32), |i, j| {
        F16T(f16::from_f32(v(i, j)))
    })
    .unwrap();
    let (k, n, m) = (6 * 32, 24, 4 * 16);
    let b16: Vec<f16> = (0..k * n)
        .map(|i| f16::from_f32(((i * 13) % 17) as f32 / 5.0 - 1.5))
        .collect();
    let bt: Vec<F16T> = b16.iter().map(|&x| F16T(x)).collect();
    let mut c16 = vec![f32::NAN; m * n];
    let mut ct = vec![f32::NAN; m * n];
    let opts = SpmmOptions::new().alpha(0.75);
    spmm(
        &a16,
        Dense::host(&b16, k, n, Layout::RowMajor),
        DenseMut::host(&mut c16, m, n, Layout::RowMajor),
        &opts,
    )
    .unwrap();
    spmm(
        &at,
        Dense::host(&bt, k, n, Layout::RowMajor),
        DenseMut::host(&mut ct, m, n, Layout::RowMajor),
        &opts,
    )
    .unwrap();
    assert!(c16.iter().all(|x| x.is_finite()));
    assert_eq!(
        c16.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        ct.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
    );
}
