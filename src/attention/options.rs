//! The options of one attention call.

use crate::options::Backend;

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
    /// The backend: `Auto`, `Cpu` (host operands) or `Hopper` (device operands, sm_90a).
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
