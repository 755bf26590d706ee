//! Target: attention_with_layout over serving layouts (`SequenceLayout`): queries and / or
//! keys packed along seq by cumulative lengths (`cu_seqlens_q` / `cu_seqlens_k`), each
//! sequence's key count (`seqlens_k`), K and V read through a page table (`PageTable`), with
//! grouped-query heads, both causal alignments and block masks counted from the layout's
//! longest sequences; and the helpers beside it (`SequenceLayout::offsets`, the layout's and
//! the table's getters, `CausalAlignment::offset` / `keeps`).
//!
//! The oracle is the documented rules (src/attention/layout.rs, include/sparsek/attention.hpp's
//! `SequenceLayout`), written here as a list of the rules a case breaks: a case breaking none
//! must be accepted and match an f64 reference computed sequence by sequence (O in every
//! element of its view, nothing outside it; the LSE `[batch, heads, seq_q]`, or `[heads,
//! total_q]` with packed queries, nothing past it); a case breaking one must be refused with a
//! typed error and O and the LSE untouched (a lone breach of an array's values is
//! `InvalidArgument`, of an array's length `BufferTooSmall`, of the head groups `HeadGroups`).

use rand::Rng;
use sparsek::{
    attention_with_layout, bf16, f16, AttentionOptions, BlockMask, BlockPatterns, CausalAlignment,
    Element, Error, IndexArray, LseMut, MaskOperand, PageTable, SequenceLayout,
};

use crate::fuzz::{ensure, random_values, Check, FuzzRng, Outcome, I32_MAX};
use crate::inputs::{huge, product, rel_err, same_bits, tolerance, ty, Ty, SENTINEL};
use crate::operands::{gen_view, View};
use crate::DRIVER;

/// LSE sentinel: no LSE of inputs in [-1, 1] comes near it.
const LSE_SENTINEL: f32 = -1.0e30;

/// A page table as given: its entries, entries per sequence and keys per page.
#[derive(Debug, Clone)]
struct Table {
    entries: Vec<i32>,
    max_pages: usize,
    page_size: usize,
}

/// A block mask drawn for the case: `count` patterns of `q_blocks x k_blocks` bits (drawn
/// in the run with density `density`), `with_heads(batch, heads)` when `made_for`.
#[derive(Debug, Clone)]
struct MaskDraw {
    block_q: usize,
    block_k: usize,
    q_blocks: usize,
    k_blocks: usize,
    count: usize,
    made_for: Option<(usize, usize)>,
    density: f64,
}

#[derive(Debug, Clone)]
struct LayoutCase {
    /// Drawn without defects (shown in the failure report).
    #[allow(dead_code)]
    clean: bool,
    ty: Ty,
    /// `SequenceLayout::new(batch)`, or `SequenceLayout::padded()` when `None`.
    batch: Option<usize>,
    /// `cu_seqlens_q(offsets, max_seqlen_q)`.
    cu_q: Option<(Vec<i32>, usize)>,
    /// `cu_seqlens_k(offsets, max_seqlen_k)`.
    cu_k: Option<(Vec<i32>, usize)>,
    /// `seqlens_k(counts, max_seqlen_k)`.
    seqlens_k: Option<(Vec<i32>, usize)>,
    /// `seqlens_k` is called after `cu_seqlens_k` (the last call sets max_seqlen_k).
    counts_last: bool,
    table: Option<Table>,
    q: View,
    k: View,
    v: View,
    o: View,
    /// The LSE's length, if one is given.
    lse: Option<usize>,
    mask: Option<MaskDraw>,
    causal: bool,
    alignment: CausalAlignment,
    scale: Option<f32>,
    /// No effect on host arrays (always checked), drawn to show it.
    check_indices: bool,
}

/// The layout as the documented builders leave it.
struct Effective<'a> {
    /// Any array is given (else the padded batch).
    any: bool,
    batch: usize,
    max_q: usize,
    max_k: usize,
    cu_q: Option<&'a [i32]>,
    cu_k: Option<&'a [i32]>,
    counts: Option<&'a [i32]>,
    table: Option<&'a Table>,
}

impl LayoutCase {
    fn effective(&self) -> Effective<'_> {
        // max_seqlen_k is shared by cu_seqlens_k and seqlens_k: the last call sets it.
        let max_k = match (&self.cu_k, &self.seqlens_k) {
            (Some(a), Some(b)) => {
                if self.counts_last {
                    b.1
                } else {
                    a.1
                }
            }
            (Some(a), None) => a.1,
            (None, Some(b)) => b.1,
            (None, None) => 0,
        };
        Effective {
            any: self.cu_q.is_some()
                || self.cu_k.is_some()
                || self.seqlens_k.is_some()
                || self.table.is_some(),
            batch: self.batch.unwrap_or(0),
            max_q: self.cu_q.as_ref().map_or(0, |c| c.1),
            max_k,
            cu_q: self.cu_q.as_ref().map(|c| c.0.as_slice()),
            cu_k: self.cu_k.as_ref().map(|c| c.0.as_slice()),
            counts: self.seqlens_k.as_ref().map(|c| c.0.as_slice()),
            table: self.table.as_ref(),
        }
    }
}

/// What error a lone breach of a rule must be (`Any`: some typed error).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Class {
    Any,
    /// A value of an array (offsets, counts, pages): `InvalidArgument`.
    Value,
    /// An array too short for the layout's batch: `BufferTooSmall`.
    Short,
    /// K's heads not dividing Q's: `HeadGroups`.
    HeadGroups,
}

/// `n` lengths in `0..=small`.
fn small_lens(rng: &mut FuzzRng, n: usize, small: usize) -> Vec<usize> {
    (0..n).map(|_| rng.random_range(0..=small)).collect()
}

/// Prefix sums from 0 (the documented offsets of these lengths).
fn prefix(lens: &[usize]) -> Vec<i32> {
    let mut cu = vec![0i32];
    for &n in lens {
        cu.push(cu[cu.len() - 1] + n as i32);
    }
    cu
}

/// What a max_seqlen adds to the longest length: mostly 0 (else an upper bound above it).
fn slack(rng: &mut FuzzRng) -> usize {
    if rng.random_bool(0.7) {
        0
    } else {
        rng.random_range(1..=2)
    }
}

/// A value an unreached page-table entry may hold: anything.
fn any_entry(rng: &mut FuzzRng, pages: usize) -> i32 {
    match rng.random_range(0..5) {
        0 => -1,
        1 => pages as i32,
        2 => i32::MIN,
        3 => i32::MAX,
        _ => rng.random_range(0..pages as i32),
    }
}

