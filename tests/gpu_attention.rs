//! GPU tests of attention and the top-k gating (`--features cuda`), against a naive f64
//! attention and the CPU gating. Without a GPU each test says SKIPPED and returns; with
//! SPARSEK_REQUIRE_GPU=1 (the bundle's run script) a missing GPU fails. On a GPU that is not
//! Hopper the kernels refuse (NotSupported), which the tests check instead.
#![cfg(feature = "full")]

mod common;

use std::sync::Arc;

use common::{
    attention_reference, device, is_hopper, random_patterns, random_vec, seed, tolerance,
};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use rand::{rngs::StdRng, Rng, SeedableRng};
use sparsek::attention::{block_topk_pooled, block_topk_scores};
use sparsek::{
    attention_into, bf16, f16, gpu, AttentionOptions, Backend, BlockPatterns, DeviceBlockPatterns,
    Element, Error, Heads, HeadsMut, HeadsShape, LseMut, MaskOperand, TopkOptions,
};

#[derive(Debug, Clone, Copy)]
enum MaskKind {
    None,
    Random,
    TopK(usize),
}

#[derive(Debug, Clone, Copy)]
struct Case {
    batch: usize,
    heads: usize,
    seq_q: usize,
    seq_k: usize,
    d: usize,
    mask: MaskKind,
    causal: bool,
    per_head: bool,
    bshd: bool,
}

/// The case's view of a `seq`-long tensor: `[batch, seq, heads, d]` with 8 elements of
/// padding per head row when `bshd` (TMA needs 16-byte strides), else packed.
fn shape(c: &Case, seq: usize) -> HeadsShape {
    common::heads_shape(c.batch, c.heads, seq, c.d, c.bshd.then_some(8))
}

fn on_device<'a, T>(data: &'a CudaSlice<T>, s: &HeadsShape) -> Heads<'a, T> {
    Heads::device(data, s.batch, s.heads, s.seq, s.head_dim)
        .with_strides(s.stride_b, s.stride_h, s.stride_s)
}

fn upload<T: Element + cudarc::driver::DeviceRepr>(
    stream: &Arc<CudaStream>,
    x: &[T],
) -> CudaSlice<T> {
    if x.is_empty() {
        stream.alloc_zeros::<T>(1).unwrap()
    } else {
        stream.clone_htod(x).unwrap()
    }
}

