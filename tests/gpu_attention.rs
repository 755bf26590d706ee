//! GPU tests of attention and the top-k gating (`--features cuda`), against a naive f64
//! attention (grouped-query heads and both causal alignments included) and the CPU gating.
//! Without a GPU each test says SKIPPED and returns; with SPARSEK_REQUIRE_GPU=1 (the bundle's
//! run script) a missing GPU fails. On a GPU that is not Hopper the kernels refuse
//! (NotSupported), which the tests check instead.
#![cfg(feature = "full")]

mod common;

use std::sync::Arc;

use common::{
    attention_reference_aligned, device, is_hopper, random_patterns, random_vec, seed, tolerance,
};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use rand::{rngs::StdRng, Rng, SeedableRng};
use sparsek::attention::{block_topk_pooled, block_topk_scores};
use sparsek::{
    attention_into, bf16, f16, gpu, AttentionOptions, Backend, BlockPatterns, CausalAlignment,
    DeviceBlockPatterns, Element, Error, Heads, HeadsMut, HeadsShape, LseMut, MaskOperand,
    TopkOptions,
};

#[derive(Debug, Clone, Copy)]
enum MaskKind {
    None,
    Random,
    TopK(usize),
}

/// Which heads a random mask is made for.
#[derive(Debug, Clone, Copy, PartialEq)]
enum PerHead {
    /// One pattern for every (batch, head).
    Shared,
    /// One per (batch, query head).
    Query,
    /// One per (batch, KV head), shared by the group's query heads.
    Kv,
}

#[derive(Debug, Clone, Copy)]
struct Case {
    batch: usize,
    heads: usize,
    /// K and V's heads (dividing `heads`: grouped-query attention).
    heads_kv: usize,
    seq_q: usize,
    seq_k: usize,
    d: usize,
    mask: MaskKind,
    causal: Option<CausalAlignment>,
    per_head: PerHead,
    bshd: bool,
    /// `Auto`, or `Hopper` to hold the Hopper kernel to shapes the decode family would take.
    backend: Backend,
}

/// The case's view of a `seq`-long tensor of `heads` heads: `[batch, seq, heads, d]` with 8
/// elements of padding per head row when `bshd` (TMA needs 16-byte strides), else packed.
fn shape(c: &Case, heads: usize, seq: usize) -> HeadsShape {
    common::heads_shape(c.batch, heads, seq, c.d, c.bshd.then_some(8))
}

