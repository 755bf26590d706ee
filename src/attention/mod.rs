//! Block-sparse attention (forward) and top-k key-block gating.
//!
//! `O = softmax(scale·Q·Kᵀ + M)·V` per (batch, head), with the rows' log-sum-exp
//! `LSE[i] = ln Σ_j exp(scale·q_i·k_j + M_ij)`. Q, K, V and O are `[batch, heads, seq,
//! head_dim]` views ([`Heads`], [`HeadsMut`]) with any batch, head and row strides
//! (`head_dim` contiguous): packed, or `[batch, seq, heads, head_dim]` as a fused QKV
//! projection stores them. The mask `M` is 0 on kept (query, key) pairs, `-inf` elsewhere:
//! - a block mask, [`BlockPatterns`]: query block `i` (rows `i·block_q ..`) keeps key block
//!   `j` when `j` is listed in row `i` of its pattern (one pattern for every head, or one per
//!   (batch, head));
//! - [`causal`](AttentionOptions::causal): query `i` keeps key `j` only when `j <= i`
//!   (top-left aligned, as PyTorch's `is_causal`);
//! - or both. A query row that keeps no key gets `O = 0` and `LSE = -inf`.
//!
//! Sequences need not be multiples of the blocks (the last blocks are partial). Host operands
//! run the CPU reference (f32 accumulation, [`Backend::Cpu`]); device operands the Hopper
//! kernel (`gpu` module: 128×128 mask blocks, head_dim 64 or 128, f16/bf16).
//!
//! Top-k gating ([`gating`]) builds a [`BlockPatterns`] from block scores, on the CPU here
//! and on the device with `gpu::block_topk` (the same bits).
//!
//! ```
//! use sparsek::{attention, bf16, AttentionOptions, BlockMask, BlockPatterns, Heads};
//!
//! let (batch, heads, seq, d) = (1, 2, 200, 64);
//! let x: Vec<bf16> = (0..batch * heads * seq * d).map(|i| bf16::from_f32((i % 7) as f32 * 0.1)).collect();
//! let q = Heads::host(&x, batch, heads, seq, d);
//! // Two query blocks of 128 (the second partial): block 1 skips key block 0.
//! let mask = BlockPatterns::from_block_masks(128, 128, &[BlockMask::from_fn(2, 2, |r, c| r == 0 || c == 1)?])?;
//! let (o, lse) = attention(q, Heads::host(&x, batch, heads, seq, d), Heads::host(&x, batch, heads, seq, d),
//!                          Some(&mask), &AttentionOptions::new().causal(true))?;
//! assert_eq!(o.len(), x.len());
//! // Causal and the mask leave rows 128..199 keys 128..=i only: every row keeps something.
//! assert!(lse.iter().all(|l| l.is_finite()));
//! # Ok::<(), sparsek::Error>(())
//! ```

mod cpu;
pub mod gating;

#[cfg(feature = "cuda")]
use cudarc::driver::CudaSlice;

use crate::dense::{Storage, StorageMut};
use crate::element::Element;
use crate::error::{BsrError, Error};
use crate::format::BlockMask;
use crate::options::Backend;

pub use gating::{block_topk_pooled, block_topk_scores, pooled_scores, topk_nnzb, TopkOptions};

/// Shape and strides of a `[batch, heads, seq, head_dim]` view; strides in elements,
/// `head_dim` contiguous.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadsShape {
    /// Batch size.
    pub batch: usize,
    /// Heads.
    pub heads: usize,
    /// Sequence length (rows per head).
    pub seq: usize,
    /// Head dimension (contiguous).
    pub head_dim: usize,
    /// Elements between consecutive batches.
    pub stride_b: usize,
    /// Elements between consecutive heads.
    pub stride_h: usize,
    /// Elements between consecutive rows of a head.
    pub stride_s: usize,
}

impl HeadsShape {
    /// The packed `[batch, heads, seq, head_dim]` shape.
    pub fn packed(batch: usize, heads: usize, seq: usize, head_dim: usize) -> Self {
        let stride_s = head_dim;
        let stride_h = seq.saturating_mul(head_dim);
        Self {
            batch,
            heads,
            seq,
            head_dim,
            stride_b: heads.saturating_mul(stride_h),
            stride_h,
            stride_s,
        }
    }

