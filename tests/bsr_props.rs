//! Property tests of the format and the CPU backend (the oracle of every GPU test).

mod common;

use common::{nonzero, random_vec, reference, rel_err, PatternKind};
use half::f16;
use proptest::prelude::*;
use rand::{rngs::StdRng, Rng, SeedableRng};
use sparsek::{
    dense_spmm, sddmm, spmm, Backend, BlockShape, BsrMatrix, Dense, DenseMut, DenseShape, Element,
    Layout, SpmmOptions,
};

const SIDES: [usize; 4] = [16, 32, 64, 128];

/// Cases per property: 1000 optimized, 250 in a debug build (CI runs this file twice in
/// debug, under `cargo test` and `--features full`, each with a fresh seed; an optimized
/// build of it alone cost CI more than the cases it adds).
const CASES: u32 = if cfg!(debug_assertions) { 250 } else { 1000 };

fn kind_strategy() -> impl Strategy<Value = PatternKind> {
    prop_oneof![
        3 => (0.0f64..=1.0).prop_map(PatternKind::Random),
        1 => Just(PatternKind::Full),
        1 => Just(PatternKind::Empty),
        1 => Just(PatternKind::Single),
        1 => Just(PatternKind::EmptyAndFullRows),
    ]
}

/// The three BSR arrays and the dense matrix, built independently of sparsek.
fn arrays(
    kind: PatternKind,
    br: usize,
    bc: usize,
    block: BlockShape,
    seed: u64,
) -> (Vec<i32>, Vec<i32>, Vec<f16>, Vec<f16>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mask = common::mask(kind, br, bc, &mut rng);
    let (m, k) = (br * block.rows, bc * block.cols);
    let mut dense = vec![f16::ZERO; m * k];
    let (mut row_ptr, mut col_idx, mut values) = (vec![0i32], vec![], vec![]);
    for r in 0..br {
        for c in 0..bc {
            if !mask.get(r, c).unwrap() {
                continue;
            }
            col_idx.push(c as i32);
            for i in 0..block.rows {
                for j in 0..block.cols {
                    let v: f16 = nonzero(&mut rng);
                    values.push(v);
                    dense[(r * block.rows + i) * k + c * block.cols + j] = v;
                }
            }
        }
        row_ptr.push(col_idx.len() as i32);
    }
    (row_ptr, col_idx, values, dense)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES, ..ProptestConfig::default() })]

    /// The transpose index lists every block once, by block-column with ascending
    /// block-rows, and `Aᵀ·B` through it matches the naive f64 product with the dense `Aᵀ`.
    #[test]
    fn transpose_index(bm in 0..4usize, bk in 0..4usize, br in 0..5usize, bc in 0..5usize,
                       n in 1..9usize, kind in kind_strategy(), seed in any::<u64>()) {
        let block = BlockShape::new(SIDES[bm], SIDES[bk]);
        let (row_ptr, col_idx, values, dense) = arrays(kind, br, bc, block, seed);
        let a = BsrMatrix::from_parts(br * block.rows, bc * block.cols, block, row_ptr.clone(),
                                      col_idx.clone(), values).unwrap();
        let idx = a.transpose_index().unwrap();
        let nnzb = col_idx.len();
        prop_assert_eq!(idx.col_ptr().len(), bc + 1);
        prop_assert_eq!(idx.col_ptr()[0], 0);
        prop_assert_eq!(idx.col_ptr()[bc] as usize, nnzb);
        let mut seen = vec![false; nnzb];
        for c in 0..bc {
            let (s, e) = (idx.col_ptr()[c] as usize, idx.col_ptr()[c + 1] as usize);
            prop_assert!(s <= e);
            for j in s..e {
                let (r, id) = (idx.row_idx()[j] as usize, idx.block_id()[j] as usize);
                prop_assert!(j == s || idx.row_idx()[j - 1] < idx.row_idx()[j], "rows ascending");
                prop_assert_eq!(col_idx[id] as usize, c);
                prop_assert!(row_ptr[r] as usize <= id && id < row_ptr[r + 1] as usize);
                prop_assert!(!seen[id], "block {} listed twice", id);
                seen[id] = true;
            }
        }
        prop_assert!(seen.iter().all(|&s| s), "every block listed");

        let (m, k) = (a.m(), a.k());
        let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
        let b: Vec<f64> = (0..m * n).map(|_| rng.random_range(-1.0..1.0)).collect();
        let got = transposed_product_via_index(&a, &b, n);
        let mut want = vec![0f64; k * n];
        for i in 0..m {
            for kk in 0..k {
                let av = f64::from(dense[i * k + kk].to_f32());
                if av != 0.0 {
                    for col in 0..n {
                        want[kk * n + col] += av * b[i * n + col];
                    }
                }
            }
        }
        let scale = want.iter().fold(1e-30f64, |s, v| s.max(v.abs()));
        for (g, w) in got.iter().zip(&want) {
            prop_assert!((g - w).abs() <= 1e-12 * scale * (m as f64 + 1.0), "{} vs {}", g, w);
        }
    }

    /// from_parts -> to_dense gives the dense matrix back, and from_dense gives the parts.
    #[test]
    fn round_trip(bm in 0..4usize, bk in 0..4usize, br in 0..5usize, bc in 0..5usize,
                  kind in kind_strategy(), seed in any::<u64>()) {
        let block = BlockShape::new(SIDES[bm], SIDES[bk]);
        let (row_ptr, col_idx, values, dense) = arrays(kind, br, bc, block, seed);
        let (m, k) = (br * block.rows, bc * block.cols);
        let a = BsrMatrix::from_parts(m, k, block, row_ptr.clone(), col_idx.clone(), values.clone()).unwrap();
        prop_assert_eq!(a.to_dense().unwrap(), dense.clone());
        prop_assert_eq!(a.nnz_blocks(), col_idx.len());
        let back = BsrMatrix::from_dense(&dense, m, k, block).unwrap();
        prop_assert_eq!(back.into_parts(), (row_ptr, col_idx, values));
    }

    /// CPU spmm against the naive f64 product: f16 inputs, f32 and f16 outputs, every
    /// layout of B and C, α/β including β = 0 on a NaN-poisoned C.
    #[test]
    fn cpu_matches_f64(bm in 0..4usize, bk in 0..4usize, br in 0..4usize, bc in 0..4usize, n in 1..24usize,
                       kind in kind_strategy(), seed in any::<u64>(),
                       b_col in any::<bool>(), c_col in any::<bool>(), f16_out in any::<bool>(),
                       alpha in prop_oneof![Just(1.0f32), Just(-0.5f32), 0.1f32..3.0],
                       beta in prop_oneof![Just(0.0f32), Just(1.0f32), -2.0f32..2.0]) {
        let block = BlockShape::new(SIDES[bm], SIDES[bk]);
        let mut rng = StdRng::seed_from_u64(seed);
        let a = common::random_bsr::<f16>(kind, br, bc, block, &mut rng);
        let lay = |col: bool| if col { Layout::ColMajor } else { Layout::RowMajor };
        let (err, bad) = if f16_out {
            check::<f16>(&a, n, lay(b_col), lay(c_col), alpha, beta, &mut rng)
        } else {
            check::<f32>(&a, n, lay(b_col), lay(c_col), alpha, beta, &mut rng)
        };
        prop_assert_eq!(bad, 0, "unwritten or non-finite outputs");
        prop_assert!(err <= 1e-3, "rel err {err}");
    }
}

