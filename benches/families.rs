//! `cargo bench` at the root: the GPU families side by side, or, without a GPU (or without
//! `--features cuda`), the CPU backend.
//!
//! With `--features cuda` on a GPU: the Hopper family (CUTLASS SM90) and the WMMA family on
//! the same problems, for every operation both run: `A·B`, `Aᵀ·B`, `D·A` and the SDDMM
//! (m = n = k = 8192, f16 in, f32 accumulation, f16 out), over several patterns (uniform
//! top-k rows at densities 1/8 and 1/4 with 128² and 64² blocks, and a skewed one: every
//! 16th block-row full), drawn from `SPARSEK_BENCH_SEED` (printed; another seed draws
//! other patterns), beside dense cuBLAS on the same m, n, k in the same run. GPU times are
//! device-side (CUDA events around back-to-back launches). The last lines are a table per
//! operation: TFLOPS on the nonzero blocks and time ÷ dense cuBLAS, per family.
//!
//! `cargo bench --features cuda -- families_gpu` runs only the GPU group; criterion's usual
//! filters and options apply. The report and regression gate are `report/` (bench_report).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::{rngs::StdRng, Rng, SeedableRng};
use sparsek::{
    f16, sddmm, spmm, BlockMask, BlockShape, BsrMatrix, Dense, DenseMut, Layout, SpmmOptions,
};

