//! Serving layouts of an attention batch ([`SequenceLayout`], the C++
//! `sparsek::SequenceLayout`): variable-length (packed) sequences, each sequence's own key
//! count and K/V read through a page table ([`PageTable`]).
//!
//! The default layout is the padded batch: every sequence has Q's `seq_q` queries and K's
//! `seq_k` keys. Packed (FlashAttention's varlen,
//! [`cu_seqlens_q`](SequenceLayout::cu_seqlens_q) / [`cu_seqlens_k`](SequenceLayout::cu_seqlens_k)):
//! Q and O (or K and V, or both) hold the `batch` sequences one after another along seq —
//! their views have batch 1 and seq the total; a `[total, heads, head_dim]` buffer is
//! `with_strides(0, head_dim, heads·head_dim)` — and sequence `b` is rows
//! `cu_seqlens[b] .. cu_seqlens[b+1]` (`batch + 1` offsets from 0, non-decreasing, ending at
//! the total, each length at most `max_seqlen`); no padding work is done. Causality is per
//! sequence (bottom-right: its own `len_k - len_q`), a mask's query blocks count from
//! `max_seqlen_q` and its per-head patterns are per (sequence, head); with packed queries the
//! LSE is `[heads, total_q]` (FlashAttention's varlen LSE). With per-sequence key counts, sequence `b` keeps its first `seqlens_k[b]`
//! keys (a KV cache filled to different lengths; bottom-right causality aligns each
//! sequence's last query with its own last key, `seqlens_k[b] - seq_q`). With a page table,
//! K and V are a pool `[num_pages, heads_kv, page_size, head_dim]` (their views' batch is the
//! pool's pages, their seq the page size) and sequence `b`'s logical key `j` is row
//! `j % page_size` of page `table[b·max_pages + j / page_size]`. A block mask's columns are
//! then logical key blocks of the longest sequence (`k_blocks = ceil(max_seqlen_k /
//! block_k)`, `block_k` a multiple of the page size or the page size a multiple of
//! `block_k`), so one table serves paged-only, sparse-only and both.
//!
//! The arrays are [`IndexArray`]s: host slices for host operands (the CPU reference checks
//! every value it reads) or device buffers for device operands. A device launch reads them
//! on the device (no host read: capturable in a CUDA graph); with
//! [`AttentionOptions::check_indices`](super::AttentionOptions::check_indices) they are
//! checked there first (a key count outside `[0, max_seqlen_k]`, a page a sequence reaches
//! outside the pool: [`Error::InvalidArgument`](crate::Error::InvalidArgument), nothing
//! launched), else trusted for the results: the kernels clamp them, so no access leaves
//! the views (offsets that disagree with the packed total are caught by the check, or with it
//! off give wrong results, never an access outside the views). The decode family takes any page size, the Hopper family pages of a multiple of
//! 128 keys ([`Error::NotSupported`](crate::Error::NotSupported) otherwise); the Hopper
//! family reads the K and V rows past a sequence's count inside its last 128-key block,
//! weighted by 0, so they must be finite (the decode family reads none of them).
//!
//! ```
//! use sparsek::{attention_with_layout, Heads, HeadsMut, LseMut, PageTable, SequenceLayout};
//! use sparsek::AttentionOptions;
//!
//! // Two sequences of one query each against a KV cache of 3 pages of 4 keys: sequence 0
//! // holds 6 keys in pages 2 then 0, sequence 1 holds 3 keys in page 1.
//! let (heads, d, page) = (1, 8, 4);
//! let q: Vec<f32> = (0..2 * heads * d).map(|i| (i % 5) as f32 * 0.1).collect();
//! let pool: Vec<f32> = (0..3 * heads * page * d).map(|i| (i % 7) as f32 * 0.1).collect();
//! let (lens, table) = ([6, 3], [2, 0, 1, 1]);
//! let layout = SequenceLayout::new(2)
//!     .seqlens_k(&lens[..], 8)
//!     .page_table(PageTable::new(&table[..], 2, page));
//! let mut o = vec![0f32; 2 * heads * d];
//! let mut lse = vec![0f32; 2 * heads];
//! attention_with_layout(
//!     Heads::host(&q, 2, heads, 1, d),
//!     Heads::host(&pool, 3, heads, page, d),
//!     Heads::host(&pool, 3, heads, page, d),
//!     HeadsMut::host(&mut o, 2, heads, 1, d),
//!     Some(LseMut::Host(&mut lse)),
//!     None,
//!     &layout,
//!     &AttentionOptions::new(),
//! )?;
//! assert!(lse.iter().all(|l| l.is_finite()));
//! # Ok::<(), sparsek::Error>(())
//! ```