/// Naive `x·y` in f64: `x` is `rows x inner`, `y` `inner x cols`, both given as element
/// functions; row-major `rows x cols`.
fn naive(
    rows: usize,
    inner: usize,
    cols: usize,
    x: impl Fn(usize, usize) -> f64,
    y: impl Fn(usize, usize) -> f64,
) -> Vec<f64> {
    let mut out = vec![0f64; rows * cols];
    for i in 0..rows {
        for kk in 0..inner {
            let xv = x(i, kk);
            if xv != 0.0 {
                for j in 0..cols {
                    out[i * cols + j] += xv * y(kk, j);
                }
            }
        }
    }
    out
}

/// A random dense operand in the given layout with `pad` extra elements per leading
/// dimension, its element function in f64, and its view shape.
fn dense_operand(
    rows: usize,
    cols: usize,
    layout: Layout,
    pad: usize,
    rng: &mut StdRng,
) -> (Vec<f16>, DenseShape) {
    let mut shape = DenseShape::packed(rows, cols, layout);
    shape.ld += pad;
    let len = shape.required_len().unwrap();
    (random_vec(len, rng), shape)
}

fn at(data: &[f16], shape: &DenseShape, i: usize, j: usize) -> f64 {
    f64::from(data[shape.layout.offset(i, j, shape.ld).unwrap()].to_f32())
}

