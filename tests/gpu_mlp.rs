//! GPU tests of the gated product (`Epilogue::gated`: the Decode family, and the Hopper
//! family's gated rows, cpp/spmm/sm90/gated.hpp) and of `SparseMlp` (`--features full`):
//! against an f64 oracle written here (gate and up from the dense forms of the two weights),
//! against the CPU backend, NaN-poisoned outputs, every n of the decode range and the chunked
//! row past it, odd n on Hopper, both layouts, odd leading dimensions, bias and every
//! activation, empty gate or up block-rows, f16/bf16 and FP8 (W8A16) weights, repeats bitwise;
//! a decode step of the MLP captured in a CUDA graph and replayed 100 times bitwise. Without
//! a GPU each test says SKIPPED (with SPARSEK_REQUIRE_GPU=1 it fails instead).
#![cfg(feature = "full")]
#![allow(deprecated)]

mod common;

use std::sync::Arc;

use common::{
    act64, device, is_hopper, nonzero, outside_untouched, random_vec, reference, rel_err, seed,
    tolerance,
};
use cudarc::driver::{CudaContext, CudaSlice};
use rand::{rngs::StdRng, Rng, SeedableRng};
use sparsek::quantize::BlockGranularity;
use sparsek::{
    bf16, f16, spmm_fused, Activation, Backend, BlockMask, BlockShape, BsrMatrix, Dense, DenseMut,
    DenseShape, DeviceBsr, Element, Epilogue, Error, Layout, SparseMlp, SpmmOptions, Vector,
    F8E4M3,
};

#[derive(Debug, Clone, Copy)]
struct GatedCase {
    /// Block-rows of the gate (and of the up) weight.
    pairs: usize,
    block_cols: usize,
    block: BlockShape,
    density: f64,
    n: usize,
    b_layout: Layout,
    c_layout: Layout,
    /// Padding of B's and of C's leading dimensions.
    b_pad: usize,
    c_pad: usize,
    bias: bool,
    activation: Activation,
    alpha: f32,
    backend: Backend,
    /// Block-row 0 of the gate, block-row 1 of the up weight and block-row 2 of both empty.
    empty_rows: bool,
    /// More launches after the first, each bitwise equal to it.
    repeats: usize,
}

fn weight<T: Element>(
    rows: usize,
    cols: usize,
    block: BlockShape,
    density: f64,
    rng: &mut StdRng,
) -> BsrMatrix<T> {
    weight_with_empty(rows, cols, block, density, &[], rng)
}

/// A random weight whose block-rows `empty` have no block.
fn weight_with_empty<T: Element>(
    rows: usize,
    cols: usize,
    block: BlockShape,
    density: f64,
    empty: &[usize],
    rng: &mut StdRng,
) -> BsrMatrix<T> {
    let mask = BlockMask::from_fn(rows, cols, |r, _| {
        !empty.contains(&r) && rng.random_bool(density)
    })
    .unwrap();
    BsrMatrix::from_block_mask(&mask, block, |_, _| nonzero(rng)).unwrap()
}

/// The gated product's f64 oracle: `act(α·G·B + bias[g]) · (α·U·B + bias[u])` (m/2 x n,
/// row-major), with the bias in the interleaved matrix's row order.
fn gated_reference<T: Element>(
    gate: &BsrMatrix<T>,
    up: &BsrMatrix<T>,
    b: &[T],
    bs: &DenseShape,
    bias: Option<&[T]>,
    act: Activation,
    alpha: f32,
) -> Vec<f64> {
    let none: [T; 0] = [];
    let cs = DenseShape::packed(gate.m(), bs.cols, Layout::RowMajor);
    let g = reference(gate, b, bs, &none, &cs, alpha, 0.0);
    let u = reference(up, b, bs, &none, &cs, alpha, 0.0);
    let (bm, n) = (gate.block().rows, bs.cols);
    (0..gate.m() * n)
        .map(|idx| {
            let i = idx / n.max(1);
            let (gr, ur) = (2 * (i / bm) * bm + i % bm, (2 * (i / bm) + 1) * bm + i % bm);
            let (bg, bu) = bias.map_or((0.0, 0.0), |b| {
                (b[gr].to_f32() as f64, b[ur].to_f32() as f64)
            });
            act64(act, g[idx] + bg) * (u[idx] + bu)
        })
        .collect()
}