fn options(c: &Case) -> AttentionOptions {
    AttentionOptions::new()
        .causal(c.causal.is_some())
        .causal_alignment(c.causal.unwrap_or_default())
        .backend(c.backend)
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
    let (qs, ks) = (shape(&c, c.heads, c.seq_q), shape(&c, c.heads_kv, c.seq_k));
    let q: Vec<T> = random_vec(qs.required_len().unwrap(), rng);
    let k: Vec<T> = random_vec(ks.required_len().unwrap(), rng);
    let v: Vec<T> = random_vec(ks.required_len().unwrap(), rng);
    let (dq, dk, dv) = (
        upload(&stream, &q),
        upload(&stream, &k),
        upload(&stream, &v),
    );
    let per_head = match c.per_head {
        PerHead::Shared => None,
        PerHead::Query => Some((c.batch, c.heads)),
        PerHead::Kv => Some((c.batch, c.heads_kv)),
    };
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
                &TopkOptions::new(top)
                    .causal(c.causal.is_some())
                    .causal_alignment(c.causal.unwrap_or_default()),
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
        &options(&c),
    );
    if !is_hopper(ctx) {
        assert!(matches!(r, Err(Error::NotSupported { .. })), "{c:?}: {r:?}");
        return;
    }
    r.unwrap();
    let o_got = stream.clone_dtoh(&o).unwrap();
    let lse_got = stream.clone_dtoh(&lse).unwrap();
    let scale = 1.0 / (c.d as f64).sqrt();
    let (ro, rl) = attention_reference_aligned(
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
        heads_kv: heads,
        seq_q,
        seq_k,
        d,
        mask,
        causal: causal.then_some(CausalAlignment::TopLeft),
        per_head: PerHead::Shared,
        bshd: false,
        backend: Backend::Auto,
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
        per_head: PerHead::Query,
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

/// Grouped-query heads (ratio 4 and MQA) and the bottom-right causal alignment (seq_q 1, 77,
/// 128 against about 1000 keys, and more queries than keys), with masks per query head, per
/// KV head and shared, top-k gating and strided views; d 64 and 128; f16 and bf16. The
/// Hopper family is asked for by name: Auto gives decode shapes (seq_q * group <= 16) to the
/// decode family (tests/gpu_attention_decode.rs).
#[test]
fn attention_grouped_and_bottom_right_match_reference() {
    let Some(ctx) = device("attention_grouped_and_bottom_right_match_reference") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    use MaskKind::*;
    let br = Some(CausalAlignment::BottomRight);
    let tl = Some(CausalAlignment::TopLeft);
    let off: Option<CausalAlignment> = Option::None;
    let hopper = |batch,
                  heads,
                  heads_kv,
                  seq_q,
                  seq_k,
                  d,
                  mask,
                  causal: Option<CausalAlignment>,
                  per_head| Case {
        batch,
        heads,
        heads_kv,
        seq_q,
        seq_k,
        d,
        mask,
        causal,
        per_head,
        bshd: false,
        backend: Backend::Hopper,
    };
    let bshd = |c: Case| Case { bshd: true, ..c };
    use PerHead::{Kv, Query, Shared};
    let cases = [
        // GQA 4 (8 query heads over 2 KV heads) and MQA, masks of each kind.
        hopper(1, 8, 2, 384, 384, 128, None, tl, Shared),
        hopper(2, 8, 2, 300, 520, 64, Random, off, Kv),
        hopper(1, 8, 2, 260, 400, 128, Random, tl, Query),
        hopper(1, 4, 1, 256, 700, 128, Random, br, Query),
        bshd(hopper(1, 4, 1, 200, 333, 64, Random, br, Kv)),
        // Bottom-right: seq_q 1, 77, 128 against about 1000 keys (a KV cache).
        hopper(2, 2, 2, 1, 1000, 128, None, br, Shared),
        hopper(1, 8, 2, 1, 1021, 64, Random, br, Kv),
        hopper(2, 8, 2, 77, 1037, 64, Random, br, Kv),
        hopper(1, 4, 4, 77, 999, 128, None, br, Shared),
        hopper(1, 4, 1, 128, 1000, 128, Random, br, Query),
        hopper(1, 4, 2, 128, 1024, 64, TopK(3), br, Shared),
        bshd(hopper(1, 8, 2, 128, 1000, 128, None, br, Shared)),
        // seq_q = seq_k, and more queries than keys (query blocks that keep nothing).
        hopper(1, 4, 2, 500, 500, 64, TopK(2), br, Shared),
        hopper(1, 2, 1, 700, 130, 128, None, br, Shared),
        hopper(2, 4, 2, 300, 200, 64, Random, br, Kv),
    ];
    for c in cases {
        run_case::<bf16>(&ctx, c, &mut rng);
        run_case::<f16>(&ctx, c, &mut rng);
    }
}

/// Grouped-query attention on the device is multi-head attention of K and V with each KV
/// head repeated for its group, and a per-KV-head mask the repeated per-query-head mask:
/// the same bits both ways (each CTA computes the same rows from the same data).
#[test]
fn attention_grouped_equals_repeated_heads() {
    let Some(ctx) = device("attention_grouped_equals_repeated_heads") else {
        return;
    };
    if !is_hopper(&ctx) {
        return;
    }
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    let (batch, heads, heads_kv, seq_q, seq_k, d) = (2, 8, 2, 300, 700, 128);
    let group = heads / heads_kv;
    let q: Vec<bf16> = random_vec(batch * heads * seq_q * d, &mut rng);
    let k: Vec<bf16> = random_vec(batch * heads_kv * seq_k * d, &mut rng);
    let v: Vec<bf16> = random_vec(batch * heads_kv * seq_k * d, &mut rng);
    let repeat = |x: &[bf16]| -> Vec<bf16> {
        let mut out = Vec::with_capacity(x.len() * group);
        for b in 0..batch {
            for h in 0..heads {
                let at = (b * heads_kv + h / group) * seq_k * d;
                out.extend_from_slice(&x[at..at + seq_k * d]);
            }
        }
        out
    };
    let (qb, kb) = (seq_q.div_ceil(128), seq_k.div_ceil(128));
    let per_kv = random_patterns(&mut rng, Some((batch, heads_kv)), qb, kb, 128, 0.5);
    let masks: Vec<sparsek::BlockMask> = (0..batch * heads)
        .map(|p| {
            let src = (p / heads) * heads_kv + (p % heads) / group;
            sparsek::BlockMask::from_fn(qb, kb, |r, c| per_kv.row(src, r).contains(&(c as i32)))
                .unwrap()
        })
        .collect();
    let per_query = BlockPatterns::from_block_masks(128, 128, &masks)
        .unwrap()
        .with_heads(batch, heads)
        .unwrap();
    let (dq, dk, dv) = (
        upload(&stream, &q),
        upload(&stream, &k),
        upload(&stream, &v),
    );
    let (dk_rep, dv_rep) = (upload(&stream, &repeat(&k)), upload(&stream, &repeat(&v)));
    let (m_kv, m_q) = (
        DeviceBlockPatterns::upload(&per_kv, &stream).unwrap(),
        DeviceBlockPatterns::upload(&per_query, &stream).unwrap(),
    );
    for causal in [
        None,
        Some(CausalAlignment::TopLeft),
        Some(CausalAlignment::BottomRight),
    ] {
        let opts = AttentionOptions::new()
            .causal(causal.is_some())
            .causal_alignment(causal.unwrap_or_default())
            .backend(Backend::Hopper);
        let run = |k: &CudaSlice<bf16>, v: &CudaSlice<bf16>, hk: usize, m: &DeviceBlockPatterns| {
            let mut o = stream.alloc_zeros::<bf16>(q.len()).unwrap();
            let mut lse = stream.alloc_zeros::<f32>(batch * heads * seq_q).unwrap();
            attention_into(
                Heads::device(&dq, batch, heads, seq_q, d),
                Heads::device(k, batch, hk, seq_k, d),
                Heads::device(v, batch, hk, seq_k, d),
                HeadsMut::device(&mut o, batch, heads, seq_q, d),
                Some(LseMut::Device(&mut lse)),
                Some(MaskOperand::Device(m)),
                &opts,
            )
            .unwrap();
            let o: Vec<u16> = stream
                .clone_dtoh(&o)
                .unwrap()
                .iter()
                .map(|x| x.to_bits())
                .collect();
            let l: Vec<u32> = stream
                .clone_dtoh(&lse)
                .unwrap()
                .iter()
                .map(|x| x.to_bits())
                .collect();
            (o, l)
        };
        let grouped = run(&dk, &dv, heads_kv, &m_kv);
        let repeated = run(&dk_rep, &dv_rep, heads, &m_q);
        assert!(
            grouped == repeated,
            "causal {causal:?}: GQA differs from repeated K/V"
        );
    }
    println!("attention_grouped_equals_repeated_heads: GQA 8/2 = repeated K/V, bit for bit");
}

/// 100 runs of one problem, bitwise identical O and LSE: `(batch, heads, heads_kv, seq_q,
/// seq_k, d)`, a per-head mask made for `mask_heads`, causal with `alignment`.
fn assert_deterministic(
    ctx: &Arc<CudaContext>,
    (b, h, hk, sq, sk, d): (usize, usize, usize, usize, usize, usize),
    mask_heads: usize,
    opts: &AttentionOptions,
    rng: &mut StdRng,
) {
    let stream = ctx.default_stream();
    let (q, k, v) = (
        upload(&stream, &random_vec::<bf16>(b * h * sq * d, rng)),
        upload(&stream, &random_vec::<bf16>(b * hk * sk * d, rng)),
        upload(&stream, &random_vec::<bf16>(b * hk * sk * d, rng)),
    );
    let mask = DeviceBlockPatterns::upload(
        &random_patterns(
            rng,
            Some((b, mask_heads)),
            sq.div_ceil(128),
            sk.div_ceil(128),
            128,
            0.5,
        ),
        &stream,
    )
    .unwrap();
    let mut o = stream.alloc_zeros::<bf16>(b * h * sq * d).unwrap();
    let mut lse = stream.alloc_zeros::<f32>(b * h * sq).unwrap();
    let mut first: Option<(Vec<bf16>, Vec<f32>)> = None;
    for run in 0..100 {
        stream.memset_zeros(&mut o).unwrap();
        attention_into(
            Heads::device(&q, b, h, sq, d),
            Heads::device(&k, b, hk, sk, d),
            Heads::device(&v, b, hk, sk, d),
            HeadsMut::device(&mut o, b, h, sq, d),
            Some(LseMut::Device(&mut lse)),
            Some(MaskOperand::Device(&mask)),
            opts,
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
                assert!(same, "run {run} differs from the first ({opts:?})");
            }
        }
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
    let mut rng = StdRng::seed_from_u64(seed());
    assert_deterministic(
        &ctx,
        (2, 3, 3, 1000, 1000, 128),
        3,
        &AttentionOptions::new().causal(true),
        &mut rng,
    );
    // Grouped-query heads (8 over 2), a per-KV-head mask, bottom-right causal.
    assert_deterministic(
        &ctx,
        (2, 8, 2, 777, 1000, 64),
        2,
        &AttentionOptions::new()
            .causal(true)
            .causal_alignment(CausalAlignment::BottomRight)
            .backend(Backend::Hopper),
        &mut rng,
    );
    println!("attention_is_deterministic: 100 runs bitwise identical (O and LSE), MHA and GQA");
}

#[test]
fn gating_matches_cpu() {
    let Some(ctx) = device("gating_matches_cpu") else {
        return;
    };
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    use CausalAlignment::{BottomRight as BR, TopLeft as TL};
    // (batch, heads, K's heads, seq_q, seq_k, d, top-k, causal, alignment)
    for &(b, h, hk, sq, sk, d, top, causal, align) in &[
        (
            2usize, 3usize, 3usize, 1000usize, 1300usize, 128usize, 4usize, false, TL,
        ),
        (1, 2, 2, 900, 900, 64, 3, true, TL),
        (2, 2, 2, 2048, 2048, 128, 16, false, TL),
        (1, 1, 1, 300, 300, 40, 9, false, TL),
        // Grouped-query heads (pooled per query head against its KV head), bottom-right.
        (2, 8, 2, 1000, 1300, 128, 4, true, BR),
        (1, 4, 1, 300, 2000, 64, 3, true, BR),
        (1, 4, 2, 1500, 700, 64, 2, true, BR),
        (1, 6, 3, 900, 900, 128, 5, false, TL),
    ] {
        let q: Vec<bf16> = random_vec(b * h * sq * d, &mut rng);
        let k: Vec<bf16> = random_vec(b * hk * sk * d, &mut rng);
        let opts = TopkOptions::new(top).causal(causal).causal_alignment(align);
        let want = block_topk_pooled(
            &Heads::host(&q, b, h, sq, d),
            &Heads::host(&k, b, hk, sk, d),
            &opts,
        )
        .unwrap();
        let (dq, dk) = (upload(&stream, &q), upload(&stream, &k));
        let got = gpu::block_topk(
            &Heads::device(&dq, b, h, sq, d),
            &Heads::device(&dk, b, hk, sk, d),
            &opts,
        )
        .unwrap()
        .download()
        .unwrap();
        assert_eq!(
            got, want,
            "pooled gating b{b} h{h}/{hk} sq{sq} sk{sk} d{d} top {top} causal {causal} {align:?}"
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
            "given-score gating b{b} h{h} sq{sq} sk{sk} top {top} causal {causal} {align:?}"
        );
        println!(
            "gating b{b} h{h}/{hk} sq{sq} sk{sk} d{d} top {top} causal {causal} {align:?}: {} blocks, equal",
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
    expect(
        "K and V with 3 heads, Q 2 (heads must divide)",
        attention_into(
            hv(d),
            Heads::device(&x, b, 3, 64, d),
            Heads::device(&x, b, 3, 64, d),
            HeadsMut::device(&mut o, b, h, s, d),
            None,
            None,
            &AttentionOptions::new()
                .causal(true)
                .causal_alignment(CausalAlignment::BottomRight),
        ),
        |e| matches!(e, Error::HeadGroups { .. }),
    );
    expect(
        "pooled gating, K with 3 heads, Q 2",
        gpu::block_topk(
            &hv(d),
            &Heads::device(&x, b, 3, 64, d),
            &TopkOptions::new(1),
        )
        .map(|_| ()),
        |e| matches!(e, Error::HeadGroups { .. }),
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
        per_head: PerHead::Query,
        ..case(1, 2, 200, 300, 128, MaskKind::Random, true)
    };
    run_case::<bf16>(&ctx, c, &mut rng);
    run_case::<f16>(
        &ctx,
        case(1, 1, 130, 130, 64, MaskKind::TopK(1), false),
        &mut rng,
    );
    // Grouped-query heads with a per-KV-head mask, bottom-right with more queries than keys
    // (a query block wholly before the first key).
    let c = Case {
        heads_kv: 1,
        per_head: PerHead::Kv,
        causal: Some(CausalAlignment::BottomRight),
        backend: Backend::Hopper,
        ..case(1, 4, 300, 140, 64, MaskKind::Random, true)
    };
    run_case::<bf16>(&ctx, c, &mut rng);
}

// ---- serving layouts: per-sequence key counts and paged K/V --------------------------------

use common::gpu_layout::{self, draw_lens, LayoutCase, PerHead as LayoutHeads, Prepared};

/// A layout case on the Hopper family by name (Backend::Hopper): checked against the
/// reference on an H100, refused NotSupported elsewhere.
fn run_layout<T: Element + cudarc::driver::DeviceRepr>(
    ctx: &Arc<CudaContext>,
    c: &LayoutCase,
    rng: &mut StdRng,
) {
    let stream = ctx.default_stream();
    let p = Prepared::<T>::new(&stream, c, rng);
    let r = p.run(&stream, &p.options(Backend::Hopper));
    if !is_hopper(ctx) {
        assert!(matches!(r, Err(Error::NotSupported { .. })), "{c:?}: {r:?}");
        return;
    }
    r.unwrap_or_else(|e| panic!("{c:?} {:?}: {e}", T::DTYPE));
}

/// Paged K/V (shuffled pools of 128- and 256-key pages) and per-sequence key counts (not
/// multiples of anything, 0 included) on the Hopper family: prefill up to 1000 queries with
/// the bottom-right diagonal at each sequence's own count, top-left and none, grouped heads,
/// 128 x 128 masks over logical key blocks (shared, per KV head, per query head), d 64 and
/// 128, f16 and bf16, against the f64 reference.
#[test]
fn attention_paged_matches_reference() {
    let Some(ctx) = device("attention_paged_matches_reference") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    use CausalAlignment::{BottomRight as BR, TopLeft as TL};
    use LayoutHeads::{Kv, Query, Shared};
    let mut cases = Vec::new();
    for (i, &(heads, heads_kv, seq_q, d, most, page)) in [
        (8usize, 2usize, 1000usize, 128usize, 1100usize, 128usize),
        (4, 1, 300, 64, 1500, 256),
        (4, 4, 77, 128, 900, 128),
        (6, 2, 129, 64, 2000, 256),
        (2, 2, 600, 128, 640, 128),
        (8, 8, 17, 64, 3000, 128),
    ]
    .iter()
    .enumerate()
    {
        let lens = draw_lens(&mut rng, 3, most);
        let base = LayoutCase::paged(heads, heads_kv, seq_q, d, &lens, page).slack(i * 13 % 30);
        let causal = [Some(BR), Some(BR), None, Some(TL)][i % 4];
        let with_causal = |c: LayoutCase| match causal {
            Some(a) => c.causal(a),
            None => c,
        };
        cases.push(with_causal(base.clone()));
        let per_head = [Shared, Kv, Query][i % 3];
        cases.push(with_causal(base.clone().mask(128, 128, per_head)));
        cases.push(with_causal(base.unpaged().mask(128, 128, per_head)));
    }
    for (i, c) in cases.iter().enumerate() {
        if i % 2 == 0 {
            run_layout::<bf16>(&ctx, c, &mut rng);
        } else {
            run_layout::<f16>(&ctx, c, &mut rng);
        }
    }
}

/// Page sizes the Hopper family cannot take (not a multiple of its 128-key tile): refused
/// NotSupported by name and through Auto for a prefill shape, O untouched; a decode shape
/// through Auto goes to the decode family, which takes any page size.
#[test]
fn attention_paged_small_pages() {
    let Some(ctx) = device("attention_paged_small_pages") else {
        return;
    };
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    for page in [16usize, 64, 100] {
        let c = LayoutCase::paged(4, 2, 200, 64, &[300, 0, 517], page)
            .causal(CausalAlignment::BottomRight);
        let p = Prepared::<bf16>::new(&stream, &c, &mut rng);
        let (o_len, lse_len) = p.out_lens();
        let before = vec![bf16::from_f32(3.0); o_len];
        let mut o = common::upload(&stream, &before);
        let mut lse = common::upload(&stream, &vec![5.0f32; lse_len]);
        for backend in [Backend::Hopper, Backend::Auto] {
            let r = p.launch(&mut o, &mut lse, &p.options(backend));
            assert!(
                matches!(r, Err(Error::NotSupported { .. })),
                "{c:?} {backend:?}: {r:?}"
            );
            println!("page {page}, {backend:?}: {}", r.unwrap_err());
        }
        let after = stream.clone_dtoh(&o).unwrap();
        assert!(
            after
                .iter()
                .zip(&before)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "page {page}: O written by a refused call"
        );
        // Decode: Auto runs it on the decode family (sm_80+).
        let c = LayoutCase::paged(8, 2, 2, 64, &[300, 0, 517], page)
            .causal(CausalAlignment::BottomRight);
        let p = Prepared::<bf16>::new(&stream, &c, &mut rng);
        p.run(&stream, &p.options(Backend::Auto))
            .unwrap_or_else(|e| panic!("{c:?} through Auto: {e}"));
    }
}

/// 100 launches of a paged prefill with a mask bitwise identical (O and LSE).
#[test]
fn attention_paged_is_deterministic() {
    let Some(ctx) = device("attention_paged_is_deterministic") else {
        return;
    };
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    let c = LayoutCase::paged(8, 2, 300, 128, &[1500, 77, 900], 128)
        .mask(128, 128, LayoutHeads::Kv)
        .causal(CausalAlignment::BottomRight);
    let p = Prepared::<bf16>::new(&stream, &c, &mut rng);
    if let Some(e) = gpu_layout::repeats_identical(&stream, &p, &p.options(Backend::Hopper)) {
        assert!(
            !is_hopper(&ctx) && matches!(e, Error::NotSupported { .. }),
            "{c:?}: {e}"
        );
    }
}

/// check_indices on the Hopper family: a page outside the pool and a key count above
/// max_seqlen_k are InvalidArgument, O untouched; good values pass.
#[test]
fn attention_paged_refusals_leave_outputs_untouched() {
    let Some(ctx) = device("attention_paged_refusals_leave_outputs_untouched") else {
        return;
    };
    if !is_hopper(&ctx) {
        eprintln!("SKIPPED attention_paged_refusals_leave_outputs_untouched: not Hopper");
        return;
    }
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    let c =
        LayoutCase::paged(4, 2, 200, 64, &[300, 0, 517], 128).causal(CausalAlignment::BottomRight);
    let p = Prepared::<bf16>::new(&stream, &c, &mut rng);
    let cache = p.cache.as_ref().unwrap();
    let checked = p.options(Backend::Hopper).check_indices(true);
    let (o_len, lse_len) = p.out_lens();
    let before = vec![bf16::from_f32(3.0); o_len];
    let mut o = common::upload(&stream, &before);
    let mut lse = common::upload(&stream, &vec![5.0f32; lse_len]);
    let mut bad = cache.table.clone();
    bad[2 * cache.max_pages + 4] = cache.num_pages as i32 + 9; // sequence 2's last page
    let bad = gpu_layout::upload_i32(&stream, &bad);
    let above = gpu_layout::upload_i32(&stream, &[300, 0, 518]);
    let max_len = c.max_seqlen_k();
    for (what, r, keyword) in [
        (
            "a page outside the pool",
            p.launch_with(&mut o, &mut lse, &p.dlens, Some(&bad), max_len, &checked),
            "sequence 2, page 4",
        ),
        (
            "a key count above max_seqlen_k",
            p.launch_with(
                &mut o,
                &mut lse,
                &above,
                p.dtable.as_ref(),
                max_len,
                &checked,
            ),
            "sequence 2",
        ),
    ] {
        match r {
            Err(e @ Error::InvalidArgument(_)) => {
                let m = e.to_string();
                println!("{what}: {m}");
                assert!(m.contains(keyword), "{what}: {m:?} lacks {keyword:?}");
            }
            other => panic!("{what}: {other:?}"),
        }
    }
    let after = stream.clone_dtoh(&o).unwrap();
    assert!(
        after
            .iter()
            .zip(&before)
            .all(|(a, b)| a.to_bits() == b.to_bits()),
        "O written by a refused call"
    );
    p.launch(&mut o, &mut lse, &checked).unwrap();
}

/// For compute-sanitizer (run.sh sanitize): a small paged prefill with a mask, and unchecked
/// bad values (pages outside the pool, counts out of range) that the kernel clamps.
#[test]
fn attention_paged_sanitized() {
    let Some(ctx) = device("attention_paged_sanitized") else {
        return;
    };
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    let c = LayoutCase::paged(4, 2, 150, 64, &[300, 0, 200], 128)
        .mask(128, 128, LayoutHeads::Kv)
        .causal(CausalAlignment::BottomRight);
    run_layout::<bf16>(&ctx, &c, &mut rng);
    if !is_hopper(&ctx) {
        return;
    }
    let p = Prepared::<bf16>::new(&stream, &c, &mut rng);
    let bad_table: Vec<i32> = p
        .cache
        .as_ref()
        .unwrap()
        .table
        .iter()
        .map(|&x| if x % 2 == 0 { -3 } else { x + 1000 })
        .collect();
    let bad_table = gpu_layout::upload_i32(&stream, &bad_table);
    let bad_lens = gpu_layout::upload_i32(&stream, &[i32::MAX, -5, 1 << 20]);
    let (o_len, lse_len) = p.out_lens();
    let mut o = stream.alloc_zeros::<bf16>(o_len).unwrap();
    let mut lse = stream.alloc_zeros::<f32>(lse_len).unwrap();
    p.launch_with(
        &mut o,
        &mut lse,
        &bad_lens,
        Some(&bad_table),
        c.max_seqlen_k(),
        &p.options(Backend::Hopper),
    )
    .unwrap();
    stream.synchronize().unwrap();
}

// ---- packed (variable-length) sequences ------------------------------------------------------

use common::varlen::{self as varlen, MaskHeads, VarlenCase, VarlenData};

/// A packed case's operands on the device (offsets, mask), beside its host data.
struct DeviceVarlen<T: cudarc::driver::DeviceRepr> {
    data: VarlenData<T>,
    dq: CudaSlice<T>,
    dk: CudaSlice<T>,
    dv: CudaSlice<T>,
    dcu_q: CudaSlice<i32>,
    dcu_k: CudaSlice<i32>,
    dmask: Option<DeviceBlockPatterns>,
}

impl<T: Element + cudarc::driver::DeviceRepr> DeviceVarlen<T> {
    fn new(stream: &Arc<CudaStream>, c: &VarlenCase, rng: &mut StdRng) -> Self {
        let data = VarlenData::<T>::new(c, rng);
        Self {
            dq: common::upload(stream, &data.q),
            dk: common::upload(stream, &data.k),
            dv: common::upload(stream, &data.v),
            dcu_q: gpu_layout::upload_i32(stream, &data.cu_q),
            dcu_k: gpu_layout::upload_i32(stream, &data.cu_k),
            dmask: data
                .mask
                .as_ref()
                .map(|m| DeviceBlockPatterns::upload(m, stream).unwrap()),
            data,
        }
    }

    /// The device layout over these offsets (the packed sides').
    fn layout<'a>(
        &self,
        cu_q: &'a CudaSlice<i32>,
        cu_k: &'a CudaSlice<i32>,
        (max_q, max_k): (usize, usize),
    ) -> sparsek::SequenceLayout<'a> {
        let c = &self.data.case;
        let mut l = sparsek::SequenceLayout::new(c.batch());
        if c.packed_q {
            l = l.cu_seqlens_q(cu_q, max_q);
        }
        if c.packed_k {
            l = l.cu_seqlens_k(cu_k, max_k);
        }
        l
    }

    fn options(&self, backend: Backend) -> AttentionOptions {
        let c = &self.data.case;
        AttentionOptions::new()
            .causal(c.causal.is_some())
            .causal_alignment(c.causal.unwrap_or_default())
            .backend(backend)
    }

    /// One launch into `o` (O's buffer: the view and 64 rows more) and `lse` over `layout`.
    fn launch(
        &self,
        o: &mut CudaSlice<T>,
        lse: &mut CudaSlice<f32>,
        layout: &sparsek::SequenceLayout<'_>,
        opts: &AttentionOptions,
    ) -> Result<(), Error> {
        let d = &self.data;
        let os = d.os;
        attention_with_layout(
            device_view(&self.dq, &d.qs),
            device_view(&self.dk, &d.ks),
            device_view(&self.dv, &d.ks),
            HeadsMut::device(o, os.batch, os.heads, os.seq, os.head_dim).with_strides(
                os.stride_b,
                os.stride_h,
                os.stride_s,
            ),
            Some(LseMut::Device(lse)),
            self.dmask.as_ref().map(MaskOperand::Device),
            layout,
            opts,
        )
    }

    /// The case's own launch on poisoned outputs: (O's buffer, LSE), or the refusal.
    fn run(
        &self,
        stream: &Arc<CudaStream>,
        opts: &AttentionOptions,
    ) -> Result<(Vec<T>, Vec<f32>), Error> {
        let d = &self.data;
        let mut o = common::upload(stream, &d.o0);
        let mut lse = common::upload(stream, &vec![f32::NAN; d.lse_len.max(1)]);
        let layout = self.layout(
            &self.dcu_q,
            &self.dcu_k,
            (d.case.max_seqlen_q(), d.case.max_seqlen_k()),
        );
        self.launch(&mut o, &mut lse, &layout, &opts.check_indices(true))?;
        let o = stream.clone_dtoh(&o).unwrap();
        let lse = stream.clone_dtoh(&lse).unwrap();
        Ok((o, lse[..d.lse_len].to_vec()))
    }
}

use sparsek::attention_with_layout;

/// A device tensor's view of this shape and strides.
fn device_view<'a, T>(x: &'a CudaSlice<T>, s: &HeadsShape) -> Heads<'a, T> {
    Heads::device(x, s.batch, s.heads, s.seq, s.head_dim)
        .with_strides(s.stride_b, s.stride_h, s.stride_s)
}

