//! GPU tests of the SDDMM `S = α·(A·B) ⊙ mask + β·S` (`--features cuda`), against a naive
//! f64 product on S's pattern. Without a GPU each test says SKIPPED and returns; with
//! SPARSEK_REQUIRE_GPU=1 (the bundle's run script) a missing GPU fails.
#![cfg(feature = "full")]

mod common;

use std::sync::Arc;

use common::{device, is_hopper, random_vec, seed, tolerance, PatternKind};
use cudarc::driver::CudaContext;
use rand::{rngs::StdRng, Rng, SeedableRng};
use rayon::prelude::*;
use sparsek::{
    bf16, f16, gpu, sddmm, Backend, BlockShape, BsrMatrix, Dense, DenseShape, DeviceBsr, Element,
    Error, Layout, SpmmOptions,
};

#[derive(Debug, Clone, Copy)]
struct Case {
    block_rows: usize,
    block_cols: usize,
    block: BlockShape,
    kind: PatternKind,
    k: usize,
    a_layout: Layout,
    b_layout: Layout,
    alpha: f32,
    beta: f32,
    backend: Backend,
    ld_pad: usize,
}

/// The f64 reference of every stored value of S (in S's value order): each value sums
/// its products in ascending k; S's blocks run in parallel (rayon).
fn reference<T: Element, O: Element>(
    s: &BsrMatrix<O>,
    a: &[T],
    a_shape: &DenseShape,
    b: &[T],
    b_shape: &DenseShape,
    (alpha, beta): (f32, f32),
) -> Vec<f64> {
    let k = a_shape.cols;
    let (bm, bn) = (s.block().rows, s.block().cols);
    // A row-major (m x k) and B transposed (n x k, row-major): every dot product contiguous.
    let a64 = common::dense_f64(a, a_shape);
    let bt = DenseShape {
        rows: b_shape.cols,
        cols: b_shape.rows,
        layout: match b_shape.layout {
            Layout::RowMajor => Layout::ColMajor,
            Layout::ColMajor => Layout::RowMajor,
        },
        ld: b_shape.ld,
    };
    let b64 = common::dense_f64(b, &bt);
    // (block-row, block-column) of each stored block, in value order.
    let blocks: Vec<(usize, usize)> = s
        .block_rows()
        .enumerate()
        .flat_map(|(r, row)| row.col_idx.iter().map(move |&c| (r, c as usize)))
        .collect();
    let mut out = vec![0f64; s.values().len()];
    out.par_chunks_mut((bm * bn).max(1))
        .zip(blocks.par_iter())
        .enumerate()
        .for_each(|(j, (out, &(r, c)))| {
            for i in 0..bm {
                for q in 0..bn {
                    let (gi, gq) = (r * bm + i, c * bn + q);
                    let acc: f64 = a64[gi * k..(gi + 1) * k]
                        .iter()
                        .zip(&b64[gq * k..(gq + 1) * k])
                        .fold(0f64, |acc, (av, bv)| acc + av * bv);
                    let mut v = alpha as f64 * acc;
                    if beta != 0.0 {
                        v += beta as f64 * s.values()[j * bm * bn + i * bn + q].to_f32() as f64;
                    }
                    out[i * bn + q] = v;
                }
            }
        });
    out
}

