//! CPU attention and top-k gating against independent references: attention against naive
//! f64 (random block masks with empty and full rows, causal top-left and bottom-right, top-k,
//! none; f16/bf16; head_dim 64, 128 and 40; sequences not multiples of the block; strided
//! views; one pattern, one per query head or one per KV head; grouped-query heads 1, 4, 8 and
//! MQA), the gating against a sort with the documented comparator, and the refusals.

mod common;

use common::{attention_reference_aligned, random_patterns, random_vec, seed, tolerance};
use rand::{rngs::StdRng, Rng, SeedableRng};
use sparsek::attention::{block_topk_pooled, block_topk_scores, pooled_scores, topk_nnzb};
use sparsek::{
    attention_into, bf16, f16, AttentionOptions, BlockPatterns, CausalAlignment, Element, Error,
    Heads, HeadsMut, HeadsShape, LseMut, MaskOperand, TopkOptions,
};

#[derive(Debug, Clone, Copy)]
enum MaskKind {
    None,
    Random,
    TopK(usize),
}

/// Which heads a per-head mask is made for.
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
    /// K and V's heads (dividing `heads`).
    heads_kv: usize,
    seq_q: usize,
    seq_k: usize,
    d: usize,
    block: usize,
    mask: MaskKind,
    causal: Option<CausalAlignment>,
    per_head: PerHead,
    bshd: bool,
}

/// The case's view of a `seq`-long tensor of `heads` heads: `[batch, seq, heads, d]` with 3
/// elements of padding per head row when `bshd` (CPU: any padding), else packed.
fn shape(c: &Case, heads: usize, seq: usize) -> HeadsShape {
    common::heads_shape(c.batch, heads, seq, c.d, c.bshd.then_some(3))
}

fn options(c: &Case) -> AttentionOptions {
    AttentionOptions::new()
        .causal(c.causal.is_some())
        .causal_alignment(c.causal.unwrap_or_default())
}

fn topk_options(c: &Case, top: usize) -> TopkOptions {
    TopkOptions::new(top)
        .causal(c.causal.is_some())
        .causal_alignment(c.causal.unwrap_or_default())
        .blocks(c.block, c.block)
}

fn heads<'a, T>(data: &'a [T], s: &HeadsShape) -> Heads<'a, T> {
    Heads::host(data, s.batch, s.heads, s.seq, s.head_dim)
        .with_strides(s.stride_b, s.stride_h, s.stride_s)
}

