//! `bench_report products`: every product on the same matrix, each beside the one it must
//! keep up with (`Aᵀ·B` beside `A·B`, `D·A` beside `A·B` in the linear-layer layout).
//!
//! It times, per top-k matrix A (`m x k`) and `Backend::Auto`, four products of the
//! same nonzero work: `A*B` with row-major B and C (the reference), `A^T*B` on the same
//! `DeviceBsr` (B `m x n`, C `k x n`, row-major), `A*B` with column-major B and C (the
//! linear-layer layout; the reference) and `D*A` through `dense_spmm` with row-major
//! D (`n x m`) and C (`n x k`), which runs as `C^T = A^T*D^T` on column-major views. Each
//! runs once first and is timed only if that returns Ok (else the row says why). The table
//! gives per row the backend Auto took (`gpu::can_implement`), median µs, TFLOPS on nonzero
//! work, E = the roofline floor of `run` (FLOPs at dense cuBLAS's rate, B's L2 traffic at
//! the L2 rate, A + B + C at the HBM rate, all measured in the same run) ÷ time, and the
//! ratio `A^T*B ÷ A*B` and `D*A ÷ A*B (col/col)` against the 1.10 target.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{bail, Result};
use cudarc::cublas::{CudaBlas, Gemm};
use cudarc::driver::{CudaSlice, CudaStream};
use indicatif::ProgressBar;
use rand::{rngs::StdRng, Rng, SeedableRng};
use serde::Serialize;
use sparsek::{
    bf16, dense_spmm, f16, gpu, spmm, Backend, BsrMatrix, Dense, DenseMut, DeviceBsr, Element,
    Layout, SpmmOptions,
};

use super::device::{
    backend_name, cublas_full, mask, memory_ceilings, open, parse_block, parse_density, progress,
    random_device, time, MemoryCeilings, Settings,
};
use super::{list, timing, write_json, Timing};
use crate::roofline::{Ceilings, Problem};

/// How much slower than its reference a product may be (the target).
const TARGET: f64 = 1.10;

/// One product of `m x k` A with `n` dense columns, `Backend::Auto`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Product {
    /// `C (m x n) = A·B (k x n)`, B and C in this layout.
    Ab(Layout),
    /// `C (k x n) = Aᵀ·B (m x n)` on the same A, B and C row-major.
    AtB,
    /// `C (n x k) = D (n x m)·A` through `dense_spmm`, D and C row-major.
    Da,
}

/// Each reference first, then the product compared with it.
const PRODUCTS: [Product; 4] = [
    Product::Ab(Layout::RowMajor),
    Product::AtB,
    Product::Ab(Layout::ColMajor),
    Product::Da,
];