/// Runs one case on the GPU (S's values poisoned with NaN when β = 0): the rel. error and
/// the non-finite outputs; checks that S's pattern came back unchanged.
fn run_case<T: Element, O: Element>(
    ctx: &Arc<CudaContext>,
    case: &Case,
    rng: &mut StdRng,
) -> Result<(f64, usize), Error> {
    let stream = ctx.default_stream();
    let mut s0 =
        common::random_bsr::<O>(case.kind, case.block_rows, case.block_cols, case.block, rng);
    if case.beta == 0.0 {
        let poison = s0.values().iter().map(|_| O::from_f32(f32::NAN)).collect();
        s0 = BsrMatrix::from_parts(
            s0.m(),
            s0.k(),
            s0.block(),
            s0.row_ptr().to_vec(),
            s0.col_idx().to_vec(),
            poison,
        )?;
    }
    let (m, n, k) = (s0.m(), s0.k(), case.k);
    let mut a_shape = DenseShape::packed(m, k, case.a_layout);
    let mut b_shape = DenseShape::packed(k, n, case.b_layout);
    a_shape.ld += case.ld_pad;
    b_shape.ld += case.ld_pad;
    let a: Vec<T> = random_vec(a_shape.required_len().unwrap().max(1), rng);
    let b: Vec<T> = random_vec(b_shape.required_len().unwrap().max(1), rng);
    let want = reference(&s0, &a, &a_shape, &b, &b_shape, (case.alpha, case.beta));

    let da = stream.clone_htod(&a)?;
    let db = stream.clone_htod(&b)?;
    let mut ds = DeviceBsr::upload(&s0, &stream)?;
    let opts = SpmmOptions::new()
        .alpha(case.alpha)
        .beta(case.beta)
        .backend(case.backend);
    // can_implement_sddmm names the family that runs (the one asked for, if one was).
    let chosen = gpu::can_implement_sddmm(
        &Dense::device(&da, m, k, case.a_layout).with_ld(a_shape.ld),
        &Dense::device(&db, k, n, case.b_layout).with_ld(b_shape.ld),
        &ds,
        &opts,
    )?;
    assert!(
        chosen == case.backend || (case.backend == Backend::Auto && chosen != Backend::Decode),
        "{case:?}: can_implement_sddmm chose {chosen:?}"
    );
    sddmm(
        Dense::device(&da, m, k, case.a_layout).with_ld(a_shape.ld),
        Dense::device(&db, k, n, case.b_layout).with_ld(b_shape.ld),
        &mut ds,
        &opts,
    )?;
    let out = ds.download()?;
    assert_eq!(out.row_ptr(), s0.row_ptr(), "{case:?}: S's pattern changed");
    assert_eq!(out.col_idx(), s0.col_idx(), "{case:?}: S's pattern changed");
    let (err, bad) = common::rel_err_values(out.values(), &want);
    Ok((err, bad))
}

fn check_typed<T: Element, O: Element>(ctx: &Arc<CudaContext>, case: &Case, rng: &mut StdRng) {
    let (err, bad) = run_case::<T, O>(ctx, case, rng)
        .unwrap_or_else(|e| panic!("{case:?} {:?}->{:?}: {e}", T::DTYPE, O::DTYPE));
    let tol = tolerance(T::DTYPE, O::DTYPE);
    assert!(
        bad == 0 && err <= tol,
        "{case:?} {:?}->{:?}: rel err {err:.3e} (tol {tol:.0e}), {bad} non-finite",
        T::DTYPE,
        O::DTYPE
    );
}

/// Case `idx` in one of the six dtype combinations (f16/bf16 in; in-type or f32 out).
fn check_combination(ctx: &Arc<CudaContext>, case: &Case, idx: usize, rng: &mut StdRng) {
    match idx % 4 {
        0 => check_typed::<f16, f16>(ctx, case, rng),
        1 => check_typed::<bf16, bf16>(ctx, case, rng),
        2 => check_typed::<f16, f32>(ctx, case, rng),
        _ => check_typed::<bf16, f32>(ctx, case, rng),
    }
}

fn cases(backend: Backend, rng: &mut StdRng) -> Vec<Case> {
    let blocks = [
        BlockShape::new(128, 128),
        BlockShape::new(64, 64),
        BlockShape::new(32, 32),
        BlockShape::new(16, 16),
        BlockShape::new(64, 128),
        BlockShape::new(128, 64),
        BlockShape::new(48, 80),
        BlockShape::new(32, 96),
    ];
    let kinds = [
        PatternKind::Random(0.3),
        PatternKind::Full,
        PatternKind::Single,
        PatternKind::EmptyAndFullRows,
        PatternKind::Random(0.6),
    ];
    let layouts = [
        (Layout::RowMajor, Layout::ColMajor),
        (Layout::ColMajor, Layout::RowMajor),
        (Layout::RowMajor, Layout::RowMajor),
        (Layout::ColMajor, Layout::ColMajor),
    ];
    let scalars = [(1.0, 0.0), (0.5, 1.0), (-1.5, 0.25), (2.0, 0.0)];
    let mut out = Vec::new();
    for (i, &block) in blocks.iter().enumerate() {
        for rep in 0..3 {
            let idx = i * 3 + rep;
            let (a_layout, b_layout) = layouts[idx % 4];
            // k: multiples of 8 where A or B is contiguous along k (the kernels' 16-byte
            // chunks), any k otherwise; deep and shallow, partial last k-steps.
            let k_contig = a_layout == Layout::RowMajor || b_layout == Layout::ColMajor;
            let k = match rep {
                0 => 256,
                1 => 8 * rng.random_range(1..40),
                _ if k_contig => 520,
                _ => rng.random_range(1..300),
            };
            let (alpha, beta) = scalars[idx % 4];
            out.push(Case {
                block_rows: rng.random_range(1..4),
                block_cols: rng.random_range(1..5),
                block,
                kind: kinds[idx % 5],
                k,
                a_layout,
                b_layout,
                alpha,
                beta,
                backend,
                ld_pad: if idx % 3 == 0 { 8 } else { 0 },
            });
        }
    }
    out
}

