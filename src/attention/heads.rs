//! `[batch, heads, seq, head_dim]` views (Q, K, V and O) on the host or the device.

#[cfg(feature = "cuda")]
use cudarc::driver::CudaSlice;

use crate::dense::{Storage, StorageMut};

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
