//! The device side of the hardening issue (`--features cuda`): operands of another CUDA
//! context (a second, non-primary context of the same GPU, and another GPU where there is
//! one) and overlapping outputs are refused with typed errors before anything is
//! enqueued, outputs untouched, and the context still works afterwards. Without a GPU each
//! test says SKIPPED and returns; with SPARSEK_REQUIRE_GPU=1 a missing GPU fails.
#![cfg(feature = "full")]

mod common;

use std::sync::Arc;

use common::{device, random_vec};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use rand::{rngs::StdRng, SeedableRng};
use sparsek::{
    attention_into, bf16, gpu, AttentionOptions, BlockMask, BlockShape, BsrMatrix, Dense, DenseMut,
    DeviceBsr, Error, Heads, HeadsMut, Layout, SpmmOptions, TopkOptions,
};

const POISON: f32 = 3.5;

fn poison(stream: &Arc<CudaStream>, len: usize) -> CudaSlice<bf16> {
    stream
        .clone_htod(&vec![bf16::from_f32(POISON); len])
        .unwrap()
}

fn untouched(stream: &Arc<CudaStream>, buf: &CudaSlice<bf16>) -> bool {
    let host = stream.clone_dtoh(buf).unwrap();
    stream.synchronize().unwrap();
    host.iter().all(|v| v.to_f32() == POISON)
}

fn mismatch(r: Result<(), Error>, operand: &str) {
    match r {
        Err(Error::ContextMismatch { operand: o, .. }) if o == operand => {}
        other => panic!("{operand} of another context: {other:?}"),
    }
}

/// Every device entry against operands of `foreign` (another context) with the rest on
/// `home`: a typed ContextMismatch naming the operand, the output untouched.
fn refuse_foreign(home: &Arc<CudaStream>, foreign: &Arc<CudaStream>, what: &str) {
    let mut rng = StdRng::seed_from_u64(25);
    let (m, k, n) = (256, 256, 64);
    let mask = BlockMask::from_fn(2, 2, |r, c| r == c || c == 0).unwrap();
    let a = BsrMatrix::from_block_mask(&mask, BlockShape::new(128, 128), |i, j| {
        bf16::from_f32(((i * 3 + j) % 7) as f32 / 8.0 - 0.4)
    })
    .unwrap();
    let b_host: Vec<bf16> = random_vec(k * n, &mut rng);
    let a_home = DeviceBsr::upload(&a, home).unwrap();
    let a_foreign = DeviceBsr::upload(&a, foreign).unwrap();
    let b_home = home.clone_htod(&b_host).unwrap();
    let b_foreign = foreign.clone_htod(&b_host).unwrap();
    let mut c = poison(home, m * n);
    let opts = SpmmOptions::new();

    // spmm: B, then A, of the other context.
    let r = sparsek::spmm(
        &a_home,
        Dense::device(&b_foreign, k, n, Layout::RowMajor),
        DenseMut::device(&mut c, m, n, Layout::RowMajor),
        &opts,
    );
    mismatch(r, "B");
    let r = sparsek::spmm(
        &a_foreign,
        Dense::device(&b_home, k, n, Layout::RowMajor),
        DenseMut::device(&mut c, m, n, Layout::RowMajor),
        &opts,
    );
    mismatch(r, "A.row_ptr");
    let r = gpu::can_implement(
        &a_home,
        &Dense::device(&b_foreign, k, n, Layout::RowMajor),
        &DenseMut::device(&mut c, m, n, Layout::RowMajor),
        &opts,
    );
    assert!(
        matches!(r, Err(Error::ContextMismatch { operand: "B", .. })),
        "{r:?}"
    );
    assert!(untouched(home, &c), "{what}: C written");

    // sddmm: S on home, A of the other context.
    let mut s = DeviceBsr::upload(&a, home).unwrap();
    let before = s.download().unwrap();
    let a_dense = foreign
        .clone_htod(&random_vec::<bf16>(m * k, &mut rng))
        .unwrap();
    let r = sparsek::sddmm(
        Dense::device(&a_dense, m, k, Layout::RowMajor),
        Dense::device(&b_home, k, n.max(256), Layout::RowMajor),
        &mut s,
        &opts,
    );
    // (B's view is k x 256 over a k x 64 buffer: the context check or the buffer check may
    // speak first; either refuses.)
    assert!(r.is_err(), "{what}: sddmm {r:?}");
    let b_wide = home
        .clone_htod(&random_vec::<bf16>(k * 256, &mut rng))
        .unwrap();
    let r = sparsek::sddmm(
        Dense::device(&a_dense, m, k, Layout::RowMajor),
        Dense::device(&b_wide, k, 256, Layout::RowMajor),
        &mut s,
        &opts,
    );
    mismatch(r, "A");
    assert_eq!(s.download().unwrap(), before, "{what}: S written");

    // Attention: Q of the other context; the gating likewise.
    let (bt, h, sq, d) = (1, 2, 200, 64);
    let x: Vec<bf16> = random_vec(bt * h * sq * d, &mut rng);
    let (q_home, q_foreign) = (
        home.clone_htod(&x).unwrap(),
        foreign.clone_htod(&x).unwrap(),
    );
    let kv = home.clone_htod(&x).unwrap();
    let mut o = poison(home, x.len());
    let r = attention_into(
        Heads::device(&q_foreign, bt, h, sq, d),
        Heads::device(&kv, bt, h, sq, d),
        Heads::device(&kv, bt, h, sq, d),
        HeadsMut::device(&mut o, bt, h, sq, d),
        None,
        None,
        &AttentionOptions::new(),
    );
    mismatch(r, "Q");
    assert!(untouched(home, &o), "{what}: O written");
    let r = gpu::block_topk(
        &Heads::device(&q_foreign, bt, h, sq, d),
        &Heads::device(&q_home, bt, h, sq, d),
        &TopkOptions::new(1),
    );
    assert!(
        matches!(r, Err(Error::ContextMismatch { operand: "Q", .. })),
        "{what}: gating {:?}",
        r.err()
    );

    // A DeviceBsr from parts of two contexts.
    let (rp, ci, vals) = DeviceBsr::upload(&a, home).unwrap().into_parts();
    let ci_foreign = foreign.clone_htod(&home.clone_dtoh(&ci).unwrap()).unwrap();
    let r = DeviceBsr::from_device_parts(m, k, BlockShape::new(128, 128), rp, ci_foreign, vals);
    assert!(
        matches!(
            r,
            Err(Error::ContextMismatch {
                operand: "col_idx",
                ..
            })
        ),
        "{what}: from_device_parts {:?}",
        r.err()
    );

    // The home context still runs a valid product, equal to the CPU's.
    let mut c_ok = home.alloc_zeros::<f32>(m * n).unwrap();
    sparsek::spmm(
        &a_home,
        Dense::device(&b_home, k, n, Layout::RowMajor),
        DenseMut::device(&mut c_ok, m, n, Layout::RowMajor),
        &opts,
    )
    .unwrap();
    let got = home.clone_dtoh(&c_ok).unwrap();
    home.synchronize().unwrap();
    let mut want = vec![0f32; m * n];
    sparsek::spmm(
        &a,
        Dense::host(&b_host, k, n, Layout::RowMajor),
        DenseMut::host(&mut want, m, n, Layout::RowMajor),
        &opts,
    )
    .unwrap();
    let err = got
        .iter()
        .zip(&want)
        .map(|(g, w)| (g - w).abs() as f64)
        .fold(0f64, f64::max);
    assert!(
        err < 1e-2,
        "{what}: valid product after the refusals: {err}"
    );
    eprintln!("{what}: every foreign operand refused, a valid product still right");
}

