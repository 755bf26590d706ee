//! The operands the targets draw: `[batch, heads, seq, head_dim]` views (attention and the
//! gating), dense views (the products) and BSR matrices, each with its buffer's length,
//! and block sides (attention's masks and the block patterns).

use std::fmt::Debug;

use rand::Rng;
use sparsek::{
    BlockMask, BlockShape, BsrMatrix, Dense, DenseMut, Element, Heads, HeadsMut, Layout,
};

use crate::fuzz::{FuzzRng, I32_MAX};
use crate::inputs::{buffer_len, huge, product, CAP};

/// A `[batch, heads, seq, head_dim]` view and its buffer's length.
#[derive(Debug, Clone, Copy)]
pub struct View {
    pub batch: usize,
    pub heads: usize,
    pub seq: usize,
    pub d: usize,
    pub sb: usize,
    pub sh: usize,
    pub ss: usize,
    pub len: usize,
}

impl View {
    /// Elements the buffer must hold (last offset + 1), exactly; `None` beyond u128.
    pub fn needed(&self) -> Option<u128> {
        if self.batch == 0 || self.heads == 0 || self.seq == 0 || self.d == 0 {
            return Some(0);
        }
        let w = |x: usize| x as u128;
        (w(self.batch - 1) * w(self.sb))
            .checked_add(w(self.heads - 1) * w(self.sh))?
            .checked_add(w(self.seq - 1) * w(self.ss))?
            .checked_add(w(self.d))
    }
    pub fn fits(&self) -> bool {
        self.needed().is_some_and(|n| n <= usize::MAX as u128) && self.needed_usize() <= self.len
    }
    pub fn needed_usize(&self) -> usize {
        self.needed()
            .map_or(usize::MAX, |n| n.min(usize::MAX as u128) as usize)
    }
    /// Rows of a head do not overlap.
    pub fn rows_ok(&self) -> bool {
        self.seq <= 1 || self.ss >= self.d
    }
    pub fn offset(&self, b: usize, h: usize, s: usize, c: usize) -> usize {
        b * self.sb + h * self.sh + s * self.ss + c
    }
    pub fn heads<'a, T>(&self, data: &'a [T]) -> Heads<'a, T> {
        Heads::host(data, self.batch, self.heads, self.seq, self.d)
            .with_strides(self.sb, self.sh, self.ss)
    }
    pub fn heads_mut<'a, T>(&self, data: &'a mut [T]) -> HeadsMut<'a, T> {
        HeadsMut::host(data, self.batch, self.heads, self.seq, self.d)
            .with_strides(self.sb, self.sh, self.ss)
    }
    /// The documented disjointness rule of an output (`HeadsShape::is_disjoint`): the
    /// dims of extent > 1 by ascending stride, each stride at least the span before it.
    pub fn disjoint_rule(&self) -> bool {
        let elements = (self.batch as u128)
            .checked_mul(self.heads as u128)
            .and_then(|x| x.checked_mul(self.seq as u128))
            .and_then(|x| x.checked_mul(self.d as u128));
        if elements == Some(0) {
            return true;
        }
        let mut dims = [
            (self.ss, self.seq),
            (self.sh, self.heads),
            (self.sb, self.batch),
        ];
        dims.sort_unstable();
        let mut span = self.d as u128;
        for (stride, extent) in dims {
            if extent <= 1 {
                continue;
            }
            if (stride as u128) < span {
                return false;
            }
            span += stride as u128 * (extent as u128 - 1);
            if span > usize::MAX as u128 {
                return false;
            }
        }
        true
    }
    /// Every offset the view addresses, when they are few.
    pub fn offsets(&self) -> Option<Vec<usize>> {
        let n = product(&[self.batch, self.heads, self.seq, self.d]).unwrap_or(u128::MAX);
        if n > CAP as u128 * 4 || !self.fits() {
            return None;
        }
        let mut out = Vec::with_capacity(n as usize);
        if n == 0 {
            return Some(out);
        }
        for b in 0..self.batch {
            for h in 0..self.heads {
                for s in 0..self.seq {
                    for c in 0..self.d {
                        out.push(self.offset(b, h, s, c));
                    }
                }
            }
        }
        Some(out)
    }
}

