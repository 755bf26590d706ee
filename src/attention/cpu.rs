//! The CPU reference of attention: per (batch, head, query row), the kept keys' scores in
//! f32 (inputs widened exactly), the softmax with the row max subtracted, O = Σ p·v / Σ p in
//! f32, rounded once. Rows run in parallel over (batch, head) pairs on scoped threads.

use super::{AttentionOptions, BlockPatterns, HeadsShape};
use crate::element::Element;
use crate::error::Error;

/// The views `attention_into` checked: each buffer holds its view.
pub(super) struct Operands<'a, T> {
    pub q: (&'a [T], &'a HeadsShape),
    pub k: (&'a [T], &'a HeadsShape),
    pub v: (&'a [T], &'a HeadsShape),
    pub o: (&'a mut [T], &'a HeadsShape),
}

/// One (batch, head)'s O rows (`seq·head_dim`, packed) and LSE (`seq`), as computed.
type HeadResult = (Vec<f32>, Vec<f32>);

/// One (batch, head)'s rows: O rows written through `write(s, d, value)`, LSE through `lse`.
struct Head<'a, T> {
    b: usize,
    h: usize,
    q: (&'a [T], &'a HeadsShape),
    k: (&'a [T], &'a HeadsShape),
    v: (&'a [T], &'a HeadsShape),
    pattern: Option<(&'a BlockPatterns, usize)>,
    causal: bool,
    scale: f32,
}

impl<T: Element> Head<'_, T> {
    /// Row `i`'s output (head_dim values) and LSE.
    fn row(&self, i: usize, scores: &mut Vec<(usize, f32)>, out: &mut [f32]) -> f32 {
        let (qd, qs) = self.q;
        let (kd, ks) = self.k;
        let (vd, vs) = self.v;
        let d = qs.head_dim;
        scores.clear();
        let kept_block = |j: usize| match self.pattern {
            None => true,
            Some((p, pat)) => p
                .row(pat, i / p.block_q())
                .binary_search(&((j / p.block_k()) as i32))
                .is_ok(),
        };
        let mut max = f32::NEG_INFINITY;
        for j in 0..ks.seq {
            if (self.causal && j > i) || !kept_block(j) {
                continue;
            }
            let mut dot = 0f32;
            for c in 0..d {
                dot += qd[qs.offset(self.b, self.h, i, c)].to_f32()
                    * kd[ks.offset(self.b, self.h, j, c)].to_f32();
            }
            let s = dot * self.scale;
            max = max.max(s);
            scores.push((j, s));
        }
        out.iter_mut().for_each(|x| *x = 0.0);
        if scores.is_empty() {
            return f32::NEG_INFINITY;
        }
        let mut sum = 0f32;
        for &(j, s) in scores.iter() {
            let p = (s - max).exp();
            sum += p;
            for (c, x) in out.iter_mut().enumerate() {
                *x += p * vd[vs.offset(self.b, self.h, j, c)].to_f32();
            }
        }
        out.iter_mut().for_each(|x| *x /= sum);
        max + sum.ln()
    }
}

pub(super) fn attention<T: Element>(
    ops: Operands<'_, T>,
    lse: Option<&mut [f32]>,
    mask: Option<&BlockPatterns>,
    opts: &AttentionOptions,
) -> Result<(), Error> {
    let qs = *ops.q.1;
    let (o, os) = (ops.o.0, *ops.o.1);
    let (batch, heads, seq, d) = (qs.batch, qs.heads, qs.seq, qs.head_dim);
    if batch == 0 || heads == 0 || seq == 0 {
        return Ok(());
    }
    let scale = opts.get_scale(d);
    let pairs = batch * heads;
    // Each (batch, head) computes into its own buffers; the strided O is written afterwards
    // (O's views of different heads may interleave in memory).
    let compute = |bh: usize| {
        let (b, h) = (bh / heads, bh % heads);
        let head = Head {
            b,
            h,
            q: ops.q,
            k: ops.k,
            v: ops.v,
            pattern: mask.map(|p| (p, if p.patterns() == 1 { 0 } else { bh })),
            causal: opts.get_causal(),
            scale,
        };
        let mut rows = vec![0f32; seq * d];
        let mut lses = vec![0f32; seq];
        let mut scores = Vec::new();
        for i in 0..seq {
            lses[i] = head.row(i, &mut scores, &mut rows[i * d..(i + 1) * d]);
        }
        (rows, lses)
    };
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(pairs);
    let mut results: Vec<HeadResult> = Vec::with_capacity(pairs);
    if threads <= 1 {
        results.extend((0..pairs).map(compute));
    } else {
        let per = pairs.div_ceil(threads);
        let compute = &compute;
        let chunks: Vec<Option<Vec<HeadResult>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    scope.spawn(move || {
                        (t * per..((t + 1) * per).min(pairs))
                            .map(compute)
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().ok()).collect()
        });
        for chunk in chunks {
            results.extend(chunk.ok_or(Error::InvalidArgument(
                "a CPU attention worker thread failed".into(),
            ))?);
        }
    }
    let mut lse = lse;
    for (bh, (rows, lses)) in results.into_iter().enumerate() {
        let (b, h) = (bh / heads, bh % heads);
        for i in 0..seq {
            for c in 0..d {
                o[os.offset(b, h, i, c)] = T::from_f32(rows[i * d + c]);
            }
        }
        if let Some(l) = lse.as_deref_mut() {
            l[bh * seq..(bh + 1) * seq].copy_from_slice(&lses);
        }
    }
    Ok(())
}