#[cfg(feature = "cuda")]
use cudarc::driver::CudaSlice;

use crate::error::Error;

/// An array of `i32` a layout reads (key counts, a page table): host or device memory.
#[derive(Debug, Clone, Copy)]
pub enum IndexArray<'a> {
    /// Host memory (host operands).
    Host(&'a [i32]),
    /// Device memory (device operands).
    #[cfg(feature = "cuda")]
    Device(&'a CudaSlice<i32>),
}

impl<'a> IndexArray<'a> {
    /// The array's entries.
    pub fn len(&self) -> usize {
        match self {
            IndexArray::Host(s) => s.len(),
            #[cfg(feature = "cuda")]
            IndexArray::Device(s) => s.len(),
        }
    }

    /// Whether it holds no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The host entries, if on the host.
    pub fn host(self) -> Option<&'a [i32]> {
        match self {
            IndexArray::Host(s) => Some(s),
            #[cfg(feature = "cuda")]
            IndexArray::Device(_) => None,
        }
    }
}

impl<'a> From<&'a [i32]> for IndexArray<'a> {
    fn from(s: &'a [i32]) -> Self {
        IndexArray::Host(s)
    }
}

impl<'a, const N: usize> From<&'a [i32; N]> for IndexArray<'a> {
    fn from(s: &'a [i32; N]) -> Self {
        IndexArray::Host(s)
    }
}

impl<'a> From<&'a Vec<i32>> for IndexArray<'a> {
    fn from(s: &'a Vec<i32>) -> Self {
        IndexArray::Host(s)
    }
}

#[cfg(feature = "cuda")]
impl<'a> From<&'a CudaSlice<i32>> for IndexArray<'a> {
    fn from(s: &'a CudaSlice<i32>) -> Self {
        IndexArray::Device(s)
    }
}

/// A page table over a pool of K/V pages: `max_pages` entries per sequence (sequence `b`'s
/// are `table[b·max_pages ..]`, its logical page `p` at `table[b·max_pages + p]`, a page of
/// the pool), pages of `page_size` keys (K and V's seq). Entries past a sequence's keys are
/// never read.
#[derive(Debug, Clone, Copy)]
pub struct PageTable<'a> {
    table: IndexArray<'a>,
    max_pages: usize,
    page_size: usize,
}

impl<'a> PageTable<'a> {
    /// The table (at least `batch·max_pages` entries), its entries per sequence and the
    /// pages' keys.
    pub fn new(table: impl Into<IndexArray<'a>>, max_pages: usize, page_size: usize) -> Self {
        Self {
            table: table.into(),
            max_pages,
            page_size,
        }
    }
    /// The entries.
    pub fn table(&self) -> IndexArray<'a> {
        self.table
    }
    /// Entries per sequence.
    pub fn max_pages(&self) -> usize {
        self.max_pages
    }
    /// Keys per page.
    pub fn page_size(&self) -> usize {
        self.page_size
    }
}

