//! The fused linear-layer epilogue: `C = act(α·A·B + bias + β·C)`, computed in f32
//! before `C` is rounded to its type, on every backend.

#[cfg(feature = "cuda")]
use cudarc::driver::CudaSlice;

/// The activation applied last in the epilogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Activation {
    /// The identity.
    #[default]
    None,
    /// `max(x, 0)`.
    Relu,
    /// GELU, tanh approximation: `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`.
    GeluTanh,
    /// SiLU (swish): `x / (1 + e^(−x))`.
    Silu,
}

impl Activation {
    /// The activation of one value, as every backend computes it (in f32).
    pub fn apply(self, x: f32) -> f32 {
        match self {
            Activation::None => x,
            Activation::Relu => x.max(0.0),
            Activation::GeluTanh => {
                const SQRT_2_OVER_PI: f32 = 0.797_884_6;
                0.5 * x * (1.0 + (SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)).tanh())
            }
            Activation::Silu => x / (1.0 + (-x).exp()),
        }
    }
}

/// A vector (the bias): a host slice or a device buffer.
#[derive(Clone, Copy)]
pub enum Vector<'a, T> {
    /// Host memory (CPU backend).
    Host(&'a [T]),
    /// Device memory (GPU backends), used on C's stream.
    #[cfg(feature = "cuda")]
    Device(&'a CudaSlice<T>),
}

impl<T> Vector<'_, T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Vector::Host(s) => s.len(),
            #[cfg(feature = "cuda")]
            Vector::Device(s) => s.len(),
        }
    }
    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What follows the product: an optional bias (one value per row of `C`, i.e. per output
/// feature of `y = x·Wᵀ`, of the type of A's values: A's element type, or C's when A is FP8,
/// [`TakesBias`](crate::element::TakesBias)) and an activation.
///
/// ```
/// use sparsek::{Activation, Epilogue, Vector};
/// let bias = vec![sparsek::f16::from_f32(0.5); 256];
/// let epilogue = Epilogue::new().bias(Vector::Host(&bias)).activation(Activation::Silu);
/// assert_eq!(epilogue.get_activation(), Activation::Silu);
/// ```
#[derive(Clone, Copy)]
pub struct Epilogue<'a, T> {
    pub(crate) bias: Option<Vector<'a, T>>,
    pub(crate) activation: Activation,
    pub(crate) gated: bool,
}

impl<T> Default for Epilogue<'_, T> {
    fn default() -> Self {
        Self {
            bias: None,
            activation: Activation::None,
            gated: false,
        }
    }
}

impl<'a, T> Epilogue<'a, T> {
    /// No bias, no activation: `C = α·A·B + β·C`.
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds `bias` (m values) to every column of the product.
    pub fn bias(mut self, bias: Vector<'a, T>) -> Self {
        self.bias = Some(bias);
        self
    }
    /// Applies `activation` last.
    pub fn activation(mut self, activation: Activation) -> Self {
        self.activation = activation;
        self
    }
    /// The gated (GLU) epilogue: the gate and up products of a SwiGLU/GeGLU layer in one
    /// product. A holds the two weights interleaved by block-row (block-row `2i`: gate rows
    /// `i·bm ..`, block-row `2i+1`: the up rows with the same indices;
    /// [`BsrMatrix::interleave_block_rows`](crate::BsrMatrix::interleave_block_rows) builds
    /// it), and `C` (`m/2 x n`) gets
    /// `C[i·bm + r] = act(α·(A·B)[2i·bm + r] + bias[2i·bm + r]) · (α·(A·B)[(2i+1)·bm + r] + bias[(2i+1)·bm + r])`,
    /// the bias (if any) having `m` values in A's row order. Needs `m` a multiple of `2·bm`,
    /// `β = 0` and `op(A) = A` ([`Error::Gated`](crate::Error::Gated) otherwise). On the
    /// device it runs on the Decode family (sm_90: the halves meet in a thread-block cluster)
    /// and on the Hopper family's gated rows (sm_90a, 16-bit, blocks up to 128 high), which
    /// `Backend::Auto` takes for more columns (from n = 17; n = 65 for blocks up to 64 high).
    pub fn gated(mut self, gated: bool) -> Self {
        self.gated = gated;
        self
    }
    /// The activation.
    pub fn get_activation(&self) -> Activation {
        self.activation
    }
    /// Whether the epilogue is gated ([`gated`](Self::gated)).
    pub fn is_gated(&self) -> bool {
        self.gated
    }
    /// Whether there is anything to do beyond `α·A·B + β·C`.
    pub fn is_identity(&self) -> bool {
        self.bias.is_none() && self.activation == Activation::None && !self.gated
    }
}
