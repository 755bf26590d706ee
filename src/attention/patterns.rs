//! Block patterns of attention masks ([`BlockPatterns`]) and their checks against a
//! problem.

use super::check::{check_mask_dims, MaskDims};
use crate::error::{check_agree, BsrError, Error};
use crate::format::BlockMask;

/// Validated block patterns over (query blocks × key blocks), stacked as one BSR pattern:
/// pattern `p` is block-rows `p·q_blocks .. (p+1)·q_blocks`. `patterns` is 1 (one pattern
/// for every (batch, head)) or `batch·heads` (pattern `b·heads + h`). Column indices are
/// ascending and unique within a row, every one below `k_blocks`.
///
/// A per-head set (`patterns != 1`) records the `(batch, heads)` it was made for
/// ([`with_heads`](Self::with_heads); the gating records it): attention takes it only for
/// that `batch`, with `heads` Q's (one pattern per query head) or K's (grouped-query
/// attention: one pattern per KV head, shared by the query heads of its group; query head
/// `h` reads pattern `b·heads + h / (heads of Q / heads)`), so a set made for (2, 3) is not
/// silently read as (3, 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockPatterns {
    block_q: usize,
    block_k: usize,
    q_blocks: usize,
    k_blocks: usize,
    patterns: usize,
    /// The (batch, heads) a per-head set was made for ([`BlockPatterns::with_heads`]).
    heads: Option<(usize, usize)>,
    row_ptr: Vec<i32>,
    col_idx: Vec<i32>,
}

fn pattern_error(msg: String) -> Error {
    Error::Bsr(BsrError::InvalidPattern(msg))
}

impl BlockPatterns {
    /// From block masks, one per pattern, each `q_blocks × k_blocks` (all alike).
    pub fn from_block_masks(
        block_q: usize,
        block_k: usize,
        masks: &[BlockMask],
    ) -> Result<Self, Error> {
        let (q_blocks, k_blocks) = masks.first().map_or((0, 0), |m| (m.rows(), m.cols()));
        // The counts from_parts checks, before anything is sized by them.
        let rows = masks
            .len()
            .checked_mul(q_blocks)
            .filter(|&r| r < i32::MAX as usize && k_blocks <= i32::MAX as usize)
            .ok_or_else(|| {
                pattern_error(
                    "patterns * q_blocks + 1 row offsets and k_blocks must fit i32".into(),
                )
            })?;
        let mut row_ptr = crate::format::try_vec("row_ptr", rows + 1)?;
        row_ptr.push(0i32);
        let mut col_idx = Vec::new();
        for (p, m) in masks.iter().enumerate() {
            if (m.rows(), m.cols()) != (q_blocks, k_blocks) {
                return Err(pattern_error(format!(
                    "mask {p} is {} x {} blocks, mask 0 {q_blocks} x {k_blocks}",
                    m.rows(),
                    m.cols()
                )));
            }
            for r in 0..q_blocks {
                for c in m.row_cols(r) {
                    col_idx.push(
                        i32::try_from(c)
                            .map_err(|_| pattern_error("a block column overflows i32".into()))?,
                    );
                }
                row_ptr.push(
                    i32::try_from(col_idx.len())
                        .map_err(|_| pattern_error("more than i32::MAX kept blocks".into()))?,
                );
            }
        }
        Self::from_parts(
            block_q,
            block_k,
            q_blocks,
            k_blocks,
            masks.len(),
            row_ptr,
            col_idx,
        )
    }

    /// From the stacked BSR arrays, fully checked: blocks ≥ 1; `row_ptr` has
    /// `patterns·q_blocks + 1` entries from 0, non-decreasing, ending at `col_idx.len()`;
    /// every row's columns ascending, unique and below `k_blocks`; counts fit `i32`.
    pub fn from_parts(
        block_q: usize,
        block_k: usize,
        q_blocks: usize,
        k_blocks: usize,
        patterns: usize,
        row_ptr: Vec<i32>,
        col_idx: Vec<i32>,
    ) -> Result<Self, Error> {
        if block_q == 0 || block_k == 0 {
            return Err(pattern_error(format!(
                "blocks {block_q} x {block_k} are not positive"
            )));
        }
        let rows = patterns
            .checked_mul(q_blocks)
            .filter(|&r| r < i32::MAX as usize)
            .ok_or_else(|| {
                pattern_error("patterns * q_blocks + 1 row offsets do not fit i32".into())
            })?;
        if k_blocks > i32::MAX as usize || col_idx.len() > i32::MAX as usize {
            return Err(pattern_error(
                "k_blocks and the kept blocks must fit i32".into(),
            ));
        }
        if row_ptr.len() != rows + 1 {
            return Err(Error::Bsr(BsrError::InvalidPattern(format!(
                "row_ptr has {} entries; patterns * q_blocks + 1 = {} expected",
                row_ptr.len(),
                rows + 1
            ))));
        }
        if row_ptr[0] != 0 || row_ptr[rows] as usize != col_idx.len() || row_ptr[rows] < 0 {
            return Err(pattern_error(format!(
                "row_ptr must run from 0 to {} (the kept blocks)",
                col_idx.len()
            )));
        }
        // Every offset first (non-decreasing from 0 to nnzb, so within col_idx), then the
        // rows they delimit.
        if let Some(r) = row_ptr.windows(2).position(|w| w[1] < w[0]) {
            return Err(pattern_error(format!("row_ptr decreases at row {r}")));
        }
        for (r, w) in row_ptr.windows(2).enumerate() {
            if w[0] == w[1] {
                continue;
            }
            let row = &col_idx[w[0] as usize..w[1] as usize];
            for (i, &c) in row.iter().enumerate() {
                if c < 0 || c as usize >= k_blocks {
                    return Err(pattern_error(format!(
                        "row {r}: column {c} is outside 0..{k_blocks}"
                    )));
                }
                if i > 0 && row[i - 1] >= c {
                    return Err(pattern_error(format!(
                        "row {r}: columns not ascending ({} then {c})",
                        row[i - 1]
                    )));
                }
            }
        }
        Ok(Self {
            block_q,
            block_k,
            q_blocks,
            k_blocks,
            patterns,
            heads: None,
            row_ptr,
            col_idx,
        })
    }

