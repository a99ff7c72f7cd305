//! Sub-pixel centroids and shape sums against the host's sums over the oracle's labels.

use super::cases::{weighted_input, Case};
use super::labels::check_stats_only;
use crate::ccl::stats::ComponentStats;
use crate::ccl::subpixel::GreyWeights;
use crate::ccl::{keep_all, CentroidRows, Keep, LabelRequest, Labeler, Mask, ShapeRows, Want};
use crate::frame::image::{BinaryImage, GrayImage, PackedBinary};
use crate::threshold::levels::ThresholdLevels;

/// What a flavour (0, 1, …) picks for the weighted checks: the grey frame of `weighted_input`,
/// every component or the odd labels only (as the pipeline's filter would), and the mask as
/// bytes or bit-packed.
struct Flavoured<'a> {
    image: &'a BinaryImage,
    grey: GrayImage,
    levels: ThresholdLevels,
    invert: bool,
    /// Every other pair of flavours keeps only the odd labels.
    odd: bool,
    /// Odd flavours hand the mask bit-packed.
    packed: Option<PackedBinary>,
}

impl<'a> Flavoured<'a> {
    fn new(image: &'a BinaryImage, flavour: usize) -> Flavoured<'a> {
        let (grey, levels, invert) = weighted_input(image, flavour);
        Flavoured {
            image,
            grey,
            levels,
            invert,
            odd: flavour % 4 >= 2,
            packed: (flavour % 2 == 1).then(|| image.pack()),
        }
    }

    fn weights(&self) -> GreyWeights<'_> {
        GreyWeights {
            grey: &self.grey,
            levels: &self.levels,
            invert: self.invert,
        }
    }

    fn keep(&self) -> Keep<'static> {
        if self.odd {
            &odd_label
        } else {
            &keep_all
        }
    }

    fn mask(&self) -> Mask<'_> {
        match &self.packed {
            Some(p) => Mask::Packed(p),
            None => Mask::Bytes(self.image),
        }
    }
}

fn odd_label(s: &ComponentStats) -> bool {
    s.label % 2 == 1
}

/// Checks `label_shapes` against the shape sums over the oracle's labels, pixel by pixel over
/// the whole image (exact integers): with and without sub-pixel weights, every component or
/// the odd labels only, bytes or bit-packed (`flavour` picks, as in `check_weighted`).
pub fn check_shapes(labeler: &mut dyn Labeler, case: &Case<'_>, flavour: usize) -> Vec<String> {
    let input = Flavoured::new(case.image, flavour);
    let keep = input.keep();
    let with_weights = flavour % 3 == 0;
    let what = format!(
        "shape descriptors (flavour {}{}{})",
        flavour % 6,
        if input.odd { ", odd labels" } else { "" },
        if with_weights { ", with sub-pixel" } else { "" }
    );
    let reference =
        crate::ccl::descriptors::shape_sums_by_scan(case.labels, case.stats.len() as u32);
    let expected: Vec<_> = case
        .stats
        .iter()
        .zip(&reference)
        .filter(|(s, _)| keep(s))
        .map(|(_, r)| *r)
        .collect();
    let weights = input.weights();
    let rows = ShapeRows {
        keep,
        weights: with_weights.then_some(&weights),
    };
    let request = LabelRequest::new(input.mask(), case.connectivity, Want::Stats);
    let (out, centroids, sums) = match labeler.label_shapes(request, rows) {
        Err(e) => return vec![format!("{what}: error: {e}")],
        Ok(result) => result,
    };
    let mut failures = check_stats_only(&what, &out, case.stats);
    if with_weights != centroids.is_some() {
        failures.push(format!(
            "{what}: sub-pixel centroids {} though {} asked for",
            if centroids.is_some() {
                "returned"
            } else {
                "missing"
            },
            if with_weights {
                "they were"
            } else {
                "none were"
            }
        ));
    }
    if sums.len() != expected.len() {
        failures.push(format!(
            "{what}: {} rows for {} components",
            sums.len(),
            expected.len()
        ));
    } else if let Some((got, want)) = sums.iter().zip(&expected).find(|(g, e)| g != e) {
        failures.push(format!(
            "{what}: component {}: {got:?}, expected {want:?}",
            want.label
        ));
    }
    failures
}

/// Checks `label_weighted` against the CPU weighted centroids over the oracle's labels (exact
/// integer sums), with the mask as bytes or bit-packed (`flavour` picks; see `weighted_input`).
pub fn check_weighted(labeler: &mut dyn Labeler, case: &Case<'_>, flavour: usize) -> Vec<String> {
    let input = Flavoured::new(case.image, flavour);
    let (weights, keep) = (input.weights(), input.keep());
    let what = format!(
        "sub-pixel (flavour {}{})",
        flavour % 6,
        if input.odd { ", odd labels" } else { "" }
    );
    let expected = match weights.centroids(case.labels, case.stats, keep) {
        Ok(e) => e,
        Err(e) => return vec![format!("{what}: the CPU reference failed: {e}")],
    };
    let request = LabelRequest::new(input.mask(), case.connectivity, Want::Stats);
    let rows = CentroidRows {
        weights: &weights,
        keep,
    };
    let (out, centroids) = match labeler.label_weighted(request, rows) {
        Err(e) => return vec![format!("{what}: error: {e}")],
        Ok(result) => result,
    };
    let mut failures = check_stats_only(&what, &out, case.stats);
    if centroids.len() != expected.len() {
        failures.push(format!(
            "{what}: {} centroids for {} components",
            centroids.len(),
            expected.len()
        ));
    } else if let Some((got, want)) = centroids.iter().zip(&expected).find(|(g, e)| {
        (g.label, g.weight, g.sum_wx, g.sum_wy) != (e.label, e.weight, e.sum_wx, e.sum_wy)
    }) {
        failures.push(format!(
            "{what}: component {}: sums (w, wx, wy) = ({}, {}, {}), expected ({}, {}, {})",
            want.label, got.weight, got.sum_wx, got.sum_wy, want.weight, want.sum_wx, want.sum_wy
        ));
    }
    failures
}
