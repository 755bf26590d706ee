//! The roofline floor of one block-sparse product and its efficiency E = floor ÷ measured
//! time, against ceilings measured in the same run (dense cuBLAS, L2 and HBM read
//! bandwidth; `ceilings.rs` and `baseline.rs` measure them). Pure arithmetic: no GPU.
//!
//! For `C (m x n) = A (m x k, BSR, bm x bk blocks, nnzb of them) · B (k x n)` the floor is the
//! largest of three times:
//! - compute: the FLOPs on nonzero blocks (`2·bm·bk·nnzb·n`) at dense cuBLAS's rate;
//! - L2: every nonzero block reads its `bk x n` slab of B once for its block-row, so B's
//!   L2 → SM traffic is `nnzb·bk·n` elements (FLOPs ÷ bm bytes for 2-byte elements), at the
//!   L2 read bandwidth;
//! - HBM: A's nonzero blocks, B and C (C twice when β ≠ 0: read and written), each once, at
//!   the HBM read bandwidth.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The ceilings one problem is rated against, all measured in the same run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ceilings {
    /// Dense cuBLAS throughput in the problem's dtype, TFLOPS.
    pub dense_tflops: f64,
    /// L2 read bandwidth, TB/s.
    pub l2_tbs: f64,
    /// HBM read bandwidth, TB/s.
    pub hbm_tbs: f64,
}

/// The sizes that set the floor of one block-sparse product.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Problem {
    /// Rows of A and C.
    pub m: usize,
    /// Columns of B and C.
    pub n: usize,
    /// Columns of A, rows of B.
    pub k: usize,
    /// Rows of a block (bm).
    pub bm: usize,
    /// Columns of a block (bk).
    pub bk: usize,
    /// Stored (nonzero) blocks of A.
    pub nnzb: usize,
    /// Bytes per element of A and B.
    pub in_bytes: usize,
    /// Bytes per element of C.
    pub out_bytes: usize,
    /// Whether C is read too (β ≠ 0).
    pub reads_c: bool,
}

impl Problem {
    /// FLOPs on the nonzero blocks: `2·bm·bk·nnzb·n`.
    pub fn flops(&self) -> f64 {
        2.0 * self.bm as f64 * self.bk as f64 * self.nnzb as f64 * self.n as f64
    }

    /// B's L2 traffic: one `bk x n` slab per nonzero block.
    pub fn l2_bytes(&self) -> f64 {
        self.nnzb as f64 * self.bk as f64 * self.n as f64 * self.in_bytes as f64
    }

    /// HBM traffic: A's nonzero blocks + B + C (read and written when β ≠ 0).
    pub fn hbm_bytes(&self) -> f64 {
        let a = self.nnzb as f64 * self.bm as f64 * self.bk as f64 * self.in_bytes as f64;
        let b = self.k as f64 * self.n as f64 * self.in_bytes as f64;
        let c = self.m as f64 * self.n as f64 * self.out_bytes as f64;
        a + b + if self.reads_c { 2.0 * c } else { c }
    }

    /// The floor against `c`.
    pub fn floor(&self, c: &Ceilings) -> Floor {
        Floor::new(
            self.flops() / (c.dense_tflops * 1e12) * 1e6,
            self.l2_bytes() / (c.l2_tbs * 1e12) * 1e6,
            self.hbm_bytes() / (c.hbm_tbs * 1e12) * 1e6,
        )
    }
}

/// Which ceiling sets the floor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Bound {
    Compute,
    L2,
    Hbm,
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Bound::Compute => "compute",
            Bound::L2 => "L2",
            Bound::Hbm => "HBM",
        })
    }
}

/// The floor of one problem: the three times, and the largest.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Floor {
    /// The floor, µs: the largest of the three below.
    pub us: f64,
    /// The bound that sets it.
    pub bound: Bound,
    /// FLOPs ÷ dense cuBLAS, µs.
    pub compute_us: f64,
    /// B's L2 traffic ÷ L2 read bandwidth, µs.
    pub l2_us: f64,
    /// A + B + C bytes ÷ HBM read bandwidth, µs.
    pub hbm_us: f64,
}

impl Floor {
    /// The largest of the three (ties go to compute, then L2).
    pub fn new(compute_us: f64, l2_us: f64, hbm_us: f64) -> Self {
        let (us, bound) = [(l2_us, Bound::L2), (hbm_us, Bound::Hbm)].into_iter().fold(
            (compute_us, Bound::Compute),
            |best, t| {
                if t.0 > best.0 {
                    t
                } else {
                    best
                }
            },
        );
        Floor {
            us,
            bound,
            compute_us,
            l2_us,
            hbm_us,
        }
    }