/// The output `C` of a product: random (β != 0) or NaN-poisoned (β = 0, so every element
/// must be written), with `pad` extra elements per leading dimension.
fn output<O: Element>(
    rows: usize,
    cols: usize,
    layout: Layout,
    pad: usize,
    beta: f32,
    rng: &mut StdRng,
) -> (Vec<O>, DenseShape) {
    let mut shape = DenseShape::packed(rows, cols, layout);
    shape.ld += pad;
    let len = shape.required_len().unwrap();
    let data = if beta == 0.0 {
        vec![O::from_f32(f32::NAN); len]
    } else {
        random_vec(len, rng)
    };
    (data, shape)
}

/// `α·prod + β·C_old` (row-major f64), and the check of C against it: relative error and
/// non-finite outputs, with the padding between leading dimensions untouched.
fn finish<O: Element>(
    prod: &[f64],
    old: &[O],
    new: &[O],
    shape: &DenseShape,
    alpha: f32,
    beta: f32,
) -> (f64, usize) {
    let (rows, cols) = (shape.rows, shape.cols);
    let mut want = vec![0f64; rows * cols];
    for i in 0..rows {
        for j in 0..cols {
            let mut v = f64::from(alpha) * prod[i * cols + j];
            if beta != 0.0 {
                v += f64::from(beta)
                    * f64::from(old[shape.layout.offset(i, j, shape.ld).unwrap()].to_f32());
            }
            want[i * cols + j] = v;
        }
    }
    // Elements outside the view (padding) keep their old bits.
    let mut inside = vec![false; old.len()];
    for i in 0..rows {
        for j in 0..cols {
            inside[shape.layout.offset(i, j, shape.ld).unwrap()] = true;
        }
    }
    let touched = old
        .iter()
        .zip(new)
        .zip(&inside)
        .filter(|((o, n), &ins)| !ins && o.to_f32().to_bits() != n.to_f32().to_bits())
        .count();
    let (err, bad) = rel_err(new, shape, &want);
    (err, bad + touched)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES, ..ProptestConfig::default() })]

    /// `C = α·Aᵀ·B + β·C` (spmm with `transpose_a`) against the naive f64 product of the
    /// dense `Aᵀ`: every layout of B and C, padded leading dimensions, f16 and f32 out.
    #[test]
    fn cpu_transposed_matches_f64(bm in 0..4usize, bk in 0..4usize, br in 0..4usize, bc in 0..4usize,
                                  n in 1..20usize, kind in kind_strategy(), seed in any::<u64>(),
                                  b_col in any::<bool>(), c_col in any::<bool>(), f16_out in any::<bool>(),
                                  pad in 0..3usize,
                                  alpha in prop_oneof![Just(1.0f32), -2.0f32..2.0],
                                  beta in prop_oneof![Just(0.0f32), -2.0f32..2.0]) {
        let block = BlockShape::new(SIDES[bm], SIDES[bk]);
        let mut rng = StdRng::seed_from_u64(seed);
        let a = common::random_bsr::<f16>(kind, br, bc, block, &mut rng);
        let (m, k) = (a.m(), a.k());
        let dense = a.to_dense().unwrap();
        let lay = |col: bool| if col { Layout::ColMajor } else { Layout::RowMajor };
        let (b, bs) = dense_operand(m, n, lay(b_col), pad, &mut rng);
        let prod = naive(k, m, n, |i, kk| f64::from(dense[kk * k + i].to_f32()), |kk, j| at(&b, &bs, kk, j));
        let opts = SpmmOptions::new().alpha(alpha).beta(beta).transpose_a(true);
        let bv = Dense::host(&b, m, n, bs.layout).with_ld(bs.ld);
        let (err, bad) = if f16_out {
            let (mut c, cs) = output::<f16>(k, n, lay(c_col), pad, beta, &mut rng);
            let old = c.clone();
            spmm(&a, bv, DenseMut::host(&mut c, k, n, cs.layout).with_ld(cs.ld), &opts).unwrap();
            finish(&prod, &old, &c, &cs, alpha, beta)
        } else {
            let (mut c, cs) = output::<f32>(k, n, lay(c_col), pad, beta, &mut rng);
            let old = c.clone();
            spmm(&a, bv, DenseMut::host(&mut c, k, n, cs.layout).with_ld(cs.ld), &opts).unwrap();
            finish(&prod, &old, &c, &cs, alpha, beta)
        };
        prop_assert_eq!(bad, 0, "unwritten, non-finite or out-of-view outputs");
        prop_assert!(err <= 1e-3, "rel err {}", err);
    }

    /// `C = α·D·op(A) + β·C` (dense_spmm, both op(A)) against the naive f64 product.
    #[test]
    fn cpu_dense_sparse_matches_f64(bm in 0..4usize, bk in 0..4usize, br in 0..4usize, bc in 0..4usize,
                                    p in 1..20usize, kind in kind_strategy(), seed in any::<u64>(),
                                    d_col in any::<bool>(), c_col in any::<bool>(), transpose in any::<bool>(),
                                    pad in 0..3usize,
                                    alpha in prop_oneof![Just(1.0f32), -2.0f32..2.0],
                                    beta in prop_oneof![Just(0.0f32), -2.0f32..2.0]) {
        let block = BlockShape::new(SIDES[bm], SIDES[bk]);
        let mut rng = StdRng::seed_from_u64(seed);
        let a = common::random_bsr::<f16>(kind, br, bc, block, &mut rng);
        let (m, k) = (a.m(), a.k());
        let dense = a.to_dense().unwrap();
        let (inner, cols) = if transpose { (k, m) } else { (m, k) };
        let op = |i: usize, j: usize| {
            let (r, c) = if transpose { (j, i) } else { (i, j) };
            f64::from(dense[r * k + c].to_f32())
        };
        let lay = |col: bool| if col { Layout::ColMajor } else { Layout::RowMajor };
        let (d, ds) = dense_operand(p, inner, lay(d_col), pad, &mut rng);
        let prod = naive(p, inner, cols, |i, kk| at(&d, &ds, i, kk), op);
        let (mut c, cs) = output::<f32>(p, cols, lay(c_col), pad, beta, &mut rng);
        let old = c.clone();
        let opts = SpmmOptions::new().alpha(alpha).beta(beta).transpose_a(transpose);
        dense_spmm(Dense::host(&d, p, inner, ds.layout).with_ld(ds.ld), &a,
                   DenseMut::host(&mut c, p, cols, cs.layout).with_ld(cs.ld), &opts).unwrap();
        let (err, bad) = finish(&prod, &old, &c, &cs, alpha, beta);
        prop_assert_eq!(bad, 0, "unwritten, non-finite or out-of-view outputs");
        prop_assert!(err <= 1e-3, "rel err {}", err);
    }

    /// `S = α·(A·B) ⊙ mask + β·S` (sddmm) against the naive f64 product on S's blocks; the
    /// pattern unchanged. f16 and f32 S, every layout of A and B, padded leading dimensions.
    #[test]
    fn cpu_sddmm_matches_f64(bm in 0..4usize, bn in 0..4usize, br in 0..4usize, bc in 0..4usize,
                             k in 1..40usize, kind in kind_strategy(), seed in any::<u64>(),
                             a_col in any::<bool>(), b_col in any::<bool>(), f16_out in any::<bool>(),
                             pad in 0..3usize,
                             alpha in prop_oneof![Just(1.0f32), -2.0f32..2.0],
                             beta in prop_oneof![Just(0.0f32), -2.0f32..2.0]) {
        let block = BlockShape::new(SIDES[bm], SIDES[bn]);
        let mut rng = StdRng::seed_from_u64(seed);
        let lay = |col: bool| if col { Layout::ColMajor } else { Layout::RowMajor };
        let (m, n) = (br * block.rows, bc * block.cols);
        let (a, as_) = dense_operand(m, k, lay(a_col), pad, &mut rng);
        let (b, bs) = dense_operand(k, n, lay(b_col), pad, &mut rng);
        let prod = naive(m, k, n, |i, kk| at(&a, &as_, i, kk), |kk, j| at(&b, &bs, kk, j));
        let opts = SpmmOptions::new().alpha(alpha).beta(beta);
        let (av, bv) = (Dense::host(&a, m, k, as_.layout).with_ld(as_.ld), Dense::host(&b, k, n, bs.layout).with_ld(bs.ld));
        let (err, bad) = if f16_out {
            let mut s = common::random_bsr::<f16>(kind, br, bc, block, &mut rng);
            sddmm_case(&mut s, av, bv, &prod, &opts, beta)
        } else {
            let mut s = common::random_bsr::<f32>(kind, br, bc, block, &mut rng);
            sddmm_case(&mut s, av, bv, &prod, &opts, beta)
        };
        prop_assert_eq!(bad, 0, "non-finite outputs or a changed pattern");
        prop_assert!(err <= 1e-3, "rel err {}", err);
    }
}

