//! The drawing helpers the targets share: sizes from tiny to huge, element types and their
//! tolerances, buffer lengths, the poison values outputs start as, and the references'
//! activations.

use std::fmt::Debug;

use rand::Rng;
use sparsek::{Activation, Element};

use crate::fuzz::{FuzzRng, I32_MAX};

/// Largest buffer (elements) a case materializes.
pub const CAP: usize = 4096;

/// Huge sizes: every one at least 2^31, so a buffer of that many elements is refused by
/// the guard (an accepted problem stays tiny), or wraps when multiplied.
const HUGE: [usize; 14] = [
    I32_MAX,
    I32_MAX + 1,
    1 << 32,
    (1 << 32) + 16,
    (1 << 60) - (1 << 32) + 16,
    1 << 40,
    1 << 62,
    (1 << 63) - 1,
    1 << 63,
    usize::MAX - 1,
    usize::MAX,
    0xAAAA_AAAA_AAAA_AAAB,
    3 << 61,
    1 << 33,
];

pub fn huge(rng: &mut FuzzRng) -> usize {
    if rng.random_bool(0.1) {
        rng.random::<u64>() as usize | (1 << 31)
    } else {
        HUGE[rng.random_range(0..HUGE.len())]
    }
}

/// A dimension: `0..=small` mostly, huge with probability `p_huge`.
pub fn dim(rng: &mut FuzzRng, small: usize, p_huge: f64) -> usize {
    if rng.random_bool(p_huge) {
        huge(rng)
    } else {
        rng.random_range(0..=small)
    }
}

/// Element types of the fuzz: f32 mostly.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Ty {
    F32,
    Bf16,
    F16,
}

pub fn ty(rng: &mut FuzzRng) -> Ty {
    match rng.random_range(0..10) {
        0 => Ty::Bf16,
        1 => Ty::F16,
        _ => Ty::F32,
    }
}

/// Tolerance on ‖out − ref‖ / ‖ref‖ of an output of this type.
pub fn tolerance(t: Ty) -> f64 {
    match t {
        Ty::F32 => 1e-4,
        Ty::Bf16 => 2e-2,
        Ty::F16 => 2e-3,
    }
}

/// The value outputs are poisoned with where no result can reach it (attention: |O| <= 1,
/// inputs being in [-1, 1]): exact in every type.
pub const SENTINEL: f32 = 7.25;

/// A poison value no result of magnitude <= `bound` can round to: 1.25 times the smallest
/// power of two above twice the bound, at least 8 (so 10; exact in f32, f16 and bf16). With inputs in [-1, 1],
/// a product's bound is |alpha| * (its reduction length) + |beta| + 1 (a bias, which an
/// activation never enlarges). 7.25 alone was reachable: a bf16 D*A of 16-long rows with
/// alpha -1.9 rounded to it exactly (seed 10634251931600340196, case 36527).
pub fn sentinel_above(bound: f64) -> f32 {
    let mut s = 8.0f32;
    while (s as f64) <= 2.0 * bound && s < 32768.0 {
        s *= 2.0;
    }
    s + s / 4.0
}

pub fn same_bits<T: Element>(a: T, b: T) -> bool {
    // Every element type converts to f32 exactly, NaN payloads aside (never here).
    a.to_f32().to_bits() == b.to_f32().to_bits()
}

/// Buffer length for a view needing `needed` elements (`None`: more than usize): exact
/// mostly, sometimes longer, sometimes (unless `clean`) one to three short; a view beyond
/// `CAP` gets a short buffer.
pub fn buffer_len(rng: &mut FuzzRng, needed: Option<u128>, clean: bool) -> usize {
    match needed {
        Some(n) if n <= CAP as u128 => {
            let n = n as usize;
            match rng.random_range(0..if clean { 17 } else { 20 }) {
                0..=13 => n,
                14..=16 => n + rng.random_range(1..=5),
                _ => n.saturating_sub(rng.random_range(1..=3)),
            }
        }
        _ => rng.random_range(0..=64),
    }
}

/// The exact product of sizes, `None` beyond u128.
pub fn product(xs: &[usize]) -> Option<u128> {
    xs.iter().try_fold(1u128, |p, &x| p.checked_mul(x as u128))
}

/// ‖out − ref‖ / max(‖ref‖, floor·√n): relative, with an absolute floor for outputs that
/// are small by cancellation.
pub fn rel_err(pairs: &[(f64, f64)], floor: f64) -> f64 {
    let (mut num, mut den) = (0f64, 0f64);
    for &(o, r) in pairs {
        num += (o - r) * (o - r);
        den += r * r;
    }
    num.sqrt()
        / den
            .sqrt()
            .max(floor * (pairs.len() as f64).sqrt())
            .max(1e-30)
}

pub fn act_f64(act: Activation, x: f64) -> f64 {
    match act {
        Activation::None => x,
        Activation::Relu => x.max(0.0),
        Activation::GeluTanh => {
            let c = (2.0 / std::f64::consts::PI).sqrt();
            0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh())
        }
        Activation::Silu => x / (1.0 + (-x).exp()),
    }
}

pub fn tol2(a: Ty, b: Ty) -> f64 {
    tolerance(a).max(tolerance(b))
}