/// One case on the device: O poisoned with NaN inside its view and a sentinel in its gaps,
/// the launch, then every element against the f64 reference.
fn run_case<T: Element + cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits>(
    ctx: &Arc<CudaContext>,
    c: Case,
    rng: &mut StdRng,
) {
    let stream = ctx.default_stream();
    let (qs, ks) = (shape(&c, c.seq_q), shape(&c, c.seq_k));
    let q: Vec<T> = random_vec(qs.required_len().unwrap(), rng);
    let k: Vec<T> = random_vec(ks.required_len().unwrap(), rng);
    let v: Vec<T> = random_vec(ks.required_len().unwrap(), rng);
    let (dq, dk, dv) = (
        upload(&stream, &q),
        upload(&stream, &k),
        upload(&stream, &v),
    );
    let per_head = c.per_head.then_some((c.batch, c.heads));
    let (qb, kb) = (c.seq_q.div_ceil(128), c.seq_k.div_ceil(128));
    let mask: Option<DeviceBlockPatterns> = match c.mask {
        MaskKind::None => None,
        MaskKind::Random => Some(
            DeviceBlockPatterns::upload(&random_patterns(rng, per_head, qb, kb, 128, 0.5), &stream)
                .unwrap(),
        ),
        MaskKind::TopK(top) => Some(
            gpu::block_topk(
                &on_device(&dq, &qs),
                &on_device(&dk, &ks),
                &TopkOptions::new(top).causal(c.causal),
            )
            .unwrap(),
        ),
    };
    let host_mask: Option<BlockPatterns> = mask.as_ref().map(|m| m.download().unwrap());
    let sentinel = T::from_f32(7.0);
    let mut o_host = vec![sentinel; qs.required_len().unwrap()];
    let view = |b: usize, h: usize, i: usize, x: usize| {
        b * qs.stride_b + h * qs.stride_h + i * qs.stride_s + x
    };
    for b in 0..c.batch {
        for h in 0..c.heads {
            for i in 0..c.seq_q {
                for x in 0..c.d {
                    o_host[view(b, h, i, x)] = T::from_f32(f32::NAN);
                }
            }
        }
    }
    let mut o = upload(&stream, &o_host);
    let mut lse = upload(&stream, &vec![f32::NAN; c.batch * c.heads * c.seq_q]);
    let r = attention_into(
        on_device(&dq, &qs),
        on_device(&dk, &ks),
        on_device(&dv, &ks),
        HeadsMut::device(&mut o, qs.batch, qs.heads, qs.seq, qs.head_dim).with_strides(
            qs.stride_b,
            qs.stride_h,
            qs.stride_s,
        ),
        Some(LseMut::Device(&mut lse)),
        mask.as_ref().map(MaskOperand::Device),
        &AttentionOptions::new().causal(c.causal),
    );
    if !is_hopper(ctx) {
        assert!(matches!(r, Err(Error::NotSupported { .. })), "{c:?}: {r:?}");
        return;
    }
    r.unwrap();
    let o_got = stream.clone_dtoh(&o).unwrap();
    let lse_got = stream.clone_dtoh(&lse).unwrap();
    let scale = 1.0 / (c.d as f64).sqrt();
    let (ro, rl) = attention_reference(
        (&q, &qs),
        (&k, &ks),
        (&v, &ks),
        host_mask.as_ref(),
        c.causal,
        scale,
    );
    let (mut num, mut den, mut lse_err, mut empty) = (0f64, 0f64, 0f64, 0usize);
    for b in 0..c.batch {
        for h in 0..c.heads {
            for i in 0..c.seq_q {
                let li = (b * c.heads + h) * c.seq_q + i;
                let row_empty = rl[li] == f64::NEG_INFINITY;
                if row_empty {
                    empty += 1;
                    assert_eq!(lse_got[li], f32::NEG_INFINITY, "{c:?}: LSE of an empty row");
                } else {
                    lse_err = lse_err.max((lse_got[li] as f64 - rl[li]).abs());
                }
                for x in 0..c.d {
                    let got = o_got[view(b, h, i, x)].to_f32() as f64;
                    assert!(got.is_finite(), "{c:?}: O[{b},{h},{i},{x}] not written");
                    if row_empty {
                        assert_eq!(got, 0.0, "{c:?}: O of an empty row");
                    }
                    let want = ro[li * c.d + x];
                    num += (got - want) * (got - want);
                    den += want * want;
                }
            }
        }
    }
    if c.bshd {
        for (at, x) in o_got.iter().enumerate() {
            if (at % qs.stride_h) >= c.d {
                assert_eq!(*x, sentinel, "{c:?}: a gap of O was written at {at}");
            }
        }
    }
    let rel = if den > 0.0 {
        (num / den).sqrt()
    } else {
        num.sqrt()
    };
    let tol = tolerance(T::DTYPE, T::DTYPE);
    println!(
        "{c:?} {:?}: rel {rel:.2e} (tol {tol:.0e}), LSE err {lse_err:.2e}, empty rows {empty}",
        T::DTYPE
    );
    assert!(rel <= tol, "{c:?}: rel {rel:.3e}");
    assert!(lse_err <= 1e-3, "{c:?}: LSE err {lse_err:.3e}");
}

fn case(
    batch: usize,
    heads: usize,
    seq_q: usize,
    seq_k: usize,
    d: usize,
    mask: MaskKind,
    causal: bool,
) -> Case {
    Case {
        batch,
        heads,
        seq_q,
        seq_k,
        d,
        mask,
        causal,
        per_head: false,
        bshd: false,
    }
}

#[test]
fn attention_matches_reference() {
    let Some(ctx) = device("attention_matches_reference") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    use MaskKind::*;
    let per_head = |c: Case| Case {
        per_head: true,
        ..c
    };
    let bshd = |c: Case| Case { bshd: true, ..c };
    let cases = [
        case(1, 2, 256, 256, 128, None, false),
        case(2, 2, 300, 300, 64, None, true),
        per_head(case(2, 2, 400, 520, 128, Random, false)),
        case(1, 3, 384, 384, 64, Random, true),
        bshd(per_head(case(1, 2, 250, 250, 128, Random, true))),
        case(1, 2, 640, 640, 128, TopK(2), false),
        bshd(case(1, 2, 700, 700, 64, TopK(3), true)),
        case(1, 1, 1, 1, 128, None, false),
        case(1, 2, 130, 7, 64, None, true),
        case(1, 1, 5, 0, 128, None, false),
    ];
    for c in cases {
        run_case::<bf16>(&ctx, c, &mut rng);
        run_case::<f16>(&ctx, c, &mut rng);
    }
}

