//! One test per defect of the hardening issue that the CPU can show (the device ones are in
//! tests/gpu_hardening.rs): each input aborted, panicked, hung or was accepted wrongly
//! before, and must now give a typed error (outputs untouched) or the right result, fast.

use std::cell::Cell;
use std::time::{Duration, Instant};

use sparsek::attention::{
    block_topk_pooled, block_topk_scores, pooled_scores, topk_nnzb, TopkOptions,
};
use sparsek::{
    attention_into, bf16, AttentionOptions, BlockMask, BlockPatterns, BlockShape, BsrMatrix, Error,
    Heads, HeadsMut, LseMut, MaskOperand,
};

const SENTINEL: f32 = 7.25;

/// `f` returns within `limit` (a hang would blow far past it).
fn quick<R>(limit: Duration, f: impl FnOnce() -> R) -> R {
    let t = Instant::now();
    let r = f();
    assert!(t.elapsed() < limit, "took {:?}", t.elapsed());
    r
}

/// Defect 1: zero strides over 2^40 logical elements sized the CPU's buffers from the
/// logical dims (a 52 TB allocation abort). O must address each element once.
#[test]
fn zero_stride_views_are_refused_not_allocated() {
    let x = [bf16::from_f32(0.5); 4];
    let mut o = [bf16::from_f32(SENTINEL); 4];
    let mut lse = [SENTINEL; 4];
    let big = |data| Heads::host(data, 1 << 20, 1 << 20, 1, 1).with_strides(0, 0, 0);
    let r = attention_into(
        big(&x[..1]),
        big(&x[..1]),
        big(&x[..1]),
        HeadsMut::host(&mut o[..1], 1 << 20, 1 << 20, 1, 1).with_strides(0, 0, 0),
        None,
        None,
        &AttentionOptions::new(),
    );
    assert!(
        matches!(
            r,
            Err(Error::Overlap {
                output: "O",
                other: "O"
            })
        ),
        "{r:?}"
    );
    // seq 2^40, d 1, row strides 0 (with an LSE, which did not prevent it).
    let long = |data| Heads::host(data, 1, 1, 1 << 40, 1).with_strides(0, 0, 0);
    let r = attention_into(
        long(&x[..1]),
        Heads::host(&x[..1], 1, 1, 1, 1),
        Heads::host(&x[..1], 1, 1, 1, 1),
        HeadsMut::host(&mut o[..1], 1, 1, 1 << 40, 1).with_strides(0, 0, 0),
        Some(LseMut::Host(&mut lse)),
        None,
        &AttentionOptions::new(),
    );
    assert!(
        matches!(
            r,
            Err(Error::LeadingDimension { .. } | Error::Overlap { .. })
        ),
        "{r:?}"
    );
    assert!(o.iter().all(|v| v.to_f32() == SENTINEL));
    assert!(lse.iter().all(|&v| v == SENTINEL));
}

/// Inputs may still repeat a head (stride_h = 0): the result equals the packed one.
#[test]
fn broadcast_heads_of_inputs_match_the_packed_result() {
    let (b, h, s, d) = (2, 3, 5, 4);
    let one: Vec<f32> = (0..s * d)
        .map(|i| ((i * 7 % 11) as f32 - 5.0) / 8.0)
        .collect();
    let packed: Vec<f32> = (0..b * h).flat_map(|_| one.iter().copied()).collect();
    let opts = AttentionOptions::new().causal(true);
    let (want, want_lse) = sparsek::attention(
        Heads::host(&packed, b, h, s, d),
        Heads::host(&packed, b, h, s, d),
        Heads::host(&packed, b, h, s, d),
        None,
        &opts,
    )
    .unwrap();
    let bc = || Heads::host(&one, b, h, s, d).with_strides(0, 0, d);
    let mut o = vec![SENTINEL; b * h * s * d];
    let mut lse = vec![SENTINEL; b * h * s];
    attention_into(
        bc(),
        bc(),
        bc(),
        HeadsMut::host(&mut o, b, h, s, d),
        Some(LseMut::Host(&mut lse)),
        None,
        &opts,
    )
    .unwrap();
    assert_eq!(o, want);
    assert_eq!(lse, want_lse);
}