/// The seed of the patterns and values (`SPARSEK_BENCH_SEED`, default 2026).
fn seed() -> u64 {
    std::env::var("SPARSEK_BENCH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2026)
}

fn random_values(len: usize, rng: &mut StdRng) -> Vec<f16> {
    (0..len)
        .map(|_| f16::from_f32(rng.random_range(-1.0..1.0)))
        .collect()
}

/// A pattern of the bench: `per_row` blocks in each block-row (top-k of random scores), or
/// skewed (every 16th block-row full, the others `per_row`).
fn pattern(rows: usize, cols: usize, per_row: usize, skewed: bool, rng: &mut StdRng) -> BlockMask {
    if skewed {
        BlockMask::skewed(rows, cols, 16, per_row, rng).expect("skewed pattern")
    } else {
        BlockMask::random_per_row(rows, cols, per_row, rng).expect("top-k pattern")
    }
}

fn random_bsr(
    m: usize,
    k: usize,
    block: BlockShape,
    mask: &BlockMask,
    rng: &mut StdRng,
) -> BsrMatrix<f16> {
    assert_eq!((mask.rows() * block.rows, mask.cols() * block.cols), (m, k));
    BsrMatrix::from_block_mask(mask, block, |_, _| {
        f16::from_f32(rng.random_range(-1.0..1.0))
    })
    .expect("valid BSR")
}

/// The CPU backend (the oracle of every test, not a contender) at a size it finishes in
/// seconds: A·B and the SDDMM.
fn cpu(c: &mut Criterion) {
    let (m, n, k) = (1024, 256, 1024);
    let mut rng = StdRng::seed_from_u64(seed());
    let mut group = c.benchmark_group("families_cpu");
    group.sample_size(10);
    for (bs, per_row) in [(64, 4), (32, 8)] {
        let block = BlockShape::new(bs, bs);
        let mask = pattern(m / bs, k / bs, per_row, false, &mut rng);
        let a = random_bsr(m, k, block, &mask, &mut rng);
        let b = random_values(k * n, &mut rng);
        let mut out = vec![0f32; m * n];
        group.throughput(Throughput::Elements(a.flops(n) as u64));
        group.bench_function(
            BenchmarkId::new("spmm", format!("{block}_{per_row}_per_row")),
            |bench| {
                bench.iter(|| {
                    spmm(
                        &a,
                        Dense::host(&b, k, n, Layout::RowMajor),
                        DenseMut::host(&mut out, m, n, Layout::RowMajor),
                        &SpmmOptions::new(),
                    )
                    .expect("cpu spmm")
                })
            },
        );
        // SDDMM on A's pattern: S (m x k) = X (m x n) · Y (n x k) on the blocks.
        let mut s = a.clone();
        let (x, y) = (
            random_values(m * n, &mut rng),
            random_values(n * k, &mut rng),
        );
        group.bench_function(
            BenchmarkId::new("sddmm", format!("{block}_{per_row}_per_row")),
            |bench| {
                bench.iter(|| {
                    sddmm(
                        Dense::host(&x, m, n, Layout::RowMajor),
                        Dense::host(&y, n, k, Layout::RowMajor),
                        &mut s,
                        &SpmmOptions::new(),
                    )
                    .expect("cpu sddmm")
                })
            },
        );
    }
    group.finish();
}

#[cfg(feature = "cuda")]
mod gpu_bench {
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::time::Duration;

    use criterion::{BenchmarkId, Criterion, Throughput};
    use cudarc::cublas::{sys::cublasOperation_t::CUBLAS_OP_N, CudaBlas, Gemm, GemmConfig};
    use cudarc::driver::{sys::CUevent_flags, CudaSlice, CudaStream};
    use rand::{rngs::StdRng, SeedableRng};
    use sparsek::{
        dense_spmm, f16, gpu, sddmm, spmm, Backend, BlockShape, Dense, DenseMut, DeviceBsr, Error,
        Layout, SpmmOptions,
    };

    use super::{pattern, random_bsr, random_values, seed};

    const SIZE: usize = 8192;
    const FAMILIES: [Backend; 2] = [Backend::Hopper, Backend::Wmma];
    const OPS: [&str; 4] = ["A·B", "Aᵀ·B", "D·A", "SDDMM"];

    /// Device time of `iters` back-to-back launches, bracketed by CUDA events.
    fn time_launches(
        stream: &Arc<CudaStream>,
        iters: u64,
        mut launch: impl FnMut() -> Result<(), Error>,
    ) -> Duration {
        let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let start = stream.record_event(timing).expect("event");
        for _ in 0..iters {
            launch().expect("a launch that ran once already");
        }
        let end = stream.record_event(timing).expect("event");
        end.synchronize().expect("sync");
        Duration::from_secs_f64(start.elapsed_ms(&end).expect("elapsed") as f64 * 1e-3)
    }

    /// Dense row-major `C = A·B` (m x k times k x n) through cuBLAS: `Cᵀ = Bᵀ·Aᵀ` in its
    /// column-major terms, f16 in and out, f32 compute.
    fn cublas_gemm(
        blas: &CudaBlas,
        (m, n, k): (usize, usize, usize),
        a: &CudaSlice<f16>,
        b: &CudaSlice<f16>,
        c: &mut CudaSlice<f16>,
    ) -> Result<(), Error> {
        assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n);
        let dim = |v: usize| i32::try_from(v).expect("bench sizes fit i32");
        let cfg = GemmConfig {
            transa: CUBLAS_OP_N,
            transb: CUBLAS_OP_N,
            m: dim(n),
            n: dim(m),
            k: dim(k),
            alpha: f16::ONE,
            lda: dim(n),
            ldb: dim(k),
            beta: f16::ZERO,
            ldc: dim(n),
        };
        // SAFETY: A (m x k), B (k x n) and C (m x n) hold their packed row-major shapes
        // (asserted above) and are live allocations of this context.
        unsafe { blas.gemm(cfg, b, a, c) }.map_err(|e| Error::Cuda(format!("cuBLAS: {e:?}")))
    }

    fn median(mut v: Vec<f64>) -> f64 {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    }

    /// Seconds per launch of each timed sample, by (op, pattern, family).
    #[derive(Default)]
    struct Samples(BTreeMap<(String, String, String), Vec<f64>>);

    pub fn gpu(c: &mut Criterion) {
        let ctx = match gpu::open_device() {
            Ok(ctx) => ctx,
            Err(why) => {
                eprintln!("families_gpu: not run ({why}); the CPU group runs");
                return;
            }
        };
        let stream = ctx.default_stream();
        let blas = CudaBlas::new(stream.clone()).expect("cuBLAS");
        let seed = seed();
        let mut rng = StdRng::seed_from_u64(seed);
        let n = SIZE;
        let upload = |v: Vec<f16>| stream.clone_htod(&v).expect("upload");
        // The dense operands every problem shares: B (k x n), D (n x m), X, Y; C's buffer.
        let b = upload(random_values(SIZE * SIZE, &mut rng));
        let d = upload(random_values(SIZE * SIZE, &mut rng));
        let mut out = stream.alloc_zeros::<f16>(SIZE * SIZE).expect("alloc C");
        let samples = std::sync::Mutex::new(Samples::default());
        let mut flops_of = BTreeMap::new();

        let mut group = c.benchmark_group("families_gpu");
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(1));

        let dense_flops = 2.0 * (SIZE as f64).powi(3);
        group.throughput(Throughput::Elements(dense_flops as u64));
        group.bench_function(BenchmarkId::new("cublas_dense", SIZE), |bench| {
            bench.iter_custom(|iters| {
                let t = time_launches(&stream, iters, || {
                    cublas_gemm(&blas, (SIZE, SIZE, SIZE), &b, &d, &mut out)
                });
                samples
                    .lock()
                    .unwrap()
                    .0
                    .entry(("dense".into(), String::new(), "cuBLAS".into()))
                    .or_default()
                    .push(t.as_secs_f64() / iters as f64);
                t
            })
        });

        // (block side, blocks per block-row as a fraction of the row, skewed)
        let patterns = [
            (128, 8, false),
            (128, 4, false),
            (64, 8, false),
            (64, 4, false),
            (128, 16, true),
        ];
        for (bs, denom, skewed) in patterns {
            let block = BlockShape::new(bs, bs);
            let per_row = SIZE / bs / denom;
            let mask = pattern(SIZE / bs, SIZE / bs, per_row, skewed, &mut rng);
            let a = random_bsr(SIZE, SIZE, block, &mask, &mut rng);
            let name = if skewed {
                format!("{block} skewed 1/16+full")
            } else {
                format!("{block} 1/{denom}")
            };
            let flops = a.flops(n);
            let mut da = DeviceBsr::upload(&a, &stream).expect("upload A");
            da.prepare_transpose().expect("transpose index");
            group.throughput(Throughput::Elements(flops as u64));
            for op in OPS {
                flops_of.insert((op.to_string(), name.clone()), flops);
                for family in FAMILIES {
                    let opts = SpmmOptions::new().backend(family);
                    let mut launch = || -> Result<(), Error> {
                        match op {
                            "A·B" | "Aᵀ·B" => spmm(
                                &da,
                                Dense::device(&b, SIZE, n, Layout::RowMajor),
                                DenseMut::device(&mut out, SIZE, n, Layout::RowMajor),
                                &opts.transpose_a(op == "Aᵀ·B"),
                            ),
                            "D·A" => dense_spmm(
                                Dense::device(&d, n, SIZE, Layout::RowMajor),
                                &da,
                                DenseMut::device(&mut out, n, SIZE, Layout::RowMajor),
                                &opts,
                            ),
                            _ => sddmm(
                                Dense::device(&b, SIZE, n, Layout::RowMajor),
                                Dense::device(&d, n, SIZE, Layout::ColMajor),
                                &mut da,
                                &opts,
                            ),
                        }
                    };
                    // Once outside the timing: a family that does not take the problem
                    // says why, and is left out of the table.
                    if let Err(e) = launch() {
                        eprintln!("{op} {name} on {family:?}: not run ({e})");
                        continue;
                    }
                    let key = (op.to_string(), name.clone(), format!("{family:?}"));
                    group.bench_function(
                        BenchmarkId::new(format!("{op}/{family:?}"), &name),
                        |bench| {
                            bench.iter_custom(|iters| {
                                let t = time_launches(&stream, iters, &mut launch);
                                samples
                                    .lock()
                                    .unwrap()
                                    .0
                                    .entry(key.clone())
                                    .or_default()
                                    .push(t.as_secs_f64() / iters as f64);
                                t
                            })
                        },
                    );
                }
            }
        }
        group.finish();
        let samples = samples.into_inner().unwrap();
        table(&samples, &flops_of, seed, &ctx.name().unwrap_or_default());
    }

    /// Per operation: TFLOPS on the nonzero blocks and time ÷ dense cuBLAS, per family.
    fn table(
        samples: &Samples,
        flops_of: &BTreeMap<(String, String), f64>,
        seed: u64,
        device: &str,
    ) {
        let med = |op: &str, pat: &str, fam: &str| {
            samples
                .0
                .get(&(op.to_string(), pat.to_string(), fam.to_string()))
                .map(|v| median(v.clone()))
        };
        let Some(dense) = med("dense", "", "cuBLAS") else {
            return;
        };
        println!(
            "\nsparsek families: Hopper (CUTLASS SM90) vs WMMA on {device}, m = n = k = {SIZE}, \
             f16 in / f32 accumulate / f16 out, seed {seed}"
        );
        println!(
            "dense cuBLAS {SIZE}³: {:.1} µs, {:.0} TFLOPS (same run)",
            dense * 1e6,
            2.0 * (SIZE as f64).powi(3) / dense / 1e12
        );
        let cell = |t: Option<f64>, flops: f64| match t {
            Some(t) => format!("{:>6.0} {:>7.3}", flops / t / 1e12, t / dense),
            None => format!("{:>6} {:>7}", "-", "-"),
        };
        for op in OPS {
            println!("\n{op}: TFLOPS on nonzero blocks, and time ÷ dense cuBLAS");
            println!(
                "{:<24} {:>14} {:>14} {:>10}",
                "pattern", "Hopper", "WMMA", "WMMA/Hop"
            );
            for ((o, pat), flops) in flops_of {
                if o != op {
                    continue;
                }
                let (h, w) = (med(op, pat, "Hopper"), med(op, pat, "Wmma"));
                let ratio = match (h, w) {
                    (Some(h), Some(w)) => format!("{:.2}", w / h),
                    _ => "-".into(),
                };
                println!(
                    "{:<24} {:>14} {:>14} {:>10}",
                    pat,
                    cell(h, *flops),
                    cell(w, *flops),
                    ratio
                );
            }
        }
        println!(
            "\n(TFLOPS = FLOPs on nonzero blocks ÷ median time; the ratio ÷ dense cuBLAS is of \
             times: 1/8 density at par with cuBLAS's rate would be 0.125)"
        );
    }
}

#[cfg(feature = "cuda")]
criterion_group! { name = benches; config = Criterion::default().without_plots(); targets = gpu_bench::gpu, cpu }
#[cfg(not(feature = "cuda"))]
criterion_group! { name = benches; config = Criterion::default().without_plots(); targets = cpu }
criterion_main!(benches);