/// Whether `backend` may refuse `c` on this device: the Hopper family off sm_90, the decode
/// family (and Auto's first choice) on shapes of more than 16 rows per KV head.
fn varlen_refusal_expected(ctx: &Arc<CudaContext>, c: &VarlenCase, backend: Backend) -> bool {
    let decode_shape = c.max_seqlen_q() * (c.heads / c.heads_kv) <= 16;
    match backend {
        Backend::Hopper => !is_hopper(ctx),
        Backend::Decode => !decode_shape,
        _ => !is_hopper(ctx) && !decode_shape,
    }
}

/// Runs a packed case with `backend`: checked against the f64 reference (every sequence row
/// written, nothing outside O's view), or a refusal this device explains.
fn run_varlen<T: Element + cudarc::driver::DeviceRepr>(
    ctx: &Arc<CudaContext>,
    c: &VarlenCase,
    backend: Backend,
    rng: &mut StdRng,
) {
    let stream = ctx.default_stream();
    let p = DeviceVarlen::<T>::new(&stream, c, rng);
    match p.run(&stream, &p.options(backend)) {
        Ok((o, lse)) => {
            let (rel, lse_err, empty) = p.data.check(&o, &lse);
            println!(
                "{c:?} {:?} {backend:?}: rel {rel:.2e}, lse err {lse_err:.2e}, empty rows {empty}",
                T::DTYPE
            );
        }
        Err(e @ Error::NotSupported { .. }) if varlen_refusal_expected(ctx, c, backend) => {
            println!("{c:?} {backend:?}: refused here: {e}")
        }
        Err(e @ Error::NotSupported { .. }) if std::env::var_os("SPARSEK_VARIANT").is_some() => {
            println!("SKIP {c:?} {backend:?}: {e}")
        }
        Err(e) => panic!("{c:?} {:?} {backend:?}: {e}", T::DTYPE),
    }
}