/// Q's (and O's) dims: `[1, heads, total, d]` packed, `[batch, heads, seq, d]` padded.
fn q_dims(
    cu_q: &Option<(Vec<i32>, usize)>,
    batch: usize,
    heads: usize,
    seq_q: usize,
    d: usize,
) -> [usize; 4] {
    match cu_q {
        Some((cu, _)) => [1, heads, *cu.last().unwrap_or(&0) as usize, d],
        None => [batch, heads, seq_q, d],
    }
}

fn gen_layout(rng: &mut FuzzRng) -> LayoutCase {
    let ty = ty(rng);
    let clean = rng.random_bool(0.5);
    let heads = if rng.random_bool(0.08) {
        0
    } else {
        rng.random_range(1..=4)
    };
    let heads_kv = match rng.random_range(0..3) {
        0 => heads,
        _ => {
            let divisors: Vec<usize> = (1..=heads).filter(|x| heads % x == 0).collect();
            if divisors.is_empty() {
                0
            } else {
                divisors[rng.random_range(0..divisors.len())]
            }
        }
    };
    let d = rng.random_range(1..=4);
    let batch = rng.random_range(0..=3);

    // Queries: padded (seq_q rows per sequence) or packed.
    let packed_q = rng.random_bool(0.6);
    let seq_q = rng.random_range(0..=4);
    let cu_q = packed_q.then(|| {
        let lens = small_lens(rng, batch, 4);
        let max = lens.iter().copied().max().unwrap_or(0) + slack(rng);
        (prefix(&lens), max)
    });
    // Keys: padded, packed or paged; each sequence's count given or not (always when paged).
    let k_mode = rng.random_range(0..3);
    let seq_k = rng.random_range(0..=5);
    let (mut cu_k, mut seqlens_k, mut table) = (None, None, None);
    let mut k_dims = [batch, heads_kv, seq_k, d];
    let with_counts = k_mode == 2 || rng.random_bool(0.5);
    match k_mode {
        0 => {
            if with_counts {
                let max = rng.random_range(0..=seq_k);
                let counts = (0..batch)
                    .map(|_| rng.random_range(0..=max) as i32)
                    .collect();
                seqlens_k = Some((counts, max));
            }
        }
        1 => {
            let lens = small_lens(rng, batch, 4);
            let max = lens.iter().copied().max().unwrap_or(0) + slack(rng);
            if with_counts {
                let counts = lens
                    .iter()
                    .map(|&n| rng.random_range(0..=n) as i32)
                    .collect();
                seqlens_k = Some((counts, max));
            }
            k_dims = [1, heads_kv, lens.iter().sum(), d];
            cu_k = Some((prefix(&lens), max));
        }
        _ => {
            let page_size = rng.random_range(1..=4);
            let pages = rng.random_range(1..=5);
            let max_pages = rng.random_range(1..=3);
            let max = rng.random_range(0..=max_pages * page_size);
            let counts: Vec<i32> = (0..batch)
                .map(|_| rng.random_range(0..=max) as i32)
                .collect();
            let mut entries = Vec::with_capacity(batch * max_pages);
            for &n in &counts {
                let reached = (n as usize).div_ceil(page_size);
                for p in 0..max_pages {
                    entries.push(if p < reached {
                        rng.random_range(0..pages as i32)
                    } else {
                        any_entry(rng, pages)
                    });
                }
            }
            seqlens_k = Some((counts, max));
            table = Some(Table {
                entries,
                max_pages,
                page_size,
            });
            k_dims = [pages, heads_kv, page_size, d];
        }
    }
    // Arrays longer than the batch needs (their tail ignored), now and then.
    let lengthen = |rng: &mut FuzzRng, a: &mut Vec<i32>| {
        if rng.random_bool(0.1) {
            for _ in 0..rng.random_range(1..=2) {
                a.push(rng.random_range(-3..=40));
            }
        }
    };
    for a in [&mut cu_k, &mut seqlens_k].into_iter().flatten() {
        lengthen(rng, &mut a.0);
    }
    // Q's dims from the offsets as drawn (their total), before any tail.
    let qd = q_dims(&cu_q, batch, heads, seq_q, d);
    let mut cu_q = cu_q;
    if let Some(a) = cu_q.as_mut() {
        lengthen(rng, &mut a.0);
    }
    if let Some(t) = table.as_mut() {
        lengthen(rng, &mut t.entries);
    }
    let has_array = cu_q.is_some() || cu_k.is_some() || seqlens_k.is_some();
    // The padded batch: either constructor (`new(0)` is the padded batch too).
    let layout_batch = if has_array {
        Some(batch)
    } else {
        [None, Some(0)][rng.random_range(0..2)]
    };
    let views_clean = |rng: &mut FuzzRng| clean || rng.random_bool(0.9);
    let view = |rng: &mut FuzzRng, dims: [usize; 4], output: bool| {
        let c = views_clean(rng);
        let mut v = gen_view(rng, dims, c, output);
        // A `[total, heads, d]` buffer of batch 1: any batch stride, 0 as the docs give it.
        if v.batch == 1 && rng.random_bool(0.3) {
            v.sb = 0;
        }
        v
    };
    let (q, k, v, o) = (
        view(rng, qd, false),
        view(rng, k_dims, false),
        view(rng, k_dims, false),
        view(rng, qd, true),
    );
    let lse_needed = qd[0] * qd[1] * qd[2];
    let lse = match rng.random_range(0..8) {
        0 | 1 => None,
        2 => Some(lse_needed + rng.random_range(1..=3)),
        _ => Some(lse_needed),
    };
    let mut case = LayoutCase {
        clean,
        ty,
        batch: layout_batch,
        cu_q,
        cu_k,
        seqlens_k,
        counts_last: rng.random_bool(0.5),
        table,
        q,
        k,
        v,
        o,
        lse,
        mask: None,
        causal: rng.random_bool(0.6),
        alignment: if rng.random_bool(0.5) {
            CausalAlignment::TopLeft
        } else {
            CausalAlignment::BottomRight
        },
        scale: match rng.random_range(0..4) {
            0 => Some(rng.random_range(0.05f32..4.0)),
            _ => None,
        },
        check_indices: rng.random_bool(0.5),
    };
    if rng.random_bool(0.4) {
        case.mask = Some(gen_mask(rng, &case, heads, heads_kv));
    }
    if !clean {
        // One or two defects; a draw that does not apply to the case is drawn again.
        for _ in 0..rng.random_range(1..=2) {
            let before = format!("{case:?}");
            for _ in 0..8 {
                mutate(rng, &mut case);
                if format!("{case:?}") != before {
                    break;
                }
            }
        }
    }
    // A grid larger than the fuzz materializes (counted from a huge max_seqlen): a small
    // wrong one instead.
    if let Some(m) = case.mask.as_mut() {
        if m.q_blocks > 64 || m.k_blocks > 64 {
            m.q_blocks = rng.random_range(0..=4);
            m.k_blocks = rng.random_range(0..=4);
        }
    }
    case
}