/// The serving layout of one attention call (the module's documentation): the padded batch
/// ([`padded`](Self::padded), the default), or `batch` sequences packed along seq
/// ([`cu_seqlens_q`](Self::cu_seqlens_q), [`cu_seqlens_k`](Self::cu_seqlens_k)), with their
/// own key counts ([`seqlens_k`](Self::seqlens_k)), read through a page table
/// ([`page_table`](Self::page_table), which needs the counts).
///
/// ```
/// use sparsek::SequenceLayout;
///
/// // Three sequences of 5, 0 and 300 tokens, packed.
/// let cu = SequenceLayout::offsets(&[5, 0, 300])?;
/// assert_eq!(cu, [0, 5, 5, 305]);
/// let layout = SequenceLayout::new(3).cu_seqlens_q(&cu, 300).cu_seqlens_k(&cu, 300);
/// assert_eq!((layout.batch(), layout.max_seqlen_q(), layout.is_padded()), (3, 300, false));
/// # Ok::<(), sparsek::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SequenceLayout<'a> {
    batch: usize,
    max_seqlen_q: usize,
    max_seqlen_k: usize,
    cu_seqlens_q: Option<IndexArray<'a>>,
    cu_seqlens_k: Option<IndexArray<'a>>,
    seqlens_k: Option<IndexArray<'a>>,
    page_table: Option<PageTable<'a>>,
}

impl<'a> SequenceLayout<'a> {
    /// The padded batch: every sequence has Q's queries and K's keys.
    pub fn padded() -> Self {
        Self::default()
    }

    /// A layout of `batch` sequences (Q's batch, unless Q is packed); give it its arrays.
    pub fn new(batch: usize) -> Self {
        Self {
            batch,
            ..Self::default()
        }
    }

    /// The offsets of sequences of these lengths (`lengths.len() + 1` entries from 0, each
    /// the sum of the lengths before it), for [`cu_seqlens_q`](Self::cu_seqlens_q) and
    /// [`cu_seqlens_k`](Self::cu_seqlens_k); [`Error::InvalidArgument`] when the total does
    /// not fit `i32`.
    pub fn offsets(lengths: &[usize]) -> Result<Vec<i32>, Error> {
        let mut cu = crate::format::try_vec("cu_seqlens", lengths.len() + 1)?;
        let mut total = 0i32;
        cu.push(0);
        for &n in lengths {
            total = i32::try_from(n)
                .ok()
                .and_then(|n| total.checked_add(n))
                .ok_or(Error::InvalidArgument(
                    "the sequences' total length must fit i32".into(),
                ))?;
            cu.push(total);
        }
        Ok(cu)
    }

    /// Packed queries: Q and O hold the `batch` sequences along seq (their views' batch 1,
    /// seq the total), sequence `b`'s queries at rows `cu_seqlens_q[b] .. cu_seqlens_q[b+1]`
    /// (`batch + 1` offsets from 0, non-decreasing, ending at Q's seq); `max_seqlen_q`, the
    /// longest (an upper bound), sizes the launch and counts a mask's query blocks. The LSE
    /// is then `[heads, total_q]`.
    pub fn cu_seqlens_q(
        mut self,
        cu_seqlens_q: impl Into<IndexArray<'a>>,
        max_seqlen_q: usize,
    ) -> Self {
        self.cu_seqlens_q = Some(cu_seqlens_q.into());
        self.max_seqlen_q = max_seqlen_q;
        self
    }

    /// Packed keys: K and V hold the `batch` sequences along seq, sequence `b`'s keys at rows
    /// `cu_seqlens_k[b] .. cu_seqlens_k[b+1]` (as [`cu_seqlens_q`](Self::cu_seqlens_q));
    /// `max_seqlen_k` the longest (shared with [`seqlens_k`](Self::seqlens_k): the last call
    /// sets it). Not with a page table.
    pub fn cu_seqlens_k(
        mut self,
        cu_seqlens_k: impl Into<IndexArray<'a>>,
        max_seqlen_k: usize,
    ) -> Self {
        self.cu_seqlens_k = Some(cu_seqlens_k.into());
        self.max_seqlen_k = max_seqlen_k;
        self
    }

