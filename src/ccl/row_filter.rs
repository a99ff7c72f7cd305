//! The area and aspect limits of the statistics rows, with the one rule every side applies: the
//! pipeline's filter on the host, and the GPU labelers that drop the rejected rows before the
//! download (`Labeler::set_row_filter`).

use crate::ccl::stats::ComponentStats;

/// Limits on a component's area and bounding-box aspect ratio; `None` = no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RowFilter {
    pub min_area: Option<u64>,
    pub max_area: Option<u64>,
    /// Bounding-box aspect ratio, long side / short side (≥ 1).
    pub max_aspect: Option<f64>,
}

/// The limits with "no limit" spelled as the value that passes everything: what the device
/// reads (`struct RowLimits` in kernels/common.cuh, uploaded as `words`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RowLimits {
    pub min_area: u64,
    pub max_area: u64,
    pub max_aspect: f64,
}

impl RowFilter {
    /// Does `c` pass every limit that is set?
    pub fn accepts(&self, c: &ComponentStats) -> bool {
        self.accepts_box(c.area, c.width, c.height)
    }

    /// The rule on a row's area and box size.
    pub fn accepts_box(&self, area: u64, width: u32, height: u32) -> bool {
        self.min_area.is_none_or(|m| area >= m)
            && self.max_area.is_none_or(|m| area <= m)
            && self.max_aspect.is_none_or(|m| aspect(width, height) <= m)
    }

    pub fn is_unlimited(&self) -> bool {
        *self == RowFilter::default()
    }

    /// The limits as the device reads them: 0, `u64::MAX` and +∞ where none is set, which
    /// every row passes (`RowLimits::accepts` decides as `accepts` does).
    pub fn limits(&self) -> RowLimits {
        RowLimits {
            min_area: self.min_area.unwrap_or(0),
            max_area: self.max_area.unwrap_or(u64::MAX),
            max_aspect: self.max_aspect.unwrap_or(f64::INFINITY),
        }
    }
}

impl RowLimits {
    /// The three 8-byte words of `struct RowLimits` (the aspect as its f64 bits).
    pub fn words(&self) -> [u64; 3] {
        [self.min_area, self.max_area, self.max_aspect.to_bits()]
    }

    /// The device's rule (`row_kept` in kernels/common.cuh), step for step: the aspect is the
    /// same f64 division as on the host (IEEE division is correctly rounded on both), so a box
    /// exactly at the limit is decided alike; a product `long ≤ limit · short` would not be.
    pub fn accepts(&self, area: u64, width: u32, height: u32) -> bool {
        area >= self.min_area && area <= self.max_area && aspect(width, height) <= self.max_aspect
    }
}

/// Long side / short side of a `width × height` box, as f64 (a side of 0 counts as 1).
pub fn aspect(width: u32, height: u32) -> f64 {
    let long = width.max(height) as f64;
    let short = width.min(height).max(1) as f64;
    long / short
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_mt::Mt;

    fn row(area: u64, width: u32, height: u32) -> ComponentStats {
        ComponentStats {
            label: 1,
            left: 0,
            top: 0,
            width,
            height,
            area,
            sum_x: 0,
            sum_y: 0,
            centroid_x: 0.0,
            centroid_y: 0.0,
        }
    }

    #[test]
    fn area_limits_are_inclusive() {
        let f = RowFilter {
            min_area: Some(5),
            max_area: Some(9),
            max_aspect: None,
        };
        let kept: Vec<u64> = (0..12).filter(|&a| f.accepts(&row(a, 3, 3))).collect();
        assert_eq!(kept, vec![5, 6, 7, 8, 9]);
        assert!(RowFilter::default().accepts(&row(u64::MAX, u32::MAX, 1)));
    }

    #[test]
    fn an_aspect_exactly_at_the_limit_passes_and_just_above_fails() {
        let at = |m: f64| RowFilter {
            max_aspect: Some(m),
            ..RowFilter::default()
        };
        // Whole ratios, either orientation.
        assert!(at(3.0).accepts(&row(3, 3, 1)));
        assert!(at(3.0).accepts(&row(3, 1, 3)));
        assert!(!at(3.0).accepts(&row(4, 4, 1)));
        // One pixel: aspect 1 passes the smallest limit there is.
        assert!(at(1.0).accepts(&row(1, 1, 1)));
        assert!(!at(1.0).accepts(&row(2, 2, 1)));
        // A ratio that f64 cannot hold: the limit typed as the division passes, the next
        // smaller double does not.
        let third = 10.0 / 3.0;
        assert!(at(third).accepts(&row(10, 10, 3)));
        assert!(!at(f64::from_bits(third.to_bits() - 1)).accepts(&row(10, 10, 3)));
        // Where the product and the division disagree: with the limit 61 / 7, the product
        // limit · 7 rounds below 61, the division is the limit itself. The rule is the
        // division, on both sides.
        let m = 61.0 / 7.0;
        assert!(m * 7.0 < 61.0);
        assert!(at(m).accepts(&row(61, 61, 7)));
        assert!(at(m).accepts(&row(61, 7, 61)));
    }

    /// The device's limits decide as the host's filter, on edge values and on random rows.
    #[test]
    fn the_device_limits_decide_like_the_filter() {
        let mut mt = Mt::new(7);
        let mut side = || mt.next_u32() % 199 + 1;
        let filters = [
            RowFilter::default(),
            RowFilter {
                min_area: Some(0),
                max_area: Some(u64::MAX),
                max_aspect: Some(1.0),
            },
            RowFilter {
                min_area: Some(4),
                max_area: Some(400),
                max_aspect: Some(10.0 / 3.0),
            },
            RowFilter {
                min_area: None,
                max_area: Some(1),
                max_aspect: Some(f64::MAX),
            },
            RowFilter {
                min_area: Some(u64::MAX),
                max_area: None,
                max_aspect: Some(f64::NAN),
            },
        ];
        let mut boxes = vec![
            (1, 1),
            (1, u32::MAX),
            (u32::MAX, 1),
            (10, 3),
            (3, 10),
            (0, 5),
        ];
        for _ in 0..2000 {
            boxes.push((side(), side()));
        }
        let mut mt = Mt::new(8);
        for f in &filters {
            let limits = f.limits();
            for &(w, h) in &boxes {
                for area in [0, 1, 4, 5, 399, 400, 401, u64::MAX, mt.next_u64()] {
                    assert_eq!(
                        limits.accepts(area, w, h),
                        f.accepts_box(area, w, h),
                        "{f:?} on area {area}, {w}×{h}"
                    );
                }
            }
        }
    }
}
