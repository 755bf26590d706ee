//! The checks of attention's operands, below both the entry point and the device path.

use super::heads::HeadsShape;
use super::options::AttentionOptions;
use super::patterns::{check_mask_dims, MaskDims};
use crate::error::{check_agree, Error};

/// The buffer holds the view, and the view's rows do not overlap (`stride_s >= head_dim`
/// over several rows): an input may repeat a head (`stride_h = 0`) or a batch, never rows
/// within a head, so every per-head size is bounded by the buffer.
pub(crate) fn check_buffer(
    operand: &'static str,
    shape: &HeadsShape,
    len: usize,
) -> Result<(), Error> {
    let needed = shape.required_len().ok_or(Error::InvalidArgument(format!(
        "{operand}: its view's extent overflows usize"
    )))?;
    if len < needed {
        return Err(Error::BufferTooSmall {
            operand,
            needed,
            got: len,
        });
    }
    if shape.seq > 1 && shape.stride_s < shape.head_dim {
        return Err(Error::LeadingDimension {
            operand,
            ld: shape.stride_s,
            min: shape.head_dim,
        });
    }
    Ok(())
}

/// K and V's heads divide Q's (grouped-query attention): `q_heads` is a multiple of
/// `kv_heads`, 0 only when `q_heads` is 0. [`Error::HeadGroups`] otherwise.
pub(crate) fn check_head_groups(q_heads: usize, kv_heads: usize) -> Result<(), Error> {
    let divides = match kv_heads {
        0 => q_heads == 0,
        kv => q_heads % kv == 0,
    };
    if divides {
        Ok(())
    } else {
        Err(Error::HeadGroups { q_heads, kv_heads })
    }
}

/// Every check of the operands that holds for every backend (shapes agree, K and V's heads
/// divide Q's, buffers hold their views, the mask's dims fit, the scale is valid). The one
/// validation of the entry.
#[allow(clippy::too_many_arguments)]
pub(crate) fn check_operands(
    q: &HeadsShape,
    k: &HeadsShape,
    v: &HeadsShape,
    o: &HeadsShape,
    lens: [usize; 4],
    lse_len: Option<usize>,
    mask: Option<MaskDims>,
    opts: &AttentionOptions,
) -> Result<(), Error> {
    check_agree(&[
        ("batch of K (= batch of Q)", q.batch, k.batch),
        ("batch of V (= batch of Q)", q.batch, v.batch),
        ("batch of O (= batch of Q)", q.batch, o.batch),
        ("heads of V (= heads of K)", k.heads, v.heads),
        ("heads of O (= heads of Q)", q.heads, o.heads),
        ("head_dim of K (= head_dim of Q)", q.head_dim, k.head_dim),
        ("head_dim of V (= head_dim of Q)", q.head_dim, v.head_dim),
        ("head_dim of O (= head_dim of Q)", q.head_dim, o.head_dim),
        ("seq of V (= seq of K)", k.seq, v.seq),
        ("seq of O (= seq of Q)", q.seq, o.seq),
    ])?;
    check_head_groups(q.heads, k.heads)?;
    if q.head_dim == 0 {
        return Err(Error::InvalidArgument("head_dim must be at least 1".into()));
    }
    for (operand, shape, len) in [
        ("Q", q, lens[0]),
        ("K", k, lens[1]),
        ("V", v, lens[2]),
        ("O", o, lens[3]),
    ] {
        check_buffer(operand, shape, len)?;
    }
    // O's writes must not race: no two of its elements may share an address. (In safe Rust
    // an output cannot alias an input: `&mut` against `&`.)
    if !o.is_disjoint() {
        return Err(Error::Overlap {
            output: "O",
            other: "O",
        });
    }
    if let Some(len) = lse_len {
        let needed = q
            .batch
            .checked_mul(q.heads)
            .and_then(|x| x.checked_mul(q.seq))
            .ok_or(Error::InvalidArgument(
                "batch * heads * seq_q overflows".into(),
            ))?;
        if len < needed {
            return Err(Error::BufferTooSmall {
                operand: "LSE",
                needed,
                got: len,
            });
        }
    }
    let scale = opts.get_scale(q.head_dim);
    if !(scale.is_finite() && scale > 0.0) {
        return Err(Error::InvalidArgument(format!(
            "scale = {scale}: must be finite and > 0"
        )));
    }
    if let Some(dims) = mask {
        check_mask_dims(dims, (q.batch, q.heads, k.heads, q.seq, k.seq))?;
    }
    Ok(())
}