    /// Sequence `b` keeps its first `seqlens_k[b]` keys (at least `batch` entries, each in
    /// `[0, max_seqlen_k]`); `max_seqlen_k`, the longest (at most the keys K holds per
    /// sequence, or the pages' `max_pages·page_size`), sizes the launch and counts a mask's
    /// key blocks.
    pub fn seqlens_k(mut self, seqlens_k: impl Into<IndexArray<'a>>, max_seqlen_k: usize) -> Self {
        self.seqlens_k = Some(seqlens_k.into());
        self.max_seqlen_k = max_seqlen_k;
        self
    }

    /// K and V read through `table` (K and V the pool of pages).
    pub fn page_table(mut self, table: PageTable<'a>) -> Self {
        self.page_table = Some(table);
        self
    }

    /// The sequences (0 for the padded batch).
    pub fn batch(&self) -> usize {
        self.batch
    }
    /// The longest query sequence (0 unless set).
    pub fn max_seqlen_q(&self) -> usize {
        self.max_seqlen_q
    }
    /// The longest key sequence (0 unless set).
    pub fn max_seqlen_k(&self) -> usize {
        self.max_seqlen_k
    }
    /// The packed queries' offsets, if given.
    pub fn get_cu_seqlens_q(&self) -> Option<IndexArray<'a>> {
        self.cu_seqlens_q
    }
    /// The packed keys' offsets, if given.
    pub fn get_cu_seqlens_k(&self) -> Option<IndexArray<'a>> {
        self.cu_seqlens_k
    }
    /// The key counts, if given.
    pub fn get_seqlens_k(&self) -> Option<IndexArray<'a>> {
        self.seqlens_k
    }
    /// The page table, if given.
    pub fn get_page_table(&self) -> Option<PageTable<'a>> {
        self.page_table
    }
    /// Whether this is the padded batch (no array).
    pub fn is_padded(&self) -> bool {
        self.seqlens_k.is_none()
            && self.page_table.is_none()
            && self.cu_seqlens_q.is_none()
            && self.cu_seqlens_k.is_none()
    }

    /// What the table's rules read (`rules/attention.toml`).
    pub(crate) fn dims(&self) -> LayoutDims {
        LayoutDims {
            varlen_q: self.cu_seqlens_q.is_some(),
            varlen_k: self.cu_seqlens_k.is_some(),
            seqlens_k: self.seqlens_k.is_some(),
            paged: self.page_table.is_some(),
            batch: self.batch,
            max_pages: self.page_table.map_or(0, |t| t.max_pages),
            max_seqlen_q: self.max_seqlen_q,
            max_seqlen_k: self.max_seqlen_k,
            page_size: self.page_table.map_or(0, |t| t.page_size),
        }
    }

    /// The arrays hold their entries (`batch + 1` offsets, `batch` key counts,
    /// `batch·max_pages` table entries), after the table's rules.
    pub(crate) fn check_lengths(&self) -> Result<(), Error> {
        for (operand, cu) in [
            ("cu_seqlens_q", &self.cu_seqlens_q),
            ("cu_seqlens_k", &self.cu_seqlens_k),
        ] {
            if let Some(cu) = cu {
                // batch < 2^31 - 1 with packed sequences (the table's rules).
                let needed = self.batch.saturating_add(1);
                if cu.len() < needed {
                    return Err(Error::BufferTooSmall {
                        operand,
                        needed,
                        got: cu.len(),
                    });
                }
            }
        }
        if let Some(s) = &self.seqlens_k {
            if s.len() < self.batch {
                return Err(Error::BufferTooSmall {
                    operand: "seqlens_k",
                    needed: self.batch,
                    got: s.len(),
                });
            }
        }
        if let Some(t) = &self.page_table {
            let needed = self
                .batch
                .checked_mul(t.max_pages)
                .ok_or(Error::InvalidArgument(
                    "batch * max_pages page-table entries overflow".into(),
                ))?;
            if t.table.len() < needed {
                return Err(Error::BufferTooSmall {
                    operand: "page_table",
                    needed,
                    got: t.table.len(),
                });
            }
        }
        Ok(())
    }

    /// Whether every array is in host memory (the padded layout's none are).
    pub(crate) fn on_host(&self) -> bool {
        self.arrays().all(|a| a.host().is_some())
    }

    /// The arrays given.
    fn arrays(&self) -> impl Iterator<Item = IndexArray<'a>> {
        [
            self.cu_seqlens_q,
            self.cu_seqlens_k,
            self.seqlens_k,
            self.page_table.map(|t| t.table),
        ]
        .into_iter()
        .flatten()
    }

    /// Whether every array is in device memory.
    #[cfg(feature = "cuda")]
    pub(crate) fn on_device(&self) -> bool {
        self.arrays().all(|a| a.host().is_none())
    }

    /// The host offsets' values, checked as the device check does (from 0, non-decreasing,
    /// ending at the packed total: Q's seq `total_q`, K's `total_k`; each length at most
    /// `max_seqlen`), and each key count within its packed sequence's keys. After
    /// [`check_lengths`](Self::check_lengths).
    pub(crate) fn host_packed(
        &self,
        total_q: usize,
        total_k: usize,
    ) -> Result<HostPacked<'a>, Error> {
        let check = |name: &str, cu: Option<IndexArray<'a>>, total: usize, max: usize| {
            let Some(cu) = cu else {
                return Ok(None);
            };
            let cu = cu.host().ok_or(Error::MixedLocations(
                "a device offsets array with host operands",
            ))?;
            let cu = &cu[..self.batch + 1];
            if cu[0] != 0 {
                return Err(Error::InvalidArgument(format!(
                    "layout.{name}[0] = {} is not 0",
                    cu[0]
                )));
            }
            for (b, w) in cu.windows(2).enumerate() {
                let len = i64::from(w[1]) - i64::from(w[0]);
                if len < 0 || len as u64 > max as u64 {
                    return Err(Error::InvalidArgument(format!(
                        "layout.{name}: sequence {b}'s length {len} is outside [0, max_seqlen = {max}]"
                    )));
                }
            }
            if cu[self.batch] as u64 != total as u64 {
                return Err(Error::InvalidArgument(format!(
                    "layout.{name}[{}] = {} is not the packed total {total} (the view's seq)",
                    self.batch, cu[self.batch]
                )));
            }
            Ok(Some(cu))
        };
        let q = check(
            "cu_seqlens_q",
            self.cu_seqlens_q,
            total_q,
            self.max_seqlen_q,
        )?;
        let k = check(
            "cu_seqlens_k",
            self.cu_seqlens_k,
            total_k,
            self.max_seqlen_k,
        )?;
        if let (Some(k), Some(lens)) = (k, self.seqlens_k.and_then(|s| s.host())) {
            for b in 0..self.batch {
                let held = k[b + 1] - k[b];
                if lens[b] > held {
                    return Err(Error::InvalidArgument(format!(
                        "layout.seqlens_k[{b}] = {} exceeds the {held} keys packed for sequence {b}",
                        lens[b]
                    )));
                }
            }
        }
        Ok(HostPacked {
            batch: self.batch,
            q,
            k,
        })
    }

    /// The host arrays' values, checked against a pool of `num_pages` pages (as the device
    /// check does): each key count in `[0, max_seqlen_k]`, each table entry a sequence
    /// reaches in `[0, num_pages)`. After [`check_lengths`](Self::check_lengths); `None` for
    /// the padded layout.
    pub(crate) fn host_keys(&self, num_pages: usize) -> Result<Option<HostKeys<'a>>, Error> {
        let Some(lens) = self.seqlens_k.and_then(|s| s.host()) else {
            return Ok(None);
        };
        let lens = &lens[..self.batch];
        for (b, &n) in lens.iter().enumerate() {
            if n < 0 || n as usize > self.max_seqlen_k {
                return Err(Error::InvalidArgument(format!(
                    "layout.seqlens_k[{b}] = {n} is outside [0, max_seqlen_k = {}]",
                    self.max_seqlen_k
                )));
            }
        }
        let pages = match self.page_table {
            None => None,
            Some(t) => {
                let table = t.table.host().ok_or(Error::MixedLocations(
                    "host key counts with a device page table",
                ))?;
                // The rules: page_size >= 1 (K's seq), batch * max_pages entries (check_lengths).
                for (b, &n) in lens.iter().enumerate() {
                    let reached = (n as usize).div_ceil(t.page_size);
                    let row = &table[b * t.max_pages..b * t.max_pages + reached];
                    if let Some(p) = row.iter().position(|&x| x < 0 || x as usize >= num_pages) {
                        return Err(Error::InvalidArgument(format!(
                            "layout.page_table: sequence {b}'s page {p} = {} is outside [0, {num_pages}) (the pool's pages)",
                            row[p]
                        )));
                    }
                }
                Some((&table[..self.batch * t.max_pages], t.max_pages, t.page_size))
            }
        };
        Ok(Some(HostKeys { lens, pages }))
    }
}

