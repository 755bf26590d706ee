//! `cargo bench --bench spmm` (CPU reference backend) and, with `--features cuda` on a
//! GPU machine, the GPU backends. Throughput is counted in FLOPs on nonzero blocks
//! (2·N·nnz(A)), so criterion prints FLOP/s.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use half::f16;
use rand::{rngs::StdRng, Rng, SeedableRng};
use sparsek::{spmm, BlockMask, BlockShape, BsrMatrix, Dense, DenseMut, Layout, SpmmOptions};

fn random_bsr(m: usize, k: usize, block: BlockShape, per_row: usize, rng: &mut StdRng) -> BsrMatrix<f16> {
    let mask = BlockMask::random_per_row(m / block.rows, k / block.cols, per_row, rng).expect("valid pattern");
    BsrMatrix::from_block_mask(&mask, block, |_, _| f16::from_f32(rng.random_range(-1.0..1.0))).expect("valid BSR")
}

/// The CPU reference at a size it finishes in seconds (it is the oracle, not a contender).
fn cpu(c: &mut Criterion) {
    let (m, n, k) = (1024, 256, 1024);
    let mut rng = StdRng::seed_from_u64(1);
    let mut group = c.benchmark_group("cpu_1024x256x1024");
    group.sample_size(10);
    for (bs, per_row) in [(64, 4), (32, 8)] {
        let block = BlockShape::new(bs, bs);
        let a = random_bsr(m, k, block, per_row, &mut rng);
        let b: Vec<f16> = (0..k * n).map(|_| f16::from_f32(rng.random_range(-1.0..1.0))).collect();
        let mut out = vec![0f32; m * n];
        group.throughput(Throughput::Elements(a.flops(n) as u64));
        group.bench_function(BenchmarkId::new(format!("{block}"), format!("{per_row}_per_row")), |bench| {
            bench.iter(|| {
                spmm(
                    &a,
                    Dense::host(&b, k, n, Layout::RowMajor),
                    DenseMut::host(&mut out, m, n, Layout::RowMajor),
                    &SpmmOptions::new(),
                )
                .expect("cpu spmm")
            })
        });
    }
    group.finish();
}

criterion_group!(benches, cpu);
criterion_main!(benches);