/// Packed sequences on the Hopper family (by name) and through Auto, against the f64
/// reference: lengths 0..3000 not multiples of 128 (empty sequences of queries, of keys and of
/// both), both causal alignments and none, GQA 8/2 and 4/4, MQA, masks per (sequence, query
/// head), per (sequence, KV head) and shared, max_seqlen above the longest, fused `[total,
/// heads, d]` views, one side packed and the other padded, d 64 and 128, f16 and bf16; O
/// poisoned (every sequence row written) with a sentinel past its view and in the fused gaps
/// (nothing else written).
#[test]
fn attention_varlen_matches_reference() {
    let Some(ctx) = device("attention_varlen_matches_reference") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    use CausalAlignment::{BottomRight as BR, TopLeft as TL};
    let mut cases = Vec::new();
    let (lq, lk) = (
        varlen::draw_lens(&mut rng, 6, 3000),
        varlen::draw_lens(&mut rng, 6, 3000),
    );
    cases.push(
        VarlenCase::packed(8, 2, 128, &lq, &lk)
            .causal(BR)
            .mask(MaskHeads::Kv),
    );
    let l = varlen::draw_lens(&mut rng, 5, 3000);
    cases.push(
        VarlenCase::packed(4, 4, 64, &l, &l)
            .fused()
            .causal(TL)
            .mask(MaskHeads::Query),
    );
    let (lq, lk) = (
        varlen::draw_lens(&mut rng, 5, 1500),
        varlen::draw_lens(&mut rng, 5, 1500),
    );
    cases.push(VarlenCase::packed(8, 1, 128, &lq, &lk));
    cases.push(
        VarlenCase::packed(4, 2, 64, &[0; 4], &varlen::draw_lens(&mut rng, 4, 2000))
            .padded_q(300)
            .causal(BR)
            .mask(MaskHeads::Shared),
    );
    cases.push(
        VarlenCase::packed(2, 2, 128, &varlen::draw_lens(&mut rng, 4, 1000), &[0; 4])
            .padded_k(777)
            .causal(TL),
    );
    cases.push(
        VarlenCase::packed(4, 2, 64, &[129, 1, 0, 257, 1000], &[300, 0, 5, 128, 1003])
            .slack(100)
            .causal(BR)
            .mask(MaskHeads::Query),
    );
    cases.push(VarlenCase::packed(4, 2, 128, &[0, 3, 0], &[0, 0, 7]).causal(BR));
    cases.push(
        VarlenCase::packed(6, 3, 64, &[640, 131, 2], &[129, 2000, 1])
            .fused()
            .causal(BR)
            .mask(MaskHeads::Kv),
    );
    for (i, c) in cases.iter().enumerate() {
        for backend in [Backend::Hopper, Backend::Auto] {
            if i % 2 == 0 {
                run_varlen::<bf16>(&ctx, c, backend, &mut rng);
            } else {
                run_varlen::<f16>(&ctx, c, backend, &mut rng);
            }
        }
    }
}

