//! The natural logarithm of the size term, in plain IEEE operations (fdlibm's `__ieee754_log`,
//! within 1 ulp of the true value): the GPU tracker (`kernels/track.cu`, `track_ln`) computes it
//! with the same operations in the same order, so both trackers get the same costs bit for bit
//! and give the same IDs. The platform's `ln` may round its last bit otherwise than CUDA's.

// fdlibm's constants, by their bits (kernels/track.cu writes the same bits).
const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);
const TWO54: f64 = f64::from_bits(0x4350_0000_0000_0000);
const LG1: f64 = f64::from_bits(0x3fe5_5555_5555_5593);
const LG2: f64 = f64::from_bits(0x3fd9_9999_9997_fa04);
const LG3: f64 = f64::from_bits(0x3fd2_4924_9422_9359);
const LG4: f64 = f64::from_bits(0x3fcc_71c5_1d8e_78af);
const LG5: f64 = f64::from_bits(0x3fc7_4664_96cb_03de);
const LG6: f64 = f64::from_bits(0x3fc3_9a09_d078_c69f);
const LG7: f64 = f64::from_bits(0x3fc2_f112_df3e_5244);
const THIRD: f64 = f64::from_bits(0x3fd5_5555_5555_5555);

/// ln(x) for x > 0 finite; NaN for x < 0 or NaN, −∞ for ±0, +∞ for +∞.
pub(crate) fn ln(x: f64) -> f64 {
    let mut x = x;
    let mut hx = (x.to_bits() >> 32) as i32;
    let lx = x.to_bits() as u32;
    let mut k: i32 = 0;
    if hx < 0x0010_0000 {
        if ((hx & 0x7fff_ffff) as u32 | lx) == 0 {
            return f64::NEG_INFINITY;
        }
        if hx < 0 {
            return f64::NAN;
        }
        // Subnormal: scale up.
        k -= 54;
        x *= TWO54;
        hx = (x.to_bits() >> 32) as i32;
    }
    if hx >= 0x7ff0_0000 {
        return x + x;
    }
    k += (hx >> 20) - 1023;
    hx &= 0x000f_ffff;
    let i = (hx + 0x95f64) & 0x0010_0000;
    // x or x/2 into [√2/2, √2).
    let high = (hx | (i ^ 0x3ff0_0000)) as u32 as u64;
    x = f64::from_bits((high << 32) | (x.to_bits() & 0xffff_ffff));
    k += i >> 20;
    let f = x - 1.0;
    let dk = k as f64;
    if (0x000f_ffff & (2 + hx)) < 3 {
        // |f| < 2^-20.
        if f == 0.0 {
            return if k == 0 {
                0.0
            } else {
                dk * LN2_HI + dk * LN2_LO
            };
        }
        let r = f * f * (0.5 - THIRD * f);
        return if k == 0 {
            f - r
        } else {
            dk * LN2_HI - ((r - dk * LN2_LO) - f)
        };
    }
    let s = f / (2.0 + f);
    let z = s * s;
    let w = z * z;
    let i = (hx - 0x6147a) | (0x6b851 - hx);
    let t1 = w * (LG2 + w * (LG4 + w * LG6));
    let t2 = z * (LG1 + w * (LG3 + w * (LG5 + w * LG7)));
    let r = t2 + t1;
    if i > 0 {
        let hfsq = 0.5 * f * f;
        if k == 0 {
            f - (hfsq - s * (hfsq + r))
        } else {
            dk * LN2_HI - ((hfsq - (s * (hfsq + r) + dk * LN2_LO)) - f)
        }
    } else if k == 0 {
        f - s * (f - r)
    } else {
        dk * LN2_HI - ((s * (f - r) - dk * LN2_LO) - f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_mt::Mt64;

    fn ulps(a: f64, b: f64) -> u64 {
        (a.to_bits() as i64).abs_diff(b.to_bits() as i64)
    }

    /// Within 1 ulp of the platform's logarithm over the areas and smoothed areas the tracker
    /// meets and far beyond; exact where the value is exact.
    #[test]
    fn ln_is_within_one_ulp_of_the_platforms() {
        let mut rng = Mt64::new(3);
        let mut worst = 0;
        for k in 0..200_000u64 {
            let x = match k % 4 {
                0 => (k / 4 + 1) as f64,
                1 => f64::from_bits(rng.next_u64() >> 2) * 1e-3 + 1e-300,
                2 => 0.5 + (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64,
                _ => f64::from_bits(0x0010_0000_0000_0000 + (rng.next_u64() >> 12)),
            };
            if !(x.is_finite() && x > 0.0) {
                continue;
            }
            worst = worst.max(ulps(ln(x), x.ln()));
        }
        assert!(worst <= 1, "worst difference {worst} ulp");
        assert_eq!(ln(1.0), 0.0);
        assert_eq!(ln(0.0), f64::NEG_INFINITY);
        assert!(ln(-1.0).is_nan() && ln(f64::NAN).is_nan());
        assert_eq!(ln(f64::INFINITY), f64::INFINITY);
        assert!(ulps(ln(5e-324), (5e-324f64).ln()) <= 1);
    }
}
