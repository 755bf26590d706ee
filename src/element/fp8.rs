//! The 8-bit floats of NVIDIA's FP8 (OCP FP8): [`F8E4M3`] and [`F8E5M2`].
//!
//! | type | exponent (bias) | mantissa | largest finite | smallest subnormal | inf | NaN |
//! |---|---|---|---|---|---|---|
//! | `F8E4M3` (OCP e4m3fn) | 4 bits (7) | 3 bits | ±448 | 2⁻⁹ | none | `0x7f`, `0xff` |
//! | `F8E5M2` | 5 bits (15) | 2 bits | ±57344 | 2⁻¹⁶ | `0x7c`, `0xfc` | `0x7d..=0x7f` (and negative) |
//!
//! `to_f32` is exact. `from_f32` rounds to the nearest value, ties to the even encoding,
//! and **saturates**: a finite value beyond the largest finite one (that would round past
//! it) becomes ± the largest finite value, as CUDA's `__NV_SATFINITE` conversions do, so a
//! quantized finite value is always finite. Infinity: E4M3 has none, so `±inf` saturates to
//! `±448`; E5M2 has it, so `±inf` stays `±inf` (an exact value is kept exactly; only
//! finite overflow saturates). NaN stays NaN (sign and, for E5M2, the top two payload bits
//! kept; a payload without them becomes the quiet NaN `0x7e`). Values below half the
//! smallest subnormal round to a zero of their sign. Every one of the 256 encodings
//! therefore round-trips bit for bit through `to_f32` and `from_f32`.

/// The parameters of one FP8 format.
struct Format {
    /// Mantissa bits.
    mbits: u32,
    /// Exponent bias.
    bias: i32,
    /// The largest finite magnitude's encoding (`0x7e` / `0x7b`).
    max_code: u32,
    /// Whether the all-ones exponent encodes infinity (mantissa 0) and NaN (E5M2), or only
    /// the all-ones encoding is NaN (E4M3, no infinity).
    ieee: bool,
}

const E4M3: Format = Format {
    mbits: 3,
    bias: 7,
    max_code: 0x7e,
    ieee: false,
};

const E5M2: Format = Format {
    mbits: 2,
    bias: 15,
    max_code: 0x7b,
    ieee: true,
};

impl Format {
    /// Whether the magnitude code `mag` (7 bits) is NaN.
    const fn is_nan(&self, mag: u32) -> bool {
        if self.ieee {
            mag >> self.mbits == (0x7f >> self.mbits) && mag & ((1 << self.mbits) - 1) != 0
        } else {
            mag == 0x7f
        }
    }

    /// The f32 bits of encoding `code`, exactly.
    const fn decode(&self, code: u8) -> u32 {
        let sign = ((code as u32) & 0x80) << 24;
        let mag = (code as u32) & 0x7f;
        let m = self.mbits;
        let mant = mag & ((1 << m) - 1);
        let exp = mag >> m;
        if self.is_nan(mag) {
            // The payload in the top mantissa bits of a quiet-or-not f32 NaN.
            return sign | 0x7f80_0000 | (mant << (23 - m));
        }
        if self.ieee && mag == (0x7f >> m) << m {
            return sign | 0x7f80_0000;
        }
        if exp == 0 {
            if mant == 0 {
                return sign;
            }
            // Subnormal: mant * 2^(1 - bias - m), normal in f32. p: the leading bit of mant.
            let mut p = 0;
            while mant >> (p + 1) != 0 {
                p += 1;
            }
            let e = 1 - self.bias - m as i32 + p + 127;
            let frac = (mant - (1 << p)) << (23 - p);
            return sign | ((e as u32) << 23) | frac;
        }
        let e = exp as i32 - self.bias + 127;
        sign | ((e as u32) << 23) | (mant << (23 - m))
    }