/// One gated case on the CPU backend and the GPU (C poisoned with NaN), checked against
/// the oracle; nothing outside C's view is written.
fn check_gated<T: Element, O: Element>(ctx: &Arc<CudaContext>, case: &GatedCase, rng: &mut StdRng) {
    let stream = ctx.default_stream();
    let (gate_empty, up_empty): (&[usize], &[usize]) = if case.empty_rows {
        (&[0, 2], &[1, 2])
    } else {
        (&[], &[])
    };
    let (rows, cols, block, d) = (case.pairs, case.block_cols, case.block, case.density);
    let gate = weight_with_empty::<T>(rows, cols, block, d, gate_empty, rng);
    let up = weight_with_empty::<T>(rows, cols, block, d, up_empty, rng);
    let gu = BsrMatrix::interleave_block_rows(&gate, &up).unwrap();
    let (m, k, n) = (gate.m(), gate.k(), case.n);
    let mut bs = DenseShape::packed(k, n, case.b_layout);
    let mut cs = DenseShape::packed(m, n, case.c_layout);
    bs.ld += case.b_pad;
    cs.ld += case.c_pad;
    let (b_len, c_len) = (bs.required_len().unwrap(), cs.required_len().unwrap());
    let b: Vec<T> = random_vec(b_len, rng);
    let bias: Vec<T> = random_vec(2 * m, rng);
    let c0 = vec![O::from_f32(f32::NAN); c_len];
    let want = gated_reference(
        &gate,
        &up,
        &b,
        &bs,
        case.bias.then_some(&bias[..]),
        case.activation,
        case.alpha,
    );
    let opts = SpmmOptions::new().alpha(case.alpha);
    let mut epi = Epilogue::new().activation(case.activation).gated(true);
    if case.bias {
        epi = epi.bias(Vector::Host(&bias));
    }
    let mut c_cpu = c0.clone();
    spmm_fused(
        &gu,
        Dense::host(&b, k, n, case.b_layout).with_ld(bs.ld),
        DenseMut::host(&mut c_cpu, m, n, case.c_layout).with_ld(cs.ld),
        &epi,
        &opts,
    )
    .unwrap();
    let (cpu_err, cpu_bad) = rel_err(&c_cpu, &cs, &want);

    let dgu = DeviceBsr::upload(&gu, &stream).unwrap();
    let db = stream.clone_htod(&b).unwrap();
    let dbias = stream.clone_htod(&bias).unwrap();
    let mut dc = stream.clone_htod(&c0).unwrap();
    let mut depi = Epilogue::new().activation(case.activation).gated(true);
    if case.bias {
        depi = depi.bias(Vector::Device(&dbias));
    }
    spmm_fused(
        &dgu,
        Dense::device(&db, k, n, case.b_layout).with_ld(bs.ld),
        DenseMut::device(&mut dc, m, n, case.c_layout).with_ld(cs.ld),
        &depi,
        &opts.backend(case.backend),
    )
    .unwrap_or_else(|e| panic!("{case:?}: {e}"));
    let out = stream.clone_dtoh(&dc).unwrap();
    stream.synchronize().unwrap();
    for rep in 0..case.repeats {
        stream.memcpy_htod(&c0, &mut dc).unwrap();
        spmm_fused(
            &dgu,
            Dense::device(&db, k, n, case.b_layout).with_ld(bs.ld),
            DenseMut::device(&mut dc, m, n, case.c_layout).with_ld(cs.ld),
            &depi,
            &opts.backend(case.backend),
        )
        .unwrap();
        let again = stream.clone_dtoh(&dc).unwrap();
        assert!(
            again
                .iter()
                .zip(&out)
                .all(|(a, b)| a.to_f32().to_bits() == b.to_f32().to_bits()),
            "{case:?}: repeat {rep} differs from the first launch"
        );
    }
    let (err, bad) = rel_err(&out, &cs, &want);
    let tol = tolerance(T::DTYPE, O::DTYPE);
    assert_eq!(bad, 0, "{case:?}: {bad} outputs unwritten or not finite");
    assert_eq!(cpu_bad, 0, "{case:?}: CPU left {cpu_bad} outputs");
    assert!(err < tol, "{case:?}: GPU rel err {err:.3e} > {tol:.0e}");
    assert!(cpu_err < tol, "{case:?}: CPU rel err {cpu_err:.3e}");
    assert!(
        outside_untouched(&out, &c0, &cs),
        "{case:?}: written outside the view"
    );
}

fn gated_cases() -> Vec<GatedCase> {
    let acts = [
        Activation::Silu,
        Activation::GeluTanh,
        Activation::None,
        Activation::Relu,
    ];
    let blocks = [
        BlockShape::new(128, 128),
        BlockShape::new(64, 64),
        BlockShape::new(32, 32),
        BlockShape::new(48, 32),
        BlockShape::new(16, 64),
    ];
    // The decode range, odd n, and past it (the chunked row: 130, 257).
    let ns = [1usize, 3, 7, 8, 16, 33, 64, 100, 128, 130, 257];
    let mut out = Vec::new();
    for (i, &n) in ns.iter().enumerate() {
        for (j, &block) in blocks.iter().enumerate() {
            let v = i * blocks.len() + j;
            out.push(GatedCase {
                pairs: (512 / block.rows).max(2) - v % 3,
                block_cols: (768 / block.cols).max(2) + v % 2,
                block,
                density: [0.5, 0.25, 0.1, 1.0][v % 4],
                n,
                b_layout: [Layout::ColMajor, Layout::RowMajor][(v / 2) % 2],
                c_layout: [Layout::ColMajor, Layout::RowMajor][v % 2],
                b_pad: [0, 0, 3, 8][v % 4],
                c_pad: [0, 0, 3, 8][v % 4],
                bias: v % 3 != 0,
                activation: acts[v % 4],
                alpha: [1.0, 0.5, -1.25][v % 3],
                backend: if v % 5 == 0 {
                    Backend::Auto
                } else {
                    Backend::Decode
                },
                empty_rows: false,
                repeats: 0,
            });
        }
    }
    out
}

#[test]
fn gated_product_matches_reference() {
    let Some(ctx) = device("gated_product_matches_reference") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    let cases = gated_cases();
    for (i, case) in cases.iter().enumerate() {
        match i % 4 {
            0 => check_gated::<f16, f16>(&ctx, case, &mut rng),
            1 => check_gated::<bf16, bf16>(&ctx, case, &mut rng),
            2 => check_gated::<f16, f32>(&ctx, case, &mut rng),
            _ => check_gated::<bf16, f32>(&ctx, case, &mut rng),
        }
    }
    println!(
        "gated_product_matches_reference: {} cases passed",
        cases.len()
    );
}

