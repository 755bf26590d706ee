//! `DeviceBsr` from buffers already on the GPU, value updates and downloads (`--features
//! cuda`). Without a GPU each test says SKIPPED on stderr and returns; with
//! SPARSEK_REQUIRE_GPU=1 a missing GPU is a failure instead (as in every tests/gpu_*.rs).
#![cfg(feature = "full")]

mod common;

use std::sync::Arc;

use common::{device, PatternKind};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use rand::{rngs::StdRng, SeedableRng};
use sparsek::quantize::BlockGranularity;
use sparsek::{
    bf16, f16, sddmm, spmm, Backend, BlockShape, BsrError, BsrMatrix, Dense, DenseMut, DenseShape,
    DeviceBsr, Element, Error, Layout, SpmmOptions, F8E4M3,
};

const B32: BlockShape = BlockShape::new(32, 32);

fn rng() -> StdRng {
    StdRng::seed_from_u64(13)
}

/// `a`'s arrays uploaded as plain buffers (an empty array as a one-element placeholder).
fn raw_parts<T: Element>(
    a: &BsrMatrix<T>,
    stream: &Arc<CudaStream>,
) -> (CudaSlice<i32>, CudaSlice<i32>, CudaSlice<T>) {
    fn up<U: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits>(
        s: &Arc<CudaStream>,
        v: &[U],
    ) -> CudaSlice<U> {
        if v.is_empty() {
            s.alloc_zeros(1).unwrap()
        } else {
            s.clone_htod(v).unwrap()
        }
    }
    (
        up(stream, a.row_ptr()),
        up(stream, a.col_idx()),
        up(stream, a.values()),
    )
}

/// `A * B` on the device with a row-major ones-and-twos B, as f32 on the host.
fn product<T: Element>(a: &DeviceBsr<T>, stream: &Arc<CudaStream>) -> Vec<f32> {
    let n = 16;
    let b: Vec<T> = (0..a.k() * n)
        .map(|i| T::from_f32((i % 2 + 1) as f32))
        .collect();
    let db = stream.clone_htod(&b).unwrap();
    product_of(a, &db, n, Layout::RowMajor, &SpmmOptions::new(), stream)
}

/// `A * B` on `stream` (B `k x n` in `layout`, C f32 row-major) with `options`, as f32 on the
/// host.
fn product_of<T: Element>(
    a: &DeviceBsr<T>,
    b: &CudaSlice<T>,
    n: usize,
    layout: Layout,
    options: &SpmmOptions,
    stream: &Arc<CudaStream>,
) -> Vec<f32> {
    let mut dc = stream.alloc_zeros::<f32>(a.m() * n).unwrap();
    spmm(
        a,
        Dense::device(b, a.k(), n, layout),
        DenseMut::device(&mut dc, a.m(), n, Layout::RowMajor),
        options,
    )
    .unwrap();
    let c = stream.clone_dtoh(&dc).unwrap();
    stream.synchronize().unwrap();
    c
}

fn round_trip<T: Element>(ctx: &Arc<CudaContext>) {
    let stream = ctx.default_stream();
    let mut rng = rng();
    for kind in [
        PatternKind::Random(0.3),
        PatternKind::Empty,
        PatternKind::EmptyAndFullRows,
    ] {
        let a = common::random_bsr::<T>(kind, 4, 6, B32, &mut rng);
        let up = DeviceBsr::upload(&a, &stream).unwrap();
        assert_eq!(up.download().unwrap(), a, "{kind:?}: upload/download");
        let (rp, ci, v) = raw_parts(&a, &stream);
        let parts = DeviceBsr::from_device_parts(a.m(), a.k(), a.block(), rp, ci, v).unwrap();
        assert_eq!(parts.nnz_blocks(), a.nnz_blocks());
        assert_eq!(parts.download().unwrap(), a, "{kind:?}: from_device_parts");
        assert_eq!(product(&parts, &stream), product(&up, &stream), "{kind:?}");
    }
}

#[test]
fn upload_from_parts_download_round_trip() {
    let Some(ctx) = device("upload_from_parts_download_round_trip") else {
        return;
    };
    round_trip::<f16>(&ctx);
    round_trip::<bf16>(&ctx);
}

#[test]
fn from_device_parts_ignores_extra_elements() {
    let Some(ctx) = device("from_device_parts_ignores_extra_elements") else {
        return;
    };
    let stream = ctx.default_stream();
    let a = common::random_bsr::<f16>(PatternKind::Random(0.5), 3, 3, B32, &mut rng());
    let mut ci = a.col_idx().to_vec();
    ci.extend([7, -1]);
    let mut v = a.values().to_vec();
    v.extend([f16::from_f32(9.0); 5]);
    let d = DeviceBsr::from_device_parts(
        a.m(),
        a.k(),
        a.block(),
        stream.clone_htod(a.row_ptr()).unwrap(),
        stream.clone_htod(&ci).unwrap(),
        stream.clone_htod(&v).unwrap(),
    )
    .unwrap();
    assert_eq!(d.values_len(), a.values().len());
    assert_eq!(d.download().unwrap(), a);
}

