//! GPU tests of the other products (`--features cuda`): `C = α·Aᵀ·B + β·C`
//! (`SpmmOptions::transpose_a`) and `C = α·D·op(A) + β·C` (`dense_spmm`) on device
//! operands, against a naive f64 oracle written here over A's blocks (independent of the
//! CPU backend). Without a GPU each test says SKIPPED and returns; with
//! SPARSEK_REQUIRE_GPU=1 (the bundle's run script) a missing GPU is a failure instead.
#![cfg(feature = "full")]

mod common;

use std::sync::Arc;

use common::{device, is_hopper, random_vec, rel_err, seed, tolerance, PatternKind};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use rand::{rngs::StdRng, SeedableRng};
use sparsek::{
    bf16, dense_spmm, f16, gpu, spmm, Backend, BlockMask, BlockShape, BsrMatrix, Dense, DenseMut,
    DenseShape, DeviceBsr, Element, Error, Layout, SpmmOptions,
};

/// The GPU families to run on this device: Auto and WMMA everywhere, Hopper on sm_90 (the
/// test says it skips those cases elsewhere).
fn backends(test: &str, ctx: &Arc<CudaContext>) -> Vec<Backend> {
    if is_hopper(ctx) {
        vec![Backend::Auto, Backend::Wmma, Backend::Hopper]
    } else {
        println!("{test}: Backend::Hopper cases skipped: not an sm_90 device");
        vec![Backend::Auto, Backend::Wmma]
    }
}

/// Which product a case runs.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    /// `spmm` with `transpose_a(true)`: `C = α·Aᵀ·B + β·C`, B `m x n`, C `k x n`.
    Transposed,
    /// `dense_spmm`: `C = α·D·op(A) + β·C`, D `n x rows(op(A))`, C `n x cols(op(A))`.
    DenseSparse { transpose: bool },
}

/// A's pattern: one of common's, or block-columns alternately empty and full (the empty
/// block-rows of Aᵀ: rows of C that only β·C, or zeros, may fill).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Pattern {
    Kind(PatternKind),
    EmptyAndFullCols,
}