/// The Hopper family's gated rows (cpp/spmm/sm90/gated.hpp) forced with `Backend::Hopper`:
/// f16/bf16 in, C f16/bf16/f32, both layouts of B and C, padded and odd leading dimensions
/// of C, every activation, α, bias, blocks up to 128 high (64-high ones on the transposed
/// row), n = 1, 7, 64, 129, 600, empty gate and up block-rows, C NaN-poisoned and nothing
/// outside it written, some cases launched 100 more times bitwise.
#[test]
fn gated_product_on_hopper_matches_reference() {
    let Some(ctx) = device("gated_product_on_hopper_matches_reference") else {
        return;
    };
    if !is_hopper(&ctx) {
        println!("gated_product_on_hopper_matches_reference: SKIPPED (not an sm_90 device)");
        return;
    }
    let mut rng = StdRng::seed_from_u64(seed());
    let acts = [
        Activation::Silu,
        Activation::GeluTanh,
        Activation::None,
        Activation::Relu,
    ];
    let blocks = [
        BlockShape::new(128, 128),
        BlockShape::new(64, 64),
        BlockShape::new(96, 64),
        BlockShape::new(128, 64),
        BlockShape::new(64, 128),
    ];
    let mut count = 0;
    for (j, &block) in blocks.iter().enumerate() {
        for (i, &n) in [1usize, 7, 64, 129, 600].iter().enumerate() {
            let v = j * 5 + i;
            // Row-major B needs 16-byte rows on Hopper (TMA): odd n take column-major B.
            let b_layout = if n % 8 == 0 && v % 2 == 0 {
                Layout::RowMajor
            } else {
                Layout::ColMajor
            };
            let case = GatedCase {
                pairs: (640 / block.rows).max(4) - v % 2,
                block_cols: (512 / block.cols).max(3) + v % 3,
                block,
                density: [0.5, 1.0, 0.3][v % 3],
                n,
                b_layout,
                c_layout: [Layout::ColMajor, Layout::RowMajor][(v / 2) % 2],
                b_pad: [0, 8][v % 2],
                c_pad: [0, 3, 8, 0][v % 4],
                bias: v % 3 != 1,
                activation: acts[v % 4],
                alpha: [1.0, 0.5, -1.25][v % 3],
                backend: Backend::Hopper,
                empty_rows: v % 2 == 0,
                repeats: if v % 6 == 0 { 100 } else { 0 },
            };
            match v % 4 {
                0 => check_gated::<f16, f16>(&ctx, &case, &mut rng),
                1 => check_gated::<bf16, bf16>(&ctx, &case, &mut rng),
                2 => check_gated::<f16, f32>(&ctx, &case, &mut rng),
                _ => check_gated::<bf16, f32>(&ctx, &case, &mut rng),
            }
            count += 1;
        }
    }
    // Auto at n = 1 and 16 (Decode) and 128 and 512 (Hopper's gated rows), both dtypes.
    for (i, &n) in [1usize, 16, 128, 512].iter().enumerate() {
        let case = GatedCase {
            pairs: 6,
            block_cols: 5,
            block: BlockShape::new(128, 128),
            density: 0.5,
            n,
            b_layout: Layout::ColMajor,
            c_layout: Layout::ColMajor,
            b_pad: 0,
            c_pad: 0,
            bias: true,
            activation: Activation::Silu,
            alpha: 1.0,
            backend: Backend::Auto,
            empty_rows: true,
            repeats: 0,
        };
        if i % 2 == 0 {
            check_gated::<f16, f16>(&ctx, &case, &mut rng);
        } else {
            check_gated::<bf16, f32>(&ctx, &case, &mut rng);
        }
        count += 1;
    }
    println!("gated_product_on_hopper_matches_reference: {count} cases passed");
}

/// The families without the gated epilogue refuse it by name; a gated β ≠ 0 is refused
/// before anything runs, and C is untouched. The Hopper family runs it (its gated rows).
#[test]
fn gated_refusals_leave_c_untouched() {
    let Some(ctx) = device("gated_refusals_leave_c_untouched") else {
        return;
    };
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    let block = BlockShape::new(64, 64);
    let gu = BsrMatrix::interleave_block_rows(
        &weight::<f16>(4, 4, block, 0.5, &mut rng),
        &weight::<f16>(4, 4, block, 0.5, &mut rng),
    )
    .unwrap();
    let dgu = DeviceBsr::upload(&gu, &stream).unwrap();
    let n = 8;
    let b = stream
        .clone_htod(&random_vec::<f16>(256 * n, &mut rng))
        .unwrap();
    let c0 = vec![f16::from_f32(7.0); 256 * n];
    let mut c = stream.clone_htod(&c0).unwrap();
    let epi = Epilogue::new().activation(Activation::Silu).gated(true);
    let e = spmm_fused(
        &dgu,
        Dense::device(&b, 256, n, Layout::ColMajor),
        DenseMut::device(&mut c, 256, n, Layout::ColMajor),
        &epi,
        &SpmmOptions::new().backend(Backend::Wmma),
    )
    .unwrap_err();
    assert!(
        matches!(&e, Error::NotSupported { reason, .. } if reason.contains("gated")),
        "Wmma: {e}"
    );
    let e = spmm_fused(
        &dgu,
        Dense::device(&b, 256, n, Layout::ColMajor),
        DenseMut::device(&mut c, 256, n, Layout::ColMajor),
        &epi,
        &SpmmOptions::new().beta(1.0),
    )
    .unwrap_err();
    assert!(matches!(e, Error::Gated(_)), "{e}");
    let after = stream.clone_dtoh(&c).unwrap();
    assert!(after
        .iter()
        .zip(&c0)
        .all(|(a, b)| a.to_bits() == b.to_bits()));
    if is_hopper(&ctx) {
        // The gated rows take it; h (256 x 8 of the 512-row A) is written.
        let mut h = stream.clone_htod(&vec![f16::NAN; 256 * n]).unwrap();
        spmm_fused(
            &dgu,
            Dense::device(&b, 256, n, Layout::ColMajor),
            DenseMut::device(&mut h, 256, n, Layout::ColMajor),
            &epi,
            &SpmmOptions::new().backend(Backend::Hopper),
        )
        .unwrap();
        assert!(stream.clone_dtoh(&h).unwrap().iter().all(|v| v.is_finite()));
    }
}