/// A mask fitting the case's layout: blocks over the longest sequences (`max_seqlen_q` with
/// packed queries, `max_seqlen_k` with keys per sequence), one pattern or one per (sequence,
/// query head) or (sequence, KV head); with pages, `block_k` nesting with the page size.
fn gen_mask(rng: &mut FuzzRng, c: &LayoutCase, heads: usize, heads_kv: usize) -> MaskDraw {
    let l = c.effective();
    let block_q = rng.random_range(1..=4);
    let block_k = match &c.table {
        Some(t) if rng.random_bool(0.9) => {
            if rng.random_bool(0.5) {
                t.page_size * rng.random_range(1..=2)
            } else {
                let divisors: Vec<usize> =
                    (1..=t.page_size).filter(|x| t.page_size % x == 0).collect();
                divisors[rng.random_range(0..divisors.len())]
            }
        }
        _ => rng.random_range(1..=4),
    };
    let rows = if c.cu_q.is_some() { l.max_q } else { c.q.seq };
    let per_sequence_keys = l.cu_k.is_some() || l.counts.is_some() || l.table.is_some();
    let cols = if per_sequence_keys { l.max_k } else { c.k.seq };
    let sequences = if c.cu_q.is_some() { l.batch } else { c.q.batch };
    let mask_heads = if rng.random_bool(0.5) {
        heads
    } else {
        heads_kv
    };
    let pairs = sequences * mask_heads;
    let (count, made_for) = if pairs >= 1 && rng.random_bool(0.5) {
        (pairs, Some((sequences, mask_heads)))
    } else {
        (1, rng.random_bool(0.3).then_some((sequences, mask_heads)))
    };
    MaskDraw {
        block_q,
        block_k,
        q_blocks: rows.div_ceil(block_q),
        k_blocks: cols.div_ceil(block_k),
        count,
        made_for,
        density: [0.0, 0.4, 0.8, 1.0][rng.random_range(0..4)],
    }
}

