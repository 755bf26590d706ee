//! GPU tests of the split-KV decode attention family (cpp/attention/decode/; `--features
//! full`): decode shapes (seq_q · heads_q / heads_kv <= 16 query rows per KV head) against the
//! naive f64 attention (common::attention_reference_aligned) of grouped-query heads, both
//! causal alignments and block masks (one for all, per KV head, per query head), with O
//! poisoned with NaN inside its view (every element must be written) and a sentinel in the
//! gaps of a strided O (none may be); 100 repeats bitwise identical; a CUDA graph's replays;
//! the shapes the family leaves to the Hopper family.
//!
//! Without a GPU each test says SKIPPED and returns; with SPARSEK_REQUIRE_GPU=1 (the bundle's
//! run script) a missing GPU fails. Knobs the bundle sets for a whole run:
//! SPARSEK_VARIANT=<a decode row> forces that row (cases it does not take, another dtype or
//! head_dim, are refused NotSupported and skipped); SPARSEK_ATTENTION_DECODE_SPLITS=<S>
//! splits every (batch, KV head) in S CTAs (the combine kernel on every launch, or never with
//! S = 1).
#![cfg(feature = "full")]

mod common;

use std::sync::Arc;

use common::{attention_reference_aligned, device, is_hopper, random_vec, seed, tolerance, upload};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DeviceRepr, ValidAsZeroBits};
use rand::{rngs::StdRng, Rng, SeedableRng};
use sparsek::{
    attention_into, bf16, f16, AttentionOptions, BlockMask, BlockPatterns, CausalAlignment,
    DeviceBlockPatterns, Element, Error, Heads, HeadsMut, HeadsShape, LseMut, MaskOperand,
};

/// Which patterns a case's mask has.
#[derive(Debug, Clone, Copy, PartialEq)]
enum MaskKind {
    None,
    /// One pattern for every (batch, head).
    Shared,
    /// One per (batch, KV head), shared by the query heads of its group.
    PerKvHead,
    /// One per (batch, query head).
    PerQueryHead,
}

#[derive(Debug, Clone, Copy)]
struct Case {
    batch: usize,
    heads_q: usize,
    heads_kv: usize,
    seq_q: usize,
    seq_k: usize,
    d: usize,
    causal: Option<CausalAlignment>,
    mask: MaskKind,
    block_q: usize,
    block_k: usize,
    /// Kept fraction of the blocks of a row that is neither empty nor full.
    density: f64,
    /// `[batch, seq, heads, d]` views with 8 elements of padding per head row.
    bshd: bool,
}

/// A packed case without mask or causality; the builders below add them.
fn case(
    batch: usize,
    heads_q: usize,
    heads_kv: usize,
    seq_q: usize,
    seq_k: usize,
    d: usize,
) -> Case {
    Case {
        batch,
        heads_q,
        heads_kv,
        seq_q,
        seq_k,
        d,
        causal: None,
        mask: MaskKind::None,
        block_q: 16,
        block_k: 128,
        density: 0.5,
        bshd: false,
    }
}

impl Case {
    fn causal(self, a: CausalAlignment) -> Self {
        Case {
            causal: Some(a),
            ..self
        }
    }
    fn mask(self, mask: MaskKind, block_q: usize, block_k: usize) -> Self {
        Case {
            mask,
            block_q,
            block_k,
            ..self
        }
    }
    fn bshd(self) -> Self {
        Case { bshd: true, ..self }
    }
    fn group(&self) -> usize {
        self.heads_q / self.heads_kv
    }
    /// Whether the decode family takes the case (cpp/attention/decode/family.cu's supports):
    /// at most 16 query rows per KV head, a mask of one query block whose patterns a group
    /// shares.
    fn decode_takes(&self) -> bool {
        self.seq_q * self.group() <= 16
            && (self.mask == MaskKind::None
                || (self.seq_q <= self.block_q
                    && (self.mask != MaskKind::PerQueryHead || self.group() == 1)))
    }
}

const BR: CausalAlignment = CausalAlignment::BottomRight;
const TL: CausalAlignment = CausalAlignment::TopLeft;

fn shape(c: &Case, heads: usize, seq: usize) -> HeadsShape {
    common::heads_shape(c.batch, heads, seq, c.d, c.bshd.then_some(8))
}

