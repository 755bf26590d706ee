//! The options of one attention call.

use crate::options::Backend;

/// Where the causal diagonal sits when `seq_q != seq_k` (the C++ `sparsek::CausalAlignment`).
///
/// With `offset` 0 ([`TopLeft`](Self::TopLeft)) or `seq_k - seq_q`
/// ([`BottomRight`](Self::BottomRight)), causal attention keeps key `j` for query `i` when
/// `j <= i + offset`.
///
/// ```
/// use sparsek::CausalAlignment;
///
/// // 2 new queries against 5 cached keys: bottom-right, query 0 sees keys 0..=3.
/// assert_eq!(CausalAlignment::BottomRight.offset(2, 5), 3);
/// assert_eq!(CausalAlignment::TopLeft.offset(2, 5), 0);
/// // 5 queries against 2 keys: queries 0..=2 see no key.
/// assert_eq!(CausalAlignment::BottomRight.offset(5, 2), -3);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CausalAlignment {
    /// Query `i` keeps keys `j <= i` (PyTorch's `is_causal`): the first query sees the first
    /// key.
    #[default]
    TopLeft,
    /// Query `i` keeps keys `j <= i + seq_k - seq_q`: the last query sees the last key (a KV
    /// cache: chunked prefill, speculative decoding, decode). With `seq_q > seq_k` the first
    /// `seq_q - seq_k` queries keep no key (O = 0, LSE = -inf).
    BottomRight,
}

impl CausalAlignment {
    /// The diagonal's offset for these sequence lengths: 0, or `seq_k - seq_q` (may be
    /// negative; saturated at the ends of `i64`).
    pub fn offset(self, seq_q: usize, seq_k: usize) -> i64 {
        match self {
            CausalAlignment::TopLeft => 0,
            CausalAlignment::BottomRight => {
                let (q, k) = (seq_q as i128, seq_k as i128);
                (k - q).clamp(i64::MIN as i128, i64::MAX as i128) as i64
            }
        }
    }

    /// Whether query `i` keeps key `j` under causal masking of these lengths.
    pub fn keeps(self, i: usize, j: usize, seq_q: usize, seq_k: usize) -> bool {
        match self {
            CausalAlignment::TopLeft => j <= i,
            // j <= i + seq_k - seq_q, without a negative intermediate.
            CausalAlignment::BottomRight => j as u128 + seq_q as u128 <= i as u128 + seq_k as u128,
        }
    }
}

/// Scale, causality (and its alignment) and backend of one attention call.
///
/// ```
/// use sparsek::{AttentionOptions, Backend, CausalAlignment};
///
/// let o = AttentionOptions::new().causal(true).scale(0.125).backend(Backend::Cpu);
/// assert_eq!((o.get_causal(), o.get_scale(64), o.get_backend()), (true, 0.125, Backend::Cpu));
/// assert_eq!(o.get_causal_alignment(), CausalAlignment::TopLeft);
/// assert_eq!(AttentionOptions::new().get_scale(64), 0.125); // 1/sqrt(head_dim)
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct AttentionOptions {
    scale: Option<f32>,
    causal: bool,
    causal_alignment: CausalAlignment,
    backend: Option<Backend>,
    check_indices: bool,
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
    /// Causal masking: query `i` keeps keys `j <= i` (top-left, the default alignment) or
    /// `j <= i + seq_k - seq_q` (bottom-right: [`causal_alignment`](Self::causal_alignment)).
    pub fn causal(mut self, causal: bool) -> Self {
        self.causal = causal;
        self
    }
    /// Where the causal diagonal sits when `seq_q != seq_k` (read only with
    /// [`causal`](Self::causal)); [`CausalAlignment::TopLeft`] unless set.
    pub fn causal_alignment(mut self, alignment: CausalAlignment) -> Self {
        self.causal_alignment = alignment;
        self
    }
    /// The backend: `Auto`, `Cpu` (host operands) or `Hopper` (device operands, sm_90a).
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = Some(backend);
        self
    }
    /// Check a [`SequenceLayout`](super::SequenceLayout)'s device arrays on the device before
    /// the launch (the C++ `AttentionOptions::check_indices`): a key count outside `[0,
    /// max_seqlen_k]` or a page a sequence reaches outside the pool is
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) and nothing is launched. It
    /// waits for the stream (not inside a CUDA graph capture). Off: the values are trusted
    /// for the results, and clamped by the kernels (no access leaves the views). Host arrays
    /// are always checked.
    pub fn check_indices(mut self, check: bool) -> Self {
        self.check_indices = check;
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
    /// The causal alignment (meaningful with [`get_causal`](Self::get_causal)).
    pub fn get_causal_alignment(&self) -> CausalAlignment {
        self.causal_alignment
    }
    /// The backend requested.
    pub fn get_backend(&self) -> Backend {
        self.backend.unwrap_or(Backend::Auto)
    }
    /// Whether a layout's device arrays are checked on the device first.
    pub fn get_check_indices(&self) -> bool {
        self.check_indices
    }
}
