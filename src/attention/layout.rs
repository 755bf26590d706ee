//! Serving layouts of an attention batch ([`SequenceLayout`], the C++
//! `sparsek::SequenceLayout`): each sequence's own key count and K/V read through a page
//! table ([`PageTable`]).
//!
//! The default layout is the padded batch: every sequence has Q's `seq_q` queries and K's
//! `seq_k` keys. With per-sequence key counts, sequence `b` keeps its first `seqlens_k[b]`
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
//! the views. The decode family takes any page size, the Hopper family pages of a multiple of
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
/// ([`padded`](Self::padded), the default), or `batch` sequences with their own key counts
/// ([`seqlens_k`](Self::seqlens_k)), read through a page table
/// ([`page_table`](Self::page_table), which needs the counts).
#[derive(Debug, Clone, Copy, Default)]
pub struct SequenceLayout<'a> {
    batch: usize,
    max_seqlen_k: usize,
    seqlens_k: Option<IndexArray<'a>>,
    page_table: Option<PageTable<'a>>,
}

impl<'a> SequenceLayout<'a> {
    /// The padded batch: every sequence has Q's queries and K's keys.
    pub fn padded() -> Self {
        Self::default()
    }

    /// A layout of `batch` sequences (Q's batch); give it its arrays.
    pub fn new(batch: usize) -> Self {
        Self {
            batch,
            ..Self::default()
        }
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
    /// The longest key sequence (0 without key counts).
    pub fn max_seqlen_k(&self) -> usize {
        self.max_seqlen_k
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
        self.seqlens_k.is_none() && self.page_table.is_none()
    }

    /// What the table's rules read (`rules/attention.toml`).
    pub(crate) fn dims(&self) -> LayoutDims {
        LayoutDims {
            seqlens_k: self.seqlens_k.is_some(),
            paged: self.page_table.is_some(),
            batch: self.batch,
            max_pages: self.page_table.map_or(0, |t| t.max_pages),
            max_seqlen_k: self.max_seqlen_k,
            page_size: self.page_table.map_or(0, |t| t.page_size),
        }
    }

    /// The arrays hold their entries (`batch` key counts, `batch·max_pages` table entries),
    /// after the table's rules.
    pub(crate) fn check_lengths(&self) -> Result<(), Error> {
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
        self.seqlens_k.is_none_or(|s| s.host().is_some())
            && self.page_table.is_none_or(|t| t.table.host().is_some())
    }

    /// Whether every array is in device memory.
    #[cfg(feature = "cuda")]
    pub(crate) fn on_device(&self) -> bool {
        self.seqlens_k.is_none_or(|s| s.host().is_none())
            && self.page_table.is_none_or(|t| t.table.host().is_none())
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
    pub seqlens_k: bool,
    pub paged: bool,
    pub batch: usize,
    pub max_pages: usize,
    pub max_seqlen_k: usize,
    pub page_size: usize,
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