fn sweep(test: &str, backend: Backend) {
    let Some(ctx) = device(test) else { return };
    let mut rng = StdRng::seed_from_u64(seed());
    let list = cases(backend, &mut rng);
    // Every case in two dtype combinations: 48 cases, 96 runs per backend.
    for (i, case) in list.iter().enumerate() {
        check_combination(&ctx, case, i, &mut rng);
        check_combination(&ctx, case, i + 1, &mut rng);
    }
    println!(
        "{test}: {} cases passed ({} runs)",
        list.len(),
        2 * list.len()
    );
}

#[test]
fn sddmm_wmma_matches_reference() {
    sweep("sddmm_wmma_matches_reference", Backend::Wmma);
}

#[test]
fn sddmm_auto_matches_reference() {
    sweep("sddmm_auto_matches_reference", Backend::Auto);
}

/// The Hopper rows: the blocks and layouts they take (128x128 and 64x64; A row-major with
/// B column-major, A column-major with B row-major), forced with Backend::Hopper.
#[test]
fn sddmm_cutlass_matches_reference() {
    let test = "sddmm_cutlass_matches_reference";
    let Some(ctx) = device(test) else { return };
    if !is_hopper(&ctx) {
        println!("SKIPPED {test}: not a Hopper GPU");
        return;
    }
    let mut rng = StdRng::seed_from_u64(seed());
    let mut count = 0;
    for block in [BlockShape::new(128, 128), BlockShape::new(64, 64)] {
        for (a_layout, b_layout) in [
            (Layout::RowMajor, Layout::ColMajor),
            (Layout::ColMajor, Layout::RowMajor),
        ] {
            for (i, kind) in [
                PatternKind::Random(0.4),
                PatternKind::Full,
                PatternKind::EmptyAndFullRows,
                PatternKind::Single,
                PatternKind::Random(0.2),
            ]
            .into_iter()
            .enumerate()
            {
                let (alpha, beta) = [(1.0, 0.0), (0.5, 1.0), (-2.0, 0.5)][i % 3];
                let case = Case {
                    block_rows: rng.random_range(1..5),
                    block_cols: rng.random_range(1..5),
                    block,
                    kind,
                    k: [64, 1024, 8 * rng.random_range(1..64)][i % 3],
                    a_layout,
                    b_layout,
                    alpha,
                    beta,
                    backend: Backend::Hopper,
                    ld_pad: if i == 2 { 8 } else { 0 },
                };
                // The dtypes the rows take: f16/bf16 in, S of the input type; f32 S for
                // A column-major with B row-major (dW = dYᵀ·X).
                check_typed::<f16, f16>(&ctx, &case, &mut rng);
                check_typed::<bf16, bf16>(&ctx, &case, &mut rng);
                count += 2;
                if a_layout == Layout::ColMajor {
                    check_typed::<f16, f32>(&ctx, &case, &mut rng);
                    check_typed::<bf16, f32>(&ctx, &case, &mut rng);
                    count += 2;
                }
            }
        }
    }
    println!("{test}: {count} runs passed");
}

/// A few small cases for the sanitizers (run.sh sanitize): every family, β = 0 and β ≠ 0.
#[test]
fn sddmm_sanitized() {
    let test = "sddmm_sanitized";
    let Some(ctx) = device(test) else { return };
    let mut rng = StdRng::seed_from_u64(seed());
    let mut backends = vec![Backend::Wmma, Backend::Auto];
    if is_hopper(&ctx) {
        backends.push(Backend::Hopper);
    }
    let mut count = 0;
    for backend in backends {
        for (i, block) in [BlockShape::new(64, 64), BlockShape::new(128, 128)]
            .into_iter()
            .enumerate()
        {
            let case = Case {
                block_rows: 2,
                block_cols: 3,
                block,
                kind: PatternKind::EmptyAndFullRows,
                k: 136,
                a_layout: [Layout::RowMajor, Layout::ColMajor][i],
                b_layout: [Layout::ColMajor, Layout::RowMajor][i],
                alpha: 1.0,
                beta: [0.0, 0.5][i],
                backend,
                ld_pad: 8,
            };
            check_typed::<f16, f16>(&ctx, &case, &mut rng);
            count += 1;
        }
    }
    println!("{test}: {count} cases passed");
}