#[test]
fn attention_is_deterministic() {
    let Some(ctx) = device("attention_is_deterministic") else {
        return;
    };
    if !is_hopper(&ctx) {
        return;
    }
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    let (b, h, s, d) = (2, 3, 1000, 128);
    let x: Vec<bf16> = random_vec(b * h * s * d, &mut rng);
    let (q, k, v) = (
        upload(&stream, &x),
        upload(&stream, &random_vec::<bf16>(x.len(), &mut rng)),
        upload(&stream, &random_vec::<bf16>(x.len(), &mut rng)),
    );
    let mask = DeviceBlockPatterns::upload(
        &random_patterns(&mut rng, Some((b, h)), 8, 8, 128, 0.5),
        &stream,
    )
    .unwrap();
    let mut o = stream.alloc_zeros::<bf16>(x.len()).unwrap();
    let mut lse = stream.alloc_zeros::<f32>(b * h * s).unwrap();
    let mut first: Option<(Vec<bf16>, Vec<f32>)> = None;
    for run in 0..100 {
        stream.memset_zeros(&mut o).unwrap();
        attention_into(
            Heads::device(&q, b, h, s, d),
            Heads::device(&k, b, h, s, d),
            Heads::device(&v, b, h, s, d),
            HeadsMut::device(&mut o, b, h, s, d),
            Some(LseMut::Device(&mut lse)),
            Some(MaskOperand::Device(&mask)),
            &AttentionOptions::new().causal(true),
        )
        .unwrap();
        let got = (
            stream.clone_dtoh(&o).unwrap(),
            stream.clone_dtoh(&lse).unwrap(),
        );
        match &first {
            None => first = Some(got),
            Some(f) => {
                let same =
                    f.0.iter()
                        .zip(&got.0)
                        .all(|(a, b)| a.to_bits() == b.to_bits())
                        && f.1
                            .iter()
                            .zip(&got.1)
                            .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "run {run} differs from the first");
            }
        }
    }
    println!("attention_is_deterministic: 100 runs bitwise identical (O and LSE)");
}

#[test]
fn gating_matches_cpu() {
    let Some(ctx) = device("gating_matches_cpu") else {
        return;
    };
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    for &(b, h, sq, sk, d, top, causal) in &[
        (
            2usize, 3usize, 1000usize, 1300usize, 128usize, 4usize, false,
        ),
        (1, 2, 900, 900, 64, 3, true),
        (2, 2, 2048, 2048, 128, 16, false),
        (1, 1, 300, 300, 40, 9, false),
    ] {
        let q: Vec<bf16> = random_vec(b * h * sq * d, &mut rng);
        let k: Vec<bf16> = random_vec(b * h * sk * d, &mut rng);
        let opts = TopkOptions::new(top).causal(causal);
        let want = block_topk_pooled(
            &Heads::host(&q, b, h, sq, d),
            &Heads::host(&k, b, h, sk, d),
            &opts,
        )
        .unwrap();
        let (dq, dk) = (upload(&stream, &q), upload(&stream, &k));
        let got = gpu::block_topk(
            &Heads::device(&dq, b, h, sq, d),
            &Heads::device(&dk, b, h, sk, d),
            &opts,
        )
        .unwrap()
        .download()
        .unwrap();
        assert_eq!(
            got, want,
            "pooled gating b{b} h{h} sq{sq} sk{sk} d{d} top {top} causal {causal}"
        );
        // Given scores: many ties, ±0, -inf and NaN.
        let (qb, kb) = (sq.div_ceil(128), sk.div_ceil(128));
        let scores: Vec<f32> = (0..b * h * qb * kb)
            .map(|_| match rng.random_range(0..20) {
                0 => f32::NAN,
                1 => f32::NEG_INFINITY,
                2 => -0.0,
                3 => 0.0,
                _ => rng.random_range(-2i32..3) as f32,
            })
            .collect();
        let want = block_topk_scores(&scores, b, h, sq, sk, &opts).unwrap();
        let got = gpu::block_topk_scores(&upload(&stream, &scores), (b, h, sq, sk), &opts)
            .unwrap()
            .download()
            .unwrap();
        assert_eq!(
            got, want,
            "given-score gating b{b} h{h} sq{sq} sk{sk} top {top} causal {causal}"
        );
        println!(
            "gating b{b} h{h} sq{sq} sk{sk} d{d} top {top} causal {causal}: {} blocks, equal",
            want.nnzb()
        );
    }
}