#[test]
fn operands_of_another_context_are_refused() {
    let Some(ctx) = device("operands_of_another_context_are_refused") else {
        return;
    };
    let home = ctx.default_stream();
    let second = CudaContext::new_non_primary(ctx.ordinal(), 0).unwrap();
    assert_ne!(second.cu_ctx(), ctx.cu_ctx());
    refuse_foreign(
        &home,
        &second.default_stream(),
        "a second context of the GPU",
    );
    // A second GPU, where the machine has one.
    if CudaContext::device_count().unwrap_or(1) > 1 {
        let other = CudaContext::new(1 - ctx.ordinal().min(1)).unwrap();
        refuse_foreign(&home, &other.default_stream(), "another GPU");
    } else {
        eprintln!("one GPU: the other-device case did not run");
    }
}

#[test]
fn overlapping_device_outputs_are_refused() {
    let Some(ctx) = device("overlapping_device_outputs_are_refused") else {
        return;
    };
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(9);
    let (b, h, s, d) = (1, 2, 256, 64);
    let x = stream
        .clone_htod(&random_vec::<bf16>(b * h * s * d, &mut rng))
        .unwrap();
    for (strides, what) in [
        ((h * s * d, 0, d), "stride_h 0 over 2 heads"),
        ((h * s * d, s * d, d / 2), "stride_s < head_dim"),
    ] {
        let mut o = poison(&stream, b * h * s * d);
        let r = attention_into(
            Heads::device(&x, b, h, s, d),
            Heads::device(&x, b, h, s, d),
            Heads::device(&x, b, h, s, d),
            HeadsMut::device(&mut o, b, h, s, d).with_strides(strides.0, strides.1, strides.2),
            None,
            None,
            &AttentionOptions::new(),
        );
        assert!(
            matches!(
                r,
                Err(Error::Overlap { output: "O", .. } | Error::LeadingDimension { .. })
            ),
            "{what}: {r:?}"
        );
        assert!(untouched(&stream, &o), "{what}: O written");
    }
}
