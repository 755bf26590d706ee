//! Typed errors. Bad input is reported here, before anything runs; nothing panics on it.

use crate::element::DType;
use crate::options::Backend;
use crate::scale::ScaleKind;

/// A malformed BSR matrix or pattern: one variant per defect.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BsrError {
    /// A block side (`bm` or `bk`) is 0.
    #[error("block shape {bm}x{bk} has a zero side")]
    ZeroSizedBlock {
        /// Rows of the block (`bm`).
        bm: usize,
        /// Columns of the block (`bk`).
        bk: usize,
    },
    /// A block side (`dim` is `"bm"` or `"bk"`) exceeds `i32::MAX`: the kernels take block
    /// sides as `i32`.
    #[error(
        "block side {dim} = {side} exceeds {max}, the largest block side the kernels take \
         (i32)",
        max = i32::MAX
    )]
    BlockSideOverflow {
        /// Which side: `"bm"` or `"bk"`.
        dim: &'static str,
        /// The side's length, in elements.
        side: usize,
    },
    /// `m` (or `k`) is not a multiple of the block side `bm` (or `bk`).
    #[error("{dim} = {len} is not a multiple of the block side {block}")]
    NotBlockMultiple {
        /// Which dimension: `"m"` or `"k"`.
        dim: &'static str,
        /// The dimension's length, in elements.
        len: usize,
        /// The block side it must be a multiple of (`bm` for `m`, `bk` for `k`).
        block: usize,
    },
    /// `row_ptr` does not have `m / bm + 1` entries.
    #[error("row_ptr has {got} entries; block rows + 1 = {expected} expected")]
    RowPtrLength {
        /// The length required, `m / bm + 1`.
        expected: usize,
        /// The length given.
        got: usize,
    },
    /// `row_ptr` does not start at 0, decreases, or does not end at `col_idx.len()`.
    #[error("row_ptr is ragged at entry {index}: {detail}")]
    RaggedRowPtr {
        /// The offending entry of `row_ptr` (0 for a bad start, the last for a bad end).
        index: usize,
        /// What is wrong there, in words.
        detail: String,
    },
    /// The columns of a block-row are not ascending.
    #[error("col_idx of block-row {row} is not sorted ({prev} then {next})")]
    UnsortedColumns {
        /// The block-row.
        row: usize,
        /// The earlier of the two adjacent columns.
        prev: i32,
        /// The later column, smaller than `prev`.
        next: i32,
    },
    /// A block-row holds the same column twice.
    #[error("col_idx of block-row {row} holds column {col} twice")]
    DuplicateColumn {
        /// The block-row.
        row: usize,
        /// The repeated block-column.
        col: i32,
    },
    /// A column index is negative or not below `k / bk`.
    #[error("col_idx of block-row {row} holds {col}, outside 0..{block_cols}")]
    ColumnOutOfRange {
        /// The block-row.
        row: usize,
        /// The offending block-column index, as given.
        col: i32,
        /// The number of block-columns, `k / bk`.
        block_cols: usize,
    },
    /// `values` does not hold `nnzb * bm * bk` elements.
    #[error("values has {got} elements; nnzb * bm * bk = {expected} expected")]
    ValuesLength {
        /// The length required, `nnzb * bm * bk` elements.
        expected: usize,
        /// The length given, in elements.
        got: usize,
    },
    /// A count the kernels index with `i32` (block rows, block columns, `nnzb`) exceeds
    /// `i32::MAX`.
    #[error("{what} = {value} overflows the i32 indices the kernels use")]
    IndexOverflow {
        /// Which count (e.g. `"block rows"`, `"nnzb"`).
        what: &'static str,
        /// Its value.
        value: u128,
    },
    /// A size computed as a product (`what`, e.g. `"m * k"`, `"nnzb * bm * bk"`) does not
    /// fit in `usize`; `value` is its exact value.
    #[error("{what} = {value} overflows usize")]
    SizeOverflow {
        /// Which product (e.g. `"m * k"`).
        what: &'static str,
        /// Its exact value.
        value: u128,
    },
    /// A block mask beyond `max_side` blocks per side or `max_blocks` blocks in all
    /// ([`BlockMask::MAX_SIDE`](crate::BlockMask::MAX_SIDE),
    /// [`BlockMask::MAX_BLOCKS`](crate::BlockMask::MAX_BLOCKS)): refused before anything
    /// is allocated.
    #[error(
        "a {rows} x {cols} block mask is too large: at most {max_side} blocks per side and \
         {max_blocks} blocks in all"
    )]
    MaskTooLarge {
        /// Block-rows requested.
        rows: usize,
        /// Block-columns requested.
        cols: usize,
        /// The most blocks allowed per side.
        max_side: usize,
        /// The most blocks allowed in all (`rows * cols`).
        max_blocks: u64,
    },
    /// An allocation of `elements` elements for `what`, sized from the input, failed.
    #[error("could not allocate {elements} elements for {what}")]
    Allocation {
        /// What the allocation was for.
        what: &'static str,
        /// How many elements (not bytes) were asked for.
        elements: usize,
    },
    /// An input slice (dense matrix, mask bits, scores) does not have the length its
    /// shape implies.
    #[error("input has {got} elements; {expected} expected")]
    InputLength {
        /// The length the shape implies, in elements.
        expected: usize,
        /// The length given, in elements.
        got: usize,
    },
    /// A pattern builder's parameter is out of range (density, top-k, band, period).
    #[error("invalid pattern: {0}")]
    InvalidPattern(String),
    /// A shard count of 0 or above the most a matrix is cut into (`format::shard`).
    #[error("{got} shards: 1 to {max}")]
    ShardCount {
        /// The count asked for.
        got: usize,
        /// [`crate::MAX_SHARDS`].
        max: usize,
    },
    /// Shard ranges that do not run contiguously from 0 over every block-row (or block-column).
    #[error("shard range {index}: {detail}")]
    ShardRanges {
        /// The first range that breaks the rule (the count of ranges where they stop short).
        index: usize,
        /// What is wrong.
        detail: String,
    },
    /// Two matrices to interleave by block-row (`BsrMatrix::interleave_block_rows`) differ
    /// in a dimension, or a matrix to split into pairs has an odd number of block-rows.
    #[error("interleave: {what} differ ({first} and {second})")]
    Interleave {
        /// The dimension: rows, columns, block rows or columns, block-rows.
        what: &'static str,
        /// The first matrix's.
        first: usize,
        /// The second's (for an odd count of block-rows: one more).
        second: usize,
    },
    /// Arrays that must agree in length do not (`what` names the array and what it must
    /// match, e.g. `"COO cols (= rows)"`, `"CSR row_ptr (m + 1)"`).
    #[error("{what} has {got} entries; {expected} expected")]
    LengthMismatch {
        /// The array, and what its length must equal.
        what: &'static str,
        /// The length required.
        expected: usize,
        /// The length given.
        got: usize,
    },
    /// A CSR `row_ptr` does not start at 0, decreases, or does not end at the number of
    /// entries.
    #[error("CSR row_ptr is ragged at entry {index}: {detail}")]
    CsrRowPtr {
        /// The offending entry of `row_ptr`.
        index: usize,
        /// What is wrong there, in words.
        detail: String,
    },
    /// A CSR or COO entry's row or column index is negative or not below `m` (or `k`).
    #[error("entry {entry}: {axis} index {index} is outside 0..{bound}")]
    EntryOutOfRange {
        /// The entry's position in the input arrays.
        entry: usize,
        /// Which index: `"row"` or `"column"`.
        axis: &'static str,
        /// The index as given (`i128::MAX` stands for one beyond `i128`).
        index: i128,
        /// The number of rows (`m`) or columns (`k`).
        bound: usize,
    },
}