/// One sddmm on `s` (values NaN-poisoned when β = 0) against `α·prod + β·S_old` on its
/// blocks: the relative error, and the count of non-finite values plus pattern changes.
fn sddmm_case<O: Element>(
    s: &mut BsrMatrix<O>,
    a: Dense<'_, f16>,
    b: Dense<'_, f16>,
    prod: &[f64],
    opts: &SpmmOptions,
    beta: f32,
) -> (f64, usize) {
    if beta == 0.0 {
        s.values_mut().fill(O::from_f32(f32::NAN));
    }
    let (old, row_ptr, col_idx) = (
        s.values().to_vec(),
        s.row_ptr().to_vec(),
        s.col_idx().to_vec(),
    );
    let n = s.k();
    sddmm(a, b, &mut *s, opts).unwrap();
    let changed =
        usize::from(s.row_ptr() != row_ptr.as_slice() || s.col_idx() != col_idx.as_slice());
    let (bm, bn) = (s.block().rows, s.block().cols);
    let (mut num, mut den, mut bad) = (0f64, 0f64, changed);
    for r in 0..s.num_block_rows() {
        let first = row_ptr[r] as usize;
        for (j, &c) in col_idx
            .iter()
            .enumerate()
            .take(row_ptr[r + 1] as usize)
            .skip(first)
        {
            let c = c as usize;
            for i in 0..bm {
                for jj in 0..bn {
                    let e = j * bm * bn + i * bn + jj;
                    let mut want =
                        f64::from(opts.get_alpha()) * prod[(r * bm + i) * n + c * bn + jj];
                    if beta != 0.0 {
                        want += f64::from(beta) * f64::from(old[e].to_f32());
                    }
                    let got = f64::from(s.values()[e].to_f32());
                    if !got.is_finite() {
                        bad += 1;
                        continue;
                    }
                    num += (got - want) * (got - want);
                    den += want * want;
                }
            }
        }
    }
    (
        if den == 0.0 {
            num.sqrt()
        } else {
            (num / den).sqrt()
        },
        bad,
    )
}

