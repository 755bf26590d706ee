//! The scales of FP8 operands (re-exported by [`crate::quantize`], where they are documented
//! with the quantizers): their kinds and the host values of A's and B's. Below the operands
//! that carry them (`dense`, `error`, `check`), so it uses none of them.

use crate::element::Fp8;
use crate::epilogue::Vector;

/// How an operand's values scale (`sparsek::ScaleKind` of the C++ API): `value = stored *
/// scale`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ScaleKind {
    /// No scale (1): every operand that is not FP8, or FP8 values read as they are.
    #[default]
    None,
    /// One value for the whole operand.
    PerTensor,
    /// A only: one value per stored block, in the order of its values (`nnzb` values).
    PerBlock,
    /// B only: one value per column of B (`n` values; a token of `x` in `y = x·Wᵀ`).
    PerColumn,
}

impl std::fmt::Display for ScaleKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ScaleKind::None => "no",
            ScaleKind::PerTensor => "per-tensor",
            ScaleKind::PerBlock => "per-block",
            ScaleKind::PerColumn => "per-column",
        })
    }
}

impl ScaleKind {
    /// How many values scales of this kind hold for an operand of `parts` blocks (A) or
    /// columns (B): 0, 1 or `parts`.
    pub fn count(self, parts: usize) -> usize {
        match self {
            ScaleKind::None => 0,
            ScaleKind::PerTensor => 1,
            ScaleKind::PerBlock | ScaleKind::PerColumn => parts,
        }
    }
}

/// The scales of an FP8 BSR matrix (A), on the host: none, one per tensor, or one per
/// stored block (`nnzb` values, in the order of the values). A [`QuantizedBsr`](crate::quantize::QuantizedBsr) holds them
/// with its values; `DeviceBsr::upload_quantized` (`cuda` feature) uploads them.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum BlockScales {
    /// No scale: the stored values are the values.
    #[default]
    None,
    /// One scale for every block.
    PerTensor(f32),
    /// One scale per stored block.
    PerBlock(Vec<f32>),
}

impl BlockScales {
    /// The kind: `None`, `PerTensor` or `PerBlock`.
    pub fn kind(&self) -> ScaleKind {
        match self {
            BlockScales::None => ScaleKind::None,
            BlockScales::PerTensor(_) => ScaleKind::PerTensor,
            BlockScales::PerBlock(_) => ScaleKind::PerBlock,
        }
    }
    /// The values, as the kernels read them: none, one, or one per block.
    pub fn as_slice(&self) -> &[f32] {
        match self {
            BlockScales::None => &[],
            BlockScales::PerTensor(s) => std::slice::from_ref(s),
            BlockScales::PerBlock(v) => v,
        }
    }
    /// The scale of stored block `i`: 1 without scales; `None` past a per-block list.
    pub fn of_block(&self, i: usize) -> Option<f32> {
        match self {
            BlockScales::None => Some(1.0),
            BlockScales::PerTensor(s) => Some(*s),
            BlockScales::PerBlock(v) => v.get(i).copied(),
        }
    }
}

/// The scales of a dense FP8 operand (B), wherever it lives: none, one per tensor (a vector
/// of one value) or one per column of B (`n` values), host slices for host operands and
/// device buffers for device ones. Attach them with
/// [`Dense::with_scales`](crate::Dense::with_scales).
#[derive(Clone, Copy, Default)]
pub enum ColumnScales<'a> {
    /// No scale.
    #[default]
    None,
    /// One value for the whole operand (a vector of length 1).
    PerTensor(Vector<'a, f32>),
    /// One value per column of B.
    PerColumn(Vector<'a, f32>),
}

impl<'a> ColumnScales<'a> {
    /// The kind: `None`, `PerTensor` or `PerColumn`.
    pub fn kind(&self) -> ScaleKind {
        match self {
            ColumnScales::None => ScaleKind::None,
            ColumnScales::PerTensor(_) => ScaleKind::PerTensor,
            ColumnScales::PerColumn(_) => ScaleKind::PerColumn,
        }
    }
    /// The values, if any.
    pub fn values(&self) -> Option<Vector<'a, f32>> {
        match self {
            ColumnScales::None => None,
            ColumnScales::PerTensor(v) | ColumnScales::PerColumn(v) => Some(*v),
        }
    }
}

/// The granularity of A's scales when quantizing ([`BsrMatrix::quantize_fp8`](crate::BsrMatrix::quantize_fp8)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BlockGranularity {
    /// One scale for the matrix.
    PerTensor,
    /// One scale per stored block: each block keeps its own range (weights whose blocks
    /// differ in magnitude lose less).
    PerBlock,
}

/// The granularity of B's scales when quantizing ([`QuantizedDense::quantize`](crate::quantize::QuantizedDense::quantize)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ColumnGranularity {
    /// One scale for the matrix.
    PerTensor,
    /// One scale per column of B (per token of `x` in `y = x·Wᵀ`).
    PerColumn,
}

/// The scale that maps a part's largest magnitude `amax` onto the largest finite FP8 value:
/// `amax / MAX`, 1 for an all-zero part, never below the smallest normal f32.
pub(crate) fn scale_for<Q: Fp8>(amax: f32) -> f32 {
    if amax == 0.0 {
        1.0
    } else {
        (amax / Q::MAX).max(f32::MIN_POSITIVE)
    }
}