/// Defect 2: the pooled gating sized its block means from a zero-stride Q's logical dims
/// (a 16 TiB allocation abort).
#[test]
fn pooled_gating_refuses_overlapping_rows() {
    let x = [bf16::from_f32(1.0); 1 << 16];
    let q = Heads::host(&x[..], 1, 1, 1 << 26, 1 << 16).with_strides(0, 0, 0);
    let k = Heads::host(&x[..], 1, 1, 1, 1 << 16);
    let r = quick(Duration::from_secs(1), || pooled_scores(&q, &k, 128, 128));
    assert!(
        matches!(r, Err(Error::LeadingDimension { operand: "Q", .. })),
        "{r:?}"
    );
    let r = quick(Duration::from_secs(1), || {
        block_topk_pooled(&q, &k, &TopkOptions::new(1))
    });
    assert!(r.is_err());
}

/// Defect 3: batch·heads overflowed unchecked without LSE and mask: `Ok(())` with batches
/// 1 and 2 never written (release), a panic (debug).
#[test]
fn overflowing_batch_times_heads_is_an_error() {
    let x = [bf16::from_f32(0.25); 3];
    let mut o = [bf16::from_f32(SENTINEL); 3];
    let heads = 0xAAAA_AAAA_AAAA_AAABusize;
    let v = |data| Heads::host(data, 3, heads, 1, 1).with_strides(1, 0, 1);
    let r = attention_into(
        v(&x),
        v(&x),
        v(&x),
        HeadsMut::host(&mut o, 3, heads, 1, 1).with_strides(1, 0, 1),
        None,
        None,
        &AttentionOptions::new(),
    );
    assert!(r.is_err(), "{r:?}");
    assert!(o.iter().all(|v| v.to_f32() == SENTINEL));
}

/// Defect 4: seq·d overflowed (a panic in debug, "capacity overflow" in release, a failed
/// worker thread with batch 2).
#[test]
fn overflowing_seq_times_head_dim_is_an_error() {
    let x = [bf16::from_f32(0.25); 8];
    for batch in [1, 2] {
        let mut o = [bf16::from_f32(SENTINEL); 8];
        let v = |data| Heads::host(data, batch, 1, 1 << 62, 8).with_strides(0, 0, 0);
        let r = attention_into(
            v(&x),
            v(&x),
            v(&x),
            HeadsMut::host(&mut o, batch, 1, 1 << 62, 8).with_strides(0, 0, 0),
            None,
            None,
            &AttentionOptions::new(),
        );
        assert!(r.is_err(), "{r:?}");
        assert!(o.iter().all(|v| v.to_f32() == SENTINEL));
    }
}

/// Defect 5: a decreasing row_ptr was sliced before it was checked.
#[test]
fn decreasing_row_ptr_is_refused_before_slicing() {
    let r = BlockPatterns::from_parts(128, 128, 2, 1, 1, vec![0, 5, 1], vec![0]);
    assert!(matches!(r, Err(Error::Bsr(_))), "{r:?}");
    let r = BlockPatterns::from_parts(128, 128, 3, 1, 1, vec![0, 1, 0, 1], vec![0]);
    assert!(matches!(r, Err(Error::Bsr(_))), "{r:?}");
}

