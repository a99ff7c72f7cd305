//! Rows a labeler drops itself against the oracle's rows filtered on the host.

use super::cases::{weighted_input, Case};
use crate::ccl::row_filter::aspect;
use crate::ccl::stats::{compare, ComponentStats};
use crate::ccl::subpixel::{GreyWeights, SubpixelCentroid};
use crate::ccl::{CentroidRows, LabelRequest, Labeler, Labeling, Mask, RowFilter, Want};

/// The filters `check_row_filter` tries on an image: one with an area range and an aspect
/// limit exactly at the aspect of one of its components (the edge value), and by `flavour`
/// one that keeps single pixels or one that keeps nothing.
pub fn row_filters(oracle_stats: &[ComponentStats], flavour: usize) -> Vec<RowFilter> {
    let mut areas: Vec<u64> = oracle_stats.iter().map(|s| s.area).collect();
    areas.sort_unstable();
    let median = areas.get(areas.len() / 2).copied().unwrap_or(1);
    let edge = oracle_stats
        .get(oracle_stats.len() / 3)
        .map_or(2.0, |s| aspect(s.width, s.height));
    let second = if flavour % 2 == 0 {
        RowFilter {
            max_area: Some(1),
            ..RowFilter::default()
        }
    } else {
        RowFilter {
            min_area: Some(u64::MAX),
            ..RowFilter::default()
        }
    };
    vec![
        RowFilter {
            min_area: Some(median),
            max_area: areas.last().copied(),
            max_aspect: Some(edge),
        },
        second,
    ]
}

/// The rows a labeler drops itself (`Labeler::set_row_filter`) against the oracle's rows
/// filtered on the host: statistics-only runs of the byte and the bit-packed mask (graphs off
/// and on where the labeler has them) and sub-pixel runs must bring the kept rows exactly, each
/// with its own label, and the full count; a run with a label image brings every row. A
/// labeler that says it filters must do so on every statistics-only run. The filter is cleared
/// afterwards.
pub fn check_row_filter(labeler: &mut dyn Labeler, case: &Case<'_>, flavour: usize) -> Vec<String> {
    let mut failures = Vec::new();
    let packed = case.image.pack();
    let graphs_were = labeler.set_cuda_graphs(false);
    let graph_modes: &[bool] = if graphs_were.is_some() {
        &[false, true]
    } else {
        &[false]
    };
    let (grey, levels, invert) = weighted_input(case.image, flavour);
    let weights = GreyWeights {
        grey: &grey,
        levels: &levels,
        invert,
    };
    for filter in row_filters(case.stats, flavour) {
        let rows = FilteredRows {
            filter,
            claims: labeler.set_row_filter(filter),
            all: case.stats,
            kept: case
                .stats
                .iter()
                .filter(|s| filter.accepts(s))
                .copied()
                .collect(),
        };
        for &graphs in graph_modes {
            labeler.set_cuda_graphs(graphs);
            for (form, is_packed) in [("bytes", false), ("packed", true)] {
                let what = format!("row filter {filter:?}, Stats, {form}, graphs {graphs}");
                let mask = if is_packed {
                    Mask::Packed(&packed)
                } else {
                    Mask::Bytes(case.image)
                };
                let out =
                    labeler.label_mask(LabelRequest::new(mask, case.connectivity, Want::Stats));
                match out {
                    Ok(out) => failures.extend(rows.check(&what, &out, true)),
                    Err(e) => failures.push(format!("{what}: error: {e}")),
                }
            }
        }
        labeler.set_cuda_graphs(false);
        let what = format!("row filter {filter:?}, Both");
        match labeler.label(case.image, case.connectivity, Want::Both) {
            Ok(out) => failures.extend(rows.check(&what, &out, false)),
            Err(e) => failures.push(format!("{what}: error: {e}")),
        }
        failures.extend(check_subpixel(labeler, case, &weights, &rows));
    }
    labeler.set_row_filter(RowFilter::default());
    if let Some(was) = graphs_were {
        labeler.set_cuda_graphs(was);
    }
    failures
}

/// The rows a run under `filter` must bring: the kept ones where it filtered, else all.
struct FilteredRows<'a> {
    filter: RowFilter,
    /// Whether the labeler said it filters (`set_row_filter`).
    claims: bool,
    all: &'a [ComponentStats],
    kept: Vec<ComponentStats>,
}

impl FilteredRows<'_> {
    /// The count, and the rows: those the filter keeps when the run says it filtered (only a
    /// statistics-only run may), all of them otherwise (not for a labeler that claims to filter
    /// on a statistics-only run).
    fn check(&self, what: &str, out: &Labeling, stats_only: bool) -> Option<String> {
        let filter = self.filter;
        if out.count as usize != self.all.len() {
            return Some(format!(
                "{what}: count {} vs oracle {}",
                out.count,
                self.all.len()
            ));
        }
        let expected = match out.filtered {
            Some(f) if f != filter => {
                return Some(format!("{what}: filtered with {f:?}, not {filter:?}"))
            }
            Some(_) if !stats_only => {
                return Some(format!("{what}: filtered a run with a label image"))
            }
            Some(_) => &self.kept[..],
            None if self.claims && stats_only => {
                return Some(format!("{what}: the labeler did not filter the rows"))
            }
            None => self.all,
        };
        match &out.stats {
            Some(s) => compare(expected, s)
                .err()
                .map(|e| format!("{what}: stats: {e}")),
            None => Some(format!("{what}: no statistics returned")),
        }
    }
}

/// Sub-pixel centroids of the kept rows: found by the labels the rows carry.
fn check_subpixel(
    labeler: &mut dyn Labeler,
    case: &Case<'_>,
    weights: &GreyWeights<'_>,
    rows: &FilteredRows<'_>,
) -> Vec<String> {
    let filter = rows.filter;
    let accepts = |s: &ComponentStats| filter.accepts(s);
    let what = format!("row filter {filter:?}, sub-pixel");
    let expected = weights.centroids(case.labels, rows.all, &accepts);
    let request = LabelRequest::new(Mask::Bytes(case.image), case.connectivity, Want::Stats);
    let centroid_rows = CentroidRows {
        weights,
        keep: &accepts,
    };
    let out = labeler.label_weighted(request, centroid_rows);
    match (out, expected) {
        (Ok((out, centroids)), Ok(expected)) => {
            // Sub-pixel runs may bring every row (no claim for them).
            let all_rows = out.filtered.is_none();
            let mut failures: Vec<String> =
                rows.check(&what, &out, !all_rows).into_iter().collect();
            let sums = |c: &SubpixelCentroid| (c.label, c.weight, c.sum_wx, c.sum_wy);
            if !centroids.iter().map(sums).eq(expected.iter().map(sums)) {
                failures.push(format!(
                    "{what}: {} centroids differ from the {} expected",
                    centroids.len(),
                    expected.len()
                ));
            }
            failures
        }
        (Err(e), _) => vec![format!("{what}: error: {e}")],
        (_, Err(e)) => vec![format!("{what}: the CPU reference failed: {e}")],
    }
}