/// `from_device_parts` on a 64 x 96 matrix of 32 x 32 blocks (2 x 3 blocks).
fn parts_err(row_ptr: &[i32], col_idx: &[i32], values: usize, stream: &Arc<CudaStream>) -> Error {
    let ci = if col_idx.is_empty() {
        &[0][..]
    } else {
        col_idx
    };
    DeviceBsr::from_device_parts(
        64,
        96,
        B32,
        stream.clone_htod(row_ptr).unwrap(),
        stream.clone_htod(ci).unwrap(),
        stream.alloc_zeros::<f16>(values.max(1)).unwrap(),
    )
    .err()
    .expect("malformed parts accepted")
}

#[test]
fn from_device_parts_rejects_each_defect() {
    let Some(ctx) = device("from_device_parts_rejects_each_defect") else {
        return;
    };
    let s = &ctx.default_stream();
    let blk = 32 * 32;
    let bsr = |e: Error| match e {
        Error::Bsr(e) => e,
        other => panic!("not a BsrError: {other}"),
    };
    let e = bsr(parts_err(&[0, 1], &[0], blk, s));
    assert!(
        matches!(
            e,
            BsrError::RowPtrLength {
                expected: 3,
                got: 2
            }
        ),
        "{e}"
    );
    let e = bsr(parts_err(&[1, 1, 1], &[0], blk, s));
    assert!(matches!(e, BsrError::RaggedRowPtr { index: 0, .. }), "{e}");
    let e = bsr(parts_err(&[0, 2, 1], &[0, 1], 2 * blk, s));
    assert!(matches!(e, BsrError::RaggedRowPtr { index: 2, .. }), "{e}");
    let e = bsr(parts_err(&[0, 0, -1], &[], 0, s));
    assert!(matches!(e, BsrError::RaggedRowPtr { .. }), "{e}");
    let e = bsr(parts_err(&[0, 1, 2], &[0, 3], 2 * blk, s));
    assert!(
        matches!(
            e,
            BsrError::ColumnOutOfRange {
                row: 1,
                col: 3,
                block_cols: 3
            }
        ),
        "{e}"
    );
    let e = bsr(parts_err(&[0, 2, 2], &[2, 1], 2 * blk, s));
    assert!(matches!(e, BsrError::UnsortedColumns { row: 0, .. }), "{e}");
    let e = bsr(parts_err(&[0, 2, 2], &[1, 1], 2 * blk, s));
    assert!(
        matches!(e, BsrError::DuplicateColumn { row: 0, col: 1 }),
        "{e}"
    );
    let e = bsr(parts_err(&[0, 1, 3], &[0, 1], 3 * blk, s));
    assert!(
        matches!(
            e,
            BsrError::LengthMismatch {
                expected: 3,
                got: 2,
                ..
            }
        ),
        "{e}"
    );
    let e = bsr(parts_err(&[0, 1, 2], &[0, 1], 2 * blk - 1, s));
    assert!(
        matches!(
            e,
            BsrError::LengthMismatch {
                expected: 2048,
                got: 2047,
                ..
            }
        ),
        "{e}"
    );
    let e = DeviceBsr::from_device_parts(
        60,
        96,
        B32,
        s.clone_htod(&[0, 0]).unwrap(),
        s.alloc_zeros::<i32>(1).unwrap(),
        s.alloc_zeros::<f16>(1).unwrap(),
    )
    .err()
    .unwrap();
    assert!(
        matches!(e, Error::Bsr(BsrError::NotBlockMultiple { dim: "m", .. })),
        "{e}"
    );
}