/// Random patterns for the case: each row empty with probability 1/6, full with 1/6, else
/// each block kept with the case's density.
fn random_mask(c: &Case, rng: &mut StdRng) -> Option<BlockPatterns> {
    let per = match c.mask {
        MaskKind::None => return None,
        MaskKind::Shared => None,
        MaskKind::PerKvHead => Some((c.batch, c.heads_kv)),
        MaskKind::PerQueryHead => Some((c.batch, c.heads_q)),
    };
    let (qb, kb) = (c.seq_q.div_ceil(c.block_q), c.seq_k.div_ceil(c.block_k));
    let masks: Vec<BlockMask> = (0..per.map_or(1, |(b, h)| b * h))
        .map(|_| {
            let kinds: Vec<f64> = (0..qb).map(|_| rng.random_range(0.0..1.0)).collect();
            let bits = (0..qb * kb)
                .map(|x| {
                    let u = kinds[x / kb.max(1)];
                    u >= 1.0 / 6.0 && (u < 2.0 / 6.0 || rng.random_range(0.0..1.0) < c.density)
                })
                .collect();
            BlockMask::new(qb, kb, bits).unwrap()
        })
        .collect();
    let set = BlockPatterns::from_block_masks(c.block_q, c.block_k, &masks).unwrap();
    Some(match per {
        Some((b, h)) => set.with_heads(b, h).unwrap(),
        None => set,
    })
}

fn forced_variant() -> bool {
    std::env::var_os("SPARSEK_VARIANT").is_some()
}

/// The device operands of one case, and its host data for the reference.
struct Operands<T: DeviceRepr> {
    q: Vec<T>,
    k: Vec<T>,
    v: Vec<T>,
    dq: CudaSlice<T>,
    dk: CudaSlice<T>,
    dv: CudaSlice<T>,
    qs: HeadsShape,
    ks: HeadsShape,
    mask: Option<BlockPatterns>,
    dmask: Option<DeviceBlockPatterns>,
}

fn operands<T: Element + DeviceRepr>(
    stream: &Arc<CudaStream>,
    c: &Case,
    rng: &mut StdRng,
) -> Operands<T> {
    let (qs, ks) = (shape(c, c.heads_q, c.seq_q), shape(c, c.heads_kv, c.seq_k));
    let q: Vec<T> = random_vec(qs.required_len().unwrap(), rng);
    let k: Vec<T> = random_vec(ks.required_len().unwrap(), rng);
    let v: Vec<T> = random_vec(ks.required_len().unwrap(), rng);
    let mask = random_mask(c, rng);
    let dmask = mask
        .as_ref()
        .map(|m| DeviceBlockPatterns::upload(m, stream).unwrap());
    Operands {
        dq: upload(stream, &q),
        dk: upload(stream, &k),
        dv: upload(stream, &v),
        q,
        k,
        v,
        qs,
        ks,
        mask,
        dmask,
    }
}

fn view<'a, T>(d: &'a CudaSlice<T>, s: &HeadsShape) -> Heads<'a, T> {
    Heads::device(d, s.batch, s.heads, s.seq, s.head_dim)
        .with_strides(s.stride_b, s.stride_h, s.stride_s)
}

/// One launch into `o` and `lse`.
fn launch<T: Element + DeviceRepr>(
    c: &Case,
    ops: &Operands<T>,
    o: &mut CudaSlice<T>,
    lse: &mut CudaSlice<f32>,
) -> Result<(), Error> {
    let mut opts = AttentionOptions::new();
    if let Some(a) = c.causal {
        opts = opts.causal(true).causal_alignment(a);
    }
    let qs = ops.qs;
    attention_into(
        view(&ops.dq, &ops.qs),
        view(&ops.dk, &ops.ks),
        view(&ops.dv, &ops.ks),
        HeadsMut::device(o, qs.batch, qs.heads, qs.seq, qs.head_dim).with_strides(
            qs.stride_b,
            qs.stride_h,
            qs.stride_s,
        ),
        Some(LseMut::Device(lse)),
        ops.dmask.as_ref().map(MaskOperand::Device),
        &opts,
    )
}

/// O poisoned: NaN inside the view, `sentinel` in its gaps.
fn poisoned<T: Element>(c: &Case, qs: &HeadsShape, sentinel: T) -> Vec<T> {
    let mut o = vec![sentinel; qs.required_len().unwrap()];
    for b in 0..c.batch {
        for h in 0..c.heads_q {
            for i in 0..c.seq_q {
                for x in 0..c.d {
                    o[b * qs.stride_b + h * qs.stride_h + i * qs.stride_s + x] =
                        T::from_f32(f32::NAN);
                }
            }
        }
    }
    o
}

/// Whether a refusal is expected: a forced row that does not take the case, or a case the
/// decode family leaves to the Hopper family on another GPU.
fn refusal_expected(ctx: &Arc<CudaContext>, c: &Case, r: &Result<(), Error>) -> bool {
    matches!(r, Err(Error::NotSupported { .. }))
        && (forced_variant() || (!c.decode_takes() && !is_hopper(ctx)))
}