/// Strides for a view of these dims: packed, `[b, s, h, d]`, padded, broadcast, garbage,
/// huge, overlapping rows.
/// `clean`: a valid layout (a broadcast one only for an input).
fn gen_strides(
    rng: &mut FuzzRng,
    (h, s, d): (usize, usize, usize),
    clean: bool,
    output: bool,
) -> (usize, usize, usize) {
    let m = |x: usize, y: usize| x.saturating_mul(y);
    let choice = match (clean, output) {
        (false, _) => rng.random_range(0..20),
        (true, true) => rng.random_range(0..13),
        (true, false) => rng.random_range(0..14),
    };
    match choice {
        0..=7 => (m(h, m(s, d)), m(s, d), d),
        8..=10 => (m(s, m(h.max(1), d)), d, m(h.max(1), d)),
        11 | 12 => {
            let ss = d.saturating_add(rng.random_range(0..3));
            let sh = m(s, ss).saturating_add(rng.random_range(0..3));
            (m(h, sh).saturating_add(rng.random_range(0..3)), sh, ss)
        }
        13 => {
            // Broadcast: a head or batch stride of 0 (fine for inputs, an overlap for O).
            let (sb, sh, ss) = (m(h, m(s, d)), m(s, d), d);
            match rng.random_range(0..3) {
                0 => (sb, 0, ss),
                1 => (0, sh, ss),
                _ => (0, 0, ss),
            }
        }
        14 | 15 => (
            rng.random_range(0..=24),
            rng.random_range(0..=24),
            rng.random_range(0..=12),
        ),
        16 => {
            let mut st = [m(h, m(s, d)), m(s, d), d];
            st[rng.random_range(0..3)] = huge(rng);
            (st[0], st[1], st[2])
        }
        17 => (
            m(h, m(s, d)),
            m(s, d),
            d.saturating_sub(rng.random_range(1..=2)),
        ),
        18 => (m(h, m(s, d)), 1, d),
        _ => (0, 0, 0),
    }
}

pub fn gen_view(rng: &mut FuzzRng, [b, h, s, d]: [usize; 4], clean: bool, output: bool) -> View {
    let (sb, sh, ss) = gen_strides(rng, (h, s, d), clean, output);
    let mut v = View {
        batch: b,
        heads: h,
        seq: s,
        d,
        sb,
        sh,
        ss,
        len: 0,
    };
    v.len = buffer_len(rng, v.needed(), clean);
    v
}

/// A block side: 1 to 8, or (unless `clean`) now and then 0 or huge.
pub fn gen_block(rng: &mut FuzzRng, clean: bool) -> usize {
    if clean {
        return rng.random_range(1..=8);
    }
    match rng.random_range(0..20) {
        0 => 0,
        1 => huge(rng),
        _ => rng.random_range(1..=8),
    }
}

/// A dense `rows x cols` view and its buffer's length.
#[derive(Debug, Clone, Copy)]
pub struct DView {
    pub rows: usize,
    pub cols: usize,
    pub layout: Layout,
    pub ld: usize,
    pub len: usize,
}