#[test]
fn attention_errors() {
    let Some(ctx) = device("attention_errors") else {
        return;
    };
    let stream = ctx.default_stream();
    let (b, h, s, d) = (1, 2, 256, 128);
    let x = upload(&stream, &vec![bf16::from_f32(0.5); b * h * s * d]);
    let sentinel = vec![bf16::from_f32(3.0); b * h * s * d];
    let mut o = upload(&stream, &sentinel);
    let host_mask =
        BlockPatterns::from_parts(128, 128, 2, 2, 1, vec![0, 1, 3], vec![0, 0, 1]).unwrap();
    let dev_mask = DeviceBlockPatterns::upload(&host_mask, &stream).unwrap();
    let mask64 = DeviceBlockPatterns::upload(
        &BlockPatterns::from_parts(64, 64, 4, 4, 1, vec![0, 1, 2, 3, 4], vec![0, 1, 2, 3]).unwrap(),
        &stream,
    )
    .unwrap();
    let hv = |n: usize| Heads::device(&x, b, h, s, n);
    let expect = |what: &str, r: Result<(), Error>, ok: fn(&Error) -> bool| {
        let e = r.expect_err(what);
        assert!(ok(&e), "{what}: {e:?}");
        println!("{what}: {e}");
    };
    expect(
        "host mask with device operands",
        attention_into(
            hv(d),
            hv(d),
            hv(d),
            HeadsMut::device(&mut o, b, h, s, d),
            None,
            Some(MaskOperand::Host(&host_mask)),
            &AttentionOptions::new(),
        ),
        |e| matches!(e, Error::MixedLocations(_)),
    );
    expect(
        "64x64 mask blocks",
        attention_into(
            hv(d),
            hv(d),
            hv(d),
            HeadsMut::device(&mut o, b, h, s, d),
            None,
            Some(MaskOperand::Device(&mask64)),
            &AttentionOptions::new(),
        ),
        |e| matches!(e, Error::NotSupported { .. }),
    );
    expect(
        "head_dim 96",
        attention_into(
            hv(96),
            hv(96),
            hv(96),
            HeadsMut::device(&mut o, b, h, s, 96),
            None,
            None,
            &AttentionOptions::new(),
        ),
        |e| matches!(e, Error::NotSupported { .. }),
    );
    expect(
        "CPU backend on device operands",
        attention_into(
            hv(d),
            hv(d),
            hv(d),
            HeadsMut::device(&mut o, b, h, s, d),
            None,
            Some(MaskOperand::Device(&dev_mask)),
            &AttentionOptions::new().backend(Backend::Cpu),
        ),
        |e| matches!(e, Error::BackendUnavailable { .. }),
    );
    expect(
        "rows not 16-byte strided",
        attention_into(
            Heads::device(&x, b, h, 200, d).with_strides(h * 200 * 130, 200 * 130, 130),
            hv(d),
            hv(d),
            HeadsMut::device(&mut o, b, h, 200, d),
            None,
            None,
            &AttentionOptions::new(),
        ),
        |e| matches!(e, Error::NotSupported { .. }),
    );
    expect(
        "mask of other dims",
        attention_into(
            Heads::device(&x, b, h, 100, d),
            hv(d),
            hv(d),
            HeadsMut::device(&mut o, b, h, 100, d),
            None,
            Some(MaskOperand::Device(&dev_mask)),
            &AttentionOptions::new(),
        ),
        |e| matches!(e, Error::ShapeMismatch { .. }),
    );
    let after = stream.clone_dtoh(&o).unwrap();
    assert!(
        after
            .iter()
            .zip(&sentinel)
            .all(|(a, b)| a.to_bits() == b.to_bits()),
        "O was written"
    );
}

/// A few small cases, for compute-sanitizer (run.sh sanitize).
#[test]
fn attention_sanitized() {
    let Some(ctx) = device("attention_sanitized") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    let c = Case {
        per_head: true,
        ..case(1, 2, 200, 300, 128, MaskKind::Random, true)
    };
    run_case::<bf16>(&ctx, c, &mut rng);
    run_case::<f16>(
        &ctx,
        case(1, 1, 130, 130, 64, MaskKind::TopK(1), false),
        &mut rng,
    );
}
