//! Reading candle storage in place and allocating outputs: the only places the ops touch
//! tensor memory. Nothing here copies a tensor.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, Layout};

use crate::element::CandleElement;
use crate::error::{Error, Result};

/// Outputs allocated by the ops ([`crate::allocations`]).
pub(crate) static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

/// The refusal of a tensor sparsek cannot read in place.
pub(crate) fn not_contiguous(
    op: &'static str,
    operand: &'static str,
    why: &'static str,
    l: &Layout,
) -> Error {
    Error::NotContiguous {
        op,
        operand,
        why,
        dims: l.dims().to_vec(),
        strides: l.stride().to_vec(),
        offset: l.start_offset(),
    }
}

pub(crate) fn check_dtype<T: CandleElement>(
    op: &'static str,
    operand: &'static str,
    got: candle_core::DType,
) -> Result<()> {
    check_dtype_of(op, operand, got, <T as candle_core::WithDType>::DTYPE)
}

/// Refuses a tensor whose dtype is not the layer's.
pub(crate) fn check_dtype_of(
    op: &'static str,
    operand: &'static str,
    got: candle_core::DType,
    want: candle_core::DType,
) -> Result<()> {
    if got == want {
        Ok(())
    } else {
        Err(Error::DType {
            op,
            operand,
            got,
            expected: format!("{want:?} (the layer's activations)"),
        })
    }
}

/// The elements of a row-major (C-contiguous) host tensor, in place.
pub(crate) fn host_rows<'a, T: CandleElement>(
    op: &'static str,
    operand: &'static str,
    s: &'a CpuStorage,
    l: &Layout,
) -> Result<&'a [T]> {
    check_dtype::<T>(op, operand, s.dtype())?;
    if !l.is_contiguous() {
        return Err(not_contiguous(
            op,
            operand,
            "its rows are not packed row-major",
            l,
        ));
    }
    let all = T::cpu_storage_as_slice(s)?;
    let start = l.start_offset();
    let end = start
        .checked_add(l.shape().elem_count())
        .filter(|&e| e <= all.len())
        .ok_or_else(|| Error::Shape {
            op,
            operand,
            got: l.dims().to_vec(),
            expected: "a layout within its storage".into(),
        })?;
    Ok(&all[start..end])
}

/// A host output of `len` elements.
pub(crate) fn host_output<T: CandleElement>(len: usize) -> Vec<T> {
    ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    vec![T::from_f64(0.0); len]
}

#[cfg(feature = "cuda")]
pub(crate) mod device {
    use super::*;
    use candle_core::{CudaDevice, CudaStorage};
    use sparsek::cudarc::driver::CudaSlice;

    /// The buffer of a device tensor sparsek reads from its start: sparsek takes whole
    /// `CudaSlice`s, so a view that starts inside its buffer cannot be passed in place.
    pub(crate) fn buffer<'a, T: CandleElement>(
        op: &'static str,
        operand: &'static str,
        s: &'a CudaStorage,
        l: &Layout,
    ) -> Result<&'a CudaSlice<T>> {
        check_dtype::<T>(op, operand, s.dtype())?;
        if l.start_offset() != 0 {
            return Err(not_contiguous(
                op,
                operand,
                "it starts inside its buffer (a narrow or a slice of a larger tensor)",
                l,
            ));
        }
        Ok(s.as_cuda_slice::<T>()?)
    }

    /// [`buffer`] of a row-major tensor.
    pub(crate) fn rows<'a, T: CandleElement>(
        op: &'static str,
        operand: &'static str,
        s: &'a CudaStorage,
        l: &Layout,
    ) -> Result<&'a CudaSlice<T>> {
        check_dtype::<T>(op, operand, s.dtype())?;
        if !l.is_contiguous() {
            return Err(not_contiguous(
                op,
                operand,
                "its rows are not packed row-major",
                l,
            ));
        }
        buffer(op, operand, s, l)
    }

    /// A device output of `len` elements on candle's stream (sparsek launches on its
    /// output's stream, so on candle's).
    pub(crate) fn output<T: CandleElement>(dev: &CudaDevice, len: usize) -> Result<CudaSlice<T>> {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the buffer reaches candle only after sparsek has written every element
        // (β = 0 products and attention write their whole output); a refused call drops it
        // unread. CUDA has no empty allocation: at least one element.
        Ok(unsafe { dev.alloc::<T>(len.max(1)) }?)
    }

    /// Refuses a tensor of another candle device than the one the weights live on.
    pub(crate) fn same_device(
        op: &'static str,
        built: &CudaDevice,
        got: &CudaDevice,
    ) -> Result<()> {
        if built.id() == got.id() {
            Ok(())
        } else {
            Err(Error::Device {
                op,
                what: format!(
                    "the tensor is on {got:?}, the weights on {built:?} (build the layer on the tensor's device)"
                ),
            })
        }
    }
}

/// A typed error raised inside a candle op, kept for the caller: candle's own error only
/// carries a message.
#[derive(Default)]
pub(crate) struct Failure(RefCell<Option<Error>>);

impl Failure {
    pub(crate) fn keep<T>(&self, r: Result<T>) -> candle_core::Result<T> {
        r.map_err(|e| {
            let message = candle_core::Error::Msg(e.to_string());
            *self.0.borrow_mut() = Some(e);
            message
        })
    }

    pub(crate) fn typed(&self, e: candle_core::Error) -> Error {
        self.0.borrow_mut().take().unwrap_or(Error::Candle(e))
    }
}