/// One defect, of the layout mostly (the views' own defects are attention's target).
fn mutate(rng: &mut FuzzRng, c: &mut LayoutCase) {
    let pick = |rng: &mut FuzzRng, n: usize| rng.random_range(0..n.max(1));
    let bump = |rng: &mut FuzzRng, x: i32| {
        if rng.random_bool(0.5) {
            x.wrapping_add(1)
        } else {
            x.wrapping_sub(1)
        }
    };
    // A view of new dims (valid strides and buffer).
    let regen =
        |rng: &mut FuzzRng, dims: [usize; 4], output: bool| gen_view(rng, dims, true, output);
    match rng.random_range(0..35) {
        // Offsets not from 0, decreasing, not ending at the total, too few, lengths above
        // max_seqlen: Q's (0..=4) or K's (5..=9).
        i @ (0..=9) => {
            let target = if i < 5 { &mut c.cu_q } else { &mut c.cu_k };
            let Some((cu, max)) = target.as_mut() else {
                return;
            };
            let n = cu.len();
            match i % 5 {
                0 if n >= 1 => {
                    if rng.random_bool(0.5) {
                        cu.iter_mut().for_each(|x| *x += 1);
                    } else {
                        cu[0] = bump(rng, cu[0]);
                    }
                }
                1 if n >= 2 => {
                    let b = 1 + pick(rng, n - 1);
                    cu[b] = cu[b - 1] - rng.random_range(1..=2);
                }
                2 if n >= 1 => {
                    let b = pick(rng, n);
                    cu[b] = bump(rng, cu[b]);
                }
                3 => {
                    cu.pop();
                }
                _ => {
                    let longest = cu.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
                    *max = (longest.max(1) - 1) as usize;
                }
            }
        }
        // The packed total one more than the offsets' (Q's and O's, or K's and V's seq).
        10 => {
            if c.cu_q.is_some() {
                let [b, h, s, d] = [c.q.batch, c.q.heads, c.q.seq.saturating_add(1), c.q.d];
                c.q = regen(rng, [b, h, s, d], false);
                c.o = regen(rng, [b, h, s, d], true);
            }
        }
        11 => {
            if c.cu_k.is_some() {
                let [b, h, s, d] = [c.k.batch, c.k.heads, c.k.seq.saturating_add(1), c.k.d];
                c.k = regen(rng, [b, h, s, d], false);
                c.v = regen(rng, [b, h, s, d], false);
            }
        }
        // Key counts: above max_seqlen_k, negative, above a packed sequence's keys, too few.
        12 => {
            if let Some((counts, max)) = c.seqlens_k.as_mut() {
                let b = pick(rng, counts.len());
                if let Some(x) = counts.get_mut(b) {
                    *x = i32::try_from(*max).map_or(i32::MAX, |m| m.saturating_add(1));
                }
            }
        }
        13 => {
            if let Some((counts, _)) = c.seqlens_k.as_mut() {
                let b = pick(rng, counts.len());
                if let Some(x) = counts.get_mut(b) {
                    *x = [-1, i32::MIN][pick(rng, 2)];
                }
            }
        }
        14 => {
            if let (Some((cu, _)), Some((counts, max))) = (&c.cu_k, c.seqlens_k.as_mut()) {
                let b = pick(rng, counts.len());
                if b + 1 < cu.len() && b < counts.len() {
                    counts[b] = cu[b + 1].wrapping_sub(cu[b]).wrapping_add(1);
                    *max = (*max).max(counts[b].max(0) as usize);
                    if let Some((_, m)) = c.cu_k.as_mut() {
                        *m = (*m).max(counts[b].max(0) as usize);
                    }
                }
            }
        }
        15 => {
            if let Some((counts, _)) = c.seqlens_k.as_mut() {
                counts.pop();
            }
        }
        // max_seqlen_k above what K (or the pages) hold for a sequence.
        16 => {
            let cap = match &c.table {
                Some(t) => t.max_pages.saturating_mul(t.page_size),
                None => c.k.seq,
            };
            if let Some((_, max)) = c.seqlens_k.as_mut() {
                *max = cap.saturating_add(rng.random_range(1..=2));
            }
        }
        // A page a sequence reaches outside the pool; the table too short.
        17 => {
            if let (Some(t), Some((counts, _))) = (c.table.as_mut(), &c.seqlens_k) {
                let reaching: Vec<usize> =
                    (0..counts.len().min(t.entries.len() / t.max_pages.max(1)))
                        .filter(|&b| counts[b] > 0)
                        .collect();
                if !reaching.is_empty() {
                    let b = reaching[pick(rng, reaching.len())];
                    let reached = (counts[b] as usize).div_ceil(t.page_size.max(1));
                    let p = pick(rng, reached.min(t.max_pages));
                    let pages = c.k.batch as i32;
                    t.entries[b * t.max_pages + p] =
                        [pages, -1, i32::MAX, i32::MIN, pages + 7][pick(rng, 5)];
                }
            }
        }
        18 => {
            if let Some(t) = c.table.as_mut() {
                t.entries.pop();
            }
        }
        // The table's page size or entries per sequence off; huge entries per sequence.
        19 => {
            if let Some(t) = c.table.as_mut() {
                t.page_size = [
                    t.page_size.saturating_add(1),
                    t.page_size.saturating_sub(1),
                    0,
                ][pick(rng, 3)];
            }
        }
        20 => {
            if let Some(t) = c.table.as_mut() {
                t.max_pages = [0, huge(rng), I32_MAX][pick(rng, 3)];
            }
        }
        // A page table without counts; packed keys with a page table.
        21 => c.seqlens_k = None,
        22 => {
            if c.table.is_some() {
                let n = c.batch.unwrap_or(0);
                c.cu_k = Some((vec![0; n.min(4) + 1], 0));
            }
        }
        // Batches that disagree: the layout's, Q's (packed: 1), K's (padded), V's (paged).
        23 => {
            c.batch = Some(match c.batch {
                Some(b) if b > 0 && rng.random_bool(0.5) => b - 1,
                Some(b) => b.saturating_add(1),
                None => rng.random_range(1..=3),
            });
        }
        24 => {
            let [b, h, s, d] = [c.q.batch + 1, c.q.heads, c.q.seq, c.q.d];
            c.q = regen(rng, [b, h, s, d], false);
            c.o = regen(rng, [b, h, s, d], true);
        }
        25 => {
            let b = if c.k.batch > 0 && rng.random_bool(0.5) {
                c.k.batch - 1
            } else {
                c.k.batch + 1
            };
            let dims = [b, c.k.heads, c.k.seq, c.k.d];
            c.k = regen(rng, dims, false);
            if rng.random_bool(0.5) {
                c.v = regen(rng, dims, false);
            }
        }
        // The layout's counts without its arrays.
        26 => {
            c.cu_q = None;
            c.cu_k = None;
            c.seqlens_k = None;
            c.table = None;
            c.batch = Some(rng.random_range(0..=3));
        }
        // A mask counted from the views' seq instead of the longest sequences, or made for
        // another batch, or whose key blocks do not nest with the pages.
        27 => {
            if let Some(m) = c.mask.as_mut() {
                if rng.random_bool(0.5) {
                    m.q_blocks = c.q.seq.div_ceil(m.block_q);
                } else {
                    m.k_blocks = c.k.seq.div_ceil(m.block_k);
                }
            }
        }
        28 => {
            if let Some(m) = c.mask.as_mut() {
                match pick(rng, 3) {
                    0 => m.made_for = m.made_for.map(|(b, h)| (h, b)),
                    1 => m.made_for = None,
                    _ => m.count += 1,
                }
            }
        }
        29 => {
            // Pages of one key nest with every block.
            let max_k = c.effective().max_k;
            if let (Some(m), Some(t)) = (c.mask.as_mut(), &c.table) {
                if t.page_size >= 2 {
                    m.block_k = t.page_size.saturating_add(1);
                    m.k_blocks = max_k.div_ceil(m.block_k);
                }
            }
        }
        // Huge counts: the layout's batch, max_seqlen_q / max_seqlen_k.
        30 => c.batch = Some([huge(rng), I32_MAX - 1, I32_MAX][pick(rng, 3)]),
        31 => {
            let x = [huge(rng), I32_MAX, usize::MAX][pick(rng, 3)];
            match pick(rng, 3) {
                0 => {
                    if let Some((_, m)) = c.cu_q.as_mut() {
                        *m = x;
                    }
                }
                1 => {
                    if let Some((_, m)) = c.cu_k.as_mut() {
                        *m = x;
                    }
                }
                _ => {
                    if let Some((_, m)) = c.seqlens_k.as_mut() {
                        *m = x;
                    }
                }
            }
        }
        // The LSE one short; K's heads not dividing Q's.
        32 => c.lse = c.lse.map(|n| n.saturating_sub(1)),
        // No head, a seq past int32 (views of no element): K and V's (padded with counts up
        // to int32, or a page size), or Q and O's.
        33 => {
            let seq = [I32_MAX, I32_MAX + 1, 1 << 40, huge(rng)][pick(rng, 4)];
            if rng.random_bool(0.5) {
                for x in [&mut c.q, &mut c.o, &mut c.k, &mut c.v] {
                    x.heads = 0;
                }
                for x in [&mut c.k, &mut c.v] {
                    x.seq = seq;
                }
                if let Some(t) = c.table.as_mut() {
                    t.page_size = seq;
                }
                if let Some((counts, max)) = c.seqlens_k.as_mut() {
                    *max = seq.min(I32_MAX);
                    counts
                        .iter_mut()
                        .for_each(|n| *n = i32::MAX - pick(rng, 2) as i32);
                }
            } else {
                for x in [&mut c.q, &mut c.o, &mut c.k, &mut c.v] {
                    x.heads = 0;
                }
                for x in [&mut c.q, &mut c.o] {
                    x.seq = seq;
                }
            }
        }
        _ => {
            let h = c.k.heads + 1;
            let dims = [c.k.batch, h, c.k.seq, c.k.d];
            c.k = regen(rng, dims, false);
            c.v = regen(rng, dims, false);
        }
    }
}

/// A rule the case breaks, and what error it must be when alone.
#[derive(Debug, Clone, Copy)]
struct Breach {
    /// Shown in the failure report.
    #[allow(dead_code)]
    rule: &'static str,
    class: Class,
}