/// One case: the poisoned O, the launch, then every element against the f64 reference.
fn run_case<T: Element + DeviceRepr + ValidAsZeroBits>(
    ctx: &Arc<CudaContext>,
    c: Case,
    rng: &mut StdRng,
) {
    let stream = ctx.default_stream();
    let ops = operands::<T>(&stream, &c, rng);
    let qs = ops.qs;
    let sentinel = T::from_f32(7.0);
    let mut o = upload(&stream, &poisoned(&c, &qs, sentinel));
    let mut lse = upload(&stream, &vec![f32::NAN; c.batch * c.heads_q * c.seq_q]);
    let r = launch(&c, &ops, &mut o, &mut lse);
    if refusal_expected(ctx, &c, &r) {
        println!("SKIP {c:?} {:?}: {}", T::DTYPE, r.unwrap_err());
        return;
    }
    r.unwrap_or_else(|e| panic!("{c:?} {:?}: {e}", T::DTYPE));
    let o_got = stream.clone_dtoh(&o).unwrap();
    let lse_got = stream.clone_dtoh(&lse).unwrap();
    let scale = 1.0 / (c.d as f64).sqrt();
    let (ro, rl) = attention_reference_aligned(
        (&ops.q, &ops.qs),
        (&ops.k, &ops.ks),
        (&ops.v, &ops.ks),
        ops.mask.as_ref(),
        c.causal,
        scale,
    );
    let (mut num, mut den, mut lse_err, mut empty) = (0f64, 0f64, 0f64, 0usize);
    for b in 0..c.batch {
        for h in 0..c.heads_q {
            for i in 0..c.seq_q {
                let li = (b * c.heads_q + h) * c.seq_q + i;
                let row_empty = rl[li] == f64::NEG_INFINITY;
                if row_empty {
                    empty += 1;
                    assert_eq!(
                        lse_got[li],
                        f32::NEG_INFINITY,
                        "{c:?}: LSE[{b},{h},{i}] of an empty row"
                    );
                } else {
                    lse_err = lse_err.max((lse_got[li] as f64 - rl[li]).abs());
                }
                for x in 0..c.d {
                    let got = o_got[b * qs.stride_b + h * qs.stride_h + i * qs.stride_s + x]
                        .to_f32() as f64;
                    assert!(
                        got.is_finite(),
                        "{c:?}: O[{b},{h},{i},{x}] = {got} (not written?)"
                    );
                    if row_empty {
                        assert_eq!(got, 0.0, "{c:?}: O[{b},{h},{i},{x}] of an empty row");
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
            if at % qs.stride_h >= c.d {
                // f16 and bf16 widen to f32 exactly and one to one.
                assert_eq!(
                    x.to_f32().to_bits(),
                    sentinel.to_f32().to_bits(),
                    "{c:?}: a gap of O was written at {at}"
                );
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
    assert!(rel <= tol, "{c:?} {:?}: rel {rel:.3e}", T::DTYPE);
    assert!(
        lse_err <= 1e-3,
        "{c:?} {:?}: LSE err {lse_err:.3e}",
        T::DTYPE
    );
}

fn run_both(ctx: &Arc<CudaContext>, c: Case, rng: &mut StdRng) {
    run_case::<bf16>(ctx, c, rng);
    run_case::<f16>(ctx, c, rng);
}

/// seq_q 1..16 over GQA groups 1, 4, 8 and MQA, keys not a multiple of the tile or block,
/// both alignments, no mask.
#[test]
fn decode_matches_reference() {
    let Some(ctx) = device("decode_matches_reference") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    let cases = [
        case(2, 4, 4, 1, 1, 128),
        case(2, 4, 4, 1, 1000, 128),
        case(3, 8, 8, 3, 777, 64).causal(BR),
        case(1, 2, 2, 16, 4097, 128).causal(BR),
        case(1, 2, 2, 16, 300, 64).causal(TL),
        case(4, 32, 8, 1, 8999, 128),
        case(2, 32, 8, 4, 2049, 128).causal(BR),
        case(2, 16, 4, 2, 1500, 64).causal(TL).bshd(),
        case(2, 16, 2, 2, 3001, 128).causal(BR),
        case(1, 8, 1, 2, 5000, 64).causal(BR),
        case(2, 16, 1, 1, 9000, 128),
        case(1, 4, 1, 4, 123, 128).causal(BR).bshd(),
        case(1, 6, 3, 8, 641, 64).causal(BR),
        case(1, 5, 5, 13, 47, 128).causal(BR),
        case(1, 4, 2, 7, 2500, 128).causal(TL),
    ];
    for c in cases {
        run_both(&ctx, c, &mut rng);
    }
}

/// Block masks: one for all, per KV head (with GQA), per query head (group 1), blocks that
/// are and are not multiples of the 16-key tile, empty and full rows, with causality.
#[test]
fn decode_masked_matches_reference() {
    let Some(ctx) = device("decode_masked_matches_reference") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    use MaskKind::*;
    let cases = [
        case(2, 8, 8, 1, 4000, 128).mask(Shared, 16, 128),
        case(2, 32, 8, 1, 8999, 128).mask(PerKvHead, 16, 64),
        case(2, 32, 8, 4, 3000, 64)
            .mask(PerKvHead, 4, 100)
            .causal(BR),
        case(3, 4, 4, 2, 2000, 128)
            .mask(PerQueryHead, 128, 128)
            .causal(BR),
        case(1, 16, 2, 2, 1111, 128)
            .mask(Shared, 2, 16)
            .causal(BR)
            .bshd(),
        case(2, 8, 1, 2, 6000, 64).mask(PerKvHead, 64, 7),
        case(1, 4, 4, 16, 900, 128)
            .mask(PerQueryHead, 16, 33)
            .causal(TL),
        case(1, 8, 2, 4, 257, 128).mask(Shared, 128, 128).causal(BR),
    ];
    for c in cases {
        run_both(&ctx, c, &mut rng);
    }
}

/// No key at all, queries before the first key (bottom-right with seq_q > seq_k), every row
/// empty, one key.
#[test]
fn decode_edge_cases() {
    let Some(ctx) = device("decode_edge_cases") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    let mut all_empty = case(2, 8, 2, 2, 500, 128).mask(MaskKind::Shared, 16, 128);
    all_empty.density = 0.0;
    let cases = [
        case(2, 4, 2, 3, 0, 128),
        case(1, 4, 4, 5, 0, 64).causal(BR),
        case(2, 4, 4, 16, 9, 128).causal(BR),
        case(1, 8, 2, 4, 3, 64).causal(BR),
        case(1, 2, 2, 16, 1, 128).causal(TL),
        all_empty,
        case(1, 1, 1, 1, 1, 64).causal(BR),
    ];
    for c in cases {
        run_both(&ctx, c, &mut rng);
    }
}

/// Shapes the decode family leaves to the Hopper family (more than 16 query rows per KV head;
/// per-query-head patterns under GQA; a mask of several query blocks), run there (or refused
/// typed on another GPU).
#[test]
fn decode_leaves_other_shapes() {
    let Some(ctx) = device("decode_leaves_other_shapes") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    let cases = [
        case(1, 8, 2, 5, 700, 128).causal(BR),
        case(1, 4, 4, 17, 300, 64),
        case(2, 8, 2, 2, 900, 128).mask(MaskKind::PerQueryHead, 128, 128),
    ];
    for c in cases {
        assert!(!c.decode_takes(), "{c:?}");
        run_both(&ctx, c, &mut rng);
    }
    // A mask of two 4-query blocks: neither family takes it (Hopper: 128 x 128 blocks only).
    let c = case(1, 4, 4, 8, 200, 128).mask(MaskKind::Shared, 4, 128);
    let stream = ctx.default_stream();
    let ops = operands::<bf16>(&stream, &c, &mut rng);
    let before = poisoned(&c, &ops.qs, bf16::from_f32(7.0));
    let mut o = upload(&stream, &before);
    let mut lse = upload(&stream, &vec![f32::NAN; c.batch * c.heads_q * c.seq_q]);
    let r = launch(&c, &ops, &mut o, &mut lse);
    assert!(matches!(r, Err(Error::NotSupported { .. })), "{c:?}: {r:?}");
    let after = stream.clone_dtoh(&o).unwrap();
    assert!(
        after
            .iter()
            .zip(&before)
            .all(|(a, b)| a.to_bits() == b.to_bits()),
        "{c:?}: O written by a refused call"
    );
}

/// 100 launches bitwise identical (O and LSE): a case the split rule splits (few (batch, KV
/// head) pairs, long keys) and one it does not (many pairs).
#[test]
fn decode_is_deterministic() {
    let Some(ctx) = device("decode_is_deterministic") else {
        return;
    };
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    for c in [
        case(1, 8, 2, 2, 9000, 128)
            .mask(MaskKind::PerKvHead, 16, 64)
            .causal(BR),
        case(64, 32, 8, 1, 2000, 128).causal(BR),
    ] {
        let ops = operands::<bf16>(&stream, &c, &mut rng);
        let mut o = stream
            .alloc_zeros::<bf16>(ops.qs.required_len().unwrap())
            .unwrap();
        let mut lse = stream
            .alloc_zeros::<f32>(c.batch * c.heads_q * c.seq_q)
            .unwrap();
        let mut first: Option<(Vec<bf16>, Vec<f32>)> = None;
        for run in 0..100 {
            stream.memset_zeros(&mut o).unwrap();
            let r = launch(&c, &ops, &mut o, &mut lse);
            if run == 0 && refusal_expected(&ctx, &c, &r) {
                println!("SKIP {c:?}: {}", r.unwrap_err());
                break;
            }
            r.unwrap();
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
                    assert!(same, "{c:?}: run {run} differs from the first");
                }
            }
        }
        println!("{c:?}: 100 runs bitwise identical (O and LSE)");
    }
}

/// A few small cases, for compute-sanitizer (run.sh sanitize): a split launch with a mask and
/// GQA, an unsplit one with empty rows.
#[test]
fn decode_sanitized() {
    let Some(ctx) = device("decode_sanitized") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    run_case::<bf16>(
        &ctx,
        case(1, 8, 2, 2, 1500, 128)
            .mask(MaskKind::PerKvHead, 16, 64)
            .causal(BR),
        &mut rng,
    );
    run_case::<f16>(&ctx, case(2, 4, 4, 3, 37, 64).causal(BR).bshd(), &mut rng);
}

/// A decode step captured in a CUDA graph (no host synchronization or allocation outside the
/// stream-ordered scratch pool): 100 replays bitwise equal to the eager call, and a replay
/// on new queries equal to the eager call on them (the graph holds pointers, not values).
/// A split case (the workspace and the combine kernel in the graph) and an unsplit one.
#[test]
fn decode_replays_in_a_cuda_graph() {
    use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
    let Some(ctx) = device("decode_replays_in_a_cuda_graph") else {
        return;
    };
    // SAFETY: every buffer of this test is created, used and freed on `stream` alone, so
    // stream order is all the synchronization there is to manage (cudarc's per-buffer
    // events, recorded outside the capture, are not wanted inside it).
    unsafe { ctx.disable_event_tracking() };
    let stream = ctx.new_stream().unwrap();
    let mut rng = StdRng::seed_from_u64(seed());
    for c in [
        case(1, 8, 2, 2, 6000, 128)
            .mask(MaskKind::PerKvHead, 16, 64)
            .causal(BR),
        case(64, 32, 8, 1, 1000, 128).causal(BR),
    ] {
        let mut ops = operands::<bf16>(&stream, &c, &mut rng);
        let q_next: Vec<bf16> = random_vec(ops.q.len(), &mut rng);
        let mut o = stream
            .alloc_zeros::<bf16>(ops.qs.required_len().unwrap())
            .unwrap();
        let mut lse = stream
            .alloc_zeros::<f32>(c.batch * c.heads_q * c.seq_q)
            .unwrap();
        let poison_o = vec![bf16::from_f32(f32::NAN); ops.qs.required_len().unwrap()];
        let poison_lse = vec![f32::NAN; c.batch * c.heads_q * c.seq_q];
        // Eager, on both queries: the expected outputs (and the set-up the capture needs).
        let mut eager = Vec::new();
        for q in [ops.q.clone(), q_next.clone()] {
            stream.memcpy_htod(&q, &mut ops.dq).unwrap();
            let r = launch(&c, &ops, &mut o, &mut lse);
            if refusal_expected(&ctx, &c, &r) {
                println!("SKIP {c:?}: {}", r.unwrap_err());
                break;
            }
            r.unwrap();
            eager.push((
                stream.clone_dtoh(&o).unwrap(),
                stream.clone_dtoh(&lse).unwrap(),
            ));
        }
        if eager.len() < 2 {
            continue;
        }
        let same = |got: &(Vec<bf16>, Vec<f32>), want: &(Vec<bf16>, Vec<f32>)| {
            got.0
                .iter()
                .zip(&want.0)
                .all(|(a, b)| a.to_bits() == b.to_bits())
                && got
                    .1
                    .iter()
                    .zip(&want.1)
                    .all(|(a, b)| a.to_bits() == b.to_bits())
        };
        stream.memcpy_htod(&ops.q, &mut ops.dq).unwrap();
        stream.synchronize().unwrap();
        stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .unwrap();
        launch(&c, &ops, &mut o, &mut lse).unwrap();
        let graph = stream
            .end_capture(CUgraphInstantiate_flags(0))
            .unwrap_or_else(|e| panic!("{c:?}: the decode attention did not capture: {e}"))
            .expect("a captured call has nodes");
        for rep in 0..100 {
            stream.memcpy_htod(&poison_o, &mut o).unwrap();
            stream.memcpy_htod(&poison_lse, &mut lse).unwrap();
            graph.launch().unwrap();
            let got = (
                stream.clone_dtoh(&o).unwrap(),
                stream.clone_dtoh(&lse).unwrap(),
            );
            assert!(
                same(&got, &eager[0]),
                "{c:?}: replay {rep} differs from the eager call"
            );
        }
        stream.memcpy_htod(&q_next, &mut ops.dq).unwrap();
        stream.memcpy_htod(&poison_o, &mut o).unwrap();
        graph.launch().unwrap();
        let got = (
            stream.clone_dtoh(&o).unwrap(),
            stream.clone_dtoh(&lse).unwrap(),
        );
        assert!(
            same(&got, &eager[1]),
            "{c:?}: a replay on new queries differs from the eager call on them"
        );
        stream.synchronize().unwrap();
        println!("{c:?}: captured, 100 replays bitwise equal to eager, new queries too");
    }
}

// ---- serving layouts: per-sequence key counts and paged K/V --------------------------------

use common::gpu_layout::{self, draw_lens, LayoutCase, PerHead, Prepared};

/// A layout case on the decode family (Backend::Decode): checked against the reference, or a
/// refusal a forced row explains (another dtype or head_dim) skipped.
fn run_layout<T: Element + DeviceRepr>(ctx: &Arc<CudaContext>, c: &LayoutCase, rng: &mut StdRng) {
    assert!(c.rows_per_kv_head() <= 16, "{c:?}: not a decode shape");
    let stream = ctx.default_stream();
    let p = Prepared::<T>::new(&stream, c, rng);
    match p.run(&stream, &p.options(sparsek::Backend::Decode)) {
        Ok(()) => {}
        Err(e @ Error::NotSupported { .. }) if forced_variant() => println!("SKIP {c:?}: {e}"),
        Err(e) => panic!("{c:?} {:?}: {e}", T::DTYPE),
    }
}

/// Paged K/V (shuffled pools; pages of 16, 64, 128 and 256 keys) and per-sequence key counts
/// (not multiples of anything, 0 included) on the decode family: seq_q 1..16 with grouped
/// heads 1, 4, 8 and MQA, both alignments, masks over logical key blocks (block_k a multiple
/// of the page, or the page a multiple of block_k; shared, per KV head, per query head),
/// d 64 and 128, f16 and bf16, against the f64 reference.
#[test]
fn decode_paged_matches_reference() {
    let Some(ctx) = device("decode_paged_matches_reference") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    use PerHead::{Kv, Query, Shared};
    let mut cases = Vec::new();
    for (i, &(heads, heads_kv, seq_q, d, most, page)) in [
        (32usize, 8usize, 1usize, 128usize, 3000usize, 16usize),
        (8, 2, 4, 128, 2500, 64),
        (8, 1, 2, 64, 1777, 128),
        (4, 4, 16, 64, 999, 256),
        (16, 2, 2, 128, 4100, 16),
        (6, 3, 5, 64, 641, 64),
        (2, 2, 8, 128, 300, 256),
        (16, 1, 1, 64, 9000, 128),
    ]
    .iter()
    .enumerate()
    {
        let lens = draw_lens(&mut rng, 3 + i % 3, most);
        let base = LayoutCase::paged(heads, heads_kv, seq_q, d, &lens, page).slack(i * 7 % 20);
        let causal = [Some(BR), None, Some(TL)][i % 3];
        let with_causal = |c: LayoutCase| match causal {
            Some(a) => c.causal(a),
            None => c,
        };
        cases.push(with_causal(base.clone()));
        // Masks nesting with the page: block_k the page, twice it, or a quarter of it.
        let block_k = [page, 2 * page, (page / 4).max(4)][i % 3];
        let per_head = if heads == heads_kv {
            [Shared, Kv, Query][i % 3]
        } else {
            [Shared, Kv][i % 2]
        };
        cases.push(with_causal(base.clone().mask(16, block_k, per_head)));
        // The same lengths without pages (seqlens_k alone).
        cases.push(with_causal(base.unpaged()));
    }
    for (i, c) in cases.iter().enumerate() {
        if i % 2 == 0 {
            run_layout::<bf16>(&ctx, c, &mut rng);
        } else {
            run_layout::<f16>(&ctx, c, &mut rng);
        }
    }
}

/// Every sequence empty; one key; a page of one key; the split rule's splits past a short
/// sequence's keys (one long sequence among short ones, forced splits when the bundle sets
/// SPARSEK_ATTENTION_DECODE_SPLITS); NaN in every K and V row no sequence keeps.
#[test]
fn decode_paged_edge_cases() {
    let Some(ctx) = device("decode_paged_edge_cases") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    let cases = [
        LayoutCase::paged(8, 2, 1, 128, &[0, 0, 0], 16).causal(BR),
        LayoutCase::paged(8, 2, 2, 64, &[1, 0], 16)
            .causal(BR)
            .slack(5),
        LayoutCase::paged(4, 4, 3, 128, &[5, 17, 2], 1).causal(BR),
        LayoutCase::paged(8, 8, 1, 128, &[20000, 3, 0, 129], 64).causal(BR),
        LayoutCase::paged(4, 1, 4, 64, &[15000, 1, 16], 16).mask(16, 64, PerHead::Kv),
        // Rows past each sequence's keys (its last page's, spare pages, the padded cache's
        // tail) NaN: never read into a result.
        LayoutCase::paged(8, 2, 3, 128, &[37, 0, 200, 1], 16)
            .causal(BR)
            .poison_tail(),
        LayoutCase::paged(8, 2, 3, 64, &[37, 0, 200, 1], 64)
            .mask(16, 32, PerHead::Shared)
            .poison_tail(),
        LayoutCase::paged(4, 4, 2, 128, &[100, 7, 63], 16)
            .slack(9)
            .unpaged()
            .causal(TL)
            .poison_tail(),
    ];
    for (i, c) in cases.iter().enumerate() {
        if i % 2 == 0 {
            run_layout::<bf16>(&ctx, c, &mut rng);
        } else {
            run_layout::<f16>(&ctx, c, &mut rng);
        }
    }
}

/// 100 launches of a paged decode bitwise identical: one the split rule splits (few pairs,
/// long sequences of different lengths) and one it does not.
#[test]
fn decode_paged_is_deterministic() {
    let Some(ctx) = device("decode_paged_is_deterministic") else {
        return;
    };
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    for c in [
        LayoutCase::paged(8, 2, 2, 128, &[9000, 31, 4500], 16)
            .mask(16, 64, PerHead::Kv)
            .causal(BR),
        LayoutCase::paged(32, 8, 1, 128, &draw_lens(&mut rng, 48, 2000), 64).causal(BR),
    ] {
        let p = Prepared::<bf16>::new(&stream, &c, &mut rng);
        if let Some(e) =
            gpu_layout::repeats_identical(&stream, &p, &p.options(sparsek::Backend::Decode))
        {
            assert!(forced_variant(), "{c:?}: {e}");
            println!("SKIP {c:?}: {e}");
        }
    }
}

/// The layout's refusals on the device, typed, O and LSE untouched: with check_indices, a
/// page a sequence reaches outside the pool and a key count above max_seqlen_k (or
/// negative); a page table without key counts; host arrays with device operands. Entries
/// past a sequence's pages are not checked (-1 there passes).
#[test]
fn decode_paged_refusals_leave_outputs_untouched() {
    let Some(ctx) = device("decode_paged_refusals_leave_outputs_untouched") else {
        return;
    };
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    let c = LayoutCase::paged(8, 2, 1, 128, &[100, 37, 0], 16).causal(BR);
    let p = Prepared::<bf16>::new(&stream, &c, &mut rng);
    let cache = p.cache.as_ref().unwrap();
    let checked = p.options(sparsek::Backend::Decode).check_indices(true);
    let (o_len, lse_len) = p.out_lens();
    let before_o = vec![bf16::from_f32(3.0); o_len];
    let before_lse = vec![5.0f32; lse_len];
    let mut o = upload(&stream, &before_o);
    let mut lse = upload(&stream, &before_lse);
    let mut out_of_pool = cache.table.clone();
    out_of_pool[cache.max_pages + 1] = cache.num_pages as i32; // sequence 1's second page
    let mut negative = cache.table.clone();
    negative[2] = -2; // sequence 0's third page
    let out_of_pool = gpu_layout::upload_i32(&stream, &out_of_pool);
    let negative = gpu_layout::upload_i32(&stream, &negative);
    let above = gpu_layout::upload_i32(&stream, &[101, 37, 0]);
    let below = gpu_layout::upload_i32(&stream, &[100, -1, 0]);
    let max_len = c.max_seqlen_k();
    let cases: Vec<(&str, Result<(), Error>, &str)> = vec![
        (
            "a page outside the pool",
            p.launch_with(
                &mut o,
                &mut lse,
                &p.dlens,
                Some(&out_of_pool),
                max_len,
                &checked,
            ),
            "sequence 1, page 1",
        ),
        (
            "a negative page",
            p.launch_with(
                &mut o,
                &mut lse,
                &p.dlens,
                Some(&negative),
                max_len,
                &checked,
            ),
            "sequence 0, page 2",
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
            "seqlens_k",
        ),
        (
            "a negative key count",
            p.launch_with(
                &mut o,
                &mut lse,
                &below,
                p.dtable.as_ref(),
                max_len,
                &checked,
            ),
            "sequence 1",
        ),
    ];
    for (what, r, keyword) in cases {
        match r {
            Err(Error::NotSupported { .. }) if forced_variant() => {
                println!("SKIP {what}: the forced row does not take the case");
                return;
            }
            Err(e @ Error::InvalidArgument(_)) => {
                let m = e.to_string();
                println!("{what}: {m}");
                assert!(m.contains(keyword), "{what}: {m:?} lacks {keyword:?}");
            }
            other => panic!("{what}: {other:?}"),
        }
    }
    // A page table without key counts, and host arrays with device operands.
    let (qs, ks) = (p.qs, p.ks);
    let run =
        |o: &mut CudaSlice<bf16>, lse: &mut CudaSlice<f32>, layout: &sparsek::SequenceLayout| {
            sparsek::attention_with_layout(
                Heads::device(&p.dq, qs.batch, qs.heads, qs.seq, qs.head_dim),
                Heads::device(&p.dk, ks.batch, ks.heads, ks.seq, ks.head_dim),
                Heads::device(&p.dv, ks.batch, ks.heads, ks.seq, ks.head_dim),
                HeadsMut::device(o, qs.batch, qs.heads, qs.seq, qs.head_dim),
                Some(LseMut::Device(lse)),
                None,
                layout,
                &checked,
            )
        };
    let table =
        sparsek::PageTable::new(p.dtable.as_ref().unwrap(), cache.max_pages, cache.page_size);
    let r = run(
        &mut o,
        &mut lse,
        &sparsek::SequenceLayout::new(3).page_table(table),
    );
    assert!(
        matches!(r, Err(Error::InvalidArgument(ref m)) if m.contains("needs seqlens_k")),
        "{r:?}"
    );
    let host_table = sparsek::PageTable::new(&cache.table, cache.max_pages, cache.page_size);
    let r = run(
        &mut o,
        &mut lse,
        &sparsek::SequenceLayout::new(3)
            .seqlens_k(&p.dlens, max_len)
            .page_table(host_table),
    );
    assert!(matches!(r, Err(Error::MixedLocations(_))), "{r:?}");
    let same = |got: Vec<bf16>, want: &[bf16]| {
        got.iter()
            .zip(want)
            .all(|(a, b)| a.to_bits() == b.to_bits())
    };
    assert!(
        same(stream.clone_dtoh(&o).unwrap(), &before_o),
        "O written by a refused call"
    );
    assert!(
        stream
            .clone_dtoh(&lse)
            .unwrap()
            .iter()
            .zip(&before_lse)
            .all(|(a, b)| a.to_bits() == b.to_bits()),
        "LSE written by a refused call"
    );
    // Checked and good (-1 past each sequence's pages): runs.
    p.launch(&mut o, &mut lse, &checked).unwrap();
}

/// For compute-sanitizer (run.sh sanitize): a paged split decode, and the same with
/// unchecked bad values (pages outside the pool, counts above max_seqlen_k and negative),
/// which the kernel clamps: no access leaves the views.
#[test]
fn decode_paged_sanitized() {
    let Some(ctx) = device("decode_paged_sanitized") else {
        return;
    };
    let stream = ctx.default_stream();
    let mut rng = StdRng::seed_from_u64(seed());
    let c = LayoutCase::paged(8, 2, 2, 128, &[1500, 3, 0], 16)
        .mask(16, 64, PerHead::Kv)
        .causal(BR);
    run_layout::<bf16>(&ctx, &c, &mut rng);
    let p = Prepared::<bf16>::new(&stream, &c, &mut rng);
    let cache = p.cache.as_ref().unwrap();
    let bad_table: Vec<i32> = cache
        .table
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            if i % 3 == 0 {
                i32::MAX - i as i32
            } else if i % 3 == 1 {
                -7
            } else {
                x
            }
        })
        .collect();
    let bad_table = gpu_layout::upload_i32(&stream, &bad_table);
    let bad_lens = gpu_layout::upload_i32(&stream, &[i32::MAX, -5, 1 << 20]);
    let (o_len, lse_len) = p.out_lens();
    let mut o = stream.alloc_zeros::<bf16>(o_len).unwrap();
    let mut lse = stream.alloc_zeros::<f32>(lse_len).unwrap();
    match p.launch_with(
        &mut o,
        &mut lse,
        &bad_lens,
        Some(&bad_table),
        c.max_seqlen_k(),
        &p.options(sparsek::Backend::Decode),
    ) {
        Ok(()) => stream.synchronize().unwrap(),
        Err(e @ Error::NotSupported { .. }) if forced_variant() => println!("SKIP: {e}"),
        Err(e) => panic!("unchecked values: {e}"),
    }
}