/// The MLP's f64 oracle for one batch: h rounded to the intermediate's type (as the device
/// stores it), then `down·h` (row-major y, `batch x out`).
fn mlp_reference<T: Element>(
    gate: &BsrMatrix<T>,
    up: &BsrMatrix<T>,
    down: &BsrMatrix<T>,
    x: &[T],
    batch: usize,
    act: Activation,
    round: impl Fn(f64) -> T,
) -> Vec<f64> {
    let xs = DenseShape::packed(gate.k(), batch, Layout::ColMajor);
    let h = gated_reference(gate, up, x, &xs, None, act, 1.0); // inter x batch, row-major
    let inter = gate.m();
    // Column-major h (inter x batch) = row-major batch x inter, the device's layout.
    let mut hc = vec![T::from_f32(0.0); inter * batch];
    for i in 0..inter {
        for j in 0..batch {
            hc[j * inter + i] = round(h[i * batch + j]);
        }
    }
    let hs = DenseShape::packed(inter, batch, Layout::ColMajor);
    let none: [T; 0] = [];
    let ys = DenseShape::packed(down.m(), batch, Layout::RowMajor);
    let y = reference(down, &hc, &hs, &none, &ys, 1.0, 0.0); // out x batch
                                                             // As row-major batch x out.
    let out = down.m();
    (0..batch * out)
        .map(|idx| y[(idx % out) * batch + idx / out])
        .collect()
}

fn rel_err_flat<O: Element>(out: &[O], want: &[f64]) -> (f64, usize) {
    common::rel_err_values(out, want)
}

/// (hidden, inter, gate/up blocks, down blocks, density)
type MlpShape = (usize, usize, (usize, usize), (usize, usize), f64);
const MLP_SHAPES: [MlpShape; 3] = [
    (512, 1536, (128, 128), (64, 64), 0.5),
    (1024, 2048, (64, 64), (128, 128), 0.25),
    (768, 1024, (32, 32), (32, 64), 0.5),
];

#[test]
fn sparse_mlp_matches_reference() {
    let Some(ctx) = device("sparse_mlp_matches_reference") else {
        return;
    };
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    let mut count = 0;
    for (s, &(hidden, inter, gb, db, density)) in MLP_SHAPES.iter().enumerate() {
        let gb = BlockShape::new(gb.0, gb.1);
        let db = BlockShape::new(db.0, db.1);
        let gate = weight::<f16>(inter / gb.rows, hidden / gb.cols, gb, density, &mut rng);
        let up = weight::<f16>(inter / gb.rows, hidden / gb.cols, gb, density, &mut rng);
        let down = weight::<f16>(hidden / db.rows, inter / db.cols, db, density, &mut rng);
        let act = [Activation::Silu, Activation::GeluTanh][s % 2];
        let host = SparseMlp::new(&gate, &up, down.clone(), act).unwrap();
        let dev = host.upload(&stream).unwrap();
        for batch in [1usize, 5, 16, 64, 128, 200, 512] {
            let x: Vec<f16> = random_vec(batch * hidden, &mut rng);
            let want = mlp_reference(&gate, &up, &down, &x, batch, act, f16::from_f64);
            let dx = stream.clone_htod(&x).unwrap();
            let mut dh = stream.alloc_zeros::<f16>(batch * inter).unwrap();
            let mut dy = stream.clone_htod(&vec![f32::NAN; batch * hidden]).unwrap();
            dev.forward(&dx, batch, &mut dh, &mut dy).unwrap();
            let y = stream.clone_dtoh(&dy).unwrap();
            let (err, bad) = rel_err_flat(&y, &want);
            assert_eq!(bad, 0, "shape {s} batch {batch}: {bad} outputs not written");
            assert!(err < 5e-3, "shape {s} batch {batch}: GPU rel err {err:.3e}");
            let mut h = vec![f16::ZERO; batch * inter];
            let mut yc = vec![f32::NAN; batch * hidden];
            host.forward(&x, batch, &mut h, &mut yc).unwrap();
            let (cerr, cbad) = rel_err_flat(&yc, &want);
            assert!(
                cbad == 0 && cerr < 5e-3,
                "shape {s} batch {batch}: CPU rel err {cerr:.3e}"
            );
            count += 1;
        }
        // bf16 weights and activations, bf16 out.
        let to_bf = |m: &BsrMatrix<f16>| {
            BsrMatrix::from_parts(
                m.m(),
                m.k(),
                m.block(),
                m.row_ptr().to_vec(),
                m.col_idx().to_vec(),
                m.values()
                    .iter()
                    .map(|v| bf16::from_f32(v.to_f32()))
                    .collect(),
            )
            .unwrap()
        };
        let (gbf, ubf, dbf) = (to_bf(&gate), to_bf(&up), to_bf(&down));
        let dev = SparseMlp::new(&gbf, &ubf, dbf.clone(), act)
            .unwrap()
            .upload(&stream)
            .unwrap();
        for batch in [1usize, 9, 32] {
            let x: Vec<bf16> = random_vec(batch * hidden, &mut rng);
            let want = mlp_reference(&gbf, &ubf, &dbf, &x, batch, act, bf16::from_f64);
            let dx = stream.clone_htod(&x).unwrap();
            let mut dh = stream.alloc_zeros::<bf16>(batch * inter).unwrap();
            let mut dy = stream
                .clone_htod(&vec![bf16::from_f32(f32::NAN); batch * hidden])
                .unwrap();
            dev.forward(&dx, batch, &mut dh, &mut dy).unwrap();
            let y = stream.clone_dtoh(&dy).unwrap();
            let (err, bad) = rel_err_flat(&y, &want);
            assert!(
                bad == 0 && err < 2e-2,
                "bf16 shape {s} batch {batch}: rel err {err:.3e}, {bad} bad"
            );
            count += 1;
        }
    }
    println!("sparse_mlp_matches_reference: {count} cases passed");
}