/// The documented rules the case breaks (empty: it must be accepted). Each stated from
/// the documentation, in no particular order; a value rule is evaluated only where its array
/// can be read (a short array or broken count is already a breach).
fn breaches(c: &LayoutCase, l: &Effective) -> Vec<Breach> {
    let mut out = Vec::new();
    let mut need = |holds: bool, rule: &'static str, class: Class| {
        if !holds {
            out.push(Breach { rule, class });
        }
    };
    let (q, k, v, o) = (&c.q, &c.k, &c.v, &c.o);
    let w = |x: usize| x as u128;

    // The views (the attention module's rules).
    need(q.d >= 1, "head_dim >= 1", Class::Any);
    need(
        k.d == q.d && v.d == q.d && o.d == q.d,
        "one head_dim",
        Class::Any,
    );
    need(
        (o.batch, o.heads, o.seq) == (q.batch, q.heads, q.seq),
        "O has Q's dims",
        Class::Any,
    );
    need(
        (v.heads, v.seq) == (k.heads, k.seq),
        "V has K's heads and seq",
        Class::Any,
    );
    need(
        if k.heads == 0 {
            q.heads == 0
        } else {
            q.heads % k.heads == 0
        },
        "K's heads divide Q's",
        Class::HeadGroups,
    );
    for x in [q, k, v, o] {
        need(x.fits(), "each buffer holds its view", Class::Any);
        need(x.rows_ok(), "a head's rows do not overlap", Class::Any);
    }
    need(
        o.disjoint_rule(),
        "O addresses each element once",
        Class::Any,
    );
    let rows = product(&[q.batch, q.heads, q.seq]);
    let elements = product(&[q.batch, q.heads, q.seq, q.d]);
    need(
        rows.is_some_and(|n| n <= usize::MAX as u128)
            && elements.is_some_and(|n| n <= usize::MAX as u128),
        "Q's sizes fit usize",
        Class::Any,
    );
    if let Some(len) = c.lse {
        need(
            rows.is_some_and(|n| w(len) >= n),
            "the LSE holds batch * heads * seq_q",
            Class::Any,
        );
    }
    let scale = c.scale.unwrap_or(1.0 / (q.d.max(1) as f32).sqrt());
    need(scale.is_finite() && scale > 0.0, "the scale", Class::Any);

    // The layout (src/attention/layout.rs, attention.hpp's SequenceLayout).
    let packed_q = l.cu_q.is_some();
    let packed_k = l.cu_k.is_some();
    let paged = l.table.is_some();
    let per_sequence_keys = packed_k || paged || l.counts.is_some();
    let sequences = if packed_q { l.batch } else { q.batch };
    if !l.any {
        need(
            l.batch == 0 && l.max_q == 0 && l.max_k == 0,
            "counts without arrays",
            Class::Any,
        );
    } else {
        if packed_q || packed_k {
            need(
                w(l.batch) < w(I32_MAX),
                "batch + 1 offsets fit int32",
                Class::Any,
            );
        }
        if packed_q {
            need(q.batch == 1, "packed Q has batch 1", Class::Any);
            need(
                q.seq <= I32_MAX,
                "the packed query total fits int32",
                Class::Any,
            );
            need(
                w(q.seq) <= w(l.batch) * w(l.max_q),
                "packed queries within batch * max_seqlen_q",
                Class::Any,
            );
        } else {
            need(l.batch == q.batch, "the layout's batch is Q's", Class::Any);
            need(
                l.max_q == 0 || l.max_q == q.seq,
                "max_seqlen_q of padded queries",
                Class::Any,
            );
        }
        if packed_k {
            need(
                k.batch == 1 && v.batch == 1,
                "packed K and V have batch 1",
                Class::Any,
            );
            need(!paged, "packed keys are not paged", Class::Any);
            need(
                k.seq <= I32_MAX,
                "the packed key total fits int32",
                Class::Any,
            );
            need(
                w(k.seq) <= w(l.batch) * w(l.max_k),
                "packed keys within batch * max_seqlen_k",
                Class::Any,
            );
        }
        if let Some(t) = l.table {
            need(
                l.counts.is_some(),
                "a page table needs seqlens_k",
                Class::Any,
            );
            need(t.max_pages >= 1, "max_pages >= 1", Class::Any);
            need(
                w(l.batch) * w(t.max_pages) <= w(I32_MAX),
                "batch * max_pages fits int32",
                Class::Any,
            );
            need(k.batch >= 1, "a pool of at least one page", Class::Any);
            need(k.seq >= 1, "pages of at least one key", Class::Any);
            need(
                t.page_size == k.seq,
                "the table's page size is K's seq",
                Class::Any,
            );
            need(
                w(l.max_k) <= w(t.max_pages) * w(k.seq),
                "max_seqlen_k within a sequence's pages",
                Class::Any,
            );
            need(v.batch == k.batch, "V has K's pages", Class::Any);
        }
        if l.counts.is_some() && !paged && !packed_k {
            need(l.max_k <= k.seq, "max_seqlen_k within K's seq", Class::Any);
        }
        if !per_sequence_keys {
            need(
                l.max_k == 0 || l.max_k == k.seq,
                "max_seqlen_k of padded keys",
                Class::Any,
            );
        }
    }
    if !paged && !packed_k {
        need(
            k.batch == sequences && v.batch == sequences,
            "padded K and V have a batch entry per sequence",
            Class::Any,
        );
    }

    // The arrays' lengths, then their values where they can be read.
    let offsets_ok = |need: &mut dyn FnMut(bool, &'static str, Class),
                      cu: Option<&[i32]>,
                      total: usize,
                      max: usize|
     -> bool {
        let Some(cu) = cu else { return true };
        if w(cu.len()) < w(l.batch) + 1 {
            need(false, "batch + 1 offsets", Class::Short);
            return false;
        }
        let cu = &cu[..l.batch + 1];
        let from_zero = cu[0] == 0;
        let lengths_ok = cu.windows(2).all(|p| {
            let len = i64::from(p[1]) - i64::from(p[0]);
            len >= 0 && (len as u128) <= w(max)
        });
        let ends = i64::from(cu[l.batch]) == total as i64;
        need(from_zero, "offsets from 0", Class::Value);
        need(lengths_ok, "lengths in [0, max_seqlen]", Class::Value);
        need(ends, "offsets ending at the packed total", Class::Value);
        from_zero && lengths_ok && ends
    };
    let cu_q_ok = offsets_ok(&mut need, l.cu_q, q.seq, l.max_q);
    let cu_k_ok = offsets_ok(&mut need, l.cu_k, k.seq, l.max_k);
    let _ = cu_q_ok;
    let mut counts_ok = vec![false; 0];
    if let Some(counts) = l.counts {
        if counts.len() < l.batch {
            need(false, "batch key counts", Class::Short);
        } else {
            counts_ok = counts[..l.batch]
                .iter()
                .map(|&n| n >= 0 && (n as u128) <= w(l.max_k))
                .collect();
            need(
                counts_ok.iter().all(|&x| x),
                "counts in [0, max_seqlen_k]",
                Class::Value,
            );
            if let (Some(cu), true) = (l.cu_k, cu_k_ok) {
                need(
                    (0..l.batch).all(|b| counts[b] <= cu[b + 1] - cu[b]),
                    "counts within a packed sequence's keys",
                    Class::Value,
                );
            }
        }
    }
    if let Some(t) = l.table {
        let entries = w(l.batch) * w(t.max_pages);
        if w(t.entries.len()) < entries {
            need(false, "batch * max_pages entries", Class::Short);
        } else if let (Some(counts), true) = (l.counts, t.page_size == k.seq && k.seq >= 1) {
            // The pages each sequence reaches (a count read only when valid).
            let mut pages_ok = true;
            for (b, &n) in counts.iter().take(counts_ok.len()).enumerate() {
                if !counts_ok[b] {
                    continue;
                }
                let reached = (n as usize).div_ceil(t.page_size);
                if reached > t.max_pages {
                    continue;
                }
                let row = &t.entries[b * t.max_pages..b * t.max_pages + reached];
                pages_ok &= row.iter().all(|&p| p >= 0 && (p as usize) < k.batch);
            }
            need(pages_ok, "pages reached within the pool", Class::Value);
        }
    }

    // The mask: its blocks counted from the longest sequences when a side is per sequence,
    // its per-head patterns per (sequence, head).
    if let Some(m) = &c.mask {
        let rows = if packed_q { l.max_q } else { q.seq };
        let cols = if per_sequence_keys { l.max_k } else { k.seq };
        need(
            w(m.q_blocks) == w(rows).div_ceil(w(m.block_q)),
            "the mask's query blocks",
            Class::Any,
        );
        need(
            w(m.k_blocks) == w(cols).div_ceil(w(m.block_k)),
            "the mask's key blocks",
            Class::Any,
        );
        if paged && k.seq >= 1 {
            need(
                m.block_k % k.seq == 0 || k.seq % m.block_k == 0,
                "block_k nests with the pages",
                Class::Any,
            );
        }
        if m.count != 1 {
            need(
                m.made_for.is_some_and(|(b, h)| {
                    b == sequences && (h == q.heads || h == k.heads) && b * h == m.count
                }),
                "patterns made for (sequences, Q's or K's heads)",
                Class::Any,
            );
        }
    }
    out
}