/// Packed decode shapes (at most 16 rows per KV head: max_seqlen_q · group <= 16) on the
/// decode family by name, on the Hopper family by name and through Auto (the decode family),
/// against the f64 reference: 1..16 queries per sequence with empty ones, keys 0..8192,
/// GQA 4 and 8 and MQA, masks per (sequence, KV head) and shared, both alignments, d 64 and
/// 128, f16 and bf16; packed queries with padded keys and the reverse.
#[test]
fn attention_varlen_decode_matches_reference() {
    let Some(ctx) = device("attention_varlen_decode_matches_reference") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    use CausalAlignment::{BottomRight as BR, TopLeft as TL};
    let cases = [
        VarlenCase::packed(8, 2, 128, &[1, 4, 0, 2, 3], &[1000, 3, 50, 0, 8192])
            .causal(BR)
            .mask(MaskHeads::Kv),
        VarlenCase::packed(8, 1, 64, &[1, 1, 1, 1], &[8192, 0, 5000, 129]).causal(BR),
        VarlenCase::packed(4, 1, 128, &[4, 0, 3], &[2049, 777, 16]).causal(TL),
        VarlenCase::packed(16, 16, 64, &[1, 1, 0], &[300, 1, 0])
            .mask(MaskHeads::Shared)
            .causal(BR),
        VarlenCase::packed(8, 2, 64, &[2, 1, 4], &[0; 3])
            .padded_k(1500)
            .causal(BR)
            .mask(MaskHeads::Kv),
        VarlenCase::packed(4, 1, 128, &[0; 3], &[100, 0, 4000])
            .padded_q(4)
            .causal(BR),
        VarlenCase::packed(8, 2, 128, &[1, 3, 2], &[64, 999, 3])
            .fused()
            .slack(1)
            .causal(BR),
    ];
    for (i, c) in cases.iter().enumerate() {
        for backend in [Backend::Decode, Backend::Hopper, Backend::Auto] {
            if i % 2 == 0 {
                run_varlen::<bf16>(&ctx, c, backend, &mut rng);
            } else {
                run_varlen::<f16>(&ctx, c, backend, &mut rng);
            }
        }
    }
}