impl DView {
    pub fn extent(&self) -> usize {
        match self.layout {
            Layout::RowMajor => self.cols,
            Layout::ColMajor => self.rows,
        }
    }
    pub fn outer(&self) -> usize {
        match self.layout {
            Layout::RowMajor => self.rows,
            Layout::ColMajor => self.cols,
        }
    }
    /// Elements the buffer must hold, exactly.
    pub fn needed(&self) -> Option<u128> {
        if self.rows == 0 || self.cols == 0 {
            return Some(0);
        }
        ((self.outer() - 1) as u128 * self.ld as u128).checked_add(self.extent() as u128)
    }
    /// The documented rule: `ld >= max(extent, 1)` and the buffer holds the view.
    pub fn ok(&self) -> bool {
        self.ld >= self.extent().max(1)
            && self
                .needed()
                .is_some_and(|n| n <= usize::MAX as u128 && n <= self.len as u128)
    }
    pub fn offset(&self, i: usize, j: usize) -> usize {
        match self.layout {
            Layout::RowMajor => i * self.ld + j,
            Layout::ColMajor => j * self.ld + i,
        }
    }
    pub fn elements(&self) -> u128 {
        self.rows as u128 * self.cols as u128
    }
    pub fn dense<'a, T>(&self, data: &'a [T]) -> Dense<'a, T> {
        Dense::host(data, self.rows, self.cols, self.layout).with_ld(self.ld)
    }
    pub fn dense_mut<'a, T>(&self, data: &'a mut [T]) -> DenseMut<'a, T> {
        DenseMut::host(data, self.rows, self.cols, self.layout).with_ld(self.ld)
    }
    /// An output buffer of `len` elements, `sentinel` outside the view; inside it `poison`
    /// with β = 0, else random old values in [-1, 1) (drawn row by row). With the view's
    /// offsets row by row (none for a view the rule refuses or an empty one).
    pub fn output<O: Element>(
        &self,
        sentinel: O,
        poison: O,
        beta: f32,
        rng: &mut FuzzRng,
    ) -> (Vec<O>, Vec<usize>) {
        let mut data = vec![sentinel; self.len];
        let addressed: Vec<usize> = if self.ok() && self.elements() > 0 {
            (0..self.rows)
                .flat_map(|i| (0..self.cols).map(move |j| (i, j)))
                .map(|(i, j)| self.offset(i, j))
                .collect()
        } else {
            Vec::new()
        };
        for &off in &addressed {
            data[off] = if beta != 0.0 {
                O::from_f32(rng.random_range(-1.0f32..1.0))
            } else {
                poison
            };
        }
        (data, addressed)
    }
}

pub fn gen_dview(rng: &mut FuzzRng, rows: usize, cols: usize, clean: bool) -> DView {
    let layout = if rng.random_bool(0.5) {
        Layout::RowMajor
    } else {
        Layout::ColMajor
    };
    let extent = match layout {
        Layout::RowMajor => cols,
        Layout::ColMajor => rows,
    };
    let packed = extent.max(1);
    let ld = match rng.random_range(0..if clean { 10 } else { 16 }) {
        0..=6 => packed,
        7..=9 => packed.saturating_add(rng.random_range(1..=3)),
        10 | 11 => extent.saturating_sub(1),
        12 => 0,
        13 => huge(rng),
        _ => rng.random_range(0..=8),
    };
    let mut v = DView {
        rows,
        cols,
        layout,
        ld,
        len: 0,
    };
    v.len = buffer_len(rng, v.needed(), clean);
    v
}

/// The sparse operand: `br x bc` blocks of `bm x bk`, each kept with probability `p`.
#[derive(Debug, Clone, Copy)]
pub struct BsrSpec {
    pub bm: usize,
    pub bk: usize,
    pub br: usize,
    pub bc: usize,
    pub p: f64,
}

impl BsrSpec {
    pub fn m(&self) -> usize {
        self.br * self.bm
    }
    pub fn k(&self) -> usize {
        self.bc * self.bk
    }
}

pub fn gen_bsr_spec(rng: &mut FuzzRng, clean: bool) -> BsrSpec {
    if !clean && rng.random_bool(0.1) {
        // Huge and empty: sides up to i32::MAX, no block stored.
        let side = |rng: &mut FuzzRng| {
            if rng.random_bool(0.5) {
                [1 << 20, 1 << 30, I32_MAX][rng.random_range(0..3)]
            } else {
                rng.random_range(1..=4)
            }
        };
        return BsrSpec {
            bm: side(rng),
            bk: side(rng),
            br: rng.random_range(0..=2),
            bc: rng.random_range(0..=2),
            p: 0.0,
        };
    }
    BsrSpec {
        bm: rng.random_range(1..=4),
        bk: rng.random_range(1..=4),
        br: rng.random_range(0..=4),
        bc: rng.random_range(0..=4),
        p: [0.0, 0.3, 0.6, 1.0][rng.random_range(0..4)],
    }
}

pub fn build_bsr<T: Element>(
    rng: &mut FuzzRng,
    s: &BsrSpec,
    value: impl Fn(&mut FuzzRng) -> T,
) -> BsrMatrix<T> {
    let mask = BlockMask::from_fn(s.br, s.bc, |_, _| rng.random_bool(s.p)).expect("a small mask");
    BsrMatrix::from_block_mask(&mask, BlockShape::new(s.bm, s.bk), |_, _| value(rng))
        .expect("a valid matrix")
}