/// Where sequence `b`'s rows are: (batch entry, first row, rows), from the offsets when
/// packed, else the view's batch entry `b` and all its `seq` rows.
fn rows_of(cu: Option<&[i32]>, b: usize, seq: usize) -> (usize, usize, usize) {
    match cu {
        Some(cu) => (0, cu[b] as usize, (cu[b + 1] - cu[b]) as usize),
        None => (b, 0, seq),
    }
}

/// The f64 attention of an accepted case, sequence by sequence: `(O's offset, value)` for
/// every element of O's view, and the LSE (`[batch, heads, seq_q]`, `[heads, total_q]` with
/// packed queries).
fn reference<T: Element>(
    c: &LayoutCase,
    l: &Effective,
    (qd, kd, vd): (&[T], &[T], &[T]),
    bits: &[Vec<bool>],
) -> (Vec<(usize, f64)>, Vec<f64>) {
    let (q, k, v) = (&c.q, &c.k, &c.v);
    let (heads, d) = (q.heads, q.d);
    let mut o = Vec::new();
    let mut lse = vec![f64::NEG_INFINITY; q.batch * heads * q.seq];
    let sequences = if l.cu_q.is_some() { l.batch } else { q.batch };
    if q.batch * heads * q.seq * d == 0 {
        return (o, lse);
    }
    let group = heads / k.heads;
    let scale = c.scale.unwrap_or(1.0 / (d as f32).sqrt()) as f64;
    let x = |data: &[T], at: usize| data[at].to_f32() as f64;
    for b in 0..sequences {
        let (qb, q0, len_q) = rows_of(l.cu_q, b, q.seq);
        let (kb, k0, held_k) = rows_of(l.cu_k, b, k.seq);
        let len_k = l.counts.map_or(held_k, |n| n[b] as usize);
        // Logical key j: (batch entry, row) of K and V.
        let key = |j: usize| match l.table {
            Some(t) => (
                t.entries[b * t.max_pages + j / t.page_size] as usize,
                j % t.page_size,
            ),
            None => (kb, k0 + j),
        };
        for h in 0..heads {
            let hk = h / group;
            let pattern = c.mask.as_ref().map(|m| match m.made_for {
                Some((_, mh)) if m.count != 1 => b * mh + h / (heads / mh),
                _ => 0,
            });
            for i in 0..len_q {
                let kept = |j: usize| {
                    let causal_ok = !c.causal
                        || match c.alignment {
                            CausalAlignment::TopLeft => j <= i,
                            CausalAlignment::BottomRight => j + len_q <= i + len_k,
                        };
                    let mask_ok = match (&c.mask, pattern) {
                        (Some(m), Some(p)) => bits[p][(i / m.block_q) * m.k_blocks + j / m.block_k],
                        _ => true,
                    };
                    causal_ok && mask_ok
                };
                let scores: Vec<(usize, f64)> = (0..len_k)
                    .filter(|&j| kept(j))
                    .map(|j| {
                        let (pb, row) = key(j);
                        let dot: f64 = (0..d)
                            .map(|t| {
                                x(qd, q.offset(qb, h, q0 + i, t)) * x(kd, k.offset(pb, hk, row, t))
                            })
                            .sum();
                        (j, dot * scale)
                    })
                    .collect();
                let mut out = vec![0f64; d];
                let at = match l.cu_q {
                    Some(_) => h * q.seq + q0 + i,
                    None => (b * heads + h) * q.seq + i,
                };
                if !scores.is_empty() {
                    let max = scores.iter().fold(f64::NEG_INFINITY, |m, s| m.max(s.1));
                    let sum: f64 = scores.iter().map(|s| (s.1 - max).exp()).sum();
                    for &(j, s) in &scores {
                        let p = (s - max).exp() / sum;
                        let (pb, row) = key(j);
                        for (t, y) in out.iter_mut().enumerate() {
                            *y += p * x(vd, v.offset(pb, hk, row, t));
                        }
                    }
                    lse[at] = max + sum.ln();
                }
                for (t, &y) in out.iter().enumerate() {
                    o.push((c.o.offset(qb, h, q0 + i, t), y));
                }
            }
        }
    }
    (o, lse)
}

