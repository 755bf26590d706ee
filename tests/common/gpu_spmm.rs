//! The `C = α·A·B + β·C` cases of the GPU test files (`tests/gpu_sm90.rs`, `gpu_wmma.rs`,
//! `gpu_decode.rs`, `gpu_families.rs`): one case on the device against the f64 oracle (and
//! the CPU backend), a spread of cases per backend, and 100 repeats of a launch compared
//! bitwise.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream};
use rand::{rngs::StdRng, SeedableRng};
use sparsek::{
    bf16, f16, spmm, spmm_fused, Activation, Backend, BlockMask, BlockShape, BsrMatrix, Dense,
    DenseMut, DenseShape, DeviceBsr, Element, Epilogue, Error, Layout, SpmmOptions, Vector,
};

use super::{device, is_hopper, random_vec, reference, rel_err, seed, tolerance, PatternKind};

/// One `C = α·A·B + β·C` case (with the fused epilogue) of random A, B and C.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    pub block_rows: usize,
    pub block_cols: usize,
    pub block: BlockShape,
    pub kind: PatternKind,
    pub n: usize,
    pub b_layout: Layout,
    pub c_layout: Layout,
    pub alpha: f32,
    pub beta: f32,
    pub backend: Backend,
    /// Extra elements of leading dimension for B and C (0: packed).
    pub ld_pad: usize,
    pub bias: bool,
    pub activation: Activation,
}

/// Runs one case on the GPU (C poisoned with NaN when β = 0) and returns
/// (rel. error vs f64, non-finite outputs, rel. error of the CPU backend vs f64).
pub fn run_case<T: Element, O: Element>(
    ctx: &Arc<CudaContext>,
    case: &Case,
    rng: &mut StdRng,
) -> Result<(f64, usize, f64), Error> {
    let stream = ctx.default_stream();
    let a = super::random_bsr::<T>(case.kind, case.block_rows, case.block_cols, case.block, rng);
    let (m, k, n) = (a.m(), a.k(), case.n);
    let mut bs = DenseShape::packed(k, n, case.b_layout);
    let mut cs = DenseShape::packed(m, n, case.c_layout);
    bs.ld += case.ld_pad;
    cs.ld += case.ld_pad;
    let (b_len, c_len) = (bs.required_len().unwrap(), cs.required_len().unwrap());
    let b: Vec<T> = random_vec(b_len, rng);
    let c0: Vec<O> = if case.beta == 0.0 {
        vec![O::from_f32(f32::NAN); c_len]
    } else {
        random_vec(c_len, rng)
    };
    let bias: Vec<T> = random_vec(m, rng);
    let base = reference(&a, &b, &bs, &c0, &cs, case.alpha, case.beta);
    let want: Vec<f64> = (0..m * n)
        .map(|idx| {
            let add = if case.bias {
                bias[idx / n.max(1)].to_f32() as f64
            } else {
                0.0
            };
            super::act64(case.activation, base[idx] + add)
        })
        .collect();
    let opts = SpmmOptions::new().alpha(case.alpha).beta(case.beta);
    let mut epi = Epilogue::new().activation(case.activation);
    if case.bias {
        epi = epi.bias(Vector::Host(&bias));
    }

    let mut c_cpu = c0.clone();
    spmm_fused(
        &a,
        Dense::host(&b, k, n, case.b_layout).with_ld(bs.ld),
        DenseMut::host(&mut c_cpu, m, n, case.c_layout).with_ld(cs.ld),
        &epi,
        &opts,
    )?;
    let (cpu_err, _) = rel_err(&c_cpu, &cs, &want);

    let da = DeviceBsr::upload(&a, &stream)?;
    let db = stream.clone_htod(&b)?;
    let dbias = stream.clone_htod(&bias)?;
    let mut dc = stream.clone_htod(&c0)?;
    let mut depi = Epilogue::new().activation(case.activation);
    if case.bias {
        depi = depi.bias(Vector::Device(&dbias));
    }
    spmm_fused(
        &da,
        Dense::device(&db, k, n, case.b_layout).with_ld(bs.ld),
        DenseMut::device(&mut dc, m, n, case.c_layout).with_ld(cs.ld),
        &depi,
        &opts.backend(case.backend),
    )?;
    let out = stream.clone_dtoh(&dc)?;
    stream.synchronize()?;
    let (err, bad) = rel_err(&out, &cs, &want);
    // Outside the view (the ld padding) nothing may be written.
    assert!(
        super::outside_untouched(&out, &c0, &cs),
        "{case:?}: written outside the view"
    );
    Ok((err, bad, cpu_err))
}

pub fn check_case<T: Element, O: Element>(ctx: &Arc<CudaContext>, case: &Case, rng: &mut StdRng) {
    let (err, bad, cpu_err) = run_case::<T, O>(ctx, case, rng)
        .unwrap_or_else(|e| panic!("{case:?} {:?}->{:?}: {e}", T::DTYPE, O::DTYPE));
    let tol = tolerance(T::DTYPE, O::DTYPE);
    assert_eq!(
        bad,
        0,
        "{case:?} {:?}->{:?}: {bad} outputs unwritten or non-finite",
        T::DTYPE,
        O::DTYPE
    );
    assert!(
        err <= tol,
        "{case:?} {:?}->{:?}: rel err {err:.3e} > {tol:.0e}",
        T::DTYPE,
        O::DTYPE
    );
    assert!(cpu_err <= tol, "CPU backend off: {cpu_err:.3e}");
}