/// Any error of sparsek's operations.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A malformed BSR matrix or pattern.
    #[error(transparent)]
    Bsr(#[from] BsrError),
    /// Operand shapes disagree (`what` names the dimension).
    #[error("{what}: {got} given, {expected} expected")]
    ShapeMismatch {
        /// The dimension, and what it must equal (e.g. `"rows of B (= k of A)"`).
        what: &'static str,
        /// The size required.
        expected: usize,
        /// The size given.
        got: usize,
    },
    /// A buffer is shorter than its view (shape and leading dimension) needs.
    #[error("{operand}: buffer holds {got} elements, its shape and ld need {needed}")]
    BufferTooSmall {
        /// The operand: `"B"` or `"C"`.
        operand: &'static str,
        /// Elements the view needs ([`DenseShape::required_len`](crate::DenseShape::required_len)).
        needed: usize,
        /// Elements the buffer holds.
        got: usize,
    },
    /// A dense view whose extent (`(outer - 1) * ld + contiguous extent`) overflows
    /// `usize`: no buffer can hold it.
    #[error(
        "{operand}: a {rows} x {cols} view with leading dimension {ld} spans more than \
         usize::MAX elements"
    )]
    SizeOverflow {
        /// The operand: `"B"` or `"C"`.
        operand: &'static str,
        /// Rows of the view.
        rows: usize,
        /// Columns of the view.
        cols: usize,
        /// Leading dimension of the view, in elements.
        ld: usize,
    },
    /// A dense view's leading dimension (a heads view's row stride) is below its
    /// contiguous extent (or below 1): its rows would overlap.
    #[error("{operand}: leading dimension {ld} is smaller than {min}")]
    LeadingDimension {
        /// The operand: `"B"`, `"C"`, or a heads view (`"Q"`, `"K"`, `"V"`, `"O"`).
        operand: &'static str,
        /// The leading dimension given, in elements.
        ld: usize,
        /// The smallest valid one: the contiguous extent, at least 1.
        min: usize,
    },
    /// The backend takes no kernel for these element types (the GPU ones: f16/bf16 in,
    /// the input type or f32 out).
    #[error("{backend:?} backend does not take {input} inputs with {output} output")]
    UnsupportedTypes {
        /// The backend requested.
        backend: Backend,
        /// Element type of A and B.
        input: DType,
        /// Element type of C.
        output: DType,
    },
    /// Some operands are on the host and others on the device.
    #[error("operands must all be on the host or all on the device: {0}")]
    MixedLocations(&'static str),
    /// The requested backend cannot run where the operands are (e.g. `Cpu` with device
    /// operands, a GPU backend with host operands).
    #[error("{backend:?} backend is not available: {reason}")]
    BackendUnavailable {
        /// The backend requested.
        backend: Backend,
        /// Why it cannot run.
        reason: String,
    },
    /// No kernel of the requested backend (`Auto`: of any backend) runs this valid problem;
    /// `reason` names each family's refusal (the message of the C++ registry, as is).
    #[error("{reason}")]
    NotSupported {
        /// The backend requested (possibly `Auto`).
        backend: Backend,
        /// Each kernel family's refusal, as the C++ registry words it.
        reason: String,
    },
    /// A value the C++ side refused (from its validation or the registry knob
    /// `SPARSEK_VARIANT`), or a size that does not fit the kernels' integer types.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The gated (GLU) epilogue's rules do not hold ([`Epilogue::gated`](crate::Epilogue::gated)):
    /// `op(A) = A`, `β = 0`, an even number of block-rows (gate and up pairs).
    #[error("gated epilogue: {0}")]
    Gated(&'static str),
    /// K and V's heads do not divide Q's (grouped-query attention: query head `h` reads KV
    /// head `h / (q_heads / kv_heads)`; `kv_heads` may be 0 only when `q_heads` is).
    #[error("K's heads ({kv_heads}) must divide Q's heads ({q_heads}): grouped-query attention")]
    HeadGroups {
        /// Heads of Q (and O).
        q_heads: usize,
        /// Heads of K (and V).
        kv_heads: usize,
    },
    /// An output view overlaps itself (`other == output`: two of its elements share an
    /// address, e.g. a head stride of 0 with several heads) or an input: the result would
    /// depend on the order of the writes, so the call is refused.
    #[error("{output} overlaps {}", if output == other { "itself" } else { other })]
    Overlap {
        /// The output view.
        output: &'static str,
        /// The operand it overlaps (the output itself for a self-overlapping view).
        other: &'static str,
    },
    /// A device operand belongs to another CUDA context (another device) than the stream
    /// the call launches on: its pointer would mean nothing there.
    #[error("{operand} is in another CUDA context than the launch stream ({detail})")]
    ContextMismatch {
        /// The operand.
        operand: &'static str,
        /// The two contexts' devices.
        detail: String,
    },
    /// A CUDA call failed (driver, allocation, launch); the message says which.
    #[error("CUDA error: {0}")]
    Cuda(String),
    /// An NCCL call failed, or NCCL cannot be loaded (feature `nccl`; the message says which).
    #[error("NCCL: {0}")]
    Nccl(String),
    /// An operand's scales do not hold the number of values their kind needs: 1 per
    /// tensor, `nnzb` per block, `n` per column (a device buffer for 0 values may hold 1:
    /// CUDA has no empty allocations).
    #[error("{operand}: {kind} scales hold {got} values; {expected} expected")]
    ScaleLength {
        /// The operand: `"A"` or `"B"`.
        operand: &'static str,
        /// The scales' kind.
        kind: ScaleKind,
        /// The values the kind needs.
        expected: usize,
        /// The values given.
        got: usize,
    },
    /// Scales of a kind this operand does not take: per block on B, per column on A (or
    /// on a transposed view, [`Dense::t`](crate::Dense::t), whose columns were rows), or
    /// any scales on an operand that is not FP8 (or on an operation that takes none: the
    /// SDDMM).
    #[error("{operand}: {kind} scales are not taken here: {reason}")]
    ScalesNotTaken {
        /// The operand: `"A"` or `"B"`.
        operand: &'static str,
        /// The scales' kind.
        kind: ScaleKind,
        /// Why, in words.
        reason: &'static str,
    },
    /// The element types of an FP8 product do not combine: A must be FP8; B of A's FP8
    /// type (W8A8) or f16/bf16 (W8A16); C f16, bf16 or f32.
    #[error("an FP8 product of {a} A, {b} B and {c} C: {reason}")]
    Fp8Types {
        /// A's element type.
        a: DType,
        /// B's element type.
        b: DType,
        /// C's element type.
        c: DType,
        /// Which rule fails, in words.
        reason: &'static str,
    },
    /// A product's element types do not go together outside the FP8 rules
    /// ([`Error::Fp8Types`]): a B of another type than an f16/bf16/f32 A's, or a bias of
    /// another type than the product's ([`TakesBias`](crate::element::TakesBias): A's; C's
    /// when A is FP8).
    #[error(
        "a product of {a} A, {b} B and {c} C{}: {reason}",
        bias.map(|t| format!(", bias {t}")).unwrap_or_default()
    )]
    OperandTypes {
        /// A's element type.
        a: DType,
        /// B's element type.
        b: DType,
        /// C's element type.
        c: DType,
        /// The bias's element type, when the bias is what is refused.
        bias: Option<DType>,
        /// Which rule fails, in words.
        reason: &'static str,
    },
    /// A value to quantize is NaN or infinite: no scale represents it.
    #[error("{operand}: value {index} is {value}; only finite values quantize")]
    NonFinite {
        /// What was being quantized (`"A"`, `"B"`).
        operand: &'static str,
        /// Its position in the input slice.
        index: usize,
        /// The value.
        value: f32,
    },
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