/// 100 runs bitwise identical, on each backend available.
#[test]
fn sddmm_is_deterministic() {
    let test = "sddmm_is_deterministic";
    let Some(ctx) = device(test) else { return };
    let mut rng = StdRng::seed_from_u64(seed());
    let stream = ctx.default_stream();
    let mut backends = vec![Backend::Wmma];
    if is_hopper(&ctx) {
        backends.push(Backend::Hopper);
    }
    for backend in backends {
        let s0 = common::random_bsr::<f16>(
            PatternKind::Random(0.5),
            4,
            4,
            BlockShape::new(64, 64),
            &mut rng,
        );
        let (m, n, k) = (s0.m(), s0.k(), 1024);
        let a: Vec<f16> = random_vec(m * k, &mut rng);
        let b: Vec<f16> = random_vec(k * n, &mut rng);
        let (da, db) = (
            stream.clone_htod(&a).unwrap(),
            stream.clone_htod(&b).unwrap(),
        );
        let mut first: Option<Vec<u16>> = None;
        for run in 0..100 {
            let mut ds = DeviceBsr::upload(&s0, &stream).unwrap();
            sddmm(
                Dense::device(&da, m, k, Layout::RowMajor),
                Dense::device(&db, k, n, Layout::ColMajor),
                &mut ds,
                &SpmmOptions::new().alpha(0.75).beta(0.5).backend(backend),
            )
            .unwrap();
            let bits: Vec<u16> = ds
                .download()
                .unwrap()
                .values()
                .iter()
                .map(|v| v.to_bits())
                .collect();
            match &first {
                None => first = Some(bits),
                Some(f) => assert!(f == &bits, "{backend:?}: run {run} differs from run 0"),
            }
        }
        println!("{test}: {backend:?}: 100 runs bitwise identical");
    }
}

/// Refusals launch nothing: S's values stay as uploaded.
#[test]
fn sddmm_errors_launch_nothing() {
    let test = "sddmm_errors_launch_nothing";
    let Some(ctx) = device(test) else { return };
    let mut rng = StdRng::seed_from_u64(seed());
    let stream = ctx.default_stream();
    let s0 = common::random_bsr::<f16>(
        PatternKind::Random(0.5),
        2,
        2,
        BlockShape::new(32, 32),
        &mut rng,
    );
    let (m, n, k) = (s0.m(), s0.k(), 64);
    let a: Vec<f16> = random_vec(m * k, &mut rng);
    let b: Vec<f16> = random_vec(k * n, &mut rng);
    let (da, db) = (
        stream.clone_htod(&a).unwrap(),
        stream.clone_htod(&b).unwrap(),
    );
    let mut ds = DeviceBsr::upload(&s0, &stream).unwrap();
    let row = Layout::RowMajor;
    // The decode family has no SDDMM (can_implement_sddmm says so too).
    let decode = SpmmOptions::new().backend(Backend::Decode);
    let e = gpu::can_implement_sddmm(
        &Dense::device(&da, m, k, row),
        &Dense::device(&db, k, n, row),
        &ds,
        &decode,
    );
    assert!(matches!(e, Err(Error::NotSupported { .. })), "{e:?}");
    let e = sddmm(
        Dense::device(&da, m, k, row),
        Dense::device(&db, k, n, row),
        &mut ds,
        &SpmmOptions::new().backend(Backend::Decode),
    );
    assert!(matches!(e, Err(Error::NotSupported { .. })), "{e:?}");
    // B with the wrong number of rows.
    let e = sddmm(
        Dense::device(&da, m, k, row),
        Dense::device(&db, k / 2, n, row),
        &mut ds,
        &SpmmOptions::new(),
    );
    assert!(matches!(e, Err(Error::ShapeMismatch { .. })), "{e:?}");
    // Row-major A with k not a multiple of 8: Wmma refuses it (16-byte chunks along k).
    let e = sddmm(
        Dense::device(&da, m, 12, row),
        Dense::device(&db, 12, n, row),
        &mut ds,
        &SpmmOptions::new().backend(Backend::Wmma),
    );
    assert!(matches!(e, Err(Error::NotSupported { .. })), "{e:?}");
    let out = ds.download().unwrap();
    assert!(
        out.values()
            .iter()
            .zip(s0.values())
            .all(|(x, y)| x.to_bits() == y.to_bits()),
        "a refused sddmm wrote S"
    );
    println!("{test}: 3 refusals, S untouched");
}