/// 100 launches of a packed prefill case (Hopper) and of a packed decode case (the decode
/// family): O and LSE bitwise identical.
#[test]
fn attention_varlen_repeats_bitwise() {
    let Some(ctx) = device("attention_varlen_repeats_bitwise") else {
        return;
    };
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    for (c, backend) in [
        (
            VarlenCase::packed(8, 2, 128, &[1000, 0, 129, 2500], &[1200, 7, 0, 2500])
                .causal(CausalAlignment::BottomRight)
                .mask(MaskHeads::Kv),
            Backend::Hopper,
        ),
        (
            VarlenCase::packed(8, 2, 128, &[2, 4, 1, 0], &[6000, 33, 0, 1000])
                .causal(CausalAlignment::BottomRight),
            Backend::Decode,
        ),
    ] {
        let p = DeviceVarlen::<bf16>::new(&stream, &c, &mut rng);
        let opts = p.options(backend);
        let first = match p.run(&stream, &opts) {
            Ok(r) => r,
            Err(e) if varlen_refusal_expected(&ctx, &c, backend) => {
                println!("{c:?} {backend:?}: refused here: {e}");
                continue;
            }
            Err(e) => panic!("{c:?} {backend:?}: {e}"),
        };
        p.data.check(&first.0, &first.1);
        let bits = |(o, lse): &(Vec<bf16>, Vec<f32>)| {
            (
                o.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                lse.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            )
        };
        let want = bits(&first);
        for rep in 1..100 {
            let got = p.run(&stream, &opts).unwrap();
            assert!(
                bits(&got) == want,
                "{c:?} {backend:?}: run {rep} differs from the first"
            );
        }
        println!("{c:?} {backend:?}: 100 runs bitwise identical (O and LSE)");
    }
}