/// `Aᵀ·B` (`k x n`, f64) walking only A's transpose index and A's values in place.
fn transposed_product_via_index(a: &BsrMatrix<f16>, b: &[f64], n: usize) -> Vec<f64> {
    let idx = a.transpose_index().unwrap();
    let (bm, bk) = (a.block().rows, a.block().cols);
    let mut out = vec![0f64; a.k() * n];
    for c in 0..a.num_block_cols() {
        let (s, e) = (idx.col_ptr()[c] as usize, idx.col_ptr()[c + 1] as usize);
        for j in s..e {
            let (r, id) = (idx.row_idx()[j] as usize, idx.block_id()[j] as usize);
            let blk = &a.values()[id * bm * bk..][..bm * bk];
            for kk in 0..bk {
                for rr in 0..bm {
                    let av = f64::from(blk[rr * bk + kk].to_f32());
                    let brow = &b[(r * bm + rr) * n..][..n];
                    for (o, bv) in out[(c * bk + kk) * n..][..n].iter_mut().zip(brow) {
                        *o += av * bv;
                    }
                }
            }
        }
    }
    out
}

fn check<O: Element>(
    a: &BsrMatrix<f16>,
    n: usize,
    bl: Layout,
    cl: Layout,
    alpha: f32,
    beta: f32,
    rng: &mut StdRng,
) -> (f64, usize) {
    let (m, k) = (a.m(), a.k());
    let b: Vec<f16> = random_vec(k * n, rng);
    let mut c: Vec<O> = if beta == 0.0 {
        vec![O::from_f32(f32::NAN); m * n]
    } else {
        random_vec(m * n, rng)
    };
    let (bs, cs) = (DenseShape::packed(k, n, bl), DenseShape::packed(m, n, cl));
    let want = reference(a, &b, &bs, &c, &cs, alpha, beta);
    let opts = SpmmOptions::new()
        .alpha(alpha)
        .beta(beta)
        .backend(if rng.random_bool(0.5) {
            Backend::Cpu
        } else {
            Backend::Auto
        });
    spmm(
        a,
        Dense::host(&b, k, n, bl),
        DenseMut::host(&mut c, m, n, cl),
        &opts,
    )
    .unwrap();
    rel_err(&c, &cs, &want)
}