/// Case `idx` with input and output types alternating over f16→f32, f16→f16, bf16→f32 and
/// bf16→bf16, so a list of cases covers every combination.
pub fn check_combination(ctx: &Arc<CudaContext>, case: &Case, idx: usize, rng: &mut StdRng) {
    match idx % 4 {
        0 => check_case::<f16, f32>(ctx, case, rng),
        1 => check_case::<f16, f16>(ctx, case, rng),
        2 => check_case::<bf16, f32>(ctx, case, rng),
        _ => check_case::<bf16, bf16>(ctx, case, rng),
    }
}

/// The patterns of a spread of cases: one block to full, with empty rows.
pub const KINDS: [PatternKind; 5] = [
    PatternKind::Single,
    PatternKind::Random(0.125),
    PatternKind::Random(0.5),
    PatternKind::Full,
    PatternKind::EmptyAndFullRows,
];

/// A spread of cases for one backend: every block shape given, patterns from one block to
/// full (with empty rows), both layouts, α/β, n not a power of two.
pub fn cases(backend: Backend, blocks: &[BlockShape], rng: &mut StdRng) -> Vec<Case> {
    let mut out = Vec::new();
    for (i, &block) in blocks.iter().enumerate() {
        for (j, &kind) in KINDS.iter().enumerate() {
            let (alpha, beta) = [(1.0, 0.0), (0.5, 1.0), (-1.25, 0.75), (2.0, -1.0)][(i + j) % 4];
            out.push(Case {
                // Grids chosen so m and k are not powers of two and stay a few hundred wide.
                block_rows: (640 / block.rows).max(3) - (i % 2),
                block_cols: (768 / block.cols).max(3) - (j % 2),
                block,
                kind,
                n: [264, 520, 136, 1000][(i + 2 * j) % 4],
                b_layout: super::layouts()[(i + j) % 2],
                c_layout: super::layouts()[(i / 2 + j) % 2],
                alpha,
                beta,
                backend,
                ld_pad: 0,
                bias: false,
                activation: Activation::None,
            });
            let _ = rng;
        }
    }
    out
}

/// Every case of `cases(backend, blocks)` against the f64 oracle, the type pairs alternating.
pub fn sweep(test: &str, backend: Backend, blocks: &[BlockShape]) {
    let Some(ctx) = device(test) else { return };
    let mut rng = StdRng::seed_from_u64(seed());
    let list = cases(backend, blocks, &mut rng);
    for (idx, case) in list.iter().enumerate() {
        // Alternate input types and outputs so every combination is covered (on the Hopper
        // path, f32 output runs on the any-block rows).
        check_combination(&ctx, case, idx, &mut rng);
    }
    println!("{test}: {} cases passed", list.len());
}

/// Uploads A and a fresh random B (`k x n`), runs the same launch 100 times with a zeroed C
/// (`m x n`), both of `layout`, and asserts that C is bitwise the same every time.
pub fn assert_repeats_bitwise<T: Element, O: Element>(
    stream: &Arc<CudaStream>,
    a: &BsrMatrix<T>,
    n: usize,
    layout: Layout,
    opts: &SpmmOptions,
    rng: &mut StdRng,
) {
    let da = DeviceBsr::upload(a, stream).unwrap();
    let db = stream.clone_htod(&random_vec::<T>(a.k() * n, rng)).unwrap();
    let (da, db) = (&da, &db);
    let (m, k) = (da.m(), da.k());
    let mut dc = stream.alloc_zeros::<O>(m * n).unwrap();
    let mut first: Option<Vec<u32>> = None;
    for run in 0..100 {
        spmm(
            da,
            Dense::device(db, k, n, layout),
            DenseMut::device(&mut dc, m, n, layout),
            opts,
        )
        .unwrap();
        // f16/bf16 -> f32 is exact, so the f32 bits tell every output bit apart.
        let bits: Vec<u32> = stream
            .clone_dtoh(&dc)
            .unwrap()
            .iter()
            .map(|v| v.to_f32().to_bits())
            .collect();
        match &first {
            None => first = Some(bits),
            Some(f) => assert!(*f == bits, "n {n}: run {run} differs from run 0"),
        }
    }
}

/// The same launch 100 times gives bitwise the same C (inputs and C of type T).
pub fn determinism<T: Element>(test: &str, backend: Backend, block: BlockShape, layout: Layout) {
    let Some(ctx) = device(test) else { return };
    if backend == Backend::Hopper && !is_hopper(&ctx) {
        println!("SKIPPED {test}: not an sm_90 device");
        return;
    }
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    let mask = BlockMask::random_per_row(
        2048 / block.rows,
        2048 / block.cols,
        (2048 / block.cols) / 4,
        &mut rng,
    )
    .unwrap();
    let a = BsrMatrix::from_block_mask(&mask, block, |_, _| super::nonzero::<T>(&mut rng)).unwrap();
    let n = 1024;
    let opts = SpmmOptions::new().backend(backend);
    assert_repeats_bitwise::<T, T>(&stream, &a, n, layout, &opts, &mut rng);
    println!("{test}: 100 runs bitwise identical");
}
