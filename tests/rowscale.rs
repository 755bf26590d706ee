//! `sparsek::rowscale` on the CPU: C = diag(s)·A against an f64 reference on f16, bf16 and
//! f32 values, C's values poisoned first (every one must be written), and the refusals, which
//! write nothing.

use sparsek::{bf16, f16, rowscale, BlockMask, BlockShape, BsrMatrix, Element, Error, Rowscale};

/// A 48 x 64 matrix of 16 x 16 blocks, some block-rows empty, its values a spread of signs
/// and magnitudes.
fn matrix<T: Element>() -> BsrMatrix<T> {
    let mask = BlockMask::from_fn(3, 4, |r, c| r != 1 && (r + c) % 2 == 0).unwrap();
    BsrMatrix::from_block_mask(&mask, BlockShape::new(16, 16), |i, j| {
        T::from_f32(((i * 31 + j * 17) % 23) as f32 * 0.37 - 4.1)
    })
    .unwrap()
}

fn scales(m: usize) -> Vec<f32> {
    (0..m).map(|i| (i as f32 - 20.0) * 0.173 + 0.01).collect()
}

/// The row of A's values' element `e`: its block's block-row, found from row_ptr.
fn row_of<T>(a: &BsrMatrix<T>, e: usize) -> usize {
    let (bm, bk) = (a.block().rows, a.block().cols);
    let j = e / (bm * bk);
    let r = a.row_ptr().partition_point(|&p| p as usize <= j) - 1;
    r * bm + (e % (bm * bk)) / bk
}

/// C against the f64 product, within one rounding of T (`eps`: its relative spacing) and
/// the f32 product's.
fn check_against_f64<T: Element>(eps: f64) {
    let a = matrix::<T>();
    let s = scales(a.m());
    let poison = T::from_f32(f32::NAN);
    let mut c = vec![poison; a.values().len()];
    rowscale(Rowscale::Host {
        a: &a,
        s: &s,
        c_values: &mut c,
    })
    .unwrap();
    for (e, (&x, &got)) in a.values().iter().zip(&c).enumerate() {
        let want = x.to_f32() as f64 * s[row_of(&a, e)] as f64;
        let got = got.to_f32() as f64;
        assert!(got.is_finite(), "value {e} not written");
        assert!(
            (got - want).abs() <= eps * want.abs() + 1e-30,
            "value {e}: {got} against {want}"
        );
    }
}

#[test]
fn f16_matches_f64() {
    check_against_f64::<f16>(f64::powi(2.0, -10));
}

#[test]
fn bf16_matches_f64() {
    check_against_f64::<bf16>(f64::powi(2.0, -7));
}

#[test]
fn f32_matches_f64() {
    check_against_f64::<f32>(f64::powi(2.0, -23));
}

#[test]
fn wrong_length_of_s_is_refused_and_writes_nothing() {
    let a = matrix::<f16>();
    let s = scales(a.m() - 1);
    let poison = f16::from_f32(f32::NAN);
    let mut c = vec![poison; a.values().len()];
    let e = rowscale(Rowscale::Host {
        a: &a,
        s: &s,
        c_values: &mut c,
    })
    .unwrap_err();
    assert!(
        matches!(
            e,
            Error::ShapeMismatch {
                expected: 48,
                got: 47,
                ..
            }
        ),
        "{e}"
    );
    assert!(
        c.iter().all(|v| v.to_bits() == poison.to_bits()),
        "C was written"
    );
}

#[test]
fn wrong_length_of_c_is_refused() {
    let a = matrix::<f32>();
    let s = scales(a.m());
    let mut c = vec![f32::NAN; a.values().len() + 1];
    let e = rowscale(Rowscale::Host {
        a: &a,
        s: &s,
        c_values: &mut c,
    })
    .unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");
    assert!(c.iter().all(|v| v.is_nan()), "C was written");
}

#[test]
fn fp8_is_refused() {
    use sparsek::F8E4M3;
    let a = matrix::<F8E4M3>();
    let s = scales(a.m());
    let mut c = vec![F8E4M3::from_f32(0.0); a.values().len()];
    let e = rowscale(Rowscale::Host {
        a: &a,
        s: &s,
        c_values: &mut c,
    })
    .unwrap_err();
    assert!(matches!(e, Error::UnsupportedTypes { .. }), "{e}");
    assert!(c.iter().all(|v| v.to_f32() == 0.0), "C was written");
}