/// A padded leading dimension: the padding is neither read as data nor written.
#[test]
fn cpu_respects_leading_dimension() {
    let mut rng = StdRng::seed_from_u64(11);
    let a = common::random_bsr::<f16>(
        PatternKind::Random(0.5),
        3,
        4,
        BlockShape::new(16, 32),
        &mut rng,
    );
    let (m, k, n) = (a.m(), a.k(), 10);
    for (bl, cl) in [
        (Layout::RowMajor, Layout::ColMajor),
        (Layout::ColMajor, Layout::RowMajor),
    ] {
        let bs = DenseShape {
            ld: DenseShape::packed(k, n, bl).ld + 3,
            ..DenseShape::packed(k, n, bl)
        };
        let cs = DenseShape {
            ld: DenseShape::packed(m, n, cl).ld + 5,
            ..DenseShape::packed(m, n, cl)
        };
        let b: Vec<f16> = random_vec(bs.required_len().unwrap(), &mut rng);
        let sentinel = 12345.0f32;
        let mut c = vec![sentinel; cs.required_len().unwrap() + 5];
        let want = reference(&a, &b, &bs, &c, &cs, 1.5, 0.0);
        spmm(
            &a,
            Dense::host(&b, k, n, bl).with_ld(bs.ld),
            DenseMut::host(&mut c, m, n, cl).with_ld(cs.ld),
            &SpmmOptions::new().alpha(1.5),
        )
        .unwrap();
        let (err, bad) = rel_err(&c, &cs, &want);
        assert!(err < 1e-6 && bad == 0, "err {err}, bad {bad}");
        let written: usize = (0..m).flat_map(|i| (0..n).map(move |j| (i, j))).count();
        let untouched = c.iter().filter(|v| **v == sentinel).count();
        assert_eq!(untouched, c.len() - written, "padding must stay untouched");
    }
}