/// Typed refusals of packed layouts on the device, O and the LSE untouched: with
/// check_indices, offsets that disagree with the packed size (a last entry short of or past
/// the total, a start other than 0, a decrease) or with max_seqlen (a longer sequence),
/// InvalidArgument naming the array; a Q of batch 2 with packed queries and a padded K of the
/// wrong batch (ShapeMismatch); host offsets with device operands (MixedLocations); too few
/// offsets (BufferTooSmall). Unchecked bad offsets run (the kernels clamp them into the
/// views: attention_varlen_sanitized runs that under compute-sanitizer).
#[test]
fn attention_varlen_refusals() {
    let Some(ctx) = device("attention_varlen_refusals") else {
        return;
    };
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    let c = VarlenCase::packed(4, 2, 64, &[100, 0, 300], &[50, 200, 1])
        .causal(CausalAlignment::BottomRight);
    if varlen_refusal_expected(&ctx, &c, Backend::Auto) {
        // No family takes the shape here: the selection refuses before any check.
        println!("SKIP attention_varlen_refusals: not a Hopper GPU");
        return;
    }
    let p = DeviceVarlen::<bf16>::new(&stream, &c, &mut rng);
    let d = &p.data;
    let mut o = common::upload(&stream, &d.o0);
    let mut lse = common::upload(&stream, &vec![5.0f32; d.lse_len]);
    let untouched = |o: &CudaSlice<bf16>, lse: &CudaSlice<f32>, what: &str| {
        let (oh, lh) = (
            stream.clone_dtoh(o).unwrap(),
            stream.clone_dtoh(lse).unwrap(),
        );
        assert!(
            oh.iter()
                .zip(&d.o0)
                .all(|(a, b)| a.to_bits() == b.to_bits())
                && lh.iter().all(|&x| x == 5.0),
            "{what}: O or LSE written by a refused call"
        );
    };
    let opts = p.options(Backend::Auto).check_indices(true);
    // (what, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, the array the message names)
    type BadOffsets<'a> = (&'a str, [i32; 4], [i32; 4], usize, &'a str);
    let bad_offsets: [BadOffsets; 5] = [
        (
            "cu_seqlens_q ending at 399 (Q's total 400)",
            [0, 100, 100, 399],
            [0, 50, 250, 251],
            300,
            "cu_seqlens_q",
        ),
        (
            "cu_seqlens_k ending at 252 (K's total 251)",
            [0, 100, 100, 400],
            [0, 50, 250, 252],
            300,
            "cu_seqlens_k",
        ),
        (
            "cu_seqlens_q from 4",
            [4, 100, 100, 400],
            [0, 50, 250, 251],
            300,
            "cu_seqlens_q",
        ),
        (
            "cu_seqlens_q decreasing",
            [0, 100, 90, 400],
            [0, 50, 250, 251],
            310,
            "cu_seqlens_q",
        ),
        (
            "a sequence of 300 queries, max_seqlen_q 299",
            [0, 100, 100, 400],
            [0, 50, 250, 251],
            299,
            "cu_seqlens_q",
        ),
    ];
    for (what, cq, ck, max_q, names) in bad_offsets {
        let (dq, dk) = (
            gpu_layout::upload_i32(&stream, &cq),
            gpu_layout::upload_i32(&stream, &ck),
        );
        let layout = p.layout(&dq, &dk, (max_q, 200));
        match p.launch(&mut o, &mut lse, &layout, &opts) {
            Err(Error::InvalidArgument(m)) if m.contains(names) => println!("{what}: {m}"),
            other => panic!("{what}: {other:?} (want InvalidArgument naming {names})"),
        }
        untouched(&o, &lse, what);
        // Unchecked, the same offsets run (wrong results, no access outside the views).
        let r = p.launch(&mut o, &mut lse, &layout, &p.options(Backend::Auto));
        assert!(
            r.is_ok() || varlen_refusal_expected(&ctx, &c, Backend::Auto),
            "{what}, unchecked: {r:?}"
        );
        stream.memcpy_htod(&d.o0, &mut o).unwrap();
        stream
            .memcpy_htod(&vec![5.0f32; d.lse_len], &mut lse)
            .unwrap();
    }
    // A Q of batch 2 with packed queries: the view's batch is refused before any device work.
    let good = p.layout(&p.dcu_q, &p.dcu_k, (300, 200));
    let (qs, ks, os) = (d.qs, d.ks, d.os);
    let r = attention_with_layout(
        Heads::device(&p.dq, 2, qs.heads, qs.seq / 2, qs.head_dim),
        Heads::device(&p.dk, ks.batch, ks.heads, ks.seq, ks.head_dim),
        Heads::device(&p.dv, ks.batch, ks.heads, ks.seq, ks.head_dim),
        HeadsMut::device(&mut o, 2, os.heads, os.seq / 2, os.head_dim),
        Some(LseMut::Device(&mut lse)),
        None,
        &good,
        &opts,
    );
    assert!(
        matches!(&r, Err(e @ Error::ShapeMismatch { .. }) if e.to_string().contains("packed queries")),
        "Q of batch 2: {r:?}"
    );
    untouched(&o, &lse, "Q of batch 2");
    // Packed queries, K padded with 2 entries for 3 sequences.
    let q_only = sparsek::SequenceLayout::new(3).cu_seqlens_q(&p.dcu_q, 300);
    let r = attention_with_layout(
        Heads::device(&p.dq, qs.batch, qs.heads, qs.seq, qs.head_dim),
        Heads::device(&p.dk, 2, ks.heads, 100, ks.head_dim),
        Heads::device(&p.dv, 2, ks.heads, 100, ks.head_dim),
        HeadsMut::device(&mut o, os.batch, os.heads, os.seq, os.head_dim),
        Some(LseMut::Device(&mut lse)),
        None,
        &q_only,
        &opts,
    );
    assert!(
        matches!(&r, Err(e @ Error::ShapeMismatch { .. }) if e.to_string().contains("the layout's batch")),
        "padded K of batch 2 for 3 sequences: {r:?}"
    );
    untouched(&o, &lse, "padded K of batch 2");
    // Host offsets with device operands; too few device offsets.
    let host = sparsek::SequenceLayout::new(3)
        .cu_seqlens_q(&d.cu_q, 300)
        .cu_seqlens_k(&d.cu_k, 200);
    let r = p.launch(&mut o, &mut lse, &host, &opts);
    assert!(
        matches!(r, Err(Error::MixedLocations(_))),
        "host offsets: {r:?}"
    );
    let short = gpu_layout::upload_i32(&stream, &d.cu_q[..3]);
    let r = p.launch(
        &mut o,
        &mut lse,
        &p.layout(&short, &p.dcu_k, (300, 200)),
        &opts,
    );
    assert!(
        matches!(
            r,
            Err(Error::BufferTooSmall {
                operand: "cu_seqlens_q",
                needed: 4,
                got: 3
            })
        ),
        "3 offsets for 3 sequences: {r:?}"
    );
    untouched(&o, &lse, "host or short offsets");
}