    /// Elements a buffer must hold: the last element's offset + 1 (0 for an empty view), or
    /// `None` when that overflows `usize`.
    pub fn required_len(&self) -> Option<usize> {
        if self.batch == 0 || self.heads == 0 || self.seq == 0 || self.head_dim == 0 {
            return Some(0);
        }
        (self.batch - 1)
            .checked_mul(self.stride_b)?
            .checked_add((self.heads - 1).checked_mul(self.stride_h)?)?
            .checked_add((self.seq - 1).checked_mul(self.stride_s)?)?
            .checked_add(self.head_dim)
    }

    /// Elements the view addresses logically, `batch·heads·seq·head_dim`, or `None` on
    /// overflow.
    pub fn elements(&self) -> Option<usize> {
        self.batch
            .checked_mul(self.heads)?
            .checked_mul(self.seq)?
            .checked_mul(self.head_dim)
    }

    /// Whether no two elements of the view share an address: taking the dims of extent > 1
    /// by ascending stride, each stride is at least the span of the dims before it (`head_dim`
    /// contiguous first). Packed and `[batch, seq, heads, head_dim]` views are; a stride of
    /// 0 over several heads, or `stride_s < head_dim` over several rows, is not. (A view that
    /// interleaves its dims in another way is refused too, as if it overlapped.) An output
    /// must not overlap itself: its writes would race on the device.
    pub fn is_disjoint(&self) -> bool {
        if self.elements() == Some(0) {
            return true;
        }
        let mut dims = [
            (self.stride_s, self.seq),
            (self.stride_h, self.heads),
            (self.stride_b, self.batch),
        ];
        dims.sort_unstable();
        let mut span = self.head_dim;
        for (stride, extent) in dims {
            if extent <= 1 {
                continue;
            }
            if stride < span {
                return false;
            }
            match stride
                .checked_mul(extent - 1)
                .and_then(|x| x.checked_add(span))
            {
                Some(s) => span = s,
                None => return false,
            }
        }
        true
    }

    /// Offset of element `(b, h, s, d)` of a view whose `required_len` was checked.
    #[inline]
    pub(crate) fn offset(&self, b: usize, h: usize, s: usize, d: usize) -> usize {
        b * self.stride_b + h * self.stride_h + s * self.stride_s + d
    }
}

/// A read-only `[batch, heads, seq, head_dim]` tensor (Q, K or V): a view of a host slice
/// or, with the `cuda` feature, of a cudarc device buffer.
pub struct Heads<'a, T> {
    pub(crate) data: Storage<'a, T>,
    pub(crate) shape: HeadsShape,
}

/// A writable `[batch, heads, seq, head_dim]` tensor (O).
pub struct HeadsMut<'a, T> {
    pub(crate) data: StorageMut<'a, T>,
    pub(crate) shape: HeadsShape,
}

impl<'a, T> Heads<'a, T> {
    /// A packed host tensor.
    pub fn host(data: &'a [T], batch: usize, heads: usize, seq: usize, head_dim: usize) -> Self {
        Self {
            data: Storage::Host(data),
            shape: HeadsShape::packed(batch, heads, seq, head_dim),
        }
    }
    /// A packed device tensor.
    #[cfg(feature = "cuda")]
    pub fn device(
        data: &'a CudaSlice<T>,
        batch: usize,
        heads: usize,
        seq: usize,
        head_dim: usize,
    ) -> Self {
        Self {
            data: Storage::Device(data),
            shape: HeadsShape::packed(batch, heads, seq, head_dim),
        }
    }
    /// Sets the batch, head and row strides (elements), e.g. `(seq*heads*d, d, heads*d)`
    /// for `[batch, seq, heads, head_dim]` storage.
    pub fn with_strides(mut self, stride_b: usize, stride_h: usize, stride_s: usize) -> Self {
        self.shape.stride_b = stride_b;
        self.shape.stride_h = stride_h;
        self.shape.stride_s = stride_s;
        self
    }
    /// The view's shape and strides.
    pub fn shape(&self) -> HeadsShape {
        self.shape
    }
}