/// Defect 6: with batch·heads = 0 the gating looped over 2^40 query blocks.
#[test]
fn gating_of_no_heads_returns_at_once() {
    let opts = TopkOptions::new(1).blocks(1, 1).causal(true);
    // 2^40 query blocks: refused at once (block counts fit i32, as in C++), not looped over.
    let n = quick(Duration::from_secs(1), || {
        topk_nnzb(0, 1, 1 << 40, 1, &opts)
    });
    assert!(n.is_err(), "{n:?}");
    let m = quick(Duration::from_secs(1), || {
        block_topk_scores(&[], 0, 7, 1 << 40, 1, &opts)
    });
    assert!(m.is_err());
    // 2^31 - 1 query blocks and no head: 0 blocks, at once.
    let n = quick(Duration::from_secs(1), || {
        topk_nnzb(0, 1, (1 << 31) - 1, 1, &opts)
    });
    assert_eq!(n.unwrap(), 0);
    let m = quick(Duration::from_secs(1), || {
        block_topk_scores(&[], 0, 7, (1 << 31) - 1, 1, &opts)
    })
    .unwrap();
    assert_eq!(m.nnzb(), 0);
    // A key side over i32 is refused at once, rows or none; 2^31 - 1 key blocks with no
    // rows allocate nothing.
    let r = quick(Duration::from_secs(1), || {
        block_topk_scores(&[], 0, 1, 1, 1 << 40, &TopkOptions::new(3).blocks(1, 1))
    });
    assert!(r.is_err(), "{r:?}");
    let m = quick(Duration::from_secs(1), || {
        block_topk_scores(
            &[],
            0,
            1,
            1,
            (1 << 31) - 1,
            &TopkOptions::new(3).blocks(1, 1),
        )
    })
    .unwrap();
    assert_eq!(m.nnzb(), 0);
    // No query block: nothing to pool, however many heads (a loop over 2^40 heads before).
    let x = [bf16::from_f32(1.0); 8];
    let q = Heads::host(&x[..], 1, 1 << 40, 0, 8).with_strides(0, 0, 8);
    let k = Heads::host(&x[..], 1, 1 << 40, 1, 8).with_strides(0, 0, 8);
    let s = quick(Duration::from_secs(1), || pooled_scores(&q, &k, 128, 128));
    assert!(s.unwrap().is_empty());
    // And 2^31 - 2 query blocks of one head are counted, not looped over.
    let big = TopkOptions::new(2).blocks(1, 1).causal(true);
    let n = quick(Duration::from_secs(1), || {
        topk_nnzb(1, 1, (1 << 31) - 2, 1 << 20, &big)
    });
    assert!(
        n.is_err(),
        "2 * (2^31 - 2) - 1 blocks do not fit i32: {n:?}"
    );
}

/// The closed form of the kept-block count equals the blocks `block_topk_scores` keeps.
#[test]
fn kept_block_count_matches_the_mask() {
    for block_q in [1, 3, 16, 128] {
        for block_k in [1, 2, 5, 64, 128] {
            for (seq_q, seq_k) in [
                (1usize, 1usize),
                (7, 300),
                (300, 7),
                (257, 513),
                (1000, 130),
            ] {
                for top_k in [0, 1, 2, 3, 9, 1000] {
                    for causal in [false, true] {
                        let opts = TopkOptions::new(top_k)
                            .blocks(block_q, block_k)
                            .causal(causal);
                        let (qb, kb) = (seq_q.div_ceil(block_q), seq_k.div_ceil(block_k));
                        let scores = vec![1.0f32; 2 * qb * kb];
                        let m = block_topk_scores(&scores, 2, 1, seq_q, seq_k, &opts).unwrap();
                        assert_eq!(
                            topk_nnzb(2, 1, seq_q, seq_k, &opts).unwrap(),
                            m.nnzb(),
                            "{opts:?} {seq_q} x {seq_k}"
                        );
                    }
                }
            }
        }
    }
}

thread_local! {
    /// Conversions left before a `Flaky` index starts lying.
    static HONEST: Cell<usize> = const { Cell::new(0) };
}

/// An index whose conversion gives its value only while `HONEST` lasts, then 1000: a
/// conversion that is not stable, as `TryInto` permits.
#[derive(Clone, Copy, Debug)]
struct Flaky(i64);

impl From<Flaky> for i128 {
    fn from(f: Flaky) -> i128 {
        let left = HONEST.with(|h| h.get());
        HONEST.with(|h| h.set(left.saturating_sub(1)));
        if left > 0 {
            f.0 as i128
        } else {
            1000
        }
    }
}

fn flaky(v: &[i64]) -> Vec<Flaky> {
    v.iter().map(|&x| Flaky(x)).collect()
}

/// Defect 7: from_csr / from_coo converted each index twice (validated one value, sliced
/// with another): one conversion each now, and the same matrix as from honest indices.
#[test]
fn indices_are_converted_once() {
    let b2 = BlockShape::new(2, 2);
    let (row_ptr, col_idx) = (vec![0i64, 2, 2, 3, 4], vec![0i64, 3, 1, 2]);
    let values = [1.0f32, 2.0, 3.0, 4.0];
    let want = BsrMatrix::from_csr(4, 4, b2, &row_ptr, &col_idx, &values).unwrap();
    HONEST.with(|h| h.set(row_ptr.len() + col_idx.len()));
    let got = BsrMatrix::from_csr(4, 4, b2, &flaky(&row_ptr), &flaky(&col_idx), &values);
    assert_eq!(got.unwrap(), want);

    let (rows, cols) = (vec![3i64, 0, 0, 2], vec![3i64, 1, 1, 0]);
    let want = BsrMatrix::from_coo(4, 4, b2, &rows, &cols, &values).unwrap();
    HONEST.with(|h| h.set(rows.len() + cols.len()));
    let got = BsrMatrix::from_coo(4, 4, b2, &flaky(&rows), &flaky(&cols), &values);
    assert_eq!(got.unwrap(), want);
}