/// NaN in every element of Q's, K's and V's buffers that no sequence may read: outside
/// the views, K and V rows past a sequence's key count, pages no sequence reaches (an
/// accepted case's O then shows any read of them).
fn poison_unread<T: Element>(c: &LayoutCase, l: &Effective, q: &mut [T], k: &mut [T], v: &mut [T]) {
    let (qv, kv, vv) = (&c.q, &c.k, &c.v);
    let nan = T::from_f32(f32::NAN);
    let elements = |x: &View| product(&[x.batch, x.heads, x.seq, x.d]).unwrap_or(u128::MAX);
    if [qv, kv, vv].iter().any(|x| elements(x) > 4096) {
        return;
    }
    let mut q_read = vec![false; q.len()];
    for b in 0..qv.batch {
        for h in 0..qv.heads {
            for i in 0..qv.seq {
                for t in 0..qv.d {
                    q_read[qv.offset(b, h, i, t)] = true;
                }
            }
        }
    }
    let (mut k_read, mut v_read) = (vec![false; k.len()], vec![false; v.len()]);
    let sequences = if l.cu_q.is_some() { l.batch } else { qv.batch };
    if qv.heads > 0 {
        for b in 0..sequences {
            let (kb, k0, held) = rows_of(l.cu_k, b, kv.seq);
            let len_k = l.counts.map_or(held, |n| n[b] as usize);
            for j in 0..len_k {
                let (pb, row) = match l.table {
                    Some(t) => (
                        t.entries[b * t.max_pages + j / t.page_size] as usize,
                        j % t.page_size,
                    ),
                    None => (kb, k0 + j),
                };
                for h in 0..kv.heads {
                    for t in 0..kv.d {
                        k_read[kv.offset(pb, h, row, t)] = true;
                        v_read[vv.offset(pb, h, row, t)] = true;
                    }
                }
            }
        }
    }
    for (data, read) in [(q, q_read), (k, k_read), (v, v_read)] {
        for (x, r) in data.iter_mut().zip(read) {
            if !r {
                *x = nan;
            }
        }
    }
}

fn check_lse(got: &[f32], want: &[f64]) -> Result<(), String> {
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        if w == f64::NEG_INFINITY {
            ensure!(
                g == f32::NEG_INFINITY,
                "LSE[{i}] = {g}, a row with no key: -inf"
            );
        } else {
            ensure!(
                (g as f64 - w).abs() <= 1e-4 * w.abs().max(1.0),
                "LSE[{i}] = {g}, the reference {w}"
            );
        }
    }
    Ok(())
}

/// The builders and getters: each getter returns what was given.
fn build_layout<'a>(c: &'a LayoutCase, l: &Effective) -> Result<SequenceLayout<'a>, String> {
    let mut layout = match c.batch {
        None => SequenceLayout::padded(),
        Some(b) => SequenceLayout::new(b),
    };
    if let Some((cu, max)) = &c.cu_q {
        layout = layout.cu_seqlens_q(cu.as_slice(), *max);
    }
    let cu_k = |x: SequenceLayout<'a>| match &c.cu_k {
        Some((cu, max)) => x.cu_seqlens_k(cu, *max),
        None => x,
    };
    let counts = |x: SequenceLayout<'a>| match &c.seqlens_k {
        Some((n, max)) => x.seqlens_k(IndexArray::Host(n), *max),
        None => x,
    };
    layout = if c.counts_last {
        counts(cu_k(layout))
    } else {
        cu_k(counts(layout))
    };
    if let Some(t) = &c.table {
        layout = layout.page_table(PageTable::new(&t.entries, t.max_pages, t.page_size));
    }
    let same = |a: Option<IndexArray>, b: Option<&[i32]>| match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => {
            a.len() == b.len() && a.is_empty() == b.is_empty() && a.host() == Some(b)
        }
        _ => false,
    };
    ensure!(
        (
            layout.batch(),
            layout.max_seqlen_q(),
            layout.max_seqlen_k(),
            layout.is_padded()
        ) == (l.batch, l.max_q, l.max_k, !l.any),
        "the layout's getters: batch {}, max_seqlen_q {}, max_seqlen_k {}, padded {}",
        layout.batch(),
        layout.max_seqlen_q(),
        layout.max_seqlen_k(),
        layout.is_padded()
    );
    ensure!(
        same(layout.get_cu_seqlens_q(), l.cu_q)
            && same(layout.get_cu_seqlens_k(), l.cu_k)
            && same(layout.get_seqlens_k(), l.counts),
        "the layout's arrays are not those given"
    );
    match (layout.get_page_table(), l.table) {
        (None, None) => {}
        (Some(p), Some(t)) => ensure!(
            (p.max_pages(), p.page_size()) == (t.max_pages, t.page_size)
                && same(Some(p.table()), Some(&t.entries)),
            "the page table's getters"
        ),
        _ => return Err("the page table given and the layout's disagree".into()),
    }
    Ok(layout)
}

/// `SequenceLayout::offsets` of random lengths (small, or near and past int32): the prefix
/// sums from 0 when the total fits i32, else `InvalidArgument`.
fn check_offsets(rng: &mut FuzzRng) -> Result<(), String> {
    let lens: Vec<usize> = (0..rng.random_range(0..=4))
        .map(|_| match rng.random_range(0..8) {
            0 => [I32_MAX, I32_MAX / 2 + 1, I32_MAX - 3][rng.random_range(0..3)],
            1 => huge(rng),
            _ => rng.random_range(0..=6),
        })
        .collect();
    let total: u128 = lens.iter().map(|&n| n as u128).sum();
    let r = SequenceLayout::offsets(&lens);
    if total > I32_MAX as u128 {
        ensure!(
            matches!(r, Err(Error::InvalidArgument(_))),
            "offsets({lens:?}) gave {r:?}, the total {total} past int32"
        );
    } else {
        let mut want = vec![0i32];
        for &n in &lens {
            want.push(want[want.len() - 1] + n as i32);
        }
        ensure!(
            r.as_ref().ok() == Some(&want),
            "offsets({lens:?}) gave {r:?}, not {want:?}"
        );
    }
    Ok(())
}