    /// Roofline efficiency of a run taking `measured_us`: floor ÷ measured.
    pub fn efficiency(&self, measured_us: f64) -> f64 {
        self.us / measured_us
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(bm: usize, bk: usize, density_inv: usize) -> Problem {
        let (m, n, k) = (8192, 8192, 8192);
        let nnzb = (m / bm) * (k / bk) / density_inv;
        Problem {
            m,
            n,
            k,
            bm,
            bk,
            nnzb,
            in_bytes: 2,
            out_bytes: 2,
            reads_c: false,
        }
    }

    const H100: Ceilings = Ceilings {
        dense_tflops: 710.0,
        l2_tbs: 7.6,
        hbm_tbs: 3.1,
    };

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn l2_bytes_are_flops_over_bm_for_two_byte_elements() {
        for (bm, bk) in [(128, 128), (64, 64), (32, 32), (128, 112)] {
            let p = problem(bm, bk, 8);
            assert!(close(p.l2_bytes(), p.flops() / bm as f64));
        }
        let f32_in = Problem {
            in_bytes: 4,
            ..problem(64, 64, 8)
        };
        assert!(close(f32_in.l2_bytes(), 2.0 * f32_in.flops() / 64.0));
    }

    #[test]
    fn floor_by_hand_128x128_one_eighth_is_compute() {
        // 64 x 64 blocks of 128 x 128, 1/8 of them: 512 nonzero blocks.
        let p = problem(128, 128, 8);
        assert_eq!(p.nnzb, 512);
        // 2 · 128 · 128 · 512 · 8192 = 2^37 FLOPs.
        assert_eq!(p.flops(), 137_438_953_472.0);
        // L2: 512 · 128 · 8192 · 2 = 2^30 bytes; HBM: A 2^24 + B 2^27 + C 2^27 bytes.
        assert_eq!(p.l2_bytes(), 1_073_741_824.0);
        assert_eq!(p.hbm_bytes(), 285_212_672.0);
        let f = p.floor(&H100);
        assert!(close(f.compute_us, 137_438_953_472.0 / 710e12 * 1e6)); // 193.6 µs
        assert!(close(f.l2_us, 1_073_741_824.0 / 7.6e12 * 1e6)); // 141.3 µs
        assert!(close(f.hbm_us, 285_212_672.0 / 3.1e12 * 1e6)); // 92.0 µs
        assert_eq!(f.bound, Bound::Compute);
        assert_eq!(f.us, f.compute_us);
        // E = floor ÷ measured: 241 µs measured gives 193.6 / 241.
        assert!(close(f.efficiency(241.0), f.compute_us / 241.0));
        assert!(close(f.efficiency(f.us), 1.0));
    }

    #[test]
    fn small_blocks_are_l2_bound_and_sparse_large_ones_hbm_bound() {
        // 32 x 32 at 1/8: same FLOPs as above, 4x the L2 bytes (2^32 B ÷ 7.6 TB/s = 565 µs).
        let f = problem(32, 32, 8).floor(&H100);
        assert_eq!(f.bound, Bound::L2);
        assert!(close(f.us, 4_294_967_296.0 / 7.6e12 * 1e6));
        // 128 x 128 at 1/64: 2^34 FLOPs = 24 µs, L2 2^27 B = 18 µs, HBM ~ 2^28 B = 87 µs.
        let f = problem(128, 128, 64).floor(&H100);
        assert_eq!(f.bound, Bound::Hbm);
        assert_eq!(f.us, f.hbm_us);
    }

    #[test]
    fn beta_reads_c_and_ties_go_to_compute() {
        let p = problem(128, 128, 8);
        let with_c = Problem { reads_c: true, ..p };
        assert_eq!(with_c.hbm_bytes() - p.hbm_bytes(), 8192.0 * 8192.0 * 2.0);
        assert_eq!(Floor::new(1.0, 1.0, 1.0).bound, Bound::Compute);
        assert_eq!(Floor::new(1.0, 2.0, 2.0).bound, Bound::L2);
    }

    #[test]
    fn floor_round_trips_through_json() {
        let f = problem(64, 64, 4).floor(&H100);
        let text = serde_json::to_string(&f).unwrap();
        assert!(text.contains("\"bound\":\"l2\""));
        assert_eq!(serde_json::from_str::<Floor>(&text).unwrap(), f);
        assert_eq!(format!("{:<8}|", Bound::Hbm), "HBM     |");
    }
}