    /// Records the `(batch, heads)` a per-head set was made for: `patterns` must equal
    /// `batch·heads`. Attention then takes the set only for that `batch` and with `heads`
    /// the heads of Q or of K (one pattern per KV head); a set of more than one pattern must
    /// say it (a single pattern serves every head).
    pub fn with_heads(mut self, batch: usize, heads: usize) -> Result<Self, Error> {
        check_pattern_heads(self.patterns, batch, heads)?;
        self.heads = Some((batch, heads));
        Ok(self)
    }

    /// The `(batch, heads)` recorded by [`with_heads`](Self::with_heads), if any.
    pub fn heads(&self) -> Option<(usize, usize)> {
        self.heads
    }

    /// Rows of a query block.
    pub fn block_q(&self) -> usize {
        self.block_q
    }
    /// Keys of a key block.
    pub fn block_k(&self) -> usize {
        self.block_k
    }
    /// Query blocks per pattern.
    pub fn q_blocks(&self) -> usize {
        self.q_blocks
    }
    /// Key blocks (columns of every row).
    pub fn k_blocks(&self) -> usize {
        self.k_blocks
    }
    /// Number of stacked patterns.
    pub fn patterns(&self) -> usize {
        self.patterns
    }
    /// Row offsets, `patterns·q_blocks + 1` entries.
    pub fn row_ptr(&self) -> &[i32] {
        &self.row_ptr
    }
    /// Block columns of every row, rows in order.
    pub fn col_idx(&self) -> &[i32] {
        &self.col_idx
    }
    /// Kept blocks over all patterns.
    pub fn nnzb(&self) -> usize {
        self.col_idx.len()
    }
    /// The kept key blocks of query block `i` of pattern `p` (empty when out of range).
    pub fn row(&self, p: usize, i: usize) -> &[i32] {
        let r = p.saturating_mul(self.q_blocks).saturating_add(i);
        if p >= self.patterns || i >= self.q_blocks {
            return &[];
        }
        &self.col_idx[self.row_ptr[r] as usize..self.row_ptr[r + 1] as usize]
    }

    /// Checks the patterns against an attention problem whose K and V have as many heads
    /// as Q: `q_blocks = ceil(seq_q/block_q)`, `k_blocks = ceil(seq_k/block_k)`, and
    /// `patterns` 1 or `batch·heads` (made for `(batch, heads)`).
    pub fn check_dims(
        &self,
        batch: usize,
        heads: usize,
        seq_q: usize,
        seq_k: usize,
    ) -> Result<(), Error> {
        check_mask_dims(self.dims(), (batch, heads, heads, seq_q, seq_k))
    }

    /// As [`check_dims`](Self::check_dims) for grouped-query attention, K and V with
    /// `kv_heads` heads: a per-head set may be made for `(batch, q_heads)` or `(batch,
    /// kv_heads)`.
    pub fn check_dims_grouped(
        &self,
        batch: usize,
        q_heads: usize,
        kv_heads: usize,
        seq_q: usize,
        seq_k: usize,
    ) -> Result<(), Error> {
        check_mask_dims(self.dims(), (batch, q_heads, kv_heads, seq_q, seq_k))
    }

    /// The pattern query head `h` of batch `b` reads in a problem with `q_heads` query heads
    /// (0 for a shared pattern; `b·heads + h / (q_heads / heads)` for a per-head set made for
    /// `(batch, heads)`). The problem's dims must have passed
    /// [`check_dims_grouped`](Self::check_dims_grouped).
    pub fn pattern_of(&self, b: usize, h: usize, q_heads: usize) -> usize {
        match self.heads {
            Some((_, heads)) if self.patterns != 1 && heads > 0 => b
                .saturating_mul(heads)
                .saturating_add(h / (q_heads / heads).max(1)),
            _ => 0,
        }
    }

    /// What [`check_mask_dims`] compares.
    pub(crate) fn dims(&self) -> MaskDims {
        MaskDims {
            block_q: self.block_q,
            block_k: self.block_k,
            q_blocks: self.q_blocks,
            k_blocks: self.k_blocks,
            patterns: self.patterns,
            heads: self.heads,
        }
    }
}

/// `patterns = batch·heads`, checked.
pub(crate) fn check_pattern_heads(
    patterns: usize,
    batch: usize,
    heads: usize,
) -> Result<(), Error> {
    let pairs = batch
        .checked_mul(heads)
        .ok_or(Error::InvalidArgument("batch * heads overflows".into()))?;
    check_agree(&[("patterns of the mask (= batch * heads)", pairs, patterns)])
}