/// A host SwiGLU MLP of FP8 E4M3 weights at half their `blk` blocks, quantized at `gran`.
#[allow(deprecated)]
fn fp8_mlp(
    hidden: usize,
    inter: usize,
    blk: BlockShape,
    gran: BlockGranularity,
    rng: &mut StdRng,
) -> SparseMlp<sparsek::QuantizedBsr<F8E4M3>> {
    let mut w = |rows: usize, cols: usize| {
        let mask = BlockMask::random(rows / blk.rows, cols / blk.cols, 0.5, rng).unwrap();
        let m =
            BsrMatrix::from_block_mask(&mask, blk, |_, _| rng.random_range(-2.0f32..2.0)).unwrap();
        m.quantize_fp8::<F8E4M3>(gran).unwrap()
    };
    let (g, u, d) = (w(inter, hidden), w(inter, hidden), w(hidden, inter));
    SparseMlp::new_fp8(&g, &u, d, Activation::Silu).unwrap()
}

/// FP8 weights (W8A16): the device MLP against the host one (the CPU reference of the FP8
/// products) and the f64 oracle on the dequantized weights.
#[test]
fn sparse_mlp_fp8_matches_reference() {
    let Some(ctx) = device("sparse_mlp_fp8_matches_reference") else {
        return;
    };
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    let (hidden, inter) = (512, 1024);
    let mut count = 0;
    for (g, &(gran, gb)) in [
        (BlockGranularity::PerBlock, 128),
        (BlockGranularity::PerTensor, 64),
    ]
    .iter()
    .enumerate()
    {
        let host = fp8_mlp(hidden, inter, BlockShape::new(gb, gb), gran, &mut rng);
        let dev = host.upload(&stream).unwrap();
        // 64 and above: Auto runs both products on the Hopper family's W8A16 rows.
        for batch in [1usize, 7, 16, 64, 65, 129, 333] {
            let x: Vec<f16> = random_vec(batch * hidden, &mut rng);
            let dx = stream.clone_htod(&x).unwrap();
            let mut dh = stream.alloc_zeros::<f16>(batch * inter).unwrap();
            let mut dy = stream.clone_htod(&vec![f32::NAN; batch * hidden]).unwrap();
            dev.forward_fp8(&dx, batch, &mut dh, &mut dy).unwrap();
            let y = stream.clone_dtoh(&dy).unwrap();
            let mut h = vec![f16::ZERO; batch * inter];
            let mut yc = vec![f32::NAN; batch * hidden];
            host.forward_fp8(&x, batch, &mut h, &mut yc).unwrap();
            let want: Vec<f64> = yc.iter().map(|&v| v as f64).collect();
            let (err, bad) = rel_err_flat(&y, &want);
            assert!(
                bad == 0 && err < 1e-2,
                "fp8 {g} batch {batch}: GPU vs CPU rel err {err:.3e}, {bad} bad"
            );
            count += 1;
        }
    }
    println!("sparse_mlp_fp8_matches_reference: {count} cases passed");
}

/// FP8 weights (W8A16) on the Hopper family's W8A16 rows (`with_backend(Backend::Hopper)`, both
/// products; sm_90 only): per-block and per-tensor scales (the latter applied before the
/// nonlinearity), 128-high and 64-high blocks 128 wide, biases on both products (h's f16 type on the
/// gated one, y's f32 on the down one), odd batches, against the host MLP and the f64 oracle's
/// tolerance; y NaN-poisoned. (The rows' k-tiles are 128 deep: 64-wide blocks run on Decode.)
#[test]
#[allow(deprecated)]
fn sparse_mlp_fp8_on_hopper_with_bias() {
    use sparsek::{interleave_bias, MlpBias};
    let Some(ctx) = device("sparse_mlp_fp8_on_hopper_with_bias") else {
        return;
    };
    if !is_hopper(&ctx) {
        println!("sparse_mlp_fp8_on_hopper_with_bias: SKIPPED (not an sm_90 device)");
        return;
    }
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    let (hidden, inter) = (640, 1152);
    let mut count = 0;
    for (g, &(gran, gb)) in [
        (BlockGranularity::PerBlock, 128),
        (BlockGranularity::PerTensor, 128),
        (BlockGranularity::PerBlock, 64),
    ]
    .iter()
    .enumerate()
    {
        let host = fp8_mlp(hidden, inter, BlockShape::new(gb, 128), gran, &mut rng);
        let dev = host.upload(&stream).unwrap().with_backend(Backend::Hopper);
        let bg: Vec<f16> = random_vec(inter, &mut rng);
        let bu: Vec<f16> = random_vec(inter, &mut rng);
        let b_gu = interleave_bias(&bg, &bu, gb).unwrap();
        let b_down: Vec<f32> = random_vec(hidden, &mut rng);
        let (d_gu, d_down) = (
            stream.clone_htod(&b_gu).unwrap(),
            stream.clone_htod(&b_down).unwrap(),
        );
        for batch in [1usize, 7, 64, 129, 333] {
            let x: Vec<f16> = random_vec(batch * hidden, &mut rng);
            let dx = stream.clone_htod(&x).unwrap();
            let mut dh = stream.alloc_zeros::<f16>(batch * inter).unwrap();
            let mut dy = stream.clone_htod(&vec![f32::NAN; batch * hidden]).unwrap();
            let dbias = MlpBias {
                gate_up: Some(Vector::Device(&d_gu)),
                down: Some(Vector::Device(&d_down)),
            };
            dev.forward_with_bias(&dx, batch, &mut dh, &mut dy, &dbias)
                .unwrap_or_else(|e| panic!("fp8 {g} batch {batch}: {e}"));
            let y = stream.clone_dtoh(&dy).unwrap();
            let mut h = vec![f16::ZERO; batch * inter];
            let mut yc = vec![f32::NAN; batch * hidden];
            let hbias = MlpBias {
                gate_up: Some(Vector::Host(&b_gu)),
                down: Some(Vector::Host(&b_down)),
            };
            host.forward_with_bias(&x, batch, &mut h, &mut yc, &hbias)
                .unwrap();
            let want: Vec<f64> = yc.iter().map(|&v| v as f64).collect();
            let (err, bad) = rel_err_flat(&y, &want);
            assert!(
                bad == 0 && err < 1e-2,
                "fp8 {g} batch {batch}: GPU (Hopper) vs CPU rel err {err:.3e}, {bad} bad"
            );
            count += 1;
        }
    }
    println!("sparse_mlp_fp8_on_hopper_with_bias: {count} cases passed");
}