impl<'a, T> HeadsMut<'a, T> {
    /// A packed host tensor.
    pub fn host(
        data: &'a mut [T],
        batch: usize,
        heads: usize,
        seq: usize,
        head_dim: usize,
    ) -> Self {
        Self {
            data: StorageMut::Host(data),
            shape: HeadsShape::packed(batch, heads, seq, head_dim),
        }
    }
    /// A packed device tensor; attention runs on this buffer's stream.
    #[cfg(feature = "cuda")]
    pub fn device(
        data: &'a mut CudaSlice<T>,
        batch: usize,
        heads: usize,
        seq: usize,
        head_dim: usize,
    ) -> Self {
        Self {
            data: StorageMut::Device(data),
            shape: HeadsShape::packed(batch, heads, seq, head_dim),
        }
    }
    /// Sets the batch, head and row strides (elements); see [`Heads::with_strides`].
    pub fn with_strides(mut self, stride_b: usize, stride_h: usize, stride_s: usize) -> Self {
        self.shape.stride_b = stride_b;
        self.shape.stride_h = stride_h;
        self.shape.stride_s = stride_s;
        self
    }
    /// The view's shape and strides.
    pub fn shape(&self) -> HeadsShape {
        self.shape
    }
}

/// Validated block patterns over (query blocks × key blocks), stacked as one BSR pattern:
/// pattern `p` is block-rows `p·q_blocks .. (p+1)·q_blocks`. `patterns` is 1 (one pattern
/// for every (batch, head)) or `batch·heads` (pattern `b·heads + h`). Column indices are
/// ascending and unique within a row, every one below `k_blocks`.
///
/// A per-head set (`patterns > 1`) records the `(batch, heads)` it was made for
/// ([`with_heads`](Self::with_heads); the gating records it): attention takes it only for
/// that `(batch, heads)`, so a set made for (2, 3) is not silently read as (3, 2).
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
        let mut row_ptr = vec![0i32];
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
        if let Some(r) = (0..rows).find(|&r| row_ptr[r + 1] < row_ptr[r]) {
            return Err(pattern_error(format!("row_ptr decreases at row {r}")));
        }
        for r in 0..rows {
            let (a, b) = (row_ptr[r], row_ptr[r + 1]);
            let row = &col_idx[a as usize..b as usize];
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
    /// `batch·heads`. Attention then takes the set only for that `(batch, heads)`; a set of
    /// more than one pattern must say it (a single pattern serves every head).
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

    /// Checks the patterns against an attention problem: `q_blocks = ceil(seq_q/block_q)`,
    /// `k_blocks = ceil(seq_k/block_k)`, and `patterns` 1 or `batch·heads`.
    pub fn check_dims(
        &self,
        batch: usize,
        heads: usize,
        seq_q: usize,
        seq_k: usize,
    ) -> Result<(), Error> {
        check_mask_dims(self.dims(), (batch, heads, seq_q, seq_k))
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

/// The dims of a mask (host or device) that an attention problem is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MaskDims {
    pub block_q: usize,
    pub block_k: usize,
    pub q_blocks: usize,
    pub k_blocks: usize,
    pub patterns: usize,
    pub heads: Option<(usize, usize)>,
}

/// The dims check of [`BlockPatterns::check_dims`], for the host and the device patterns.
pub(crate) fn check_mask_dims(
    mask: MaskDims,
    (batch, heads, seq_q, seq_k): (usize, usize, usize, usize),
) -> Result<(), Error> {
    let MaskDims {
        block_q,
        block_k,
        q_blocks,
        k_blocks,
        patterns,
        heads: made_for,
    } = mask;
    if q_blocks != seq_q.div_ceil(block_q) {
        return Err(Error::ShapeMismatch {
            what: "query blocks of the mask (= ceil(seq_q / block_q))",
            expected: seq_q.div_ceil(block_q),
            got: q_blocks,
        });
    }
    if k_blocks != seq_k.div_ceil(block_k) {
        return Err(Error::ShapeMismatch {
            what: "key blocks of the mask (= ceil(seq_k / block_k))",
            expected: seq_k.div_ceil(block_k),
            got: k_blocks,
        });
    }
    let pairs = batch
        .checked_mul(heads)
        .ok_or(Error::InvalidArgument("batch * heads overflows".into()))?;
    if patterns != 1 && patterns != pairs {
        return Err(Error::ShapeMismatch {
            what: "patterns of the mask (1 or batch * heads)",
            expected: pairs,
            got: patterns,
        });
    }
    if patterns != 1 {
        let (b, h) = made_for.ok_or(Error::InvalidArgument(
            "a per-head mask must record the (batch, heads) it was made for \
             (BlockPatterns::with_heads)"
                .into(),
        ))?;
        check_agree(&[
            ("batch the per-head mask was made for", batch, b),
            ("heads the per-head mask was made for", heads, h),
        ])?;
    }
    Ok(())
}

/// The mask operand: host patterns (CPU) or device patterns (GPU).
pub enum MaskOperand<'a> {
    /// Patterns in host memory.
    Host(&'a BlockPatterns),
    /// Patterns in device memory.
    #[cfg(feature = "cuda")]
    Device(&'a crate::gpu::DeviceBlockPatterns),
}

impl<'a> From<&'a BlockPatterns> for MaskOperand<'a> {
    fn from(p: &'a BlockPatterns) -> Self {
        MaskOperand::Host(p)
    }
}

#[cfg(feature = "cuda")]
impl<'a> From<&'a crate::gpu::DeviceBlockPatterns> for MaskOperand<'a> {
    fn from(p: &'a crate::gpu::DeviceBlockPatterns) -> Self {
        MaskOperand::Device(p)
    }
}