#[test]
fn update_values_from_host_and_device() {
    let Some(ctx) = device("update_values_from_host_and_device") else {
        return;
    };
    let stream = ctx.default_stream();
    let mut rng = rng();
    let a = common::random_bsr::<f16>(PatternKind::Random(0.4), 4, 4, B32, &mut rng);
    let fresh = common::random_bsr::<f16>(PatternKind::Full, 4, 4, B32, &mut rng);
    // Same pattern as `a`, new values.
    let new_values: Vec<f16> = fresh.values()[..a.values().len()].to_vec();
    let want = BsrMatrix::from_parts(
        a.m(),
        a.k(),
        a.block(),
        a.row_ptr().to_vec(),
        a.col_idx().to_vec(),
        new_values.clone(),
    )
    .unwrap();
    let expected = product(&DeviceBsr::upload(&want, &stream).unwrap(), &stream);

    let mut d = DeviceBsr::upload(&a, &stream).unwrap();
    d.update_values(&new_values).unwrap();
    assert_eq!(d.download().unwrap(), want);
    assert_eq!(product(&d, &stream), expected);

    let mut d = DeviceBsr::upload(&a, &stream).unwrap();
    let dev = stream.clone_htod(&new_values).unwrap();
    d.update_values_from_device(&dev).unwrap();
    assert_eq!(d.download().unwrap(), want);
    assert_eq!(product(&d, &stream), expected);

    // Wrong lengths: an error, the values untouched.
    let e = d.update_values(&new_values[1..]).unwrap_err();
    assert!(
        matches!(e, Error::Bsr(BsrError::ValuesLength { .. })),
        "{e}"
    );
    let longer = stream.alloc_zeros::<f16>(new_values.len() + 1).unwrap();
    let e = d.update_values_from_device(&longer).unwrap_err();
    assert!(
        matches!(e, Error::Bsr(BsrError::ValuesLength { .. })),
        "{e}"
    );
    assert_eq!(d.download().unwrap(), want);

    // An empty matrix takes only empty values.
    let empty = common::random_bsr::<f16>(PatternKind::Empty, 2, 2, B32, &mut rng);
    let mut d = DeviceBsr::upload(&empty, &stream).unwrap();
    d.update_values(&[]).unwrap();
    assert!(d.update_values(&[f16::ZERO]).is_err());
    assert_eq!(d.download().unwrap(), empty);
}

/// `A·B` on the Decode family (B `k x n` column-major), as f32 on the host.
fn decode_product(
    a: &DeviceBsr<f16>,
    b: &CudaSlice<f16>,
    n: usize,
    stream: &Arc<CudaStream>,
) -> Vec<f32> {
    let options = SpmmOptions::new().backend(Backend::Decode);
    product_of(a, b, n, Layout::ColMajor, &options, stream)
}

/// Which matrices are settled (their weights read before the previous kernel completes on
/// sm_90): uploaded or taken from device buffers, yes; an SDDMM's output or a device
/// quantization, no, until `settle`. A product that reads an SDDMM's output right after it
/// on the same stream (the call may launch while the SDDMM finishes) sees every new value,
/// and the same product on the settled matrix gives the same bits.
#[test]
fn settled_follows_kernel_writes() {
    let Some(ctx) = device("settled_follows_kernel_writes") else {
        return;
    };
    let stream = ctx.default_stream();
    let mut rng = rng();
    let block = BlockShape::new(64, 64);
    let (m, k, n) = (2048, 1024, 4);
    let s0 = common::random_bsr::<f16>(PatternKind::Random(0.5), m / 64, k / 64, block, &mut rng);
    let up = DeviceBsr::upload(&s0, &stream).unwrap();
    assert!(up.is_settled(), "upload");
    let (rp, ci, v) = raw_parts(&s0, &stream);
    let parts = DeviceBsr::from_device_parts(m, k, block, rp, ci, v).unwrap();
    assert!(parts.is_settled(), "from_device_parts");

    // S = A1·B1 on S's pattern (inner dimension 64), then S·x on the Decode family.
    let mut s = DeviceBsr::upload(&s0, &stream).unwrap();
    let a1 = common::random_vec::<f16>(m * 64, &mut rng);
    let b1 = common::random_vec::<f16>(64 * k, &mut rng);
    let x = common::random_vec::<f16>(k * n, &mut rng);
    let (da1, db1, dx) = (
        stream.clone_htod(&a1).unwrap(),
        stream.clone_htod(&b1).unwrap(),
        stream.clone_htod(&x).unwrap(),
    );
    sddmm(
        Dense::device(&da1, m, 64, Layout::RowMajor),
        Dense::device(&db1, 64, k, Layout::RowMajor),
        &mut s,
        &SpmmOptions::new(),
    )
    .unwrap();
    assert!(!s.is_settled(), "an SDDMM's output");
    let unsettled = decode_product(&s, &dx, n, &stream);
    let written = s.download().unwrap();
    let x_shape = DenseShape::packed(k, n, Layout::ColMajor);
    let want = common::reference::<f16, f32>(
        &written,
        &x,
        &x_shape,
        &[],
        &DenseShape::packed(m, n, Layout::RowMajor),
        1.0,
        0.0,
    );
    let (err, bad) = common::rel_err(
        &unsettled,
        &DenseShape::packed(m, n, Layout::RowMajor),
        &want,
    );
    assert!(
        err < 2e-3 && bad == 0,
        "S·x right after the SDDMM: rel. error {err:.2e}, {bad} non-finite"
    );
    s.settle().unwrap();
    assert!(s.is_settled(), "after settle");
    assert_eq!(
        decode_product(&s, &dx, n, &stream),
        unsettled,
        "settled and not: the same bits"
    );

    let q = up
        .quantize_fp8::<F8E4M3>(BlockGranularity::PerBlock)
        .unwrap();
    assert!(!q.is_settled(), "a device quantization");
    let mut q = q;
    q.settle().unwrap();
    assert!(q.is_settled(), "a quantized matrix after settle");
}