/// `CausalAlignment::offset` and `keeps` at small and huge lengths: the offset 0 or
/// `seq_k - seq_q` (saturated to i64), query `i` keeping key `j` when `j <= i + offset`.
fn check_alignment(rng: &mut FuzzRng) -> Result<(), String> {
    let draw = |rng: &mut FuzzRng| {
        if rng.random_bool(0.3) {
            huge(rng)
        } else {
            rng.random_range(0..=6)
        }
    };
    let (i, j, sq, sk) = (draw(rng), draw(rng), draw(rng), draw(rng));
    for a in [CausalAlignment::TopLeft, CausalAlignment::BottomRight] {
        let exact: i128 = match a {
            CausalAlignment::TopLeft => 0,
            CausalAlignment::BottomRight => sk as i128 - sq as i128,
        };
        let want = exact.clamp(i64::MIN as i128, i64::MAX as i128) as i64;
        ensure!(
            a.offset(sq, sk) == want,
            "{a:?}.offset({sq}, {sk}) = {}, not {want}",
            a.offset(sq, sk)
        );
        let keeps = (j as i128) <= i as i128 + exact;
        ensure!(
            a.keeps(i, j, sq, sk) == keeps,
            "{a:?}.keeps({i}, {j}, {sq}, {sk}) is not {keeps}"
        );
    }
    Ok(())
}

fn run_layout<T: Element>(c: &LayoutCase, rng: &mut FuzzRng) -> Check {
    check_offsets(rng)?;
    check_alignment(rng)?;
    let l = c.effective();
    let layout = build_layout(c, &l)?;
    let q: Vec<T> = random_values(rng, c.q.len);
    let k: Vec<T> = random_values(rng, c.k.len);
    let v: Vec<T> = random_values(rng, c.v.len);
    let bits: Vec<Vec<bool>> = c.mask.as_ref().map_or(Vec::new(), |m| {
        (0..m.count)
            .map(|_| {
                (0..m.q_blocks * m.k_blocks)
                    .map(|_| rng.random_bool(m.density))
                    .collect()
            })
            .collect()
    });
    let patterns = match &c.mask {
        None => None,
        Some(m) => {
            let masks: Vec<BlockMask> = bits
                .iter()
                .map(|b| BlockMask::new(m.q_blocks, m.k_blocks, b.clone()).expect("a small mask"))
                .collect();
            let p = BlockPatterns::from_block_masks(m.block_q, m.block_k, &masks)
                .map_err(|e| format!("from_block_masks of the drawn mask: {e}"))?;
            Some(match m.made_for {
                Some((b, h)) if b * h == m.count => {
                    p.with_heads(b, h).map_err(|e| format!("with_heads: {e}"))?
                }
                _ => p,
            })
        }
    };
    // A made_for that with_heads could not record is none.
    let mut case = c.clone();
    if let Some(m) = case.mask.as_mut() {
        if m.made_for.is_some_and(|(b, h)| b * h != m.count) {
            m.made_for = None;
        }
    }
    let broken = breaches(&case, &l);
    let (mut q, mut k, mut v) = (q, k, v);
    if broken.is_empty() {
        poison_unread(&case, &l, &mut q, &mut k, &mut v);
    }
    let opts = {
        let o = AttentionOptions::new()
            .causal(c.causal)
            .causal_alignment(c.alignment)
            .check_indices(c.check_indices);
        match c.scale {
            Some(s) => o.scale(s),
            None => o,
        }
    };
    let sentinel = T::from_f32(SENTINEL);
    let mut o = vec![sentinel; c.o.len];
    let mut lse = vec![LSE_SENTINEL; c.lse.unwrap_or(0)];
    let r = attention_with_layout(
        c.q.heads(&q),
        c.k.heads(&k),
        c.v.heads(&v),
        c.o.heads_mut(&mut o),
        c.lse.map(|_| LseMut::Host(&mut lse)),
        patterns.as_ref().map(MaskOperand::Host),
        &layout,
        &opts,
    );
    ensure!(
        r.is_ok() == broken.is_empty(),
        "attention_with_layout gave {:?}, the oracle's breaches: {:?}",
        r.as_ref().err(),
        broken
    );
    if let Err(e) = &r {
        // Typed, and printable.
        let _ = e.to_string();
        if let [one] = broken.as_slice() {
            let fits = match one.class {
                Class::Any => true,
                Class::Value => matches!(e, Error::InvalidArgument(_)),
                Class::Short => matches!(e, Error::BufferTooSmall { .. }),
                Class::HeadGroups => matches!(e, Error::HeadGroups { .. }),
            };
            ensure!(fits, "the lone breach {one:?} gave {e:?}");
        }
        ensure!(
            o.iter().all(|&x| same_bits(x, sentinel)),
            "O written by a call that failed ({e:?})"
        );
        ensure!(
            lse.iter().all(|&x| x.to_bits() == LSE_SENTINEL.to_bits()),
            "LSE written by a call that failed ({e:?})"
        );
        return Ok(Outcome::Rejected);
    }
    let (want_o, want_lse) = reference(&case, &l, (&q, &k, &v), &bits);
    // Every element of O's view is some sequence's (the offsets cover the packed rows).
    let view =
        c.o.offsets()
            .ok_or("an accepted O with too many elements")?;
    ensure!(
        want_o.len() == view.len(),
        "the sequences cover {} elements of O's view of {}",
        want_o.len(),
        view.len()
    );
    let mut addressed = vec![false; o.len()];
    let mut pairs = Vec::with_capacity(want_o.len());
    for &(at, w) in &want_o {
        ensure!(!addressed[at], "O[{at}] addressed twice");
        addressed[at] = true;
        ensure!(
            !same_bits(o[at], sentinel),
            "O[{at}] of a sequence's row not written"
        );
        pairs.push((o[at].to_f32() as f64, w));
    }
    for (i, &x) in o.iter().enumerate() {
        ensure!(
            addressed[i] || same_bits(x, sentinel),
            "O[{i}] outside the sequences' rows written"
        );
    }
    let err = rel_err(&pairs, 0.1);
    ensure!(
        err <= tolerance(c.ty),
        "O off the reference by {err:e} (tolerance {:e})",
        tolerance(c.ty)
    );
    if c.lse.is_some() {
        let n = want_lse.len();
        check_lse(&lse[..n], &want_lse)?;
        ensure!(
            lse[n..]
                .iter()
                .all(|&x| x.to_bits() == LSE_SENTINEL.to_bits()),
            "LSE past its rows written"
        );
    }
    Ok(Outcome::Accepted)
}

#[test]
fn fuzz_attention_with_layout() {
    DRIVER.run("attention_with_layout", 19, gen_layout, |c, rng| {
        match c.ty {
            Ty::F32 => run_layout::<f32>(c, rng),
            Ty::Bf16 => run_layout::<bf16>(c, rng),
            Ty::F16 => run_layout::<f16>(c, rng),
        }
    });
}
