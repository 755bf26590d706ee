//! CPU attention and top-k gating against independent references: attention against naive
//! f64 (random block masks with empty and full rows, causal, top-k, none; f16/bf16; head_dim
//! 64, 128 and 40; sequences not multiples of the block; strided views; one pattern or one
//! per head), the gating against a sort with the documented comparator, and the refusals.

mod common;

use common::{attention_reference, random_patterns, random_vec, seed, tolerance};
use rand::{rngs::StdRng, Rng, SeedableRng};
use sparsek::attention::{block_topk_pooled, block_topk_scores, pooled_scores, topk_nnzb};
use sparsek::{
    attention_into, bf16, f16, AttentionOptions, BlockPatterns, Element, Error, Heads, HeadsMut,
    HeadsShape, LseMut, MaskOperand, TopkOptions,
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
    block: usize,
    mask: MaskKind,
    causal: bool,
    per_head: bool,
    bshd: bool,
}

/// The case's view of a `seq`-long tensor: `[batch, seq, heads, d]` with 3 elements of
/// padding per head row when `bshd` (CPU: any padding), else packed.
fn shape(c: &Case, seq: usize) -> HeadsShape {
    common::heads_shape(c.batch, c.heads, seq, c.d, c.bshd.then_some(3))
}

fn heads<'a, T>(data: &'a [T], s: &HeadsShape) -> Heads<'a, T> {
    Heads::host(data, s.batch, s.heads, s.seq, s.head_dim)
        .with_strides(s.stride_b, s.stride_h, s.stride_s)
}

fn run_case<T: Element>(c: Case, rng: &mut StdRng) {
    let (qs, ks) = (shape(&c, c.seq_q), shape(&c, c.seq_k));
    let q: Vec<T> = random_vec(qs.required_len().unwrap(), rng);
    let k: Vec<T> = random_vec(ks.required_len().unwrap(), rng);
    let v: Vec<T> = random_vec(ks.required_len().unwrap(), rng);
    let (qb, kb) = (c.seq_q.div_ceil(c.block), c.seq_k.div_ceil(c.block));
    let per_head = c.per_head.then_some((c.batch, c.heads));
    let mask = match c.mask {
        MaskKind::None => None,
        MaskKind::Random => Some(random_patterns(rng, per_head, qb, kb, c.block, 0.5)),
        MaskKind::TopK(top) => Some(
            block_topk_pooled(
                &heads(&q, &qs),
                &heads(&k, &ks),
                &TopkOptions::new(top)
                    .causal(c.causal)
                    .blocks(c.block, c.block),
            )
            .unwrap(),
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
    let opts = AttentionOptions::new().causal(c.causal);
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
    let (ro, rl) = attention_reference(
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

#[test]
fn cpu_attention_matches_f64() {
    let mut rng = StdRng::seed_from_u64(seed());
    let case = |batch, heads, seq_q, seq_k, d, block, mask, causal, per_head, bshd| Case {
        batch,
        heads,
        seq_q,
        seq_k,
        d,
        block,
        mask,
        causal,
        per_head,
        bshd,
    };
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
    for &(batch, heads, seq_q, seq_k, bq, bk, top, causal) in &[
        (
            2usize, 3usize, 1000usize, 1300usize, 128usize, 128usize, 4usize, false,
        ),
        (1, 2, 900, 900, 128, 128, 3, true),
        (1, 2, 500, 700, 64, 100, 5, true),
        (1, 1, 300, 300, 128, 128, 0, false),
        (1, 2, 300, 400, 128, 128, 9, false),
    ] {
        let (qb, kb) = (seq_q.div_ceil(bq), seq_k.div_ceil(bk));
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
        let opts = TopkOptions::new(top).causal(causal).blocks(bq, bk);
        let got = block_topk_scores(&scores, batch, heads, seq_q, seq_k, &opts).unwrap();
        assert_eq!(
            got.nnzb(),
            topk_nnzb(batch, heads, seq_q, seq_k, &opts).unwrap()
        );
        for p in 0..batch * heads {
            for i in 0..qb {
                let cand = if causal {
                    (((i + 1) * bq - 1) / bk + 1).min(kb)
                } else {
                    kb
                };
                let row = &scores[(p * qb + i) * kb..(p * qb + i) * kb + cand];
                assert_eq!(
                    got.row(p, i),
                    reference_topk(row, top).as_slice(),
                    "pattern {p} row {i}"
                );
            }
        }
    }
}

#[test]
fn cpu_pooled_scores_follow_the_documented_order() {
    let mut rng = StdRng::seed_from_u64(seed());
    let (batch, heads, seq_q, seq_k, d) = (2, 2, 300, 200, 64);
    let q: Vec<bf16> = random_vec(batch * heads * seq_q * d, &mut rng);
    let k: Vec<bf16> = random_vec(batch * heads * seq_k * d, &mut rng);
    let qh = Heads::host(&q, batch, heads, seq_q, d);
    let kh = Heads::host(&k, batch, heads, seq_k, d);
    let got = pooled_scores(&qh, &kh, 128, 64).unwrap();
    let mean = |x: &[bf16], seq: usize, b: usize, h: usize, blk: usize, bs: usize, c: usize| {
        let rows = (blk * bs..((blk + 1) * bs).min(seq)).len();
        let mut total = 0f32;
        for g in (0..rows).step_by(16) {
            let mut part = 0f32;
            for r in blk * bs + g..blk * bs + (g + 16).min(rows) {
                part += x[((b * heads + h) * seq + r) * d + c].to_f32();
            }
            total += part;
        }
        total / rows as f32
    };
    let (qb, kb) = (seq_q.div_ceil(128), seq_k.div_ceil(64));
    for b in 0..batch {
        for h in 0..heads {
            for i in 0..qb {
                for j in 0..kb {
                    let mut acc = 0f32;
                    for c in 0..d {
                        acc = mean(&q, seq_q, b, h, i, 128, c)
                            .mul_add(mean(&k, seq_k, b, h, j, 64, c), acc);
                    }
                    let at = ((b * heads + h) * qb + i) * kb + j;
                    assert_eq!(got[at].to_bits(), acc.to_bits(), "score ({b},{h},{i},{j})");
                }
            }
        }
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