/// The LSE output (`batch·heads·seq_q` floats, `[batch, heads, seq_q]` packed).
pub enum LseMut<'a> {
    /// Host floats.
    Host(&'a mut [f32]),
    /// Device floats.
    #[cfg(feature = "cuda")]
    Device(&'a mut CudaSlice<f32>),
}

impl LseMut<'_> {
    fn len(&self) -> usize {
        match self {
            LseMut::Host(s) => s.len(),
            #[cfg(feature = "cuda")]
            LseMut::Device(s) => s.len(),
        }
    }
}

/// Scale, causality and backend of one attention call.
///
/// ```
/// use sparsek::{AttentionOptions, Backend};
///
/// let o = AttentionOptions::new().causal(true).scale(0.125).backend(Backend::Cpu);
/// assert_eq!((o.get_causal(), o.get_scale(64), o.get_backend()), (true, 0.125, Backend::Cpu));
/// assert_eq!(AttentionOptions::new().get_scale(64), 0.125); // 1/sqrt(head_dim)
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct AttentionOptions {
    scale: Option<f32>,
    causal: bool,
    backend: Option<Backend>,
}

impl AttentionOptions {
    /// Scale 1/sqrt(head_dim), not causal, the backend chosen by where the operands are.
    pub fn new() -> Self {
        Self::default()
    }
    /// The softmax scale (finite and > 0).
    pub fn scale(mut self, scale: f32) -> Self {
        self.scale = Some(scale);
        self
    }
    /// Causal masking (query `i` keeps keys `j <= i`).
    pub fn causal(mut self, causal: bool) -> Self {
        self.causal = causal;
        self
    }
    /// The backend: `Auto`, `Cpu` (host operands) or `Cutlass` (device operands, Hopper).
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = Some(backend);
        self
    }
    /// The scale for this head dimension (1/sqrt(head_dim) unless set).
    pub fn get_scale(&self, head_dim: usize) -> f32 {
        self.scale
            .unwrap_or_else(|| 1.0 / (head_dim.max(1) as f32).sqrt())
    }
    /// Whether causal masking is on.
    pub fn get_causal(&self) -> bool {
        self.causal
    }
    /// The backend requested.
    pub fn get_backend(&self) -> Backend {
        self.backend.unwrap_or(Backend::Auto)
    }
}