/// Defect 9 (the host side; the device side is in gpu_hardening): an O view that
/// overlaps itself (stride_h = 0 over several heads, stride_s < head_dim) is refused.
#[test]
fn self_overlapping_outputs_are_refused() {
    let (b, h, s, d) = (1, 2, 3, 4);
    let x: Vec<f32> = (0..b * h * s * d).map(|i| i as f32 / 16.0).collect();
    let qkv = || Heads::host(&x, b, h, s, d);
    for (strides, want) in [
        ((h * s * d, 0, d), "stride_h 0"),
        ((h * s * d, s * d, d - 1), "stride_s < head_dim"),
        ((h * s * d, 1, d), "heads interleaved with head_dim"),
    ] {
        let mut o = vec![SENTINEL; x.len()];
        let r = attention_into(
            qkv(),
            qkv(),
            qkv(),
            HeadsMut::host(&mut o, b, h, s, d).with_strides(strides.0, strides.1, strides.2),
            None,
            None,
            &AttentionOptions::new(),
        );
        assert!(
            matches!(
                r,
                Err(Error::Overlap {
                    output: "O",
                    other: "O"
                } | Error::LeadingDimension { .. })
            ),
            "{want}: {r:?}"
        );
        assert!(o.iter().all(|&v| v == SENTINEL), "{want}");
    }
    // [batch, seq, heads, d] storage is disjoint and accepted.
    let mut o = vec![SENTINEL; x.len()];
    attention_into(
        qkv(),
        qkv(),
        qkv(),
        HeadsMut::host(&mut o, b, h, s, d).with_strides(s * h * d, d, h * d),
        None,
        None,
        &AttentionOptions::new(),
    )
    .unwrap();
    assert!(o.iter().all(|&v| v != SENTINEL));
}

/// Defect 11: a per-head set made for (batch 2, heads 3) was accepted for (3, 2).
#[test]
fn per_head_patterns_keep_their_batch_and_heads() {
    let masks: Vec<BlockMask> = (0..6)
        .map(|p| BlockMask::from_fn(1, 1, |_, _| p % 2 == 0).unwrap())
        .collect();
    let set = BlockPatterns::from_block_masks(32, 32, &masks).unwrap();
    // Unrecorded: refused for any (batch, heads).
    assert!(set.check_dims(2, 3, 10, 10).is_err());
    assert!(set.clone().with_heads(4, 2).is_err());
    let set = set.with_heads(2, 3).unwrap();
    assert_eq!(set.heads(), Some((2, 3)));
    set.check_dims(2, 3, 10, 10).unwrap();
    assert!(matches!(
        set.check_dims(3, 2, 10, 10),
        Err(Error::ShapeMismatch { .. })
    ));
    let (b, h, s, d) = (3, 2, 10, 4);
    let x = vec![0.5f32; b * h * s * d];
    let mut o = vec![SENTINEL; x.len()];
    let r = attention_into(
        Heads::host(&x, b, h, s, d),
        Heads::host(&x, b, h, s, d),
        Heads::host(&x, b, h, s, d),
        HeadsMut::host(&mut o, b, h, s, d),
        None,
        Some(MaskOperand::Host(&set)),
        &AttentionOptions::new(),
    );
    assert!(matches!(r, Err(Error::ShapeMismatch { .. })), "{r:?}");
    assert!(o.iter().all(|&v| v == SENTINEL));
    // The gating records what it was made for.
    let scores = vec![1.0f32; 6];
    let m = block_topk_scores(&scores, 2, 3, 10, 10, &TopkOptions::new(1).blocks(32, 32));
    assert_eq!(m.unwrap().heads(), Some((2, 3)));
}