/// A decode step of the MLP (gated product + down product) captured in a CUDA graph:
/// 100 replays bitwise equal to the eager step, and a replay after new input equal to the
/// eager step on it.
#[test]
fn mlp_step_replays_in_a_cuda_graph() {
    use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
    let Some(ctx) = device("mlp_step_replays_in_a_cuda_graph") else {
        return;
    };
    // SAFETY: every buffer of this test is created, used and freed on `stream` alone, so
    // stream order is all the synchronization there is (cudarc's per-buffer events,
    // recorded outside the capture, are not wanted inside it).
    unsafe { ctx.disable_event_tracking() };
    let stream = ctx.new_stream().unwrap();
    let mut rng = StdRng::seed_from_u64(seed());
    for (s, &(hidden, inter, gb, db, density)) in MLP_SHAPES.iter().enumerate() {
        let gb = BlockShape::new(gb.0, gb.1);
        let db = BlockShape::new(db.0, db.1);
        let gate = weight::<f16>(inter / gb.rows, hidden / gb.cols, gb, density, &mut rng);
        let up = weight::<f16>(inter / gb.rows, hidden / gb.cols, gb, density, &mut rng);
        let down = weight::<f16>(hidden / db.rows, inter / db.cols, db, density, &mut rng);
        let mlp = SparseMlp::new(&gate, &up, down, Activation::Silu)
            .unwrap()
            .upload(&stream)
            .unwrap();
        let batch = [1, 7, 16][s];
        let x0: Vec<f16> = random_vec(batch * hidden, &mut rng);
        let x1: Vec<f16> = random_vec(batch * hidden, &mut rng);
        let mut x = stream.clone_htod(&x0).unwrap();
        let mut h = stream.alloc_zeros::<f16>(batch * inter).unwrap();
        let mut y = stream.alloc_zeros::<f32>(batch * hidden).unwrap();
        let poison = vec![f32::NAN; batch * hidden];
        let step = |x: &CudaSlice<f16>, h: &mut CudaSlice<f16>, y: &mut CudaSlice<f32>| {
            mlp.forward(x, batch, h, y).unwrap();
        };
        let mut eager = Vec::new();
        for xi in [&x0, &x1] {
            stream.memcpy_htod(xi, &mut x).unwrap();
            stream.memcpy_htod(&poison, &mut y).unwrap();
            step(&x, &mut h, &mut y);
            eager.push(stream.clone_dtoh(&y).unwrap());
        }
        assert!(
            eager.iter().all(|e| e.iter().all(|v| v.is_finite())),
            "shape {s}: the eager step left outputs unwritten"
        );
        stream.memcpy_htod(&x0, &mut x).unwrap();
        stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .unwrap();
        step(&x, &mut h, &mut y);
        let graph = stream
            .end_capture(CUgraphInstantiate_flags(0))
            .unwrap_or_else(|e| panic!("shape {s}: the MLP step did not capture: {e}"))
            .expect("a captured step has nodes");
        for rep in 0..100 {
            stream.memcpy_htod(&poison, &mut y).unwrap();
            graph.launch().unwrap();
            let got = stream.clone_dtoh(&y).unwrap();
            assert!(
                got.iter()
                    .zip(&eager[0])
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "shape {s}: replay {rep} differs from the eager step"
            );
        }
        stream.memcpy_htod(&x1, &mut x).unwrap();
        stream.memcpy_htod(&poison, &mut y).unwrap();
        graph.launch().unwrap();
        let got = stream.clone_dtoh(&y).unwrap();
        assert!(
            got.iter()
                .zip(&eager[1])
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "shape {s}: the replay on new input differs from eager"
        );
    }
    println!("mlp_step_replays_in_a_cuda_graph: 3 shapes, 100 replays each, bitwise");
}

/// `A·B` in f64 (m x n, row-major) for a column-major B (`k x n`, ld k): the sparse blocks
/// only, block-rows in parallel (the layer sizes are too large for the dense oracle).
fn sparse_reference<T: Element>(a: &BsrMatrix<T>, b: &[T], n: usize) -> Vec<f64> {
    use rayon::prelude::*;
    let (bm, bk, k) = (a.block().rows, a.block().cols, a.k());
    let bf: Vec<f64> = b.iter().map(|v| v.to_f32() as f64).collect();
    let mut out = vec![0f64; a.m() * n];
    let rows: Vec<_> = a.block_rows().collect();
    out.par_chunks_mut(bm * n).zip(rows).for_each(|(out, row)| {
        for (j, &col) in row.col_idx.iter().enumerate() {
            let blk = &row.values[j * bm * bk..][..bm * bk];
            for r in 0..bm {
                for c in 0..n {
                    let x = &bf[c * k + col as usize * bk..][..bk];
                    let s: f64 = blk[r * bk..][..bk]
                        .iter()
                        .zip(x)
                        .map(|(w, x)| w.to_f32() as f64 * x)
                        .sum();
                    out[r * n + c] += s;
                }
            }
        }
    });
    out
}

