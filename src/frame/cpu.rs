//! What the host CPU can do: the per-pixel loops (labeling, thresholds) have a build for the
//! x86-64-v3 instruction set (AVX2, BMI, popcnt, lzcnt) chosen at run time, beside the x86-64
//! baseline build.

/// Whether the CPU has the x86-64-v3 features the fast builds use (detected once).
#[cfg(target_arch = "x86_64")]
pub fn has_v3() -> bool {
    use std::sync::OnceLock;
    static V3: OnceLock<bool> = OnceLock::new();
    *V3.get_or_init(|| {
        is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("bmi1")
            && is_x86_feature_detected!("bmi2")
            && is_x86_feature_detected!("popcnt")
            && is_x86_feature_detected!("lzcnt")
    })
}