/// A packed launch captured in a CUDA graph (the offsets are read on the device: no host
/// synchronization): 100 replays bitwise equal to the eager call, and a replay after new
/// offsets (other lengths, same totals) equal to the eager call on them.
#[test]
fn attention_varlen_replays_in_a_cuda_graph() {
    use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
    let Some(ctx) = device("attention_varlen_replays_in_a_cuda_graph") else {
        return;
    };
    // SAFETY: every buffer of this test is created, used and freed on `stream` alone, so
    // stream order is all the synchronization there is to manage (cudarc's per-buffer
    // events, recorded outside the capture, are not wanted inside it).
    unsafe { ctx.disable_event_tracking() };
    let stream = ctx.new_stream().unwrap();
    let mut rng = StdRng::seed_from_u64(seed());
    let c = VarlenCase::packed(8, 2, 128, &[700, 0, 129, 300], &[900, 5, 0, 640])
        .causal(CausalAlignment::BottomRight)
        .mask(MaskHeads::Kv);
    let mut p = DeviceVarlen::<bf16>::new(&stream, &c, &mut rng);
    let (max_q, max_k) = (c.max_seqlen_q(), c.max_seqlen_k());
    // Other lengths of the same totals (and within the same maxima).
    let (cq2, ck2) = ([0i32, 300, 400, 529, 1129], [0i32, 640, 645, 645, 1545]);
    let d = &p.data;
    let mut o = common::upload(&stream, &d.o0);
    let mut lse = common::upload(&stream, &vec![f32::NAN; d.lse_len]);
    let opts = p.options(Backend::Hopper);
    let download = |o: &CudaSlice<bf16>, lse: &CudaSlice<f32>| {
        let o: Vec<u16> = stream
            .clone_dtoh(o)
            .unwrap()
            .iter()
            .map(|x| x.to_bits())
            .collect();
        let l: Vec<u32> = stream
            .clone_dtoh(lse)
            .unwrap()
            .iter()
            .map(|x| x.to_bits())
            .collect();
        (o, l)
    };
    let mut eager = Vec::new();
    for (cq, ck) in [
        (d.cu_q.clone(), d.cu_k.clone()),
        (cq2.to_vec(), ck2.to_vec()),
    ] {
        stream.memcpy_htod(&cq, &mut p.dcu_q).unwrap();
        stream.memcpy_htod(&ck, &mut p.dcu_k).unwrap();
        stream.memcpy_htod(&p.data.o0, &mut o).unwrap();
        let layout = p.layout(&p.dcu_q, &p.dcu_k, (max_q, max_k));
        match p.launch(&mut o, &mut lse, &layout, &opts) {
            Ok(()) => {}
            Err(e) if !is_hopper(&ctx) => {
                println!("SKIP: {e}");
                return;
            }
            Err(e) => panic!("{c:?}: {e}"),
        }
        eager.push(download(&o, &lse));
    }
    stream.memcpy_htod(&p.data.cu_q, &mut p.dcu_q).unwrap();
    stream.memcpy_htod(&p.data.cu_k, &mut p.dcu_k).unwrap();
    stream.synchronize().unwrap();
    stream
        .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        .unwrap();
    let layout = p.layout(&p.dcu_q, &p.dcu_k, (max_q, max_k));
    p.launch(&mut o, &mut lse, &layout, &opts).unwrap();
    let graph = stream
        .end_capture(CUgraphInstantiate_flags(0))
        .unwrap_or_else(|e| panic!("{c:?}: the packed attention did not capture: {e}"))
        .expect("a captured call has nodes");
    for rep in 0..100 {
        stream.memcpy_htod(&p.data.o0, &mut o).unwrap();
        graph.launch().unwrap();
        assert!(
            download(&o, &lse) == eager[0],
            "{c:?}: replay {rep} differs from the eager call"
        );
    }
    stream.memcpy_htod(&cq2, &mut p.dcu_q).unwrap();
    stream.memcpy_htod(&ck2, &mut p.dcu_k).unwrap();
    stream.memcpy_htod(&p.data.o0, &mut o).unwrap();
    graph.launch().unwrap();
    assert!(
        download(&o, &lse) == eager[1],
        "{c:?}: a replay on new offsets differs from the eager call on them"
    );
    stream.synchronize().unwrap();
    println!("{c:?}: captured, 100 replays bitwise equal to eager, new offsets too");
}

/// For compute-sanitizer (run.sh sanitize): small packed cases on the Hopper and decode
/// families (masks, empty sequences, fused views), and unchecked offsets that disagree with
/// the totals (past them, decreasing): the kernels clamp every sequence into the views.
#[test]
fn attention_varlen_sanitized() {
    let Some(ctx) = device("attention_varlen_sanitized") else {
        return;
    };
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    let c = VarlenCase::packed(4, 2, 64, &[130, 0, 5], &[7, 200, 0])
        .fused()
        .causal(CausalAlignment::BottomRight)
        .mask(MaskHeads::Kv);
    run_varlen::<bf16>(&ctx, &c, Backend::Hopper, &mut rng);
    let c = VarlenCase::packed(8, 2, 128, &[2, 0, 4], &[300, 17, 0])
        .causal(CausalAlignment::BottomRight)
        .mask(MaskHeads::Kv);
    run_varlen::<f16>(&ctx, &c, Backend::Decode, &mut rng);
    for backend in [Backend::Hopper, Backend::Decode] {
        let c = VarlenCase::packed(8, 2, 64, &[2, 1, 3], &[100, 50, 90])
            .causal(CausalAlignment::TopLeft);
        let p = DeviceVarlen::<bf16>::new(&stream, &c, &mut rng);
        let d = &p.data;
        let mut o = common::upload(&stream, &d.o0);
        let mut lse = common::upload(&stream, &vec![f32::NAN; d.lse_len]);
        for (cq, ck) in [
            ([0i32, 2, 3, 90], [0i32, 100, 5000, 240]),
            ([0i32, 5, 1, 6], [-7, 100, 40, 240]),
        ] {
            let (dq, dk) = (
                gpu_layout::upload_i32(&stream, &cq),
                gpu_layout::upload_i32(&stream, &ck),
            );
            let r = p.launch(
                &mut o,
                &mut lse,
                &p.layout(&dq, &dk, (4, 200)),
                &p.options(backend),
            );
            assert!(
                r.is_ok() || varlen_refusal_expected(&ctx, &c, backend),
                "{backend:?}, unchecked offsets {cq:?} {ck:?}: {r:?}"
            );
            stream.synchronize().unwrap();
        }
        // The sentinel past O's view survives even wrong offsets.
        let oh = stream.clone_dtoh(&o).unwrap();
        let mut inside = vec![false; oh.len()];
        varlen::for_each_view_offset(&d.os, |at| inside[at] = true);
        assert!(
            oh.iter()
                .zip(&inside)
                .all(|(x, &inside)| inside || x.to_f32() == varlen::SENTINEL),
            "{backend:?}: unchecked offsets wrote outside O's view"
        );
    }
}