    /// The 256 encodings as f32 bits.
    const fn table(&self) -> [u32; 256] {
        let mut t = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            t[i] = self.decode(i as u8);
            i += 1;
        }
        t
    }

    /// `v` rounded to the nearest encoding, ties to even, saturating finite overflow (see
    /// the module docs).
    fn encode(&self, v: f32) -> u8 {
        let bits = v.to_bits();
        let sign = ((bits >> 24) & 0x80) as u8;
        let abs = bits & 0x7fff_ffff;
        let m = self.mbits;
        if abs > 0x7f80_0000 {
            if !self.ieee {
                return sign | 0x7f;
            }
            // Keep the payload's top bits where they make a NaN, else the quiet NaN.
            let payload = (abs >> (23 - m)) & ((1 << m) - 1);
            let payload = if payload == 0 { 1 << (m - 1) } else { payload };
            return sign | (0x7c | payload) as u8;
        }
        if abs == 0x7f80_0000 {
            return sign | if self.ieee { 0x7c } else { self.max_code as u8 };
        }
        let e = (abs >> 23) as i32;
        if e == 0 {
            // An f32 subnormal (or zero): below 2^-126, far below half of any FP8 subnormal.
            return sign;
        }
        // The value is full * 2^(e - 127 - 23), full its 24-bit significand.
        let full = (abs & 0x7f_ffff) | 0x80_0000;
        let exp = e - 127;
        let emin = 1 - self.bias;
        // The FP8 binade it lands in (subnormals share emin's spacing).
        let target = if exp > emin { exp } else { emin };
        // Bits of `full` below the FP8 spacing at `target`: at least 23 - m >= 20.
        let shift = (23 - m as i32 + (target - exp)) as u32;
        if shift > 25 {
            // Below half the smallest subnormal (it rounds to zero at shift 24 and 25 too).
            return sign;
        }
        let q = full >> shift;
        let rem = full & ((1 << shift) - 1);
        let half = 1 << (shift - 1);
        let q = if rem > half || (rem == half && q & 1 == 1) {
            q + 1
        } else {
            q
        };
        // q counts FP8 spacings at `target`: a normal significand in [2^m, 2^(m+1)] (the
        // top rounding into the next binade through the carry), a subnormal one below 2^m;
        // one formula encodes both, target + bias >= 1.
        let code = (((target + self.bias) as u32) << m) + q - (1 << m);
        sign | code.min(self.max_code) as u8
    }
}

const E4M3_TABLE: [u32; 256] = E4M3.table();
const E5M2_TABLE: [u32; 256] = E5M2.table();

/// What the products need of an FP8 element type beyond [`Element`](crate::Element): its
/// format's limits and its bits. Implemented by [`F8E4M3`] and [`F8E5M2`] only.
pub trait Fp8: crate::element::Element {
    /// The largest finite value: 448 (E4M3), 57344 (E5M2).
    const MAX: f32;
    /// The smallest positive normal value: 2⁻⁶ (E4M3), 2⁻¹⁴ (E5M2).
    const MIN_POSITIVE: f32;
    /// The smallest positive subnormal value: 2⁻⁹ (E4M3), 2⁻¹⁶ (E5M2).
    const MIN_SUBNORMAL: f32;
    /// Explicit mantissa bits: 3 (E4M3), 2 (E5M2). The spacing of values in the binade of
    /// `x` (normal) is `2^(floor(log2 |x|) - MANTISSA_BITS)`.
    const MANTISSA_BITS: u32;
    /// The value of these bits.
    fn from_bits(bits: u8) -> Self;
    /// The encoding.
    fn to_bits(self) -> u8;
}

macro_rules! fp8_type {
    ($name:ident, $format:ident, $table:ident, $dtype:ident, $doc:literal) => {
        #[doc = $doc]
        ///
        /// `Default` is `+0`. Equality compares encodings (`PartialEq` on the bits: `+0 != -0`,
        /// and a NaN equals itself); compare `to_f32()` for IEEE equality.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        #[repr(transparent)]
        pub struct $name(u8);

        impl $name {
            /// The largest finite value.
            pub const MAX: Self = Self($format.max_code as u8);
            /// The value of these bits.
            pub const fn from_bits(bits: u8) -> Self {
                Self(bits)
            }
            /// The encoding.
            pub const fn to_bits(self) -> u8 {
                self.0
            }
            /// Widens to `f32`, exactly (NaN keeps its sign and payload bits).
            pub fn to_f32(self) -> f32 {
                f32::from_bits($table[self.0 as usize])
            }
            /// Rounds `v` to the nearest value, ties to even, saturating finite overflow
            /// (see the [module docs](crate::element::fp8)).
            pub fn from_f32(v: f32) -> Self {
                Self($format.encode(v))
            }
            /// Whether this is NaN.
            pub fn is_nan(self) -> bool {
                $format.is_nan((self.0 & 0x7f) as u32)
            }
        }

        impl crate::element::sealed::Sealed for $name {}

        impl crate::element::Element for $name {
            const DTYPE: crate::element::DType = crate::element::DType::$dtype;
            fn to_f32(self) -> f32 {
                $name::to_f32(self)
            }
            fn from_f32(v: f32) -> Self {
                $name::from_f32(v)
            }
        }

        impl Fp8 for $name {
            const MAX: f32 = f32::from_bits($table[$format.max_code as usize]);
            const MIN_POSITIVE: f32 = f32::from_bits($table[1 << $format.mbits]);
            const MIN_SUBNORMAL: f32 = f32::from_bits($table[1]);
            const MANTISSA_BITS: u32 = $format.mbits;
            fn from_bits(bits: u8) -> Self {
                Self(bits)
            }
            fn to_bits(self) -> u8 {
                self.0
            }
        }

        impl From<$name> for f32 {
            fn from(v: $name) -> f32 {
                v.to_f32()
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Display::fmt(&self.to_f32(), f)
            }
        }

        // SAFETY: a `#[repr(transparent)]` wrapper of `u8`: one byte, no padding, no
        // pointers, the layout the kernels read (`__nv_fp8_e4m3` / `__nv_fp8_e5m2` are one
        // byte), and every bit pattern (so all zeros, +0) is a valid value.
        #[cfg(feature = "cuda")]
        unsafe impl cudarc::driver::DeviceRepr for $name {}
        // SAFETY: as above: all-zero bits are the valid value +0.
        #[cfg(feature = "cuda")]
        unsafe impl cudarc::driver::ValidAsZeroBits for $name {}
    };
}