fn random_a<T: Element>(
    pattern: Pattern,
    block_rows: usize,
    block_cols: usize,
    block: BlockShape,
    rng: &mut StdRng,
) -> BsrMatrix<T> {
    match pattern {
        Pattern::Kind(kind) => common::random_bsr(kind, block_rows, block_cols, block, rng),
        Pattern::EmptyAndFullCols => {
            let mask = BlockMask::from_fn(block_rows, block_cols, |_, c| c % 2 == 1).unwrap();
            BsrMatrix::from_block_mask(&mask, block, |_, _| common::nonzero(rng)).unwrap()
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Case {
    op: Op,
    block_rows: usize,
    block_cols: usize,
    block: BlockShape,
    pattern: Pattern,
    /// Columns of B and C (`Aᵀ·B`); rows of D and C (`D·op(A)`).
    n: usize,
    /// Layout of B (`Aᵀ·B`) or of D (`D·op(A)`).
    b_layout: Layout,
    c_layout: Layout,
    alpha: f32,
    beta: f32,
    backend: Backend,
    /// Extra elements of leading dimension for B (or D) and C (0: packed).
    ld_pad: usize,
    /// Input → output types: 0 f16→f32, 1 f16→f16, 2 bf16→f32, 3 bf16→bf16.
    types: usize,
}

impl Case {
    /// The views of B (or D) and C for A of `m x k`, padded by `ld_pad`.
    fn shapes(&self, m: usize, k: usize) -> (DenseShape, DenseShape) {
        let n = self.n;
        let ((b_rows, b_cols), (c_rows, c_cols)) = match self.op {
            Op::Transposed => ((m, n), (k, n)),
            Op::DenseSparse { transpose: false } => ((n, m), (n, k)),
            Op::DenseSparse { transpose: true } => ((n, k), (n, m)),
        };
        let mut bs = DenseShape::packed(b_rows, b_cols, self.b_layout);
        let mut cs = DenseShape::packed(c_rows, c_cols, self.c_layout);
        bs.ld += self.ld_pad;
        cs.ld += self.ld_pad;
        (bs, cs)
    }
}

/// Whether element `idx` of a buffer lies inside the view `shape`.
fn in_view(shape: &DenseShape, idx: usize) -> bool {
    let (outer, inner) = (idx / shape.ld, idx % shape.ld);
    match shape.layout {
        Layout::RowMajor => outer < shape.rows && inner < shape.cols,
        Layout::ColMajor => outer < shape.cols && inner < shape.rows,
    }
}

/// The nonzero entries of op(A) as (row, column, value), read straight from A's blocks
/// (row-major `bm x bk`, in `col_idx` order).
fn op_entries<T: Element>(a: &BsrMatrix<T>, transpose: bool) -> Vec<(usize, usize, f64)> {
    let (bm, bk) = (a.block().rows, a.block().cols);
    let (row_ptr, col_idx, values) = (a.row_ptr(), a.col_idx(), a.values());
    let mut out = Vec::new();
    for br in 0..a.num_block_rows() {
        for idx in row_ptr[br] as usize..row_ptr[br + 1] as usize {
            let bc = col_idx[idx] as usize;
            let block = &values[idx * bm * bk..(idx + 1) * bm * bk];
            for r in 0..bm {
                for c in 0..bk {
                    let v = block[r * bk + c].to_f32() as f64;
                    if v != 0.0 {
                        let (i, j) = (br * bm + r, bc * bk + c);
                        out.push(if transpose { (j, i, v) } else { (i, j, v) });
                    }
                }
            }
        }
    }
    out
}

fn at<T: Element>(data: &[T], shape: &DenseShape, i: usize, j: usize) -> f64 {
    data[shape.layout.offset(i, j, shape.ld).unwrap()].to_f32() as f64
}

/// The view `shape` of `data` in f64, row-major; with `transposed`, its transpose.
fn to_f64<T: Element>(data: &[T], shape: &DenseShape, transposed: bool) -> Vec<f64> {
    let (rows, cols) = if transposed {
        (shape.cols, shape.rows)
    } else {
        (shape.rows, shape.cols)
    };
    let mut out = Vec::with_capacity(rows * cols);
    for i in 0..rows {
        for j in 0..cols {
            out.push(if transposed {
                at(data, shape, j, i)
            } else {
                at(data, shape, i, j)
            });
        }
    }
    out
}

/// `dst += v·src`, elementwise.
fn axpy(dst: &mut [f64], v: f64, src: &[f64]) {
    for (x, y) in dst.iter_mut().zip(src) {
        *x += v * y;
    }
}

/// `α·acc + β·C_old` over C's view, row-major (C_old is not read when β = 0).
fn finish<O: Element>(
    mut acc: Vec<f64>,
    c_old: &[O],
    cs: &DenseShape,
    alpha: f32,
    beta: f32,
) -> Vec<f64> {
    for i in 0..cs.rows {
        for j in 0..cs.cols {
            let v = &mut acc[i * cs.cols + j];
            *v *= alpha as f64;
            if beta != 0.0 {
                *v += beta as f64 * at(c_old, cs, i, j);
            }
        }
    }
    acc
}

/// Naive `α·op(A)·B + β·C` in f64 (op(A) given by its entries), row-major over C's view.
fn reference_sparse_dense<T: Element, O: Element>(
    op_a: &[(usize, usize, f64)],
    b: &[T],
    bs: &DenseShape,
    c_old: &[O],
    cs: &DenseShape,
    alpha: f32,
    beta: f32,
) -> Vec<f64> {
    let n = cs.cols;
    let b = to_f64(b, bs, false);
    let mut acc = vec![0f64; cs.rows * n];
    for &(i, l, v) in op_a {
        axpy(&mut acc[i * n..(i + 1) * n], v, &b[l * n..(l + 1) * n]);
    }
    finish(acc, c_old, cs, alpha, beta)
}

/// Naive `α·D·op(A) + β·C` in f64 (op(A) given by its entries), row-major over C's view.
fn reference_dense_sparse<T: Element, O: Element>(
    d: &[T],
    ds: &DenseShape,
    op_a: &[(usize, usize, f64)],
    c_old: &[O],
    cs: &DenseShape,
    alpha: f32,
    beta: f32,
) -> Vec<f64> {
    // Column j of C gathers v·(column l of D) for each entry (l, j, v): work on transposes.
    let (p, q) = (cs.rows, cs.cols);
    let d_t = to_f64(d, ds, true);
    let mut acc_t = vec![0f64; q * p];
    for &(l, j, v) in op_a {
        axpy(&mut acc_t[j * p..(j + 1) * p], v, &d_t[l * p..(l + 1) * p]);
    }
    let acc = (0..p * q)
        .map(|idx| acc_t[(idx % q) * p + idx / q])
        .collect();
    finish(acc, c_old, cs, alpha, beta)
}

/// What one GPU case gave.
enum Outcome {
    /// Rel. error against f64, non-finite outputs, and the family that
    /// `gpu::can_implement` said runs it.
    Ran {
        err: f64,
        bad: usize,
        ran_on: Backend,
    },
    /// `can_implement` and the product both refused it (C checked untouched): the
    /// product's error.
    Refused(Error),
}

/// Runs one case on the GPU: B's (or D's) elements outside its view are NaN, so reading
/// them shows; C is NaN when β = 0 (every element of the view must be written) and random
/// otherwise. Asserts that nothing outside C's view is written, and that `can_implement`
/// and the product agree on whether the case runs.
fn run_case<T: Element, O: Element>(
    ctx: &Arc<CudaContext>,
    case: &Case,
    rng: &mut StdRng,
) -> Result<Outcome, Error> {
    let stream = ctx.default_stream();
    let a = random_a::<T>(
        case.pattern,
        case.block_rows,
        case.block_cols,
        case.block,
        rng,
    );
    let (bs, cs) = case.shapes(a.m(), a.k());
    let mut b: Vec<T> = random_vec(bs.required_len().unwrap(), rng);
    for (idx, v) in b.iter_mut().enumerate() {
        if !in_view(&bs, idx) {
            *v = T::from_f32(f32::NAN);
        }
    }
    let c_len = cs.required_len().unwrap();
    let c0: Vec<O> = if case.beta == 0.0 {
        vec![O::from_f32(f32::NAN); c_len]
    } else {
        random_vec(c_len, rng)
    };
    let (alpha, beta) = (case.alpha, case.beta);
    let want = match case.op {
        Op::Transposed => {
            reference_sparse_dense(&op_entries(&a, true), &b, &bs, &c0, &cs, alpha, beta)
        }
        Op::DenseSparse { transpose } => {
            reference_dense_sparse(&b, &bs, &op_entries(&a, transpose), &c0, &cs, alpha, beta)
        }
    };

    let da = DeviceBsr::upload(&a, &stream)?;
    let db = stream.clone_htod(&b)?;
    let mut dc = stream.clone_htod(&c0)?;
    let opts = SpmmOptions::new()
        .alpha(alpha)
        .beta(beta)
        .backend(case.backend);
    let b_view = |db| Dense::device(db, bs.rows, bs.cols, bs.layout).with_ld(bs.ld);
    let (chosen, ran) = match case.op {
        Op::Transposed => {
            let opts = opts.transpose_a(true);
            let (bv, cv) = (
                b_view(&db),
                DenseMut::device(&mut dc, cs.rows, cs.cols, cs.layout).with_ld(cs.ld),
            );
            (
                gpu::can_implement(&da, &bv, &cv, &opts),
                spmm(&da, bv, cv, &opts),
            )
        }
        Op::DenseSparse { transpose } => {
            // dense_spmm runs Cᵀ = op(A)ᵀ·Dᵀ on the transposed views: ask about that one.
            let chosen = gpu::can_implement(
                &da,
                &b_view(&db).t(),
                &DenseMut::device(&mut dc, cs.rows, cs.cols, cs.layout)
                    .with_ld(cs.ld)
                    .t(),
                &opts.transpose_a(!transpose),
            );
            let ran = dense_spmm(
                b_view(&db),
                &da,
                DenseMut::device(&mut dc, cs.rows, cs.cols, cs.layout).with_ld(cs.ld),
                &opts.transpose_a(transpose),
            );
            (chosen, ran)
        }
    };
    let out = stream.clone_dtoh(&dc)?;
    stream.synchronize()?;
    let same = |i: usize| out[i].to_f32().to_bits() == c0[i].to_f32().to_bits();
    match (chosen, ran) {
        (Ok(ran_on), Ok(())) => {
            assert!(
                (0..c_len).all(|i| in_view(&cs, i) || same(i)),
                "{case:?}: written outside C's view"
            );
            let (err, bad) = rel_err(&out, &cs, &want);
            Ok(Outcome::Ran { err, bad, ran_on })
        }
        (Err(_), Err(e)) => {
            assert!(
                (0..c_len).all(same),
                "{case:?}: C written by a refused call ({e})"
            );
            Ok(Outcome::Refused(e))
        }
        (chosen, ran) => panic!("{case:?}: can_implement says {chosen:?}, the product {ran:?}"),
    }
}

/// A's block shapes whose Aᵀ the Hopper family must run. On the others (16- and 32-high
/// blocks, 48x80: A's bm is the k of Aᵀ's tiles) it may refuse Aᵀ with NotSupported, C
/// untouched (Auto then takes WMMA); the case then counts as refused, not passed.
const HOPPER_AT_MUST_RUN: [(usize, usize); 5] =
    [(64, 64), (128, 128), (128, 64), (64, 128), (128, 112)];

/// Whether the product the case runs is Aᵀ·B (dense_spmm with op(A) = A runs as Aᵀ·Dᵀ).
fn runs_transposed(op: Op) -> bool {
    matches!(op, Op::Transposed | Op::DenseSparse { transpose: false })
}

/// The family that ran the case, or None where a refusal is allowed (see
/// HOPPER_AT_MUST_RUN).
fn check_case<T: Element, O: Element>(
    ctx: &Arc<CudaContext>,
    case: &Case,
    rng: &mut StdRng,
) -> Option<Backend> {
    let what = format!("{case:?} {:?}->{:?}", T::DTYPE, O::DTYPE);
    let (err, bad, ran_on) = match run_case::<T, O>(ctx, case, rng) {
        Ok(Outcome::Ran { err, bad, ran_on }) => (err, bad, ran_on),
        Ok(Outcome::Refused(e)) => {
            let may_refuse = case.backend == Backend::Hopper
                && runs_transposed(case.op)
                && !HOPPER_AT_MUST_RUN.contains(&(case.block.rows, case.block.cols))
                && matches!(e, Error::NotSupported { .. });
            assert!(may_refuse, "{what}: refused: {e}");
            return None;
        }
        Err(e) => panic!("{what}: {e}"),
    };
    match case.backend {
        // Decode takes op(A) = A with few columns (D·Aᵀ with few rows of D), never Aᵀ.
        Backend::Auto => assert!(
            ran_on == Backend::Wmma
                || (ran_on == Backend::Hopper && is_hopper(ctx))
                || (ran_on == Backend::Decode && !runs_transposed(case.op)),
            "{what}: Auto resolved to {ran_on:?}"
        ),
        b => assert_eq!(ran_on, b, "{what}: can_implement names another family"),
    }
    assert_eq!(
        bad, 0,
        "{what}: {bad} outputs non-finite (C's NaN poison left unwritten, or B's NaN padding read)"
    );
    let tol = tolerance(T::DTYPE, O::DTYPE);
    assert!(err <= tol, "{what}: rel err {err:.3e} > {tol:.0e}");
    Some(ran_on)
}

/// Counts of one list's cases: run on each family, and refused where allowed.
#[derive(Debug, Default)]
struct Tally {
    wmma: usize,
    hopper: usize,
    /// "block shape, op" of each allowed refusal.
    refused: Vec<String>,
}

impl Tally {
    fn passed(&self) -> usize {
        self.wmma + self.hopper
    }
    fn summary(&self) -> String {
        let mut s = format!(
            "{} cases passed ({} on Wmma, {} on Hopper)",
            self.passed(),
            self.wmma,
            self.hopper
        );
        if !self.refused.is_empty() {
            s += &format!(
                "; {} Hopper cases refused (NotSupported, C untouched): {}",
                self.refused.len(),
                self.refused.join(", ")
            );
        }
        s
    }
}

/// Runs every case (its input/output types as `case.types` says).
fn run_all(ctx: &Arc<CudaContext>, list: &[Case], rng: &mut StdRng) -> Tally {
    let mut tally = Tally::default();
    for case in list {
        let ran_on = match case.types % 4 {
            0 => check_case::<f16, f32>(ctx, case, rng),
            1 => check_case::<f16, f16>(ctx, case, rng),
            2 => check_case::<bf16, f32>(ctx, case, rng),
            _ => check_case::<bf16, bf16>(ctx, case, rng),
        };
        match ran_on {
            Some(Backend::Hopper) => tally.hopper += 1,
            Some(_) => tally.wmma += 1,
            None => tally.refused.push(format!(
                "{}x{} {:?}",
                case.block.rows, case.block.cols, case.op
            )),
        }
    }
    tally
}

/// A's block shapes: square, tall, wide, small, and sides that are multiples of 16 only.
const BLOCKS: [(usize, usize); 8] = [
    (64, 64),
    (128, 128),
    (128, 64),
    (64, 128),
    (32, 32),
    (16, 16),
    (48, 80),
    (128, 112),
];

const PATTERNS: [Pattern; 6] = [
    Pattern::Kind(PatternKind::Random(0.3)),
    Pattern::Kind(PatternKind::EmptyAndFullRows),
    Pattern::EmptyAndFullCols,
    Pattern::Kind(PatternKind::Full),
    Pattern::Kind(PatternKind::Single),
    Pattern::Kind(PatternKind::Random(0.1)),
];

/// (B or D, C) layouts.
const LAYOUTS: [(Layout, Layout); 4] = [
    (Layout::RowMajor, Layout::RowMajor),
    (Layout::RowMajor, Layout::ColMajor),
    (Layout::ColMajor, Layout::RowMajor),
    (Layout::ColMajor, Layout::ColMajor),
];

/// (α, β): half with β = 0 (C poisoned with NaN), half reading C.
const SCALARS: [(f32, f32); 4] = [(1.0, 0.0), (0.5, 1.0), (-1.25, 0.75), (2.0, 0.0)];

/// Cases per backend: every block shape with every pattern (an empty one for two shapes),
/// the four layout pairs, every input/output type pair, α/β, ld padding, and n (or D's rows)
/// odd or 1 only where the layouts allow it: for Aᵀ·B both B and C column-major, for
/// D·op(A) both D and C row-major (dense_spmm runs on transposed views).
fn cases(ops: impl Fn(usize) -> Op, backends: &[Backend]) -> Vec<Case> {
    let mut out = Vec::new();
    for (bi, &backend) in backends.iter().enumerate() {
        for g in 0..BLOCKS.len() * PATTERNS.len() {
            let (i, v) = (g % BLOCKS.len(), g / BLOCKS.len());
            let (bm, bk) = BLOCKS[i];
            let op = ops(g);
            let (b_layout, c_layout) = LAYOUTS[(g + v + bi) % 4];
            let any_n = match op {
                Op::Transposed => (b_layout, c_layout) == (Layout::ColMajor, Layout::ColMajor),
                Op::DenseSparse { .. } => {
                    (b_layout, c_layout) == (Layout::RowMajor, Layout::RowMajor)
                }
            };
            let n = if any_n {
                [1, 7, 33, 100][(g / 4 + bi) % 4]
            } else {
                [8, 24, 136, 72][(g / 4 + bi) % 4]
            };
            let pattern = match PATTERNS[v] {
                Pattern::Kind(PatternKind::Single) if i % 4 == 1 => {
                    Pattern::Kind(PatternKind::Empty)
                }
                p => p,
            };
            let (alpha, beta) = SCALARS[(g / 6 + bi) % 4];
            out.push(Case {
                op,
                // m and k a few hundred, not powers of two.
                block_rows: (448 / bm).max(3) - g % 2,
                block_cols: (512 / bk).max(3) + v % 2,
                block: BlockShape::new(bm, bk),
                pattern,
                n,
                b_layout,
                c_layout,
                alpha,
                beta,
                backend,
                ld_pad: [0, 8, 0, 24][(g + g / 12 + bi) % 4],
                types: (g / 3 + bi) % 4,
            });
        }
    }
    out
}

#[test]
fn transposed_matches_reference() {
    let test = "transposed_matches_reference";
    let Some(ctx) = device(test) else { return };
    let mut rng = StdRng::seed_from_u64(seed());
    let list = cases(|_| Op::Transposed, &backends(test, &ctx));
    assert!(list.len() >= 96);
    let tally = run_all(&ctx, &list, &mut rng);
    assert!(tally.passed() >= 80, "{test}: {}", tally.summary());
    println!("{test}: {}", tally.summary());
}

#[test]
fn dense_sparse_matches_reference() {
    let test = "dense_sparse_matches_reference";
    let Some(ctx) = device(test) else { return };
    let mut rng = StdRng::seed_from_u64(seed());
    // op(A) = A and Aᵀ alternating over the patterns of each block shape.
    let list = cases(
        |g| Op::DenseSparse {
            transpose: (g + g / BLOCKS.len()) % 2 == 1,
        },
        &backends(test, &ctx),
    );
    assert!(list.len() >= 96);
    let tally = run_all(&ctx, &list, &mut rng);
    assert!(tally.passed() >= 80, "{test}: {}", tally.summary());
    println!("{test}: {}", tally.summary());
}

/// Seven small cases of both products, for compute-sanitizer (run.sh sanitize).
#[test]
fn transposed_sanitized() {
    let test = "transposed_sanitized";
    let Some(ctx) = device(test) else { return };
    let mut rng = StdRng::seed_from_u64(seed());
    let base = Case {
        op: Op::Transposed,
        block_rows: 3,
        block_cols: 4,
        block: BlockShape::new(32, 32),
        pattern: Pattern::Kind(PatternKind::Random(0.5)),
        n: 24,
        b_layout: Layout::RowMajor,
        c_layout: Layout::RowMajor,
        alpha: 1.0,
        beta: 0.0,
        backend: Backend::Auto,
        ld_pad: 0,
        types: 1,
    };
    let list = [
        base,
        Case {
            block: BlockShape::new(64, 128),
            pattern: Pattern::EmptyAndFullCols,
            backend: Backend::Wmma,
            c_layout: Layout::ColMajor,
            beta: 0.5,
            types: 2,
            ..base
        },
        Case {
            block: BlockShape::new(48, 80),
            block_rows: 2,
            block_cols: 3,
            n: 7,
            b_layout: Layout::ColMajor,
            c_layout: Layout::ColMajor,
            ld_pad: 8,
            types: 0,
            ..base
        },
        Case {
            op: Op::DenseSparse { transpose: false },
            block: BlockShape::new(16, 16),
            pattern: Pattern::Kind(PatternKind::EmptyAndFullRows),
            block_rows: 5,
            block_cols: 6,
            n: 5,
            types: 3,
            ..base
        },
        Case {
            op: Op::DenseSparse { transpose: true },
            block: BlockShape::new(128, 64),
            block_rows: 2,
            block_cols: 2,
            backend: Backend::Wmma,
            b_layout: Layout::ColMajor,
            n: 16,
            beta: -1.0,
            ..base
        },
        Case {
            op: Op::DenseSparse { transpose: false },
            block: BlockShape::new(64, 64),
            pattern: Pattern::Kind(PatternKind::Full),
            block_rows: 2,
            block_cols: 3,
            n: 8,
            c_layout: Layout::ColMajor,
            ld_pad: 8,
            types: 0,
            ..base
        },
        // Blocks the Hopper family's Aᵀ rows take (Auto picks them there).
        Case {
            block: BlockShape::new(128, 112),
            block_rows: 2,
            block_cols: 2,
            n: 40,
            b_layout: Layout::ColMajor,
            beta: 1.0,
            types: 3,
            ..base
        },
    ];
    let tally = run_all(&ctx, &list, &mut rng);
    assert_eq!(tally.passed(), list.len(), "{test}: {}", tally.summary());
    println!("{test}: {}", tally.summary());
}

/// Runs `launch` 100 times, C reset to NaN before each (β = 0: every run must write all
/// of it), and asserts that C is bitwise the same every time, finite, and within tolerance
/// of `want` (row-major over the packed view `cs`).
fn assert_repeats_bitwise<T: Element, O: Element>(
    what: &str,
    stream: &Arc<CudaStream>,
    cs: &DenseShape,
    want: &[f64],
    mut launch: impl FnMut(&mut CudaSlice<O>) -> Result<(), Error>,
) {
    let poison = vec![O::from_f32(f32::NAN); cs.required_len().unwrap()];
    let mut dc = stream.clone_htod(&poison).unwrap();
    let mut first: Option<Vec<u32>> = None;
    for run in 0..100 {
        stream.memcpy_htod(&poison, &mut dc).unwrap();
        launch(&mut dc).unwrap_or_else(|e| panic!("{what}: run {run}: {e}"));
        let out = stream.clone_dtoh(&dc).unwrap();
        // f16/bf16 -> f32 is exact, so the f32 bits tell every output bit apart.
        let bits: Vec<u32> = out.iter().map(|v| v.to_f32().to_bits()).collect();
        match &first {
            None => {
                let (err, bad) = rel_err(&out, cs, want);
                let tol = tolerance(T::DTYPE, O::DTYPE);
                assert!(bad == 0 && err <= tol, "{what}: err {err:.3e}, bad {bad}");
                first = Some(bits);
            }
            Some(f) => assert!(*f == bits, "{what}: run {run} differs from run 0"),
        }
    }
}

/// `Aᵀ·B` 100 times on one family (f16 in and out, row-major B and C).
fn transposed_repeats(ctx: &Arc<CudaContext>, backend: Backend, block: BlockShape) {
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    // Block-columns get uneven counts of blocks (random per row): uneven rows of Aᵀ.
    let (m, k, n) = (1024, 768, 256);
    let mask = BlockMask::random_per_row(m / block.rows, k / block.cols, 3, &mut rng).unwrap();
    let a =
        BsrMatrix::from_block_mask(&mask, block, |_, _| common::nonzero::<f16>(&mut rng)).unwrap();
    let b: Vec<f16> = random_vec(m * n, &mut rng);
    let (bs, cs) = (
        DenseShape::packed(m, n, Layout::RowMajor),
        DenseShape::packed(k, n, Layout::RowMajor),
    );
    let want = reference_sparse_dense(&op_entries(&a, true), &b, &bs, &[f16::ZERO], &cs, 1.0, 0.0);
    let da = DeviceBsr::upload(&a, &stream).unwrap();
    let db = stream.clone_htod(&b).unwrap();
    let opts = SpmmOptions::new().transpose_a(true).backend(backend);
    assert_repeats_bitwise::<f16, f16>(
        &format!("Aᵀ·B on {backend:?}, {block:?}"),
        &stream,
        &cs,
        &want,
        |dc| {
            spmm(
                &da,
                Dense::device(&db, m, n, Layout::RowMajor),
                DenseMut::device(dc, k, n, Layout::RowMajor),
                &opts,
            )
        },
    );
}

#[test]
fn transposed_is_deterministic() {
    let test = "transposed_is_deterministic";
    let Some(ctx) = device(test) else { return };
    let mut ran = vec![];
    for backend in [Backend::Wmma, Backend::Hopper] {
        if backend == Backend::Hopper && !is_hopper(&ctx) {
            println!("{test}: Backend::Hopper skipped: not an sm_90 device");
            continue;
        }
        transposed_repeats(&ctx, backend, BlockShape::new(64, 64));
        ran.push(backend);
    }
    // D·A (x·W with W stored in x out): the transposed kernel on transposed views, Auto.
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    let block = BlockShape::new(128, 64);
    let (m, k, p) = (768, 1024, 136);
    let mask = BlockMask::random_per_row(m / block.rows, k / block.cols, 4, &mut rng).unwrap();
    let a =
        BsrMatrix::from_block_mask(&mask, block, |_, _| common::nonzero::<bf16>(&mut rng)).unwrap();
    let d: Vec<bf16> = random_vec(p * m, &mut rng);
    let (ds, cs) = (
        DenseShape::packed(p, m, Layout::RowMajor),
        DenseShape::packed(p, k, Layout::RowMajor),
    );
    let want = reference_dense_sparse(&d, &ds, &op_entries(&a, false), &[0f32], &cs, 1.0, 0.0);
    let da = DeviceBsr::upload(&a, &stream).unwrap();
    let dd = stream.clone_htod(&d).unwrap();
    assert_repeats_bitwise::<bf16, f32>("D·A on Auto", &stream, &cs, &want, |dc| {
        dense_spmm(
            Dense::device(&dd, p, m, Layout::RowMajor),
            &da,
            DenseMut::device(dc, p, k, Layout::RowMajor),
            &SpmmOptions::new(),
        )
    });
    println!("{test}: 100 runs bitwise identical: Aᵀ·B on {ran:?}, D·A on Auto");
}

/// Refused calls with op(A) = Aᵀ: a typed error, and C bitwise as it was uploaded.
#[test]
fn transposed_errors_launch_nothing() {
    let test = "transposed_errors_launch_nothing";
    let Some(ctx) = device(test) else { return };
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    // A: 192 x 128 (m != k), so B of k rows is the wrong shape for Aᵀ·B.
    let a = common::random_bsr::<f16>(PatternKind::Full, 3, 2, BlockShape::new(64, 64), &mut rng);
    let (m, k, n) = (a.m(), a.k(), 64);
    let da = DeviceBsr::upload(&a, &stream).unwrap();
    let db = stream
        .clone_htod(&random_vec::<f16>(m * n, &mut rng))
        .unwrap();
    let c0: Vec<f16> = random_vec(k * n, &mut rng);
    let mut dc = stream.clone_htod(&c0).unwrap();
    let t = SpmmOptions::new().transpose_a(true).beta(0.5);
    let mut refused = 0;
    let mut check = |e: Result<(), Error>, dc: &CudaSlice<f16>, want: fn(&Error) -> bool| {
        let e = e.expect_err("a refused call returned Ok");
        assert!(want(&e), "unexpected error: {e}");
        stream.synchronize().unwrap();
        let now = stream.clone_dtoh(dc).unwrap();
        assert!(
            now.iter().zip(&c0).all(|(x, y)| x.to_bits() == y.to_bits()),
            "C was written by a refused call ({e})"
        );
        refused += 1;
    };
    let not_supported = |e: &Error| matches!(e, Error::NotSupported { .. });
    let shape_mismatch = |e: &Error| matches!(e, Error::ShapeMismatch { .. });

    // The decode family does not run Aᵀ.
    let decode = t.backend(Backend::Decode);
    let (bv, cv) = (
        Dense::device(&db, m, n, Layout::RowMajor),
        DenseMut::device(&mut dc, k, n, Layout::RowMajor),
    );
    let e = gpu::can_implement(&da, &bv, &cv, &decode).unwrap_err();
    assert!(not_supported(&e), "can_implement: {e}");
    check(spmm(&da, bv, cv, &decode), &dc, not_supported);
    // Nor D·A, which runs as Aᵀ·Dᵀ (D: n x m, C: n x k, row-major: the transposes' layouts).
    let e = dense_spmm(
        Dense::device(&db, n, m, Layout::RowMajor),
        &da,
        DenseMut::device(&mut dc, n, k, Layout::RowMajor),
        &SpmmOptions::new().backend(Backend::Decode),
    );
    check(e, &dc, not_supported);

    // B with k rows instead of m, on every backend: ShapeMismatch before anything else.
    for backend in [
        Backend::Auto,
        Backend::Wmma,
        Backend::Hopper,
        Backend::Decode,
    ] {
        let e = spmm(
            &da,
            Dense::device(&db, k, n, Layout::RowMajor),
            DenseMut::device(&mut dc, k, n, Layout::RowMajor),
            &t.backend(backend),
        );
        check(e, &dc, shape_mismatch);
    }
    // C with m rows instead of k (the shape of A·B's C).
    let e = spmm(
        &da,
        Dense::device(&db, m, n / 2, Layout::RowMajor),
        DenseMut::device(&mut dc, m, n / 2, Layout::RowMajor),
        &t,
    );
    check(e, &dc, shape_mismatch);
    // D·Aᵀ with D of m columns instead of k.
    let e = dense_spmm(
        Dense::device(&db, n, m, Layout::RowMajor),
        &da,
        DenseMut::device(&mut dc, n, m, Layout::RowMajor),
        &t,
    );
    check(e, &dc, shape_mismatch);
    // n not a multiple of 8 with row-major B (leading dimensions fine): neither tensor-core
    // family takes it.
    for backend in [Backend::Wmma, Backend::Hopper] {
        let e = spmm(
            &da,
            Dense::device(&db, m, 12, Layout::RowMajor).with_ld(16),
            DenseMut::device(&mut dc, k, 12, Layout::RowMajor).with_ld(16),
            &t.backend(backend),
        );
        check(e, &dc, not_supported);
    }
    // Blocks of 24 (not multiples of 16): neither family runs Aᵀ of them.
    let a24 = common::random_bsr::<f16>(PatternKind::Full, 2, 2, BlockShape::new(24, 24), &mut rng);
    let da24 = DeviceBsr::upload(&a24, &stream).unwrap();
    for backend in [Backend::Wmma, Backend::Hopper, Backend::Auto] {
        let e = spmm(
            &da24,
            Dense::device(&db, 48, 64, Layout::RowMajor),
            DenseMut::device(&mut dc, 48, 64, Layout::RowMajor),
            &t.backend(backend),
        );
        check(e, &dc, not_supported);
    }
    // f16 in, bf16 out: no GPU family takes it, Aᵀ or not.
    let c_bf: Vec<bf16> = random_vec(k * n, &mut rng);
    let mut dc_bf = stream.clone_htod(&c_bf).unwrap();
    let e = spmm(
        &da,
        Dense::device(&db, m, n, Layout::RowMajor),
        DenseMut::device(&mut dc_bf, k, n, Layout::RowMajor),
        &t,
    )
    .unwrap_err();
    assert!(matches!(e, Error::UnsupportedTypes { .. }), "{e}");
    let now = stream.clone_dtoh(&dc_bf).unwrap();
    assert!(
        now.iter()
            .zip(&c_bf)
            .all(|(x, y)| x.to_bits() == y.to_bits()),
        "C (bf16) was written by a refused call"
    );
    println!("{test}: {} refusals typed, C untouched", refused + 1);
}
