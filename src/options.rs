//! What one call is asked to do besides its operands: scalars and backend.

/// Which implementation runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// The best available for where the operands live: the CPU for host operands; on
    /// the device, the Decode family for few columns of B, else the Hopper family where it
    /// applies, else the WMMA kernel.
    Auto,
    /// The CPU reference backend (host operands).
    Cpu,
    /// The WMMA tensor-core kernel, sm_80+ (device operands).
    Wmma,
    /// The Hopper family (sm_90a: TMA + WGMMA on CUTLASS/CuTe), device operands. (Named
    /// for the architecture, beside which an sm_100 family will stand.)
    Hopper,
    /// The memory-bound family for few columns of B (decode-sized batches), sm_80+
    /// (device operands).
    Decode,
}

impl Backend {
    /// The old name of [`Backend::Hopper`].
    #[deprecated(since = "0.1.1", note = "Backend::Cutlass is Backend::Hopper")]
    #[allow(non_upper_case_globals)]
    pub const Cutlass: Backend = Backend::Hopper;
}

/// Scalars, `op(A)` and backend of one product: `SpmmOptions::new().alpha(2.0).beta(1.0)`.
///
/// ```
/// use sparsek::{Backend, SpmmOptions};
///
/// let o = SpmmOptions::new().alpha(2.0).beta(1.0).backend(Backend::Cpu);
/// assert_eq!((o.get_alpha(), o.get_beta(), o.get_backend()), (2.0, 1.0, Backend::Cpu));
/// // The default: C = A·B, the backend chosen per call.
/// assert_eq!(
///     SpmmOptions::default(),
///     SpmmOptions::new().alpha(1.0).beta(0.0).transpose_a(false).backend(Backend::Auto)
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpmmOptions {
    pub(crate) alpha: f32,
    pub(crate) beta: f32,
    pub(crate) transpose_a: bool,
    pub(crate) backend: Backend,
}

impl Default for SpmmOptions {
    fn default() -> Self {
        Self {
            alpha: 1.0,
            beta: 0.0,
            transpose_a: false,
            backend: Backend::Auto,
        }
    }
}

impl SpmmOptions {
    /// `α = 1, β = 0`, `Backend::Auto`.
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets `α`, the scale of `A·B` (default 1).
    pub fn alpha(mut self, alpha: f32) -> Self {
        self.alpha = alpha;
        self
    }
    /// Sets `β`, the scale of C's old contents (default 0).
    ///
    /// With `β = 0`, C is write-only: its old contents (even NaN) are never read.
    pub fn beta(mut self, beta: f32) -> Self {
        self.beta = beta;
        self
    }
    /// Sets `op(A)`: `false` (default) multiplies by `A`, `true` by `Aᵀ`, read in place
    /// through the pattern's transpose index ([`BsrMatrix::transpose_index`](crate::BsrMatrix::transpose_index)):
    /// `C = α·Aᵀ·B + β·C` with `B` `m x n` and `C` `k x n` for `A` `m x k`. The CPU backend
    /// and, on the device, the Hopper and Wmma families run it (a `DeviceBsr` keeps its
    /// transpose index on the device once built); the Decode family does not.
    pub fn transpose_a(mut self, transpose: bool) -> Self {
        self.transpose_a = transpose;
        self
    }
    /// Sets the backend (default [`Backend::Auto`]).
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }
    /// The `α` set.
    pub fn get_alpha(&self) -> f32 {
        self.alpha
    }
    /// The `β` set.
    pub fn get_beta(&self) -> f32 {
        self.beta
    }
    /// Whether `op(A) = Aᵀ`.
    pub fn get_transpose_a(&self) -> bool {
        self.transpose_a
    }
    /// The backend set (`Auto` stays `Auto`; it is resolved per call).
    pub fn get_backend(&self) -> Backend {
        self.backend
    }
}