impl Product {
    fn name(self) -> &'static str {
        match self {
            Product::Ab(_) => "A*B",
            Product::AtB => "A^T*B",
            Product::Da => "D*A",
        }
    }

    /// Layouts of the dense operands, `B/C` (`D/C` for `D*A`).
    fn layout(self) -> &'static str {
        match self {
            Product::Ab(Layout::ColMajor) => "col/col",
            _ => "row/row",
        }
    }

    /// The product this one must keep up with.
    fn reference(self) -> Option<Product> {
        match self {
            Product::Ab(_) => None,
            Product::AtB => Some(Product::Ab(Layout::RowMajor)),
            Product::Da => Some(Product::Ab(Layout::ColMajor)),
        }
    }

    /// B, C and `transpose_a` as `spmm` runs the product: for `D*A`, `dense_spmm`'s
    /// `Cᵀ = Aᵀ·Dᵀ` on the transposed (column-major) views of D and C.
    fn views<'a, T: Element>(
        self,
        (m, n, k): (usize, usize, usize),
        b: &'a CudaSlice<T>,
        c: &'a mut CudaSlice<T>,
    ) -> (Dense<'a, T>, DenseMut<'a, T>, bool) {
        let row = Layout::RowMajor;
        match self {
            Product::Ab(l) => (
                Dense::device(b, k, n, l),
                DenseMut::device(c, m, n, l),
                false,
            ),
            Product::AtB => (
                Dense::device(b, m, n, row),
                DenseMut::device(c, k, n, row),
                true,
            ),
            Product::Da => (
                Dense::device(b, n, m, row).t(),
                DenseMut::device(c, n, k, row).t(),
                true,
            ),
        }
    }

    /// The backend `Auto` takes for it, or why none can.
    fn select<T: Element>(
        self,
        a: &DeviceBsr<T>,
        dims: (usize, usize, usize),
        b: &CudaSlice<T>,
        c: &mut CudaSlice<T>,
        opts: &SpmmOptions,
    ) -> Result<Backend, sparsek::Error> {
        let (b, c, transpose) = self.views(dims, b, c);
        gpu::can_implement(a, &b, &c, &opts.transpose_a(transpose))
    }

    /// Enqueues the product through its entry point (`spmm`, `dense_spmm`).
    fn call<T: Element>(
        self,
        a: &DeviceBsr<T>,
        dims: (usize, usize, usize),
        b: &CudaSlice<T>,
        c: &mut CudaSlice<T>,
        opts: &SpmmOptions,
    ) -> Result<(), sparsek::Error> {
        let (b, c, transpose) = self.views(dims, b, c);
        match self {
            Product::Da => dense_spmm(b.t(), a, c.t(), opts),
            _ => spmm(a, b, c, &opts.transpose_a(transpose)),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
struct ProductRow {
    /// Unique key, e.g. `128x128 d=0.1250 topk f16 A^T*B row/row`.
    config: String,
    block: String,
    density: f64,
    pattern: String,
    dtype: String,
    /// `A*B`, `A^T*B` or `D*A`.
    product: String,
    /// `B/C` layouts (`D/C` for `D*A`).
    layout: String,
    /// Nonzero FLOPs, the same for the four products of one matrix.
    flops: f64,
    /// What `Auto` took (`can_implement`).
    backend: Option<String>,
    /// Why the product did not run, where it did not.
    refused: Option<String>,
    timing: Option<Timing>,
    /// (FLOPs at dense cuBLAS's rate) / median time.
    e: Option<f64>,
    /// The config of the reference row, and this row's median time over its.
    reference: Option<String>,
    ratio: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
struct ProductsReport {
    device: String,
    m: usize,
    n: usize,
    k: usize,
    repeats: usize,
    iters: usize,
    /// Dense cuBLAS at the full M, N, K, per dtype: E's compute ceiling.
    cublas_full: BTreeMap<String, Timing>,
    rows: Vec<ProductRow>,
}

/// `bench_report products ARGS` (the usage in `src/bin/bench_report.rs`).
pub fn command(args: &[String]) -> Result<()> {
    let s = Settings::from_args(args)?;
    let blocks = list(args, "--blocks", "128x128,64x64");
    let densities = list(args, "--densities", "1/8,1/4");
    let dtypes = list(args, "--dtypes", "f16,bf16");
    let (device, stream, blas) = open()?;
    let memory = memory_ceilings(&stream);
    let mut report = ProductsReport {
        device,
        m: s.m,
        n: s.n,
        k: s.k,
        repeats: s.repeats,
        iters: s.iters,
        cublas_full: BTreeMap::new(),
        rows: Vec::new(),
    };
    let bar = progress(blocks.len() * densities.len() * dtypes.len() * PRODUCTS.len())?;
    let mut rng = StdRng::seed_from_u64(42);
    for dtype in &dtypes {
        let sweep = match dtype.as_str() {
            "f16" => sweep_dtype::<f16>,
            "bf16" => sweep_dtype::<bf16>,
            other => bail!("dtype `{other}`: f16 or bf16"),
        };
        sweep(
            &s,
            &stream,
            &blas,
            &mut report,
            &bar,
            &mut rng,
            (&blocks, &densities, memory),
        )?;
    }
    bar.finish_and_clear();
    print_table(&report);
    write_json(args, &report)
}

fn sweep_dtype<T: Element>(
    s: &Settings,
    stream: &Arc<CudaStream>,
    blas: &CudaBlas,
    report: &mut ProductsReport,
    bar: &ProgressBar,
    rng: &mut StdRng,
    (blocks, densities, (l2_tbs, hbm_tbs)): (&[String], &[String], MemoryCeilings),
) -> Result<()>
where
    CudaBlas: Gemm<T>,
{
    let dtype = format!("{}", T::DTYPE);
    let pattern = "topk";
    let n = s.n;
    // One B and one C for every product: B is k x n, m x n or D n x m; C m x n or k x n.
    let side = s.m.max(s.k);
    let b = random_device::<T>(stream, side * n, rng)?;
    let mut c = stream.alloc_zeros::<T>(side * n)?;
    let full = cublas_full(s, stream, blas, rng, &b, &mut c)?;
    let dense_tflops = full.tflops;
    report.cublas_full.insert(dtype.clone(), full);
    let opts = SpmmOptions::new();
    for block in blocks {
        let block = parse_block(block)?;
        for density in densities {
            let density = parse_density(density)?;
            let mask = mask(pattern, s.m / block.rows, s.k / block.cols, density, rng)?;
            let a = BsrMatrix::from_block_mask(&mask, block, |_, _| {
                T::from_f32(rng.random_range(-1.0..1.0))
            })?;
            let da = DeviceBsr::upload(&a, stream)?;
            // A block side that does not divide M or K runs on the largest multiple below.
            let dims = (a.m(), n, a.k());
            let flops = da.flops(n);
            let first = report.rows.len();
            for product in PRODUCTS {
                let config = format!(
                    "{block} d={:.4} {pattern} {dtype} {} {}",
                    a.density(),
                    product.name(),
                    product.layout()
                );
                bar.set_message(config.clone());
                // Run once first: only a product that runs is timed.
                let selected = product.select(&da, dims, &b, &mut c, &opts);
                let mut call = || product.call(&da, dims, &b, &mut c, &opts);
                let checked = selected.map_err(anyhow::Error::from).and_then(|backend| {
                    call()?;
                    stream.synchronize()?;
                    Ok(backend)
                });
                let timed = match &checked {
                    Ok(_) => Some(timing(time(stream, s, || Ok(call()?))?, flops)),
                    Err(_) => None,
                };
                let reference = product.reference().map(|r| {
                    let i = first + PRODUCTS.iter().position(|&p| p == r).expect("listed");
                    &report.rows[i]
                });
                let ratio = match (&timed, reference.and_then(|r| r.timing.as_ref())) {
                    (Some(t), Some(r)) => Some(t.median_us / r.median_us),
                    _ => None,
                };
                let row = ProductRow {
                    config,
                    block: format!("{block}"),
                    density: a.density(),
                    pattern: pattern.into(),
                    dtype: dtype.clone(),
                    product: product.name().into(),
                    layout: product.layout().into(),
                    flops,
                    backend: checked.as_ref().ok().map(|&b| backend_name(b).into()),
                    refused: checked.err().map(|e| format!("{e:#}")),
                    // The roofline floor of the product as spmm runs it (op(A) is A, or
                    // Aᵀ with its blocks bk x bm; square here).
                    e: timed.as_ref().and_then(|t| {
                        let ceilings = Ceilings {
                            dense_tflops,
                            l2_tbs: l2_tbs?,
                            hbm_tbs: hbm_tbs?,
                        };
                        let (rows, cols) = match product {
                            Product::Ab(_) => (block.rows, block.cols),
                            _ => (block.cols, block.rows),
                        };
                        let problem = Problem {
                            m: if rows == block.rows { dims.0 } else { dims.2 },
                            n,
                            k: if rows == block.rows { dims.2 } else { dims.0 },
                            bm: rows,
                            bk: cols,
                            nnzb: da.nnz_blocks(),
                            in_bytes: 2,
                            out_bytes: 2,
                            reads_c: false,
                        };
                        Some(problem.floor(&ceilings).efficiency(t.median_us))
                    }),
                    timing: timed,
                    reference: reference.map(|r| r.config.clone()),
                    ratio,
                };
                report.rows.push(row);
                bar.inc(1);
            }
        }
    }
    Ok(())
}

/// Per row: product, layouts, Auto's backend, median µs, TFLOPS, E and the ratio to its
/// reference; a refused row says why.
fn print_table(r: &ProductsReport) {
    println!(
        "\nsparsek products: {} | M={} N={} K={} | {} repeats x {} launches",
        r.device, r.m, r.n, r.k, r.repeats, r.iters
    );
    let dense: Vec<String> = r
        .cublas_full
        .iter()
        .map(|(dtype, t)| format!("{dtype} {:.0} TFLOPS", t.tflops))
        .collect();
    println!("dense cuBLAS at M, N, K (this run): {}", dense.join(", "));
    println!(
        "{:<28} {:<6} {:<8} {:<8} {:>9} {:>6} {:>5} {:>6}",
        "matrix", "op", "B/C", "auto", "us", "TFLOPS", "E", "ratio"
    );
    for row in &r.rows {
        let matrix = format!(
            "{} d={:.4} {} {}",
            row.block, row.density, row.pattern, row.dtype
        );
        let head = format!(
            "{matrix:<28} {:<6} {:<8} {:<8}",
            row.product,
            row.layout,
            row.backend.as_deref().unwrap_or("-")
        );
        let tail = match (&row.timing, &row.refused) {
            (Some(t), _) => format!(
                " {:>9.1} {:>6.0} {:>5.2} {}",
                t.median_us,
                t.tflops,
                row.e.unwrap_or(f64::NAN),
                match row.ratio {
                    Some(q) => format!("{q:>6.3} {}", if q <= TARGET { "ok" } else { "OVER" }),
                    None if row.reference.is_some() => format!("{:>6}", "-"),
                    None => format!("{:>6}", "ref"),
                }
            ),
            (None, refused) => format!(" refused: {}", refused.as_deref().unwrap_or("?")),
        };
        println!("{head}{tail}");
    }
    println!(
        "(medians; TFLOPS on nonzero work; E = roofline floor (cuBLAS, L2, HBM of this run) / time; \
         ratio = A^T*B / A*B (row/row) and D*A / A*B (col/col), target <= {TARGET:.2}; \
         D*A: D (N x M) and C (N x K) row-major, run by dense_spmm as C^T = A^T * D^T)"
    );
}