/// A layout's dims, as the table's rules read them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct LayoutDims {
    pub varlen_q: bool,
    pub varlen_k: bool,
    pub seqlens_k: bool,
    pub paged: bool,
    pub batch: usize,
    pub max_pages: usize,
    pub max_seqlen_q: usize,
    pub max_seqlen_k: usize,
    pub page_size: usize,
}

impl LayoutDims {
    /// Any array is set (the table's `layout`).
    pub fn any(&self) -> bool {
        self.varlen_q || self.varlen_k || self.seqlens_k || self.paged
    }
}

/// Where one sequence's rows lie in a view: its batch entry, first row and rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SequenceRows {
    pub batch: usize,
    pub start: usize,
    pub len: usize,
}

/// A host layout's packed offsets, checked ([`SequenceLayout::host_packed`]): Q's, K's or
/// neither (the padded batch).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct HostPacked<'a> {
    pub batch: usize,
    pub q: Option<&'a [i32]>,
    pub k: Option<&'a [i32]>,
}

impl HostPacked<'_> {
    /// The sequences: the layout's batch with packed queries, else Q's batch `q_batch`.
    pub fn sequences(&self, q_batch: usize) -> usize {
        if self.q.is_some() {
            self.batch
        } else {
            q_batch
        }
    }
    /// Sequence `b`'s rows in Q and O (`seq`: Q's seq).
    pub fn queries(&self, b: usize, seq: usize) -> SequenceRows {
        Self::rows(self.q, b, seq)
    }
    /// Sequence `b`'s rows in K and V (`seq`: K's seq), before any key count or page table.
    pub fn keys(&self, b: usize, seq: usize) -> SequenceRows {
        Self::rows(self.k, b, seq)
    }
    fn rows(cu: Option<&[i32]>, b: usize, seq: usize) -> SequenceRows {
        match cu {
            None => SequenceRows {
                batch: b,
                start: 0,
                len: seq,
            },
            // Checked: from 0, non-decreasing.
            Some(cu) => SequenceRows {
                batch: 0,
                start: cu[b] as usize,
                len: (cu[b + 1] - cu[b]) as usize,
            },
        }
    }
}

/// A host layout whose values were checked ([`SequenceLayout::host_keys`]): each sequence's
/// key count, and the pages (`table`, `max_pages`, `page_size`) when paged.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HostKeys<'a> {
    pub lens: &'a [i32],
    pub pages: Option<(&'a [i32], usize, usize)>,
}

impl HostKeys<'_> {
    /// Sequence `b`'s key count.
    pub fn len(&self, b: usize) -> usize {
        self.lens[b] as usize
    }
    /// Where sequence `b`'s key `j` is in K and V: (batch entry, row).
    pub fn key(&self, b: usize, j: usize) -> (usize, usize) {
        match self.pages {
            None => (b, j),
            Some((table, max_pages, page_size)) => {
                (table[b * max_pages + j / page_size] as usize, j % page_size)
            }
        }
    }
}