/// bf16 inputs and outputs, all three element types through the same path.
#[test]
fn cpu_bf16_and_f32() {
    let mut rng = StdRng::seed_from_u64(5);
    let a = common::random_bsr::<sparsek::bf16>(
        PatternKind::Random(0.6),
        4,
        3,
        BlockShape::new(32, 16),
        &mut rng,
    );
    let (m, k, n) = (a.m(), a.k(), 17);
    let b = random_vec::<sparsek::bf16>(k * n, &mut rng);
    let mut c = random_vec::<sparsek::bf16>(m * n, &mut rng);
    let (bs, cs) = (
        DenseShape::packed(k, n, Layout::RowMajor),
        DenseShape::packed(m, n, Layout::RowMajor),
    );
    let want = reference(&a, &b, &bs, &c, &cs, 0.75, 0.5);
    spmm(
        &a,
        Dense::host(&b, k, n, Layout::RowMajor),
        DenseMut::host(&mut c, m, n, Layout::RowMajor),
        &SpmmOptions::new().alpha(0.75).beta(0.5),
    )
    .unwrap();
    let (err, bad) = rel_err(&c, &cs, &want);
    assert!(err < 1e-2 && bad == 0, "bf16 rel err {err}");

    let a32 = common::random_bsr::<f32>(PatternKind::Full, 2, 2, BlockShape::new(16, 16), &mut rng);
    let b32 = random_vec::<f32>(32 * 8, &mut rng);
    let mut c32 = vec![f32::NAN; 32 * 8];
    let (bs, cs) = (
        DenseShape::packed(32, 8, Layout::ColMajor),
        DenseShape::packed(32, 8, Layout::ColMajor),
    );
    let want = reference(&a32, &b32, &bs, &c32, &cs, 1.0, 0.0);
    spmm(
        &a32,
        Dense::host(&b32, 32, 8, Layout::ColMajor),
        DenseMut::host(&mut c32, 32, 8, Layout::ColMajor),
        &SpmmOptions::new(),
    )
    .unwrap();
    let (err, bad) = rel_err(&c32, &cs, &want);
    assert!(err < 1e-6 && bad == 0, "f32 rel err {err}");
}

/// The pattern builders keep what they say.
#[test]
fn pattern_builders() {
    let mut rng = StdRng::seed_from_u64(3);
    let topk = sparsek::BlockMask::random_per_row(8, 16, 5, &mut rng).unwrap();
    assert!((0..8).all(|r| topk.row_cols(r).count() == 5));
    let scores: Vec<f32> = (0..12).map(|i| (i % 4) as f32).collect();
    let t = sparsek::BlockMask::topk_per_row(&scores, 3, 4, 2).unwrap();
    assert_eq!(t.row_cols(0).collect::<Vec<_>>(), vec![2, 3]);
    let causal = sparsek::BlockMask::causal(4, None).unwrap();
    assert_eq!(causal.count(), 10);
    let band = sparsek::BlockMask::causal(4, Some(2)).unwrap();
    assert_eq!(band.row_cols(3).collect::<Vec<_>>(), vec![2, 3]);
    let skew = sparsek::BlockMask::skewed(8, 16, 4, 2, &mut rng).unwrap();
    assert_eq!(skew.row_cols(0).count(), 16);
    assert_eq!(skew.row_cols(1).count(), 2);
    let d = sparsek::BlockMask::random(64, 64, 0.25, &mut rng).unwrap();
    let frac = d.count() as f64 / 4096.0;
    assert!((0.2..0.3).contains(&frac), "density {frac}");
    let a =
        BsrMatrix::<f32>::from_block_mask(&causal, BlockShape::new(16, 16), |_, _| 1.0).unwrap();
    assert_eq!(a.nnz_blocks(), 10);
    assert!((a.density() - 10.0 / 16.0).abs() < 1e-12);
    assert_eq!(
        a.block_rows().map(|r| r.col_idx.len()).collect::<Vec<_>>(),
        vec![1, 2, 3, 4]
    );
    assert_eq!(a.mask().unwrap(), causal);
}