/// The first of `(what, expected, got)` whose sizes differ, as `ShapeMismatch`.
pub(crate) fn check_agree(list: &[(&'static str, usize, usize)]) -> Result<(), Error> {
    match list.iter().find(|(_, expected, got)| expected != got) {
        Some(&(what, expected, got)) => Err(Error::ShapeMismatch {
            what,
            expected,
            got,
        }),
        None => Ok(()),
    }
}

/// The buffer holds the view, and the view's rows do not overlap (`stride_s >= head_dim`
/// over several rows): an input may repeat a head (`stride_h = 0`) or a batch, never rows
/// within a head, so every per-head size is bounded by the buffer.
fn check_buffer(operand: &'static str, shape: &HeadsShape, len: usize) -> Result<(), Error> {
    let needed = shape.required_len().ok_or(Error::InvalidArgument(format!(
        "{operand}: its view's extent overflows usize"
    )))?;
    if len < needed {
        return Err(Error::BufferTooSmall {
            operand,
            needed,
            got: len,
        });
    }
    if shape.seq > 1 && shape.stride_s < shape.head_dim {
        return Err(Error::LeadingDimension {
            operand,
            ld: shape.stride_s,
            min: shape.head_dim,
        });
    }
    Ok(())
}

/// Every check of the operands that holds for every backend (shapes agree, buffers hold
/// their views, the mask's dims fit, the scale is valid). The one validation of the entry.
#[allow(clippy::too_many_arguments)]
fn check_operands(
    q: &HeadsShape,
    k: &HeadsShape,
    v: &HeadsShape,
    o: &HeadsShape,
    lens: [usize; 4],
    lse_len: Option<usize>,
    mask: Option<MaskDims>,
    opts: &AttentionOptions,
) -> Result<(), Error> {
    check_agree(&[
        ("batch of K (= batch of Q)", q.batch, k.batch),
        ("batch of V (= batch of Q)", q.batch, v.batch),
        ("batch of O (= batch of Q)", q.batch, o.batch),
        ("heads of K (= heads of Q)", q.heads, k.heads),
        ("heads of V (= heads of Q)", q.heads, v.heads),
        ("heads of O (= heads of Q)", q.heads, o.heads),
        ("head_dim of K (= head_dim of Q)", q.head_dim, k.head_dim),
        ("head_dim of V (= head_dim of Q)", q.head_dim, v.head_dim),
        ("head_dim of O (= head_dim of Q)", q.head_dim, o.head_dim),
        ("seq of V (= seq of K)", k.seq, v.seq),
        ("seq of O (= seq of Q)", q.seq, o.seq),
    ])?;
    if q.head_dim == 0 {
        return Err(Error::InvalidArgument("head_dim must be at least 1".into()));
    }
    for (operand, shape, len) in [
        ("Q", q, lens[0]),
        ("K", k, lens[1]),
        ("V", v, lens[2]),
        ("O", o, lens[3]),
    ] {
        check_buffer(operand, shape, len)?;
    }
    // O's writes must not race: no two of its elements may share an address. (In safe Rust
    // an output cannot alias an input: `&mut` against `&`.)
    if !o.is_disjoint() {
        return Err(Error::Overlap {
            output: "O",
            other: "O",
        });
    }
    if let Some(len) = lse_len {
        let needed = q
            .batch
            .checked_mul(q.heads)
            .and_then(|x| x.checked_mul(q.seq))
            .ok_or(Error::InvalidArgument(
                "batch * heads * seq_q overflows".into(),
            ))?;
        if len < needed {
            return Err(Error::BufferTooSmall {
                operand: "LSE",
                needed,
                got: len,
            });
        }
    }
    let scale = opts.get_scale(q.head_dim);
    if !(scale.is_finite() && scale > 0.0) {
        return Err(Error::InvalidArgument(format!(
            "scale = {scale}: must be finite and > 0"
        )));
    }
    if let Some(dims) = mask {
        check_mask_dims(dims, (q.batch, q.heads, q.seq, k.seq))?;
    }
    Ok(())
}

/// Attention into `o` (and `lse` when given) on any backend: host operands run the CPU
/// reference, device operands (and a device mask) the GPU kernel on O's stream. Every check
/// runs first; on an error nothing is written.
pub fn attention_into<T: Element>(
    q: Heads<'_, T>,
    k: Heads<'_, T>,
    v: Heads<'_, T>,
    o: HeadsMut<'_, T>,
    lse: Option<LseMut<'_>>,
    mask: Option<MaskOperand<'_>>,
    opts: &AttentionOptions,
) -> Result<(), Error> {
    let mask_dims = mask.as_ref().map(|m| match m {
        MaskOperand::Host(p) => p.dims(),
        #[cfg(feature = "cuda")]
        MaskOperand::Device(p) => p.dims(),
    });
    check_operands(
        &q.shape,
        &k.shape,
        &v.shape,
        &o.shape,
        [q.data.len(), k.data.len(), v.data.len(), o.data.len()],
        lse.as_ref().map(LseMut::len),
        mask_dims,
        opts,
    )?;
    let backend = opts.get_backend();
    match (&q.data, &k.data, &v.data, o.data) {
        (Storage::Host(qd), Storage::Host(kd), Storage::Host(vd), StorageMut::Host(od)) => {
            if !matches!(backend, Backend::Auto | Backend::Cpu) {
                return Err(Error::BackendUnavailable {
                    backend,
                    reason: "operands are on the host".into(),
                });
            }
            let lse = match lse {
                None => None,
                Some(LseMut::Host(l)) => Some(l),
                #[cfg(feature = "cuda")]
                Some(LseMut::Device(_)) => {
                    return Err(Error::MixedLocations("host Q, K, V, O with a device LSE"))
                }
            };
            let mask = match mask {
                None => None,
                Some(MaskOperand::Host(p)) => Some(p),
                #[cfg(feature = "cuda")]
                Some(MaskOperand::Device(_)) => {
                    return Err(Error::MixedLocations("host Q, K, V, O with a device mask"))
                }
            };
            cpu::attention(
                cpu::Operands {
                    q: (qd, &q.shape),
                    k: (kd, &k.shape),
                    v: (vd, &v.shape),
                    o: (od, &o.shape),
                },
                lse,
                mask,
                opts,
            )
        }
        #[cfg(feature = "cuda")]
        (Storage::Device(_), Storage::Device(_), Storage::Device(_), StorageMut::Device(od)) => {
            let lse = match lse {
                None => None,
                Some(LseMut::Device(l)) => Some(l),
                Some(LseMut::Host(_)) => {
                    return Err(Error::MixedLocations("device Q, K, V, O with a host LSE"))
                }
            };
            let mask = match mask {
                None => None,
                Some(MaskOperand::Device(p)) => Some(p),
                Some(MaskOperand::Host(_)) => return Err(Error::MixedLocations(
                    "device Q, K, V, O with a host mask (upload it: DeviceBlockPatterns::upload)",
                )),
            };
            crate::gpu::attention::run_attention(
                crate::gpu::attention::AttentionOperands {
                    q: &q,
                    k: &k,
                    v: &v,
                    o: (od, o.shape),
                    lse,
                    mask,
                },
                opts,
            )
        }
        #[cfg(feature = "cuda")]
        _ => Err(Error::MixedLocations(
            "Q, K, V and O must all be on the host or all on the device",
        )),
    }
}

/// Attention of host operands, allocating the outputs: `(O, LSE)`, O packed `[batch, heads,
/// seq_q, head_dim]`, LSE `[batch, heads, seq_q]`. The CPU reference.
pub fn attention<T: Element>(
    q: Heads<'_, T>,
    k: Heads<'_, T>,
    v: Heads<'_, T>,
    mask: Option<&BlockPatterns>,
    opts: &AttentionOptions,
) -> Result<(Vec<T>, Vec<f32>), Error> {
    let s = q.shape;
    let o_len = HeadsShape::packed(s.batch, s.heads, s.seq, s.head_dim)
        .required_len()
        .ok_or(Error::InvalidArgument("O's size overflows usize".into()))?;
    let lse_len = s
        .batch
        .checked_mul(s.heads)
        .and_then(|x| x.checked_mul(s.seq))
        .ok_or(Error::InvalidArgument(
            "batch * heads * seq_q overflows".into(),
        ))?;
    let mut o = crate::format::try_vec("O", o_len)?;
    o.resize(o_len, T::default());
    let mut lse = crate::format::try_vec("LSE", lse_len)?;
    lse.resize(lse_len, 0.0f32);
    attention_into(
        q,
        k,
        v,
        HeadsMut::host(&mut o, s.batch, s.heads, s.seq, s.head_dim),
        Some(LseMut::Host(&mut lse)),
        mask.map(MaskOperand::Host),
        opts,
    )?;
    Ok((o, lse))
}