/// The layer sizes (4096x4096, 14336x4096, 4096x14336; 128² and 64² blocks; d = 0.5
/// and 0.25; n = 1, 7, 16, 64, 96) through `Auto` (Decode; at n = 96 Hopper for 4096x14336's
/// 56 MiB of 128² blocks, cpp/spmm/operation.hpp hopper_takes_plain), and Llama-3-8B's gate and
/// up as one gated product, against the f64 oracle, with NaN-poisoned outputs.
#[test]
fn llama_shapes_match_reference() {
    let Some(ctx) = device("llama_shapes_match_reference") else {
        return;
    };
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    let mut count = 0;
    for (s, &(out, inp)) in [(4096usize, 4096usize), (14336, 4096), (4096, 14336)]
        .iter()
        .enumerate()
    {
        for (b, &bs) in [128usize, 64].iter().enumerate() {
            let block = BlockShape::new(bs, bs);
            let density = [0.5, 0.25][(s + b) % 2];
            let w = weight::<f16>(out / bs, inp / bs, block, density, &mut rng);
            let dw = DeviceBsr::upload(&w, &stream).unwrap();
            for n in [1usize, 7, 16, 64, 96] {
                let x: Vec<f16> = random_vec(inp * n, &mut rng);
                let want = sparse_reference(&w, &x, n);
                let dx = stream.clone_htod(&x).unwrap();
                let mut dy = stream
                    .clone_htod(&vec![f16::from_f32(f32::NAN); out * n])
                    .unwrap();
                spmm_fused(
                    &dw,
                    Dense::device(&dx, inp, n, Layout::ColMajor),
                    DenseMut::device(&mut dy, out, n, Layout::ColMajor),
                    &Epilogue::new(),
                    &SpmmOptions::new(),
                )
                .unwrap();
                let y = stream.clone_dtoh(&dy).unwrap();
                let cs = DenseShape::packed(out, n, Layout::ColMajor);
                let (err, bad) = rel_err(&y, &cs, &want);
                assert!(
                    bad == 0 && err < 2e-3,
                    "{out}x{inp} {bs}² d={density} n={n}: rel err {err:.3e}, {bad} bad"
                );
                count += 1;
            }
        }
    }
    // Gate and up of Llama-3-8B (14336 x 4096 each) as one gated product.
    let block = BlockShape::new(128, 128);
    let gate = weight::<f16>(112, 32, block, 0.5, &mut rng);
    let up = weight::<f16>(112, 32, block, 0.5, &mut rng);
    let gu = DeviceBsr::upload(
        &BsrMatrix::interleave_block_rows(&gate, &up).unwrap(),
        &stream,
    )
    .unwrap();
    for n in [1usize, 16, 64] {
        let x: Vec<f16> = random_vec(4096 * n, &mut rng);
        let (g, u) = (sparse_reference(&gate, &x, n), sparse_reference(&up, &x, n));
        let want: Vec<f64> = g
            .iter()
            .zip(&u)
            .map(|(&g, &u)| act64(Activation::Silu, g) * u)
            .collect();
        let dx = stream.clone_htod(&x).unwrap();
        let mut dh = stream
            .clone_htod(&vec![f16::from_f32(f32::NAN); 14336 * n])
            .unwrap();
        spmm_fused(
            &gu,
            Dense::device(&dx, 4096, n, Layout::ColMajor),
            DenseMut::device(&mut dh, 14336, n, Layout::ColMajor),
            &Epilogue::new().activation(Activation::Silu).gated(true),
            &SpmmOptions::new(),
        )
        .unwrap();
        let h = stream.clone_dtoh(&dh).unwrap();
        let (err, bad) = rel_err(&h, &DenseShape::packed(14336, n, Layout::ColMajor), &want);
        assert!(
            bad == 0 && err < 2e-3,
            "gated 14336x4096 n={n}: rel err {err:.3e}, {bad} bad"
        );
        count += 1;
    }
    println!("llama_shapes_match_reference: {count} cases passed");
}

/// Bit for bit equal (every element type widens to f32 exactly).
fn same_bits<T: Element>(now: &[T], before: &[T]) -> bool {
    now.len() == before.len()
        && now
            .iter()
            .zip(before)
            .all(|(a, b)| a.to_f32().to_bits() == b.to_f32().to_bits())
}