fp8_type!(
    F8E4M3,
    E4M3,
    E4M3_TABLE,
    E4M3,
    "OCP FP8 E4M3 (`e4m3fn`): 4 exponent bits (bias 7), 3 mantissa bits, finite to ±448, no \
     infinity, NaN `0x7f`/`0xff`; NVIDIA's `__nv_fp8_e4m3`."
);

fp8_type!(
    F8E5M2,
    E5M2,
    E5M2_TABLE,
    E5M2,
    "OCP FP8 E5M2: 5 exponent bits (bias 15), 2 mantissa bits, finite to ±57344, IEEE-like \
     infinity (`0x7c`/`0xfc`) and NaN; NVIDIA's `__nv_fp8_e5m2`."
);

#[cfg(test)]
mod tests {
    use super::*;

    /// Every finite non-negative value of a format, ascending, with its code.
    fn finite_ascending<Q: Fp8>() -> Vec<(u8, f32)> {
        let mut v: Vec<(u8, f32)> = (0u8..0x80)
            .map(|b| (b, Q::from_bits(b).to_f32()))
            .filter(|(_, x)| x.is_finite())
            .collect();
        v.sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap());
        v
    }

    /// The nearest finite value by exhaustive search (ties to the even code), saturating.
    fn nearest<Q: Fp8>(x: f32) -> u8 {
        let sign = if x.is_sign_negative() { 0x80 } else { 0 };
        let a = x.abs() as f64;
        let mut best = (f64::INFINITY, 0u8);
        for (code, v) in finite_ascending::<Q>() {
            let d = (v as f64 - a).abs();
            if d < best.0 || (d == best.0 && code % 2 == 0) {
                best = (d, code);
            }
        }
        sign | best.1
    }

    fn round_trip_all<Q: Fp8>() {
        for b in 0..=255u8 {
            let x = Q::from_bits(b).to_f32();
            let back = Q::from_f32(x).to_bits();
            assert_eq!(back, b, "{b:#04x} -> {x} -> {back:#04x}");
        }
    }

    #[test]
    fn every_encoding_round_trips() {
        round_trip_all::<F8E4M3>();
        round_trip_all::<F8E5M2>();
    }

    #[test]
    fn decoding_is_exact() {
        // Spot values, written out.
        let e4 = |b| F8E4M3::from_bits(b).to_f32();
        assert_eq!(e4(0x00), 0.0);
        assert!(e4(0x80).is_sign_negative() && e4(0x80) == 0.0);
        assert_eq!(e4(0x01), 2f32.powi(-9));
        assert_eq!(e4(0x07), 7.0 * 2f32.powi(-9));
        assert_eq!(e4(0x08), 2f32.powi(-6));
        assert_eq!(e4(0x38), 1.0);
        assert_eq!(e4(0x7e), 448.0);
        assert_eq!(e4(0xfe), -448.0);
        assert!(e4(0x7f).is_nan() && e4(0xff).is_nan());
        assert_eq!(e4(0x78), 256.0);
        let e5 = |b| F8E5M2::from_bits(b).to_f32();
        assert_eq!(e5(0x01), 2f32.powi(-16));
        assert_eq!(e5(0x03), 3.0 * 2f32.powi(-16));
        assert_eq!(e5(0x04), 2f32.powi(-14));
        assert_eq!(e5(0x3c), 1.0);
        assert_eq!(e5(0x7b), 57344.0);
        assert_eq!(e5(0x7c), f32::INFINITY);
        assert_eq!(e5(0xfc), f32::NEG_INFINITY);
        for b in [0x7d, 0x7e, 0x7f, 0xfd, 0xfe, 0xff] {
            assert!(e5(b).is_nan(), "{b:#x}");
        }
        // The trait's constants agree with the encodings and the formats' definitions.
        assert_eq!(<F8E4M3 as Fp8>::MAX, 448.0);
        assert_eq!(<F8E5M2 as Fp8>::MAX, 57344.0);
        assert_eq!(<F8E4M3 as Fp8>::MIN_SUBNORMAL, 2f32.powi(-9));
        assert_eq!(<F8E5M2 as Fp8>::MIN_POSITIVE, 2f32.powi(-14));
        assert_eq!(F8E4M3::MAX.to_f32(), <F8E4M3 as Fp8>::MAX);
        assert_eq!(F8E5M2::MAX.to_f32(), <F8E5M2 as Fp8>::MAX);
        assert_eq!(e4(0x08), <F8E4M3 as Fp8>::MIN_POSITIVE);
        assert_eq!(e5(0x04), <F8E5M2 as Fp8>::MIN_POSITIVE);
        assert_eq!(e4(0x01), <F8E4M3 as Fp8>::MIN_SUBNORMAL);
        assert_eq!(e5(0x01), <F8E5M2 as Fp8>::MIN_SUBNORMAL);
        // Values ascend with the codes of either sign (the encoding is sign-magnitude).
        for (lo, hi) in [(0x00u8, 0x7eu8), (0x00, 0x7b)] {
            let t: fn(u8) -> f32 = if hi == 0x7e { e4 } else { e5 };
            for b in lo..hi {
                assert!(t(b) < t(b + 1));
                assert_eq!(t(b | 0x80), -t(b));
            }
        }
    }

    /// Every midpoint between neighbours rounds to the even code; a hair either side rounds
    /// to the nearer; the midpoint of zero and the smallest subnormal goes to zero.
    fn ties_to_even<Q: Fp8>() {
        let vals = finite_ascending::<Q>();
        for w in vals.windows(2) {
            let ((c0, v0), (c1, v1)) = (w[0], w[1]);
            // Exact in f32: neighbours differ in at most 4 significant bits.
            let mid = (v0 + v1) / 2.0;
            assert_eq!(mid as f64, (v0 as f64 + v1 as f64) / 2.0);
            let even = if c0 % 2 == 0 { c0 } else { c1 };
            for sign in [1.0f32, -1.0] {
                let s = if sign < 0.0 { 0x80 } else { 0 };
                let x = sign * mid;
                assert_eq!(Q::from_f32(x).to_bits(), s | even, "tie {x}");
                let below = f32::from_bits(mid.to_bits() - 1) * sign;
                let above = f32::from_bits(mid.to_bits() + 1) * sign;
                assert_eq!(Q::from_f32(below).to_bits(), s | c0, "{below}");
                assert_eq!(Q::from_f32(above).to_bits(), s | c1, "{above}");
            }
        }
    }

    #[test]
    fn rounding_ties_to_even() {
        ties_to_even::<F8E4M3>();
        ties_to_even::<F8E5M2>();
    }

    fn saturates<Q: Fp8>(inf_code: u8) {
        let max = Q::MAX;
        let max_code = Q::from_f32(max).to_bits();
        for x in [
            max * 1.0001,
            max * 1.5,
            max * 2.0,
            // The midpoint of max and the next would-be value (a tie RNE sends past max).
            max * (1.0 + 2f32.powi(-(Q::MANTISSA_BITS as i32) - 1)),
            1e30,
            f32::MAX,
            // Just past the midpoint of max and the next would-be value.
            max * (1.0 + 2f32.powi(-(Q::MANTISSA_BITS as i32) - 1)) * 1.001,
        ] {
            assert_eq!(Q::from_f32(x).to_bits(), max_code, "{x}");
            assert_eq!(Q::from_f32(-x).to_bits(), 0x80 | max_code, "{}", -x);
        }
        assert_eq!(Q::from_f32(f32::INFINITY).to_bits(), inf_code);
        assert_eq!(Q::from_f32(f32::NEG_INFINITY).to_bits(), 0x80 | inf_code);
        assert!(Q::from_f32(f32::NAN).to_f32().is_nan());
        assert!(Q::from_f32(-f32::NAN).to_f32().is_nan());
        assert!(Q::from_f32(-f32::NAN).to_f32().is_sign_negative());
        // A NaN whose payload sits only in low f32 bits stays NaN.
        assert!(Q::from_f32(f32::from_bits(0x7f80_0001)).to_f32().is_nan());
    }

    #[test]
    fn saturation() {
        saturates::<F8E4M3>(0x7e);
        saturates::<F8E5M2>(0x7c);
    }

    fn subnormals<Q: Fp8>() {
        let s = Q::MIN_SUBNORMAL;
        assert_eq!(Q::from_f32(s).to_bits(), 0x01);
        assert_eq!(Q::from_f32(s * 0.5).to_bits(), 0x00, "tie to even: zero");
        assert_eq!(Q::from_f32(-s * 0.5).to_bits(), 0x80);
        assert_eq!(Q::from_f32(s * 0.500001).to_bits(), 0x01);
        assert_eq!(Q::from_f32(s * 0.499999).to_bits(), 0x00);
        assert_eq!(Q::from_f32(s * 1.5).to_bits(), 0x02, "tie to even: 2");
        assert_eq!(Q::from_f32(s * 2.5).to_bits(), 0x02, "tie to even: 2");
        assert_eq!(Q::from_f32(s * 0.25).to_bits(), 0x00);
        // f32 subnormals and tiny normals: a zero of their sign.
        for x in [1e-40f32, f32::MIN_POSITIVE, 1e-20] {
            assert_eq!(Q::from_f32(x).to_bits(), 0x00);
            assert_eq!(Q::from_f32(-x).to_bits(), 0x80);
        }
        // The largest subnormal rounds up into the smallest normal from just below it.
        let top_sub = Q::MIN_POSITIVE - s;
        let mid = (top_sub + Q::MIN_POSITIVE) / 2.0;
        let min_normal_code = Q::from_f32(Q::MIN_POSITIVE).to_bits();
        assert_eq!(min_normal_code, 1 << Q::MANTISSA_BITS);
        assert_eq!(
            Q::from_f32(f32::from_bits(mid.to_bits() + 1)).to_bits(),
            min_normal_code
        );
    }

    #[test]
    fn subnormal_rounding() {
        subnormals::<F8E4M3>();
        subnormals::<F8E5M2>();
    }

    /// from_f32 against an exhaustive nearest-value search, on f32s spread over every
    /// binade of the format and beyond (a fixed generator: no dependency).
    fn matches_search<Q: Fp8>() {
        let mut state = 0x1234_5678_9abc_def0u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as u32
        };
        let lo = (Q::MIN_SUBNORMAL / 8.0).log2();
        let hi = (Q::MAX * 4.0).log2();
        for _ in 0..20_000 {
            let u = next() as f32 / (1u64 << 31) as f32;
            let mag = (lo + u * (hi - lo)).exp2();
            let x = if next() % 2 == 0 { mag } else { -mag };
            assert_eq!(Q::from_f32(x).to_bits(), nearest::<Q>(x), "{x}");
        }
    }

    #[test]
    fn rounding_matches_exhaustive_search() {
        matches_search::<F8E4M3>();
        matches_search::<F8E5M2>();
    }

    #[test]
    fn element_impl() {
        use crate::element::{DType, Element};
        assert_eq!(<F8E4M3 as Element>::DTYPE, DType::E4M3);
        assert_eq!(<F8E5M2 as Element>::DTYPE, DType::E5M2);
        assert_eq!(F8E4M3::default().to_bits(), 0);
        assert!(<F8E5M2 as Element>::from_f32(-0.0).is_zero());
        assert!(!<F8E5M2 as Element>::from_f32(f32::NAN).is_zero());
        assert!(F8E4M3::from_bits(0xff).is_nan() && !F8E4M3::from_bits(0x7e).is_nan());
        assert!(F8E5M2::from_bits(0x7d).is_nan() && !F8E5M2::from_bits(0x7c).is_nan());
        assert_eq!(DType::E4M3.to_string(), "e4m3");
        assert_eq!(DType::E5M2.to_string(), "e5m2");
        assert_eq!(std::mem::size_of::<F8E4M3>(), 1);
        assert_eq!(f32::from(F8E5M2::from_f32(1.25)), 1.25);
    }
}