fn run_case<T: Element>(c: Case, rng: &mut StdRng) {
    let (qs, ks) = (shape(&c, c.heads, c.seq_q), shape(&c, c.heads_kv, c.seq_k));
    let q: Vec<T> = random_vec(qs.required_len().unwrap(), rng);
    let k: Vec<T> = random_vec(ks.required_len().unwrap(), rng);
    let v: Vec<T> = random_vec(ks.required_len().unwrap(), rng);
    let (qb, kb) = (c.seq_q.div_ceil(c.block), c.seq_k.div_ceil(c.block));
    let per_head = match c.per_head {
        PerHead::Shared => None,
        PerHead::Query => Some((c.batch, c.heads)),
        PerHead::Kv => Some((c.batch, c.heads_kv)),
    };
    let mask = match c.mask {
        MaskKind::None => None,
        MaskKind::Random => Some(random_patterns(rng, per_head, qb, kb, c.block, 0.5)),
        MaskKind::TopK(top) => Some(
            block_topk_pooled(&heads(&q, &qs), &heads(&k, &ks), &topk_options(&c, top)).unwrap(),
        ),
    };
    let nan = T::from_f32(f32::NAN);
    let sentinel = T::from_f32(7.0);
    let mut o = vec![sentinel; qs.required_len().unwrap()];
    for b in 0..c.batch {
        for h in 0..c.heads {
            for i in 0..c.seq_q {
                for x in 0..c.d {
                    o[b * qs.stride_b + h * qs.stride_h + i * qs.stride_s + x] = nan;
                }
            }
        }
    }
    let mut lse = vec![f32::NAN; c.batch * c.heads * c.seq_q];
    let opts = options(&c);
    attention_into(
        heads(&q, &qs),
        heads(&k, &ks),
        heads(&v, &ks),
        HeadsMut::host(&mut o, qs.batch, qs.heads, qs.seq, qs.head_dim).with_strides(
            qs.stride_b,
            qs.stride_h,
            qs.stride_s,
        ),
        Some(LseMut::Host(&mut lse)),
        mask.as_ref().map(MaskOperand::Host),
        &opts,
    )
    .unwrap();
    let scale = 1.0 / (c.d as f64).sqrt();
    let (ro, rl) = attention_reference_aligned(
        (&q, &qs),
        (&k, &ks),
        (&v, &ks),
        mask.as_ref(),
        c.causal,
        scale,
    );
    let (mut num, mut den, mut lse_err, mut empty) = (0f64, 0f64, 0f64, 0usize);
    for b in 0..c.batch {
        for h in 0..c.heads {
            for i in 0..c.seq_q {
                let li = (b * c.heads + h) * c.seq_q + i;
                if rl[li] == f64::NEG_INFINITY {
                    empty += 1;
                    assert_eq!(lse[li], f32::NEG_INFINITY, "{c:?}: LSE of empty row {li}");
                } else {
                    lse_err = lse_err.max((lse[li] as f64 - rl[li]).abs());
                }
                for x in 0..c.d {
                    let got =
                        o[b * qs.stride_b + h * qs.stride_h + i * qs.stride_s + x].to_f32() as f64;
                    let want = ro[li * c.d + x];
                    assert!(got.is_finite(), "{c:?}: O[{b},{h},{i},{x}] not written");
                    if rl[li] == f64::NEG_INFINITY {
                        assert_eq!(got, 0.0, "{c:?}: O of an empty row");
                    }
                    num += (got - want) * (got - want);
                    den += want * want;
                }
            }
        }
    }
    // The gaps of a strided O are untouched.
    if c.bshd {
        for b in 0..c.batch {
            for i in 0..c.seq_q {
                for h in 0..c.heads {
                    for x in c.d..qs.stride_h {
                        let at = b * qs.stride_b + i * qs.stride_s + h * qs.stride_h + x;
                        if at < o.len() {
                            assert_eq!(o[at], sentinel, "{c:?}: a gap of O was written");
                        }
                    }
                }
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
        "{c:?} {:?}: rel {rel:.2e}, lse err {lse_err:.2e}, empty rows {empty}",
        T::DTYPE
    );
    assert!(rel <= tol, "{c:?}: rel {rel:.3e} above {tol:.0e}");
    assert!(lse_err <= 1e-3, "{c:?}: LSE error {lse_err:.3e}");
}

#[allow(clippy::too_many_arguments)]
fn case(
    batch: usize,
    heads: usize,
    seq_q: usize,
    seq_k: usize,
    d: usize,
    block: usize,
    mask: MaskKind,
    causal: bool,
    per_head: bool,
    bshd: bool,
) -> Case {
    Case {
        batch,
        heads,
        heads_kv: heads,
        seq_q,
        seq_k,
        d,
        block,
        mask,
        causal: causal.then_some(CausalAlignment::TopLeft),
        per_head: if per_head {
            PerHead::Query
        } else {
            PerHead::Shared
        },
        bshd,
    }
}

#[test]
fn cpu_attention_matches_f64() {
    let mut rng = StdRng::seed_from_u64(seed());
    use MaskKind::*;
    let cases = [
        case(1, 2, 200, 200, 64, 128, None, false, false, false),
        case(2, 2, 150, 333, 128, 64, Random, false, true, false),
        case(1, 3, 200, 200, 40, 64, Random, true, true, true),
        case(2, 1, 257, 129, 64, 128, Random, false, false, true),
        case(1, 2, 300, 300, 64, 64, TopK(2), false, false, false),
        case(1, 2, 300, 260, 128, 64, TopK(3), true, false, true),
        case(2, 2, 100, 100, 64, 32, None, true, false, false),
        case(1, 1, 1, 1, 64, 128, None, false, false, false),
        case(1, 2, 70, 0, 64, 64, None, false, false, false),
        case(1, 1, 130, 7, 64, 128, None, true, false, false),
    ];
    for c in cases {
        run_case::<bf16>(c, &mut rng);
        run_case::<f16>(c, &mut rng);
    }
}

/// Grouped-query heads (ratios 1, 4, 8 and MQA) and the bottom-right causal alignment with
/// seq_q below, equal to and above seq_k, with masks per query head, per KV head and shared,
/// top-k gating (pooled per query head against its KV head; bottom-right candidates) and
/// strided views.
#[test]
fn cpu_grouped_heads_and_bottom_right_match_f64() {
    let mut rng = StdRng::seed_from_u64(seed());
    use MaskKind::*;
    let br = Some(CausalAlignment::BottomRight);
    let tl = Some(CausalAlignment::TopLeft);
    let gqa = |c: Case, heads_kv: usize| Case { heads_kv, ..c };
    let aligned = |c: Case, causal: Option<CausalAlignment>| Case { causal, ..c };
    let per = |c: Case, per_head: PerHead| Case { per_head, ..c };
    let cases = [
        // GQA ratio 1 (8/8), 4 (8/2), 8 (16/2) and MQA (6/1), no mask and top-left causal.
        gqa(case(1, 8, 150, 150, 64, 64, None, false, false, false), 8),
        gqa(case(2, 8, 130, 200, 64, 64, None, true, false, false), 2),
        gqa(case(1, 16, 100, 140, 40, 64, None, false, false, true), 2),
        gqa(case(2, 6, 90, 170, 128, 64, None, true, false, false), 1),
        // Masks per query head and per KV head, with GQA and MQA.
        per(
            gqa(case(2, 8, 200, 260, 64, 64, Random, false, false, false), 2),
            PerHead::Query,
        ),
        per(
            gqa(case(2, 8, 200, 260, 64, 64, Random, true, false, true), 2),
            PerHead::Kv,
        ),
        per(
            gqa(case(1, 4, 150, 150, 64, 32, Random, false, false, false), 1),
            PerHead::Kv,
        ),
        per(
            gqa(case(2, 4, 150, 150, 64, 32, Random, false, false, false), 4),
            PerHead::Kv,
        ),
        // Bottom-right: seq_q < seq_k (a KV cache), = and > (the first queries keep nothing),
        // single queries (decode) included.
        aligned(case(2, 2, 70, 300, 64, 64, None, false, false, false), br),
        aligned(case(1, 2, 200, 200, 64, 64, None, false, false, false), br),
        aligned(case(1, 2, 300, 130, 64, 64, None, false, false, true), br),
        aligned(
            gqa(case(2, 8, 1, 333, 64, 64, None, false, false, false), 2),
            br,
        ),
        aligned(
            gqa(case(1, 4, 5, 5, 64, 64, None, false, false, false), 1),
            br,
        ),
        aligned(case(1, 2, 40, 0, 64, 64, None, false, false, false), br),
        // Bottom-right with masks (per KV head, per query head) and with top-k gating.
        aligned(
            per(
                gqa(case(1, 8, 77, 600, 64, 64, Random, false, false, false), 2),
                PerHead::Kv,
            ),
            br,
        ),
        aligned(
            per(
                gqa(case(2, 4, 260, 130, 64, 64, Random, false, false, true), 2),
                PerHead::Query,
            ),
            br,
        ),
        aligned(
            gqa(
                case(1, 8, 100, 500, 64, 64, TopK(3), false, false, false),
                2,
            ),
            br,
        ),
        aligned(
            gqa(
                case(1, 4, 300, 200, 64, 64, TopK(2), false, false, false),
                1,
            ),
            br,
        ),
        aligned(
            gqa(
                case(1, 4, 300, 200, 64, 64, TopK(2), false, false, false),
                4,
            ),
            tl,
        ),
    ];
    for c in cases {
        run_case::<bf16>(c, &mut rng);
        run_case::<f16>(c, &mut rng);
    }
}

/// Grouped-query attention is multi-head attention of K and V with each KV head repeated
/// for its group (`repeat_interleave`), and a per-KV-head mask is the per-query-head mask
/// of each KV head's pattern repeated: the CPU gives the same bits both ways.
#[test]
fn cpu_grouped_heads_equal_repeated_heads() {
    let mut rng = StdRng::seed_from_u64(seed());
    let (batch, heads, heads_kv, seq_q, seq_k, d, block) = (2, 6, 2, 150, 230, 64, 64);
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
    let (k_rep, v_rep) = (repeat(&k), repeat(&v));
    let (qb, kb) = (seq_q.div_ceil(block), seq_k.div_ceil(block));
    let per_kv = random_patterns(&mut rng, Some((batch, heads_kv)), qb, kb, block, 0.5);
    let per_query = {
        let masks: Vec<sparsek::BlockMask> = (0..batch * heads)
            .map(|p| {
                let (b, h) = (p / heads, p % heads);
                let src = b * heads_kv + h / group;
                sparsek::BlockMask::from_fn(qb, kb, |r, c| per_kv.row(src, r).contains(&(c as i32)))
                    .unwrap()
            })
            .collect();
        BlockPatterns::from_block_masks(block, block, &masks)
            .unwrap()
            .with_heads(batch, heads)
            .unwrap()
    };
    for causal in [
        None,
        Some(CausalAlignment::TopLeft),
        Some(CausalAlignment::BottomRight),
    ] {
        let opts = AttentionOptions::new()
            .causal(causal.is_some())
            .causal_alignment(causal.unwrap_or_default());
        let grouped = sparsek::attention(
            Heads::host(&q, batch, heads, seq_q, d),
            Heads::host(&k, batch, heads_kv, seq_k, d),
            Heads::host(&v, batch, heads_kv, seq_k, d),
            Some(&per_kv),
            &opts,
        )
        .unwrap();
        let repeated = sparsek::attention(
            Heads::host(&q, batch, heads, seq_q, d),
            Heads::host(&k_rep, batch, heads, seq_k, d),
            Heads::host(&v_rep, batch, heads, seq_k, d),
            Some(&per_query),
            &opts,
        )
        .unwrap();
        let bits = |x: &(Vec<bf16>, Vec<f32>)| {
            (
                x.0.iter().map(|e| e.to_bits()).collect::<Vec<_>>(),
                x.1.iter().map(|e| e.to_bits()).collect::<Vec<_>>(),
            )
        };
        assert_eq!(bits(&grouped), bits(&repeated), "causal {causal:?}");
    }
}

/// The documented rank: NaN as -inf, then total order, higher first; ties to the lower block.
fn reference_topk(row: &[f32], top: usize) -> Vec<i32> {
    let key = |x: f32| if x.is_nan() { f32::NEG_INFINITY } else { x };
    let mut idx: Vec<usize> = (0..row.len()).collect();
    idx.sort_by(|&a, &b| key(row[b]).total_cmp(&key(row[a])).then(a.cmp(&b)));
    let mut kept: Vec<i32> = idx[..top.min(row.len())]
        .iter()
        .map(|&j| j as i32)
        .collect();
    kept.sort_unstable();
    kept
}

#[test]
fn cpu_gating_matches_the_documented_rank() {
    let mut rng = StdRng::seed_from_u64(seed());
    use CausalAlignment::{BottomRight as BR, TopLeft as TL};
    for &(batch, heads, seq_q, seq_k, bq, bk, top, causal, align) in &[
        (
            2usize, 3usize, 1000usize, 1300usize, 128usize, 128usize, 4usize, false, TL,
        ),
        (1, 2, 900, 900, 128, 128, 3, true, TL),
        (1, 2, 500, 700, 64, 100, 5, true, TL),
        (1, 1, 300, 300, 128, 128, 0, false, TL),
        (1, 2, 300, 400, 128, 128, 9, false, TL),
        // Bottom-right: fewer queries than keys, as many, and more (the first query blocks
        // have no candidate).
        (1, 2, 300, 1300, 128, 128, 3, true, BR),
        (2, 1, 900, 900, 128, 128, 3, true, BR),
        (1, 2, 1000, 333, 64, 100, 2, true, BR),
        (1, 1, 1, 2000, 128, 128, 4, true, BR),
    ] {
        let (qb, kb) = (seq_q.div_ceil(bq), seq_k.div_ceil(bk));
        let offset = match align {
            TL => 0i64,
            BR => seq_k as i64 - seq_q as i64,
        };
        // Coarse scores: many ties, ±0, -inf and NaN.
        let scores: Vec<f32> = (0..batch * heads * qb * kb)
            .map(|_| match rng.random_range(0..20) {
                0 => f32::NAN,
                1 => f32::NEG_INFINITY,
                2 => -0.0,
                3 => 0.0,
                _ => rng.random_range(-2i32..3) as f32,
            })
            .collect();
        let opts = TopkOptions::new(top)
            .causal(causal)
            .causal_alignment(align)
            .blocks(bq, bk);
        let got = block_topk_scores(&scores, batch, heads, seq_q, seq_k, &opts).unwrap();
        assert_eq!(
            got.nnzb(),
            topk_nnzb(batch, heads, seq_q, seq_k, &opts).unwrap()
        );
        for p in 0..batch * heads {
            for i in 0..qb {
                // Key block j is a candidate when j·bk <= (i+1)·bq - 1 + offset.
                let cand = if causal {
                    (0..kb)
                        .filter(|&j| (j * bk) as i64 <= ((i + 1) * bq) as i64 - 1 + offset)
                        .count()
                } else {
                    kb
                };
                let row = &scores[(p * qb + i) * kb..(p * qb + i) * kb + cand];
                assert_eq!(
                    got.row(p, i),
                    reference_topk(row, top).as_slice(),
                    "pattern {p} row {i} ({align:?})"
                );
            }
        }
    }
}

#[test]
fn cpu_pooled_scores_follow_the_documented_order() {
    let mut rng = StdRng::seed_from_u64(seed());
    // K with as many heads as Q, half as many (GQA) and one (MQA): query head h is scored
    // against KV head h / (heads / heads_kv).
    for heads_kv in [4, 2, 1] {
        let (batch, heads, seq_q, seq_k, d) = (2, 4, 300, 200, 64);
        let group = heads / heads_kv;
        let q: Vec<bf16> = random_vec(batch * heads * seq_q * d, &mut rng);
        let k: Vec<bf16> = random_vec(batch * heads_kv * seq_k * d, &mut rng);
        let qh = Heads::host(&q, batch, heads, seq_q, d);
        let kh = Heads::host(&k, batch, heads_kv, seq_k, d);
        let got = pooled_scores(&qh, &kh, 128, 64).unwrap();
        let mean = |x: &[bf16],
                    hn: usize,
                    seq: usize,
                    b: usize,
                    h: usize,
                    blk: usize,
                    bs: usize,
                    c: usize| {
            let rows = (blk * bs..((blk + 1) * bs).min(seq)).len();
            let mut total = 0f32;
            for g in (0..rows).step_by(16) {
                let mut part = 0f32;
                for r in blk * bs + g..blk * bs + (g + 16).min(rows) {
                    part += x[((b * hn + h) * seq + r) * d + c].to_f32();
                }
                total += part;
            }
            total / rows as f32
        };
        let (qb, kb) = (seq_q.div_ceil(128), seq_k.div_ceil(64));
        assert_eq!(got.len(), batch * heads * qb * kb);
        for b in 0..batch {
            for h in 0..heads {
                for i in 0..qb {
                    for j in 0..kb {
                        let mut acc = 0f32;
                        for c in 0..d {
                            acc = mean(&q, heads, seq_q, b, h, i, 128, c)
                                .mul_add(mean(&k, heads_kv, seq_k, b, h / group, j, 64, c), acc);
                        }
                        let at = ((b * heads + h) * qb + i) * kb + j;
                        assert_eq!(
                            got[at].to_bits(),
                            acc.to_bits(),
                            "heads_kv {heads_kv}: score ({b},{h},{i},{j})"
                        );
                    }
                }
            }
        }
        // The pooled top-k mask is one pattern per query head, recorded for (batch, heads).
        let mask = block_topk_pooled(&qh, &kh, &TopkOptions::new(2).blocks(128, 64)).unwrap();
        assert_eq!(
            (mask.patterns(), mask.heads()),
            (batch * heads, Some((batch, heads)))
        );
    }
}

/// topk_nnzb's closed form (no loop over the query blocks) against a count row by row, over
/// blocks, top-k, lengths and both alignments, bottom-right with more queries than keys
/// included (rows with no candidate).
#[test]
fn cpu_gating_block_counts_match_a_row_count() {
    let mut rng = StdRng::seed_from_u64(seed());
    for _ in 0..3000 {
        let (bq, bk) = (rng.random_range(1..40usize), rng.random_range(1..40usize));
        let (seq_q, seq_k) = (rng.random_range(0..400usize), rng.random_range(0..400usize));
        let top = rng.random_range(0..12usize);
        let causal = rng.random_bool(0.8);
        let align = if rng.random_bool(0.5) {
            CausalAlignment::TopLeft
        } else {
            CausalAlignment::BottomRight
        };
        let opts = TopkOptions::new(top)
            .causal(causal)
            .causal_alignment(align)
            .blocks(bq, bk);
        let (qb, kb) = (seq_q.div_ceil(bq), seq_k.div_ceil(bk));
        let offset = if causal && align == CausalAlignment::BottomRight {
            seq_k as i64 - seq_q as i64
        } else {
            0
        };
        let want: usize = (0..qb)
            .map(|i| {
                let cand = if causal {
                    (0..kb)
                        .filter(|&j| (j * bk) as i64 <= ((i + 1) * bq) as i64 - 1 + offset)
                        .count()
                } else {
                    kb
                };
                top.min(cand)
            })
            .sum();
        let what =
            format!("blocks {bq}x{bk}, seq {seq_q}/{seq_k}, top {top}, causal {causal} {align:?}");
        assert_eq!(
            topk_nnzb(2, 3, seq_q, seq_k, &opts).unwrap(),
            6 * want,
            "{what}"
        );
        // The mask itself keeps that many.
        let scores = vec![1.0f32; qb * kb];
        let mask = block_topk_scores(&scores, 1, 1, seq_q, seq_k, &opts).unwrap();
        assert_eq!(mask.nnzb(), want, "{what}");
    }
}

#[test]
fn attention_refusals_leave_outputs_untouched() {
    let (b, h, s, d) = (1, 2, 64, 32);
    let x = vec![bf16::from_f32(0.5); b * h * s * d];
    let mut o = vec![bf16::from_f32(3.0); b * h * s * d];
    let mut lse = vec![5.0f32; b * h * s];
    let before = (o.clone(), lse.clone());
    let check = |what: &str, r: Result<(), Error>| {
        assert!(r.is_err(), "{what}: accepted");
        println!("{what}: {}", r.unwrap_err());
    };
    let opts = AttentionOptions::new();
    let mk = |n| Heads::host(&x[..n], b, h, s, d);
    // K and V lengths differ.
    check(
        "V seq",
        attention_into(
            mk(x.len()),
            mk(x.len()),
            Heads::host(&x, b, h, s - 1, d),
            HeadsMut::host(&mut o, b, h, s, d),
            Some(LseMut::Host(&mut lse)),
            None,
            &opts,
        ),
    );
    // A buffer too small for its view.
    check(
        "short K",
        attention_into(
            mk(x.len()),
            Heads::host(&x[..10], b, h, s, d),
            mk(x.len()),
            HeadsMut::host(&mut o, b, h, s, d),
            Some(LseMut::Host(&mut lse)),
            None,
            &opts,
        ),
    );
    // LSE too short.
    check(
        "short LSE",
        attention_into(
            mk(x.len()),
            mk(x.len()),
            mk(x.len()),
            HeadsMut::host(&mut o, b, h, s, d),
            Some(LseMut::Host(&mut lse[..3])),
            None,
            &opts,
        ),
    );
    // A mask of other dims, and one with 3 patterns for batch*heads = 2.
    let wrong = BlockPatterns::from_parts(16, 16, 3, 4, 1, vec![0, 0, 0, 0], vec![]).unwrap();
    check(
        "mask dims",
        attention_into(
            mk(x.len()),
            mk(x.len()),
            mk(x.len()),
            HeadsMut::host(&mut o, b, h, s, d),
            None,
            Some(MaskOperand::Host(&wrong)),
            &opts,
        ),
    );
    let three = BlockPatterns::from_parts(32, 32, 2, 2, 3, vec![0; 7], vec![]).unwrap();
    check(
        "patterns",
        attention_into(
            mk(x.len()),
            mk(x.len()),
            mk(x.len()),
            HeadsMut::host(&mut o, b, h, s, d),
            None,
            Some(MaskOperand::Host(&three)),
            &opts,
        ),
    );
    // A bad scale; a device backend for host operands.
    check(
        "scale",
        attention_into(
            mk(x.len()),
            mk(x.len()),
            mk(x.len()),
            HeadsMut::host(&mut o, b, h, s, d),
            None,
            None,
            &AttentionOptions::new().scale(f32::NAN),
        ),
    );
    check(
        "backend",
        attention_into(
            mk(x.len()),
            mk(x.len()),
            mk(x.len()),
            HeadsMut::host(&mut o, b, h, s, d),
            None,
            None,
            &AttentionOptions::new().backend(sparsek::Backend::Hopper),
        ),
    );
    // Malformed patterns never become BlockPatterns.
    assert!(BlockPatterns::from_parts(32, 32, 2, 2, 1, vec![0, 2, 1], vec![0, 1]).is_err());
    assert!(BlockPatterns::from_parts(32, 32, 2, 2, 1, vec![0, 2, 2], vec![1, 0]).is_err());
    assert!(BlockPatterns::from_parts(32, 32, 2, 2, 1, vec![0, 1, 2], vec![0, 2]).is_err());
    assert!(BlockPatterns::from_parts(0, 32, 2, 2, 1, vec![0, 0, 0], vec![]).is_err());
    assert!(block_topk_scores(&[0.0; 3], 1, 1, 128, 512, &TopkOptions::new(1)).is_err());
    assert!(topk_nnzb(1, 1, 10, 10, &TopkOptions::new(1).blocks(0, 4)).is_err());
    assert_eq!((o, lse), before);
}

/// Grouped-query shapes the rules refuse, each with its typed error, O and LSE untouched:
/// K's heads not dividing Q's (or 0 with query heads), V's heads not K's, O's not Q's, a
/// per-head mask made for heads that are neither Q's nor K's, or for another batch. Empty
/// calls with heads 0 pass.
#[test]
fn grouped_heads_refusals_leave_outputs_untouched() {
    let (b, hq, s, d) = (2, 4, 40, 16);
    let x = vec![bf16::from_f32(0.25); b * hq * s * d];
    let mut o = vec![bf16::from_f32(3.0); b * hq * s * d];
    let mut lse = vec![5.0f32; b * hq * s];
    let before = (o.clone(), lse.clone());
    let run = |o: &mut [bf16],
               lse: &mut [f32],
               (hk, hv, ho): (usize, usize, usize),
               mask: Option<&BlockPatterns>| {
        attention_into(
            Heads::host(&x, b, hq, s, d),
            Heads::host(&x, b, hk, s, d),
            Heads::host(&x, b, hv, s, d),
            HeadsMut::host(o, b, ho, s, d),
            Some(LseMut::Host(lse)),
            mask.map(MaskOperand::Host),
            &AttentionOptions::new()
                .causal(true)
                .causal_alignment(CausalAlignment::BottomRight),
        )
    };
    let expect = |what: &str, r: Result<(), Error>, ok: fn(&Error) -> bool| {
        let e = r.expect_err(what);
        assert!(ok(&e), "{what}: {e:?}");
        println!("{what}: {e}");
    };
    let groups = |e: &Error| matches!(e, Error::HeadGroups { .. });
    let shape = |e: &Error| matches!(e, Error::ShapeMismatch { .. });
    expect(
        "K heads 3 of 4",
        run(&mut o, &mut lse, (3, 3, hq), None),
        groups,
    );
    expect(
        "K heads 8 of 4",
        run(&mut o, &mut lse, (8, 8, hq), None),
        groups,
    );
    expect(
        "K heads 0 of 4",
        run(&mut o, &mut lse, (0, 0, hq), None),
        groups,
    );
    expect(
        "V heads 4, K 2",
        run(&mut o, &mut lse, (2, 4, hq), None),
        shape,
    );
    expect("O heads 2", run(&mut o, &mut lse, (2, 2, 2), None), shape);
    let qb = s.div_ceil(16);
    let made_for = |batch: usize, heads: usize| {
        random_patterns(
            &mut StdRng::seed_from_u64(1),
            Some((batch, heads)),
            qb,
            qb,
            16,
            0.5,
        )
    };
    // K has 2 heads: masks made for 4 (Q's) or 2 (K's) heads pass, 1 head (3 patterns is
    // neither) does not, nor another batch.
    expect(
        "mask for (2, 1) heads",
        run(&mut o, &mut lse, (2, 2, hq), Some(&made_for(2, 1))),
        shape,
    );
    expect(
        "mask for (1, 2) heads",
        run(&mut o, &mut lse, (2, 2, hq), Some(&made_for(1, 2))),
        shape,
    );
    // As many patterns as batch * K's heads, made for another (batch, heads).
    expect(
        "mask for (4, 1) heads",
        run(&mut o, &mut lse, (2, 2, hq), Some(&made_for(4, 1))),
        shape,
    );
    expect(
        "mask for (2, 8) heads",
        run(&mut o, &mut lse, (2, 2, hq), Some(&made_for(2, 8))),
        shape,
    );
    let unrecorded =
        BlockPatterns::from_parts(16, 16, qb, qb, 4, vec![0; 4 * qb + 1], vec![]).unwrap();
    expect(
        "per-KV-head mask not recorded",
        run(&mut o, &mut lse, (2, 2, hq), Some(&unrecorded)),
        |e| matches!(e, Error::InvalidArgument(_)),
    );
    // Gating: K's heads must divide Q's too.
    expect(
        "pooled gating, K heads 3 of 4",
        block_topk_pooled(
            &Heads::host(&x, b, hq, s, d),
            &Heads::host(&x, b, 3, s, d),
            &TopkOptions::new(1).blocks(16, 16),
        )
        .map(|_| ()),
        groups,
    );
    assert_eq!((o.clone(), lse.clone()), before);
    // The accepted neighbours: per-query-head and per-KV-head masks, and empty calls.
    run(&mut o, &mut lse, (2, 2, hq), Some(&made_for(2, 4))).unwrap();
    run(&mut o, &mut lse, (2, 2, hq), Some(&made_for(2, 2))).unwrap();
    run(&mut o, &mut lse, (1, 1, hq), None).unwrap();
    for (hq, hk) in [(0, 0), (0, 2)] {
        attention_into(
            Heads::host(&x, b, hq, s, d),
            Heads::host(&x, b, hk, s, d),
            Heads::host(&x, b, hk, s, d),
            HeadsMut::host(&mut o, b, hq, s, d),
            None,
            None,
            &AttentionOptions::new(),
        )
        .unwrap();
    }
}

/// FP8 Q, K, V, O mean `stored * scale` and attention takes no scales: both CPU entries refuse
/// them with the products' typed error, O and LSE (poisoned) untouched, as the device does.
#[test]
fn cpu_attention_refuses_fp8_elements() {
    fn refuses<T: Element>(rng: &mut StdRng) {
        let (b, h, s, d) = (1, 2, 40, 32);
        let n = b * h * s * d;
        let (q, k, v): (Vec<T>, Vec<T>, Vec<T>) =
            (random_vec(n, rng), random_vec(n, rng), random_vec(n, rng));
        let poison = T::from_f32(3.0);
        let mut o = vec![poison; n];
        let mut lse = vec![f32::NAN; b * h * s];
        let opts = AttentionOptions::new().causal(true);
        let e = attention_into(
            Heads::host(&q, b, h, s, d),
            Heads::host(&k, b, h, s, d),
            Heads::host(&v, b, h, s, d),
            HeadsMut::host(&mut o, b, h, s, d),
            Some(LseMut::Host(&mut lse)),
            None,
            &opts,
        );
        assert!(
            matches!(e, Err(Error::UnsupportedTypes { input, output, .. })
                if input == T::DTYPE && output == T::DTYPE),
            "{}: attention_into gave {e:?}",
            T::DTYPE
        );
        assert!(
            o.iter().all(|x| x.to_f32() == 3.0) && lse.iter().all(|x| x.is_nan()),
            "{}: O or LSE written by a refused call",
            T::DTYPE
        );
        let e = sparsek::attention(
            Heads::host(&q, b, h, s, d),
            Heads::host(&k, b, h, s, d),
            Heads::host(&v, b, h, s, d),
            None,
            &opts,
        );
        assert!(
            matches!(e, Err(Error::UnsupportedTypes { .. })),
            "{}: attention gave {:?}",
            T::DTYPE,
            e.err()
        );
    }
    let mut rng = StdRng::seed_from_u64(seed());
    refuses::<sparsek::F8E4M3>(&mut rng);
    refuses::<sparsek::F8E5M2>(&mut rng);
}

/// One serving-layout case: `lens[b]` keys per sequence, paged in pages of `page` keys (a
/// shuffled pool) or padded to `max_seqlen_k + 5` keys; a mask of `block_q × block_k` blocks
/// over the longest sequence's key blocks, or none.
#[derive(Debug, Clone)]
struct LayoutCase {
    heads: usize,
    heads_kv: usize,
    seq_q: usize,
    d: usize,
    lens: Vec<usize>,
    /// max_seqlen_k above the longest length by this much (an upper bound).
    slack: usize,
    page: Option<usize>,
    mask: Option<(usize, usize)>,
    per_head: PerHead,
    causal: Option<CausalAlignment>,
}

/// The case's K and V (pool or padded), layout and mask, run on the CPU against the f64
/// reference; returns O's and LSE's bits (for the bitwise comparisons).
fn run_layout_case<T: Element>(c: &LayoutCase, rng: &mut StdRng) -> (Vec<u32>, Vec<u32>) {
    let batch = c.lens.len();
    let max_len = c.lens.iter().copied().max().unwrap_or(0) + c.slack;
    let cache = c.page.map(|page| {
        common::PagedCache::shuffled(rng, &c.lens, page, max_len.div_ceil(page) + 1, 3)
    });
    let ks = match &cache {
        Some(p) => HeadsShape::packed(p.num_pages, c.heads_kv, p.page_size, c.d),
        None => HeadsShape::packed(batch, c.heads_kv, max_len + 5, c.d),
    };
    let qs = HeadsShape::packed(batch, c.heads, c.seq_q, c.d);
    let q: Vec<T> = random_vec(qs.required_len().unwrap(), rng);
    let k: Vec<T> = random_vec(ks.required_len().unwrap(), rng);
    let v: Vec<T> = random_vec(ks.required_len().unwrap(), rng);
    let lens: Vec<i32> = c.lens.iter().map(|&n| n as i32).collect();
    let mut layout = sparsek::SequenceLayout::new(batch).seqlens_k(&lens, max_len);
    if let Some(p) = &cache {
        layout = layout.page_table(sparsek::PageTable::new(&p.table, p.max_pages, p.page_size));
    }
    let per_head = match c.per_head {
        PerHead::Shared => None,
        PerHead::Query => Some((batch, c.heads)),
        PerHead::Kv => Some((batch, c.heads_kv)),
    };
    let mask = c.mask.map(|(bq, bk)| {
        common::random_patterns_blocks(
            rng,
            per_head,
            c.seq_q.div_ceil(bq),
            max_len.div_ceil(bk),
            (bq, bk),
            0.5,
        )
    });
    let mut o = vec![T::from_f32(f32::NAN); qs.required_len().unwrap()];
    let mut lse = vec![f32::NAN; batch * c.heads * c.seq_q];
    let opts = AttentionOptions::new()
        .causal(c.causal.is_some())
        .causal_alignment(c.causal.unwrap_or_default());
    sparsek::attention_with_layout(
        heads(&q, &qs),
        heads(&k, &ks),
        heads(&v, &ks),
        HeadsMut::host(&mut o, batch, c.heads, c.seq_q, c.d),
        Some(LseMut::Host(&mut lse)),
        mask.as_ref().map(MaskOperand::Host),
        &layout,
        &opts,
    )
    .unwrap();
    let reference = match &cache {
        Some(p) => p.reference(),
        None => common::RefLayout {
            seqlens_k: &lens,
            pages: None,
        },
    };
    let (ro, rl) = common::attention_reference_layout(
        (&q, &qs),
        (&k, &ks),
        (&v, &ks),
        mask.as_ref(),
        c.causal,
        1.0 / (c.d as f64).sqrt(),
        Some(reference),
    );
    let (mut num, mut den, mut lse_err, mut empty) = (0f64, 0f64, 0f64, 0usize);
    for (li, &want_lse) in rl.iter().enumerate() {
        if want_lse == f64::NEG_INFINITY {
            empty += 1;
            assert_eq!(lse[li], f32::NEG_INFINITY, "{c:?}: LSE of empty row {li}");
        } else {
            lse_err = lse_err.max((lse[li] as f64 - want_lse).abs());
        }
        for x in 0..c.d {
            let got = o[li * c.d + x].to_f32() as f64;
            assert!(got.is_finite(), "{c:?}: O row {li} not written");
            if want_lse == f64::NEG_INFINITY {
                assert_eq!(got, 0.0, "{c:?}: O of an empty row");
            }
            let want = ro[li * c.d + x];
            num += (got - want) * (got - want);
            den += want * want;
        }
    }
    let rel = if den > 0.0 {
        (num / den).sqrt()
    } else {
        num.sqrt()
    };
    let tol = tolerance(T::DTYPE, T::DTYPE);
    println!(
        "{c:?} {:?}: rel {rel:.2e}, lse err {lse_err:.2e}, empty rows {empty}",
        T::DTYPE
    );
    assert!(rel <= tol, "{c:?}: rel {rel:.3e} above {tol:.0e}");
    assert!(lse_err <= 1e-3, "{c:?}: LSE error {lse_err:.3e}");
    (
        o.iter().map(|x| x.to_f32().to_bits()).collect(),
        lse.iter().map(|x| x.to_bits()).collect(),
    )
}

/// Per-sequence key counts (not multiples of anything, 0 included) and paged K/V (shuffled
/// tables, pages of 16, 64, 128 and 256 keys): decode (seq_q 1..16 with grouped heads) and
/// prefill, both alignments, masks over logical key blocks (block_k a multiple of the page
/// or the page a multiple of block_k), f16 and bf16, d 64 and 128, against the f64
/// reference.
#[test]
fn cpu_paged_and_counted_keys_match_f64() {
    let mut rng = StdRng::seed_from_u64(seed());
    use CausalAlignment::{BottomRight as BR, TopLeft as TL};
    let lens = |rng: &mut StdRng, batch: usize, most: usize| -> Vec<usize> {
        let mut l: Vec<usize> = (0..batch).map(|_| rng.random_range(0..=most)).collect();
        l[0] = 0;
        if batch > 1 {
            l[1] = most;
        }
        l
    };
    for (i, &(heads, heads_kv, seq_q, d, most, page, mask, per_head, causal)) in [
        (
            8usize,
            2usize,
            1usize,
            128usize,
            700usize,
            Some(16usize),
            None,
            PerHead::Shared,
            Some(BR),
        ),
        (
            8,
            2,
            1,
            64,
            500,
            Some(64),
            Some((128, 128)),
            PerHead::Kv,
            Some(BR),
        ),
        (
            4,
            1,
            4,
            128,
            300,
            Some(128),
            Some((16, 64)),
            PerHead::Kv,
            Some(BR),
        ),
        (
            4,
            4,
            16,
            64,
            600,
            Some(256),
            Some((16, 128)),
            PerHead::Query,
            None,
        ),
        (2, 2, 7, 64, 333, None, Some((8, 32)), PerHead::Kv, Some(BR)),
        (
            6,
            3,
            3,
            64,
            257,
            Some(16),
            Some((4, 48)),
            PerHead::Shared,
            Some(TL),
        ),
        (
            4,
            2,
            150,
            64,
            400,
            Some(128),
            Some((64, 128)),
            PerHead::Query,
            Some(BR),
        ),
        (
            2,
            1,
            200,
            128,
            300,
            Some(256),
            None,
            PerHead::Shared,
            Some(BR),
        ),
        (2, 2, 100, 64, 250, None, None, PerHead::Shared, Some(TL)),
        (
            4,
            2,
            90,
            64,
            130,
            Some(64),
            Some((32, 128)),
            PerHead::Kv,
            None,
        ),
    ]
    .iter()
    .enumerate()
    {
        let c = LayoutCase {
            heads,
            heads_kv,
            seq_q,
            d,
            lens: lens(&mut rng, 3, most),
            slack: rng.random_range(0..20),
            page,
            mask,
            per_head,
            causal,
        };
        if i % 2 == 0 {
            run_layout_case::<bf16>(&c, &mut rng);
        } else {
            run_layout_case::<f16>(&c, &mut rng);
        }
    }
}

/// Attention over a paged cache equals attention over the same keys gathered into a padded
/// K and V with the same key counts, bit for bit (the CPU sums in key order either way); and a
/// count equal to K's seq is the padded batch's result.
#[test]
fn cpu_paged_equals_gathered_and_counts_equal_padded() {
    let mut rng = StdRng::seed_from_u64(seed());
    let (batch, hq, heads_kv, seq_q, d, page) = (3, 4, 2, 5, 64, 16);
    let lens = [37usize, 0, 90];
    let max_len = 90;
    let cache = common::PagedCache::shuffled(&mut rng, &lens, page, 7, 2);
    let pool_shape = HeadsShape::packed(cache.num_pages, heads_kv, page, d);
    let k: Vec<bf16> = random_vec(pool_shape.required_len().unwrap(), &mut rng);
    let v: Vec<bf16> = random_vec(pool_shape.required_len().unwrap(), &mut rng);
    let q: Vec<bf16> = random_vec(batch * hq * seq_q * d, &mut rng);
    let (kg, vg) = (
        cache.gather(&k, heads_kv, d, max_len),
        cache.gather(&v, heads_kv, d, max_len),
    );
    let opts = AttentionOptions::new()
        .causal(true)
        .causal_alignment(CausalAlignment::BottomRight);
    let run = |k: &[bf16], v: &[bf16], ks: HeadsShape, layout: &sparsek::SequenceLayout| {
        let mut o = vec![bf16::from_f32(f32::NAN); batch * hq * seq_q * d];
        let mut lse = vec![f32::NAN; batch * hq * seq_q];
        sparsek::attention_with_layout(
            Heads::host(&q, batch, hq, seq_q, d),
            heads(k, &ks),
            heads(v, &ks),
            HeadsMut::host(&mut o, batch, hq, seq_q, d),
            Some(LseMut::Host(&mut lse)),
            None,
            layout,
            &opts,
        )
        .unwrap();
        (
            o.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            lse.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        )
    };
    let paged = run(
        &k,
        &v,
        pool_shape,
        &sparsek::SequenceLayout::new(batch)
            .seqlens_k(&cache.lens, max_len)
            .page_table(sparsek::PageTable::new(&cache.table, cache.max_pages, page)),
    );
    let gathered_shape = HeadsShape::packed(batch, heads_kv, max_len, d);
    let gathered = run(
        &kg,
        &vg,
        gathered_shape,
        &sparsek::SequenceLayout::new(batch).seqlens_k(&cache.lens, max_len),
    );
    assert_eq!(paged, gathered);
    // Every count = K's seq: the padded batch.
    let full = vec![max_len as i32; batch];
    let counted = run(
        &kg,
        &vg,
        gathered_shape,
        &sparsek::SequenceLayout::new(batch).seqlens_k(&full, max_len),
    );
    let padded = run(&kg, &vg, gathered_shape, &sparsek::SequenceLayout::padded());
    assert_eq!(counted, padded);
}

/// The layout's refusals, each typed, O and LSE untouched: a page index out of the pool, a
/// key count above max_seqlen_k or negative, a page table without key counts, max_seqlen_k
/// above the pages' capacity or K's keys, arrays shorter than their entries, K's batch not
/// the layout's, a page size the table does not state, a mask counted from the page size, a
/// mask's key blocks not nesting with the pages, the layout's batch not Q's.
#[test]
fn layout_refusals_leave_outputs_untouched() {
    let (batch, heads, seq_q, d, page, pages) = (2, 2, 3, 16, 8, 5);
    let x = vec![bf16::from_f32(0.25); pages * heads * page * d];
    let q = vec![bf16::from_f32(0.5); batch * heads * seq_q * d];
    let mut o = vec![bf16::from_f32(3.0); batch * heads * seq_q * d];
    let mut lse = vec![5.0f32; batch * heads * seq_q];
    let before = (o.clone(), lse.clone());
    let lens = [10i32, 3];
    let table = [4i32, 0, 2, -1];
    let run = |o: &mut [bf16],
               lse: &mut [f32],
               kv_batch: usize,
               kv_seq: usize,
               mask: Option<&BlockPatterns>,
               layout: &sparsek::SequenceLayout| {
        attention_into_layout(
            &q,
            &x,
            (batch, heads, seq_q, d),
            (kv_batch, kv_seq),
            o,
            lse,
            mask,
            layout,
        )
    };
    // Two sequences, 2 table entries each, pages of 8 keys.
    fn paged<'a>(lens: &'a [i32], table: &'a [i32], max_len: usize) -> sparsek::SequenceLayout<'a> {
        sparsek::SequenceLayout::new(2)
            .seqlens_k(lens, max_len)
            .page_table(sparsek::PageTable::new(table, 2, 8))
    }
    let lens_v = lens.to_vec();
    let table_v = table.to_vec();
    let out_of_pool = [4i32, 5, 2, -1];
    let above = [17i32, 3];
    let negative = [10i32, -1];
    let cases: Vec<(&str, Result<(), Error>, &str)> = vec![
        (
            "a page index out of the pool",
            run(
                &mut o,
                &mut lse,
                pages,
                page,
                None,
                &paged(&lens_v, &out_of_pool, 16),
            ),
            "outside [0, 5)",
        ),
        (
            "a key count above max_seqlen_k",
            run(
                &mut o,
                &mut lse,
                pages,
                page,
                None,
                &paged(&above, &table_v, 16),
            ),
            "outside [0, max_seqlen_k = 16]",
        ),
        (
            "a negative key count",
            run(
                &mut o,
                &mut lse,
                pages,
                page,
                None,
                &paged(&negative, &table_v, 16),
            ),
            "outside [0, max_seqlen_k",
        ),
        (
            "a page table without key counts",
            run(
                &mut o,
                &mut lse,
                pages,
                page,
                None,
                &sparsek::SequenceLayout::new(batch)
                    .page_table(sparsek::PageTable::new(&table_v, 2, page)),
            ),
            "needs seqlens_k",
        ),
        (
            "max_seqlen_k above the pages' keys",
            run(
                &mut o,
                &mut lse,
                pages,
                page,
                None,
                &paged(&lens_v, &table_v, 17),
            ),
            "max_pages * page_size",
        ),
        (
            "max_seqlen_k above K's keys",
            run(
                &mut o,
                &mut lse,
                batch,
                page,
                None,
                &sparsek::SequenceLayout::new(batch).seqlens_k(&lens_v, 9),
            ),
            "exceeds seq of K",
        ),
        (
            "key counts shorter than the batch",
            run(
                &mut o,
                &mut lse,
                batch,
                page,
                None,
                &sparsek::SequenceLayout::new(batch).seqlens_k(&lens_v[..1], 8),
            ),
            "seqlens_k",
        ),
        (
            "a table shorter than batch * max_pages",
            run(
                &mut o,
                &mut lse,
                pages,
                page,
                None,
                &paged(&lens_v, &table_v[..3], 16),
            ),
            "page_table",
        ),
        (
            "a page size the table does not state",
            run(
                &mut o,
                &mut lse,
                pages,
                page,
                None,
                &sparsek::SequenceLayout::new(batch)
                    .seqlens_k(&lens_v, 16)
                    .page_table(sparsek::PageTable::new(&table_v, 2, 16)),
            ),
            "page_size",
        ),
        (
            "the layout's batch not Q's",
            run(
                &mut o,
                &mut lse,
                pages,
                page,
                None,
                &sparsek::SequenceLayout::new(3)
                    .seqlens_k(&[1, 1, 1], 16)
                    .page_table(sparsek::PageTable::new(&[0, 0, 0, 0, 0, 0], 2, page)),
            ),
            "batch of the layout",
        ),
        (
            "counts without arrays",
            run(
                &mut o,
                &mut lse,
                batch,
                page,
                None,
                &sparsek::SequenceLayout::new(batch),
            ),
            "none of its arrays",
        ),
        (
            "a mask counted from the page size",
            run(
                &mut o,
                &mut lse,
                pages,
                page,
                Some(&BlockPatterns::from_parts(4, 8, 1, 1, 1, vec![0, 1], vec![0]).unwrap()),
                &paged(&lens_v, &table_v, 16),
            ),
            "max_seqlen_k",
        ),
        (
            "mask blocks not nesting with the pages",
            run(
                &mut o,
                &mut lse,
                pages,
                page,
                Some(&BlockPatterns::from_parts(4, 12, 1, 2, 1, vec![0, 1], vec![0]).unwrap()),
                &paged(&lens_v, &table_v, 16),
            ),
            "multiple of the page size",
        ),
    ];
    for (what, r, keyword) in cases {
        let e = r.expect_err(what).to_string();
        println!("{what}: {e}");
        assert!(e.contains(keyword), "{what}: {e:?} lacks {keyword:?}");
    }
    assert_eq!((o, lse), before);
    // The same problems pass with good values.
    let mut o2 = before.0.clone();
    let mut l2 = before.1.clone();
    run(
        &mut o2,
        &mut l2,
        pages,
        page,
        None,
        &paged(&lens_v, &table_v, 16),
    )
    .unwrap();
    assert_ne!(o2, before.0);
}

/// Host attention of packed views over a layout: Q `[batch, heads, seq_q, d]`, K and V
/// `[kv_batch, heads, kv_seq, d]` (both from `kv`).
#[allow(clippy::too_many_arguments)]
fn attention_into_layout(
    q: &[bf16],
    kv: &[bf16],
    (batch, heads, seq_q, d): (usize, usize, usize, usize),
    (kv_batch, kv_seq): (usize, usize),
    o: &mut [bf16],
    lse: &mut [f32],
    mask: Option<&BlockPatterns>,
    layout: &sparsek::SequenceLayout,
) -> Result<(), Error> {
    let kv = &kv[..kv_batch * heads * kv_seq * d];
    sparsek::attention_with_layout(
        Heads::host(q, batch, heads, seq_q, d),
        Heads::host(kv, kv_batch, heads, kv_seq, d),
        Heads::host(kv, kv_batch, heads, kv_seq, d),
        HeadsMut::host(o, batch, heads, seq_q, d),
        Some(LseMut::Host(lse)),
        mask.map(MaskOperand::Host),
        layout,
        &AttentionOptions::new(),
    )
}

// ---- packed (variable-length) sequences --------------------------------------------------

use common::varlen::{draw_lens, MaskHeads, VarlenCase, VarlenData};

/// Runs a packed case on the CPU (host offsets) and checks it against the f64 reference
/// (`VarlenData::check`: every sequence row written, nothing outside O's view); returns O's
/// buffer and the LSE.
fn run_varlen<T: Element>(c: &VarlenCase, rng: &mut StdRng) -> (Vec<T>, Vec<f32>) {
    let data = VarlenData::<T>::new(c, rng);
    let (mut o, mut lse) = (data.o0.clone(), vec![f32::NAN; data.lse_len]);
    let os = data.os;
    let opts = AttentionOptions::new()
        .causal(c.causal.is_some())
        .causal_alignment(c.causal.unwrap_or_default());
    sparsek::attention_with_layout(
        heads(&data.q, &data.qs),
        heads(&data.k, &data.ks),
        heads(&data.v, &data.ks),
        HeadsMut::host(&mut o, os.batch, os.heads, os.seq, os.head_dim).with_strides(
            os.stride_b,
            os.stride_h,
            os.stride_s,
        ),
        Some(LseMut::Host(&mut lse)),
        data.mask.as_ref().map(MaskOperand::Host),
        &data.host_layout(),
        &opts,
    )
    .unwrap_or_else(|e| panic!("{c:?}: {e}"));
    let (rel, lse_err, empty) = data.check(&o, &lse);
    println!(
        "{c:?} {:?}: rel {rel:.2e}, lse err {lse_err:.2e}, empty rows {empty}",
        T::DTYPE
    );
    (o, lse)
}

/// Packed sequences on the CPU against the f64 reference: lengths 0..700 not multiples of
/// the block (empty sequences of queries, of keys and of both), both causal alignments,
/// grouped heads (4/2, 8/2, MQA), 128 × 128 masks per (sequence, query head), per (sequence,
/// KV head) and shared, max_seqlen above the longest, fused `[total, heads, d]` views, one
/// side packed and the other padded, d 64 and 128, f16 and bf16.
#[test]
fn cpu_varlen_matches_f64() {
    let mut rng = StdRng::seed_from_u64(seed());
    use CausalAlignment::{BottomRight as BR, TopLeft as TL};
    let mut cases = Vec::new();
    let (lq, lk) = (draw_lens(&mut rng, 5, 700), draw_lens(&mut rng, 5, 700));
    cases.push(
        VarlenCase::packed(4, 2, 64, &lq, &lk)
            .causal(BR)
            .mask(MaskHeads::Kv),
    );
    let l = draw_lens(&mut rng, 4, 600);
    cases.push(
        VarlenCase::packed(2, 2, 128, &l, &l)
            .causal(TL)
            .mask(MaskHeads::Query),
    );
    cases.push(VarlenCase::packed(4, 1, 64, &[129, 0, 257, 1], &[1, 300, 0, 131]).fused());
    cases.push(
        VarlenCase::packed(4, 2, 64, &[0, 0, 0], &[40, 0, 513])
            .padded_q(200)
            .causal(BR)
            .mask(MaskHeads::Shared),
    );
    cases.push(
        VarlenCase::packed(2, 2, 128, &[300, 1, 0], &[0; 3])
            .padded_k(300)
            .causal(TL),
    );
    cases.push(
        VarlenCase::packed(4, 4, 64, &[100, 5, 260], &[90, 400, 7])
            .slack(50)
            .causal(BR)
            .mask(MaskHeads::Query),
    );
    cases.push(
        VarlenCase::packed(8, 2, 64, &[1, 4, 0, 2], &[700, 3, 50, 0])
            .causal(BR)
            .mask(MaskHeads::Kv),
    );
    cases.push(VarlenCase::packed(2, 1, 128, &[0, 3, 0], &[5, 0, 0]).causal(TL));
    cases.push(
        VarlenCase::packed(4, 2, 64, &[200, 131], &[77, 300])
            .fused()
            .causal(TL)
            .mask(MaskHeads::Kv),
    );
    for (i, c) in cases.iter().enumerate() {
        if i % 2 == 0 {
            run_varlen::<f16>(c, &mut rng);
        } else {
            run_varlen::<bf16>(c, &mut rng);
        }
    }
}

/// No padding work and no crosstalk: each packed sequence's O rows and LSE are bit for bit
/// those of the same sequence alone in a padded batch of one (the same arithmetic on the same
/// values), for both alignments, with a mask per (sequence, KV head).
#[test]
fn cpu_varlen_equals_each_sequence_alone() {
    let mut rng = StdRng::seed_from_u64(seed());
    for causal in [CausalAlignment::TopLeft, CausalAlignment::BottomRight] {
        let c = VarlenCase::packed(4, 2, 64, &[130, 0, 7, 300], &[260, 5, 0, 129])
            .causal(causal)
            .mask(MaskHeads::Kv);
        let data = VarlenData::<bf16>::new(&c, &mut rng);
        let (o, lse) = run_varlen_data(&data);
        let (d, heads, heads_kv) = (c.d, c.heads, c.heads_kv);
        for b in 0..c.batch() {
            let (_, q0, nq) = data.q_rows(b);
            let (_, k0, nk) = data.k_rows(b);
            // Sequence b alone: its rows copied into padded [1, heads, n, d] tensors, its
            // patterns as a set of one sequence.
            let gather = |x: &[bf16], s: &HeadsShape, h_n: usize, r0: usize, n: usize| {
                let mut out = Vec::with_capacity(h_n * n * d);
                for h in 0..h_n {
                    for i in 0..n {
                        let at = h * s.stride_h + (r0 + i) * s.stride_s;
                        out.extend_from_slice(&x[at..at + d]);
                    }
                }
                out
            };
            let q1 = gather(&data.q, &data.qs, heads, q0, nq);
            let k1 = gather(&data.k, &data.ks, heads_kv, k0, nk);
            let v1 = gather(&data.v, &data.ks, heads_kv, k0, nk);
            let m = data.mask.as_ref().unwrap();
            let rows = m.q_blocks();
            let mut masks = Vec::new();
            for hk in 0..heads_kv {
                let p = b * heads_kv + hk;
                masks.push(
                    sparsek::BlockMask::from_fn(rows, m.k_blocks(), |r, col| {
                        m.row(p, r).contains(&(col as i32))
                    })
                    .unwrap(),
                );
            }
            // The mask's rows and columns are counted from the longest sequences; alone, the
            // sequence's own counts.
            let cut = |bm: &sparsek::BlockMask| {
                sparsek::BlockMask::from_fn(nq.div_ceil(128), nk.div_ceil(128), |r, col| {
                    bm.get(r, col).unwrap_or(false)
                })
                .unwrap()
            };
            let alone: Vec<_> = masks.iter().map(cut).collect();
            let patterns = BlockPatterns::from_block_masks(128, 128, &alone)
                .unwrap()
                .with_heads(1, heads_kv)
                .unwrap();
            let mut o1 = vec![bf16::from_f32(f32::NAN); heads * nq * d];
            let mut l1 = vec![f32::NAN; heads * nq];
            attention_into(
                Heads::host(&q1, 1, heads, nq, d),
                Heads::host(&k1, 1, heads_kv, nk, d),
                Heads::host(&v1, 1, heads_kv, nk, d),
                HeadsMut::host(&mut o1, 1, heads, nq, d),
                Some(LseMut::Host(&mut l1)),
                Some(MaskOperand::Host(&patterns)),
                &AttentionOptions::new()
                    .causal(true)
                    .causal_alignment(causal),
            )
            .unwrap();
            for h in 0..heads {
                for i in 0..nq {
                    let at = h * data.os.stride_h + (q0 + i) * data.os.stride_s;
                    let packed: Vec<u16> = o[at..at + d].iter().map(|x| x.to_bits()).collect();
                    let single: Vec<u16> = o1[(h * nq + i) * d..(h * nq + i + 1) * d]
                        .iter()
                        .map(|x| x.to_bits())
                        .collect();
                    assert_eq!(
                        packed, single,
                        "{causal:?}: sequence {b}, head {h}, row {i}"
                    );
                    assert_eq!(
                        lse[data.lse_at(b, h, i)].to_bits(),
                        l1[h * nq + i].to_bits(),
                        "{causal:?}: LSE of sequence {b}, head {h}, row {i}"
                    );
                }
            }
        }
    }
}

/// A prepared packed case on the CPU (no check): O's buffer and the LSE.
fn run_varlen_data<T: Element>(data: &VarlenData<T>) -> (Vec<T>, Vec<f32>) {
    let c = &data.case;
    let (mut o, mut lse) = (data.o0.clone(), vec![f32::NAN; data.lse_len]);
    let os = data.os;
    sparsek::attention_with_layout(
        heads(&data.q, &data.qs),
        heads(&data.k, &data.ks),
        heads(&data.v, &data.ks),
        HeadsMut::host(&mut o, os.batch, os.heads, os.seq, os.head_dim).with_strides(
            os.stride_b,
            os.stride_h,
            os.stride_s,
        ),
        Some(LseMut::Host(&mut lse)),
        data.mask.as_ref().map(MaskOperand::Host),
        &data.host_layout(),
        &AttentionOptions::new()
            .causal(c.causal.is_some())
            .causal_alignment(c.causal.unwrap_or_default()),
    )
    .unwrap();
    (o, lse)
}

/// Packed layouts refused with a typed error, O and the LSE untouched: offsets that disagree
/// with the packed size (a last entry past or short of Q's or K's seq, a start other than 0, a
/// decrease, a sequence longer than max_seqlen), too few offsets, Q or K of batch != 1, a
/// padded side whose batch is not the layout's, a total past batch · max_seqlen, a mask
/// counted from the total or made for Q's batch, packed keys with a page table, key counts
/// above a packed sequence's keys.
#[test]
fn varlen_refusals_leave_outputs_untouched() {
    let (heads, d) = (2, 16);
    let (total_q, total_k) = (10, 12);
    let q = vec![bf16::from_f32(0.5); heads * total_q * d];
    let kv = vec![bf16::from_f32(0.25); 3 * heads * total_k * d];
    let before = (
        vec![bf16::from_f32(3.0); heads * total_q * d],
        vec![5.0f32; heads * total_q],
    );
    let (cu_q, cu_k) = ([0i32, 4, 4, 10], [0i32, 5, 7, 12]);
    let good = sparsek::SequenceLayout::new(3)
        .cu_seqlens_q(&cu_q, 6)
        .cu_seqlens_k(&cu_k, 5);
    // One call on fresh outputs; a refused one must leave them as they were.
    let run = |q_batch: usize,
               (kb, ks): (usize, usize),
               mask: Option<&BlockPatterns>,
               layout: &sparsek::SequenceLayout|
     -> Result<(), Error> {
        let (mut o, mut lse) = before.clone();
        let kv = &kv[..kb * heads * ks * d];
        let qs = total_q / q_batch;
        let r = sparsek::attention_with_layout(
            Heads::host(&q, q_batch, heads, qs, d),
            Heads::host(kv, kb, heads, ks, d),
            Heads::host(kv, kb, heads, ks, d),
            HeadsMut::host(&mut o, q_batch, heads, qs, d),
            Some(LseMut::Host(&mut lse)),
            mask.map(MaskOperand::Host),
            layout,
            &AttentionOptions::new(),
        );
        if r.is_err() {
            assert!(
                o == before.0
                    && lse
                        .iter()
                        .zip(&before.1)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                "O or LSE written by a refused call: {r:?}"
            );
        }
        r
    };
    // A control: the good layout runs.
    let mut o_ok = before.0.clone();
    let mut lse_ok = before.1.clone();
    sparsek::attention_with_layout(
        Heads::host(&q, 1, heads, total_q, d),
        Heads::host(&kv[..heads * total_k * d], 1, heads, total_k, d),
        Heads::host(&kv[..heads * total_k * d], 1, heads, total_k, d),
        HeadsMut::host(&mut o_ok, 1, heads, total_q, d),
        Some(LseMut::Host(&mut lse_ok)),
        None,
        &good,
        &AttentionOptions::new(),
    )
    .unwrap();
    assert!(lse_ok.iter().all(|x| x.is_finite()));

    let invalid = |r: Result<(), Error>, what: &str, words: &str| match r {
        Err(Error::InvalidArgument(m)) if m.contains(words) => println!("{what}: {m}"),
        other => panic!("{what}: {other:?} (want InvalidArgument mentioning {words:?})"),
    };
    let shape = |r: Result<(), Error>, what: &str, words: &str| match r {
        Err(e @ Error::ShapeMismatch { .. }) if e.to_string().contains(words) => {
            println!("{what}: {e}")
        }
        other => panic!("{what}: {other:?} (want ShapeMismatch mentioning {words:?})"),
    };
    let l = |cq: &'static [i32], ck: &'static [i32], mq: usize, mk: usize| {
        sparsek::SequenceLayout::new(3)
            .cu_seqlens_q(cq, mq)
            .cu_seqlens_k(ck, mk)
    };
    invalid(
        run(
            1,
            (1, total_k),
            None,
            &l(&[0, 4, 4, 9], &[0, 5, 7, 12], 6, 5),
        ),
        "cu_seqlens_q ending at 9, Q's total 10",
        "is not the packed total 10",
    );
    invalid(
        run(
            1,
            (1, total_k),
            None,
            &l(&[0, 4, 4, 10], &[0, 5, 7, 13], 6, 6),
        ),
        "cu_seqlens_k ending at 13, K's total 12",
        "is not the packed total 12",
    );
    invalid(
        run(
            1,
            (1, total_k),
            None,
            &l(&[1, 4, 4, 10], &[0, 5, 7, 12], 6, 5),
        ),
        "cu_seqlens_q from 1",
        "is not 0",
    );
    invalid(
        run(
            1,
            (1, total_k),
            None,
            &l(&[0, 4, 3, 10], &[0, 5, 7, 12], 7, 5),
        ),
        "cu_seqlens_q decreasing",
        "sequence 1's length -1",
    );
    invalid(
        run(
            1,
            (1, total_k),
            None,
            &l(&[0, 4, 4, 10], &[0, 5, 7, 12], 5, 5),
        ),
        "a sequence of 6 queries, max_seqlen_q 5",
        "max_seqlen = 5",
    );
    let short = sparsek::SequenceLayout::new(3)
        .cu_seqlens_q(&cu_q[..3], 6)
        .cu_seqlens_k(&cu_k, 5);
    match run(1, (1, total_k), None, &short) {
        Err(Error::BufferTooSmall {
            operand: "cu_seqlens_q",
            needed: 4,
            got: 3,
        }) => {}
        other => panic!("3 offsets for 3 sequences: {other:?}"),
    }
    shape(
        run(2, (1, total_k), None, &good),
        "packed queries in a Q of batch 2",
        "batch of Q (= 1: packed queries",
    );
    shape(
        run(1, (3, 4), None, &good),
        "packed keys in a K of batch 3",
        "batch of K (= 1: packed keys",
    );
    let q_only = sparsek::SequenceLayout::new(3).cu_seqlens_q(&cu_q, 6);
    shape(
        run(1, (2, 4), None, &q_only),
        "packed Q, padded K of batch 2 for 3 sequences",
        "batch of K (= the layout's batch",
    );
    invalid(
        run(
            1,
            (1, total_k),
            None,
            &l(&[0, 4, 4, 10], &[0, 5, 7, 12], 3, 5),
        ),
        "10 queries past 3 * max_seqlen_q 3",
        "batch * max_seqlen_q",
    );
    // A mask counted from Q's total (ceil(10 / 4) = 3 query blocks, not ceil(6 / 4) = 2; key
    // blocks ceil(5 / 4) = 2), and a per-head set made for Q's batch 1.
    let m = |rows: usize, per: Option<(usize, usize)>| {
        let n = per.map_or(1, |(b, h)| b * h);
        let masks = vec![sparsek::BlockMask::from_fn(rows, 2, |_, _| true).unwrap(); n];
        let p = BlockPatterns::from_block_masks(4, 4, &masks).unwrap();
        match per {
            Some((b, h)) => p.with_heads(b, h).unwrap(),
            None => p,
        }
    };
    shape(
        run(1, (1, total_k), Some(&m(3, None)), &good),
        "a mask's query blocks from Q's total",
        "max_seqlen_q",
    );
    run(1, (1, total_k), Some(&m(2, Some((3, heads)))), &good).unwrap();
    shape(
        run(1, (1, total_k), Some(&m(2, Some((1, heads)))), &good),
        "a per-head mask made for Q's batch 1",
        "patterns of the mask",
    );
    // Packed keys with a page table; key counts above a packed sequence's keys.
    let table = [0i32; 6];
    let lens = [5i32, 2, 5];
    let paged = sparsek::SequenceLayout::new(3)
        .cu_seqlens_q(&cu_q, 6)
        .seqlens_k(&lens, 5)
        .page_table(sparsek::PageTable::new(&table, 2, total_k))
        .cu_seqlens_k(&cu_k, 5);
    invalid(
        run(1, (1, total_k), None, &paged),
        "packed keys with a page table",
        "exclusive",
    );
    let too_many = [5i32, 3, 5];
    let counted = good.seqlens_k(&too_many, 5);
    invalid(
        run(1, (1, total_k), None, &counted),
        "seqlens_k[1] = 3 over sequence 1's 2 packed keys",
        "exceeds the 2 keys packed",
    );
}