/// Issue 45: a device MLP whose y the down product refuses (a type the GPU does not write
/// for these weights; an FP8 y of FP8 weights) is a typed error before the gated product is
/// launched: h (NaN-poisoned) and y read back unchanged after synchronizing. The same
/// buffers with a valid y are accepted (h written).
#[test]
fn device_mlp_refuses_a_bad_y_before_launching_the_gated_product() {
    let Some(ctx) = device("device_mlp_refuses_a_bad_y_before_launching_the_gated_product") else {
        return;
    };
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    let (hidden, inter, batch) = (256, 512, 5);
    let blk = BlockShape::new(64, 64);
    let gate = weight::<f16>(inter / 64, hidden / 64, blk, 0.5, &mut rng);
    let up = weight::<f16>(inter / 64, hidden / 64, blk, 0.5, &mut rng);
    let down = weight::<f16>(hidden / 64, inter / 64, blk, 0.5, &mut rng);
    let mlp = SparseMlp::new(&gate, &up, down.clone(), Activation::Silu)
        .unwrap()
        .upload(&stream)
        .unwrap();
    let x = stream
        .clone_htod(&random_vec::<f16>(batch * hidden, &mut rng))
        .unwrap();
    let h0 = vec![f16::NAN; batch * inter];
    let mut h = stream.clone_htod(&h0).unwrap();

    // f16 weights write f16 or f32: a bf16 or an FP8 y is the down product's
    // UnsupportedTypes.
    let y0: Vec<bf16> = random_vec(batch * hidden, &mut rng);
    let mut y = stream.clone_htod(&y0).unwrap();
    let e = mlp.forward(&x, batch, &mut h, &mut y).unwrap_err();
    assert!(matches!(e, Error::UnsupportedTypes { .. }), "bf16 y: {e}");
    stream.synchronize().unwrap();
    assert!(
        same_bits(&stream.clone_dtoh(&h).unwrap(), &h0),
        "bf16 y: h written ({e})"
    );
    assert!(
        same_bits(&stream.clone_dtoh(&y).unwrap(), &y0),
        "bf16 y: y written ({e})"
    );
    let y0: Vec<F8E4M3> = random_vec(batch * hidden, &mut rng);
    let mut y = stream.clone_htod(&y0).unwrap();
    let e = mlp.forward(&x, batch, &mut h, &mut y).unwrap_err();
    assert!(matches!(e, Error::UnsupportedTypes { .. }), "E4M3 y: {e}");
    stream.synchronize().unwrap();
    assert!(
        same_bits(&stream.clone_dtoh(&h).unwrap(), &h0),
        "E4M3 y: h written ({e})"
    );
    assert!(
        same_bits(&stream.clone_dtoh(&y).unwrap(), &y0),
        "E4M3 y: y written ({e})"
    );

    // FP8 weights (W8A16): an FP8 y is the down product's Fp8Types.
    let q = |m: &BsrMatrix<f16>| {
        let f = BsrMatrix::from_parts(
            m.m(),
            m.k(),
            m.block(),
            m.row_ptr().to_vec(),
            m.col_idx().to_vec(),
            m.values().iter().map(|v| v.to_f32()).collect(),
        )
        .unwrap();
        f.quantize_fp8::<F8E4M3>(BlockGranularity::PerBlock)
            .unwrap()
    };
    let fp8 = SparseMlp::new_fp8(&q(&gate), &q(&up), q(&down), Activation::Silu)
        .unwrap()
        .upload(&stream)
        .unwrap();
    let y0: Vec<sparsek::F8E5M2> = random_vec(batch * hidden, &mut rng);
    let mut y = stream.clone_htod(&y0).unwrap();
    let e = fp8.forward_fp8(&x, batch, &mut h, &mut y).unwrap_err();
    assert!(matches!(e, Error::Fp8Types { .. }), "FP8 MLP, E5M2 y: {e}");
    stream.synchronize().unwrap();
    assert!(
        same_bits(&stream.clone_dtoh(&h).unwrap(), &h0),
        "FP8 MLP: h written ({e})"
    );
    assert!(
        same_bits(&stream.clone_dtoh(&y).unwrap(), &y0),
        "FP8 MLP: y written ({e})"
    );

    // The same x and h with an f32 y: accepted, h and y written.
    let mut y = stream.clone_htod(&vec![f32::NAN; batch * hidden]).unwrap();
    mlp.forward(&x, batch, &mut h, &mut y).unwrap();
    fp8.forward_fp8(&x, batch, &mut h, &mut y).unwrap();
    let (hv, yv) = (
        stream.clone_dtoh(&h).unwrap(),
        stream.clone_dtoh(&y).unwrap(),
    );
    assert!(
        hv.iter().all(|v| v.is_finite()) && yv.iter().all(|v| v.is_finite()),
        "a valid call left h or y unwritten"
    );
}

/// Issue 45: `SparseMlp::from_device` takes gate_up and down of one CUDA context; down in
/// a second context of the same GPU is `ContextMismatch` (the forward used to launch the
/// gated product, then refuse the down weight with h written).
#[test]
fn from_device_refuses_weights_of_two_contexts() {
    let Some(ctx) = device("from_device_refuses_weights_of_two_contexts") else {
        return;
    };
    let home = ctx.default_stream();
    let second = CudaContext::new_non_primary(ctx.ordinal(), 0).unwrap();
    assert_ne!(second.cu_ctx(), ctx.cu_ctx());
    let foreign = second.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    let blk = BlockShape::new(64, 64);
    let gate = weight::<f16>(4, 2, blk, 0.7, &mut rng);
    let up = weight::<f16>(4, 2, blk, 0.7, &mut rng);
    let down = weight::<f16>(2, 4, blk, 0.7, &mut rng);
    let gu = BsrMatrix::interleave_block_rows(&gate, &up).unwrap();
    let e = SparseMlp::from_device(
        DeviceBsr::upload(&gu, &home).unwrap(),
        DeviceBsr::upload(&down, &foreign).unwrap(),
        Activation::Silu,
    )
    .err()
    .expect("gate_up and down of two contexts accepted");
    assert!(matches!(e, Error::ContextMismatch { .. }), "{e}");
    // One context: accepted, and it runs.
    let mlp = SparseMlp::from_device(
        DeviceBsr::upload(&gu, &home).unwrap(),
        DeviceBsr::upload(&down, &home).unwrap(),
        Activation::Silu,
    )
    .unwrap();
    let batch = 3;
    let x = home
        .clone_htod(&random_vec::<f16>(batch * 128, &mut rng))
        .unwrap();
    let mut h = home.alloc_zeros::<f16>(batch * 256).unwrap();
    let mut y = home.clone_htod(&vec![f32::NAN; batch * 128]).unwrap();
    mlp.forward(&x, batch, &mut h, &mut y).unwrap();
    assert!(home.clone_dtoh(&y).unwrap().iter().all(|v| v.is_finite()));
}
