use super::row_filter::row_filters;
use super::*;
use crate::ccl::cpu::oracle::{flood_fill, Oracle};
use crate::ccl::shapes::random_images;
use crate::ccl::stats::ComponentStats;
use crate::ccl::{
    CentroidRows, LabelRequest, Labeling, Mask, RowFilter, ShapeRows, Submission, Want,
    CUDA_GRAPH_STEP,
};
use crate::frame::image::BinaryImage;

/// Wraps the oracle and breaks one thing about its output.
enum Fault {
    None,
    /// Numbers components in reverse order (same partition, wrong numbering).
    ReverseNumbering,
    /// Reports the count of the previous image (the stale-state bug selftest must catch).
    StaleCount,
    /// Merges components 1 and 2.
    MergeFirstTwo,
    /// Adds one to the weight of the first sub-pixel centroid.
    HeavierFirstCentroid,
    /// Adds a diagonal pixel pair to the first component's shape sums.
    ShorterFirstPerimeter,
}

struct Faulty {
    fault: Fault,
    last_count: u32,
}

impl Labeler for Faulty {
    fn name(&self) -> &'static str {
        "faulty"
    }
    fn label_mask(&mut self, request: LabelRequest<Mask<'_>>) -> crate::error::Result<Labeling> {
        let mut out = Oracle.label_mask(request)?;
        let n = out.count;
        match self.fault {
            Fault::None | Fault::HeavierFirstCentroid | Fault::ShorterFirstPerimeter => {}
            Fault::ReverseNumbering => {
                if let Some(l) = out.labels.as_mut() {
                    l.data
                        .iter_mut()
                        .filter(|v| **v != 0)
                        .for_each(|v| *v = n + 1 - *v);
                }
            }
            Fault::StaleCount => out.count = self.last_count,
            Fault::MergeFirstTwo => {
                if let Some(l) = out.labels.as_mut() {
                    l.data.iter_mut().filter(|v| **v == 2).for_each(|v| *v = 1);
                }
            }
        }
        self.last_count = n;
        Ok(out)
    }

    fn label_weighted(
        &mut self,
        request: LabelRequest<Mask<'_>>,
        rows: CentroidRows<'_>,
    ) -> crate::error::Result<(Labeling, Vec<crate::ccl::subpixel::SubpixelCentroid>)> {
        let want = request.want;
        let out = Oracle.label_mask(request.wanting(Want::Both))?;
        let mut centroids = rows.weights.centroids(
            out.labels.as_ref().unwrap(),
            out.stats.as_ref().unwrap(),
            rows.keep,
        )?;
        if let (Fault::HeavierFirstCentroid, Some(first)) = (&self.fault, centroids.first_mut()) {
            first.weight += 1;
        }
        let out = Labeling {
            labels: out.labels.filter(|_| want.labels()),
            ..out
        };
        Ok((out, centroids))
    }

    fn label_shapes(
        &mut self,
        request: LabelRequest<Mask<'_>>,
        rows: ShapeRows<'_>,
    ) -> crate::error::Result<crate::ccl::ShapeLabeling> {
        let (out, centroids, mut sums) = crate::ccl::label_shapes_on_host(self, request, rows)?;
        if let (Fault::ShorterFirstPerimeter, Some(first)) = (&self.fault, sums.first_mut()) {
            first.pairs_diagonal += 1;
        }
        Ok((out, centroids, sums))
    }
}

fn run_faulty(fault: Fault, image: &BinaryImage) -> Vec<String> {
    let (labels, stats) = oracle_of(image, Connectivity::Four);
    let case = Case {
        image,
        connectivity: Connectivity::Four,
        labels: &labels,
        stats: &stats,
    };
    let mut l = Faulty {
        fault,
        last_count: 0,
    };
    let mut failures = check_one(&mut l, image, Connectivity::Four, &labels, &stats);
    for flavour in 0..6 {
        failures.extend(check_weighted(&mut l, &case, flavour));
        failures.extend(check_shapes(&mut l, &case, flavour));
    }
    failures
}

#[test]
fn check_one_accepts_the_oracle_and_catches_each_fault() {
    let image = BinaryImage::from_fn(9, 7, |x, y| (x * 3 + y * 5) % 7 < 3).unwrap();
    assert!(run_faulty(Fault::None, &image).is_empty());
    let f = run_faulty(Fault::ReverseNumbering, &image);
    assert!(f.iter().any(|m| m.contains("raster order")), "{f:?}");
    let f = run_faulty(Fault::StaleCount, &image);
    assert!(f.iter().any(|m| m.contains("count")), "{f:?}");
    let f = run_faulty(Fault::MergeFirstTwo, &image);
    assert!(f.iter().any(|m| m.contains("labels:")), "{f:?}");
    let f = run_faulty(Fault::HeavierFirstCentroid, &image);
    assert_eq!(f.len(), 6, "{f:?}");
    assert!(f.iter().all(|m| m.starts_with("sub-pixel")), "{f:?}");
    let f = run_faulty(Fault::ShorterFirstPerimeter, &image);
    assert_eq!(f.len(), 6, "{f:?}");
    assert!(
        f.iter().all(|m| m.starts_with("shape descriptors")),
        "{f:?}"
    );
}

/// The oracle behind a graph switch: with graphs on it reports the graph step, unless it
/// falls back to plain steps, or it drops the last row.
struct GraphLabeler {
    graphs: bool,
    quiet_fallback: bool,
    drops_a_row: bool,
}

impl Labeler for GraphLabeler {
    fn name(&self) -> &'static str {
        "graphs"
    }
    fn set_cuda_graphs(&mut self, on: bool) -> Option<bool> {
        Some(std::mem::replace(&mut self.graphs, on))
    }
    fn label_mask(&mut self, request: LabelRequest<Mask<'_>>) -> crate::error::Result<Labeling> {
        let mut out = Oracle.label_mask(request)?;
        let step = if self.graphs && !self.quiet_fallback {
            CUDA_GRAPH_STEP
        } else {
            "label"
        };
        out.timings = vec![crate::ccl::StepTime::new(step, 0.1)];
        if self.graphs && self.drops_a_row {
            out.stats.as_mut().unwrap().pop();
        }
        Ok(out)
    }
}

/// The oracle that drops the rows of its row filter on statistics-only runs, as the GPU
/// labelers do, or gets it wrong in one way.
struct RowFiltering {
    filter: RowFilter,
    fault: Option<RowFault>,
}

#[derive(Clone, Copy, PartialEq)]
enum RowFault {
    /// Says it filters, never does.
    Ignores,
    /// Numbers the kept rows 1..=kept instead of keeping their labels.
    Renumbers,
    /// Reports the kept rows as the count.
    CountsKept,
}

impl Labeler for RowFiltering {
    fn name(&self) -> &'static str {
        "row filtering oracle"
    }
    fn set_row_filter(&mut self, filter: RowFilter) -> bool {
        self.filter = filter;
        true
    }
    fn label_mask(&mut self, request: LabelRequest<Mask<'_>>) -> crate::error::Result<Labeling> {
        let mut out = Oracle.label_mask(request)?;
        if request.want != Want::Stats || self.filter.is_unlimited() {
            return Ok(out);
        }
        if self.fault == Some(RowFault::Ignores) {
            return Ok(out);
        }
        let rows = out.stats.as_mut().expect("statistics asked");
        rows.retain(|s| self.filter.accepts(s));
        if self.fault == Some(RowFault::Renumbers) {
            for (i, row) in rows.iter_mut().enumerate() {
                row.label = i as u32 + 1;
            }
        }
        if self.fault == Some(RowFault::CountsKept) {
            out.count = rows.len() as u32;
        }
        out.filtered = Some(self.filter);
        Ok(out)
    }
}

#[test]
fn check_row_filter_accepts_filtered_rows_and_catches_each_fault() {
    let image = random_images(64, 48, &[1, 2], 0.25, 3)
        .into_iter()
        .map(|s| s.image)
        .max_by_key(|i| flood_fill(i, Connectivity::Four).1.len())
        .expect("random images");
    let (labels, stats) = oracle_of(&image, Connectivity::Four);
    assert!(stats.len() > 20, "{} components", stats.len());
    let case = Case {
        image: &image,
        connectivity: Connectivity::Four,
        labels: &labels,
        stats: &stats,
    };
    let run = |fault: Option<RowFault>| {
        let mut l = RowFiltering {
            filter: RowFilter::default(),
            fault,
        };
        let mut failures = Vec::new();
        for flavour in 0..2 {
            failures.extend(check_row_filter(&mut l, &case, flavour));
        }
        assert!(l.filter.is_unlimited(), "the filter is cleared afterwards");
        failures
    };
    assert!(run(None).is_empty(), "{:?}", run(None));
    for (fault, says) in [
        (RowFault::Ignores, "did not filter"),
        (RowFault::Renumbers, "stats: component"),
        (RowFault::CountsKept, "count"),
    ] {
        let failures = run(Some(fault));
        assert!(
            failures.iter().any(|f| f.contains(says)),
            "{says}: {failures:?}"
        );
    }
    // The edge filter keeps some rows and rejects others here.
    let edge = row_filters(&stats, 0)[0];
    let kept = stats.iter().filter(|s| edge.accepts(s)).count();
    assert!(kept > 0 && kept < stats.len(), "{kept} of {}", stats.len());
}

/// A small image of a few components, and its statistics at 4-connectivity.
fn small_image_and_stats() -> (BinaryImage, Vec<ComponentStats>) {
    let image = BinaryImage::from_fn(9, 7, |x, y| (x * 3 + y * 5) % 7 < 3).unwrap();
    let (_, moments) = flood_fill(&image, Connectivity::Four);
    let stats = moments
        .iter()
        .enumerate()
        .map(|(i, m)| m.to_stats(i as u32 + 1))
        .collect();
    (image, stats)
}

/// The oracle keeping two frames in flight; with `shared`, every instance hands back the
/// last frame submitted to any of them (results crossed between frames).
struct InFlightOracle {
    result: std::sync::Arc<std::sync::Mutex<Option<crate::ccl::Completed>>>,
    shared: bool,
}

impl Labeler for InFlightOracle {
    fn name(&self) -> &'static str {
        "in flight"
    }
    fn label_mask(&mut self, request: LabelRequest<Mask<'_>>) -> crate::error::Result<Labeling> {
        Oracle.label_mask(request)
    }
    fn submit(&mut self, request: LabelRequest<Submission<'_>>) -> crate::error::Result<bool> {
        let above = |g: &crate::threshold::GreyInput<'_>| {
            BinaryImage::from_fn(g.grey.width, g.grey.height, |x, y| {
                g.grey.data[(y * g.grey.width + x) as usize] > 127
            })
        };
        let result = match request.input {
            Submission::Mask(mask) => {
                let mask = mask.bytes().into_owned();
                (
                    Oracle.label(&mask, request.connectivity, request.want)?,
                    None,
                )
            }
            Submission::Grey(g) => {
                let mask = above(&g)?;
                (
                    Oracle.label(&mask, request.connectivity, request.want)?,
                    None,
                )
            }
            Submission::WeightedGrey(g) => {
                let both = Oracle.label(&above(&g)?, request.connectivity, Want::Both)?;
                let (labels, stats) = (both.labels.unwrap(), both.stats.clone().unwrap());
                let levels = crate::threshold::levels::ThresholdLevels::Global(127);
                let centroids = crate::ccl::subpixel::weighted_centroids(
                    g.grey, &labels, &stats, &levels, false,
                )?;
                let labeling = Labeling {
                    labels: None,
                    ..both
                };
                (labeling, Some(centroids))
            }
        };
        *self.result.lock().unwrap() = Some(result);
        Ok(true)
    }
    fn complete(
        &mut self,
        _keep: crate::ccl::Keep<'_>,
    ) -> crate::error::Result<crate::ccl::Completed> {
        Ok(self.result.lock().unwrap().take().unwrap_or_default())
    }
    fn frames_in_flight(&self) -> usize {
        2
    }
    fn twin(&self) -> crate::error::Result<Box<dyn Labeler>> {
        let result = if self.shared {
            self.result.clone()
        } else {
            Default::default()
        };
        Ok(Box::new(InFlightOracle {
            result,
            shared: self.shared,
        }))
    }
}

#[test]
fn check_in_flight_catches_results_handed_to_the_wrong_frame() {
    let (image, stats) = small_image_and_stats();
    let check = |shared| {
        let l = InFlightOracle {
            result: Default::default(),
            shared,
        };
        check_in_flight(&l, &image, Connectivity::Four, &stats)
    };
    assert_eq!(check(false), Vec::<String>::new());
    let f = check(true);
    // Every round and graph setting: the first frame got the second's (empty) result.
    assert!(f.len() >= 6, "{f:?}");
    assert!(f.iter().all(|m| m.starts_with("in flight")), "{f:?}");
    assert!(f.iter().any(|m| m.contains("count 0 vs oracle")), "{f:?}");
    // A labeler that keeps one frame at a time is not checked.
    assert!(check_in_flight(&Oracle, &image, Connectivity::Four, &stats).is_empty());
}

#[test]
fn check_graphs_compares_both_paths_and_restores_the_switch() {
    let (image, stats) = small_image_and_stats();
    let check = |quiet_fallback, drops_a_row| {
        let mut l = GraphLabeler {
            graphs: true,
            quiet_fallback,
            drops_a_row,
        };
        let f = check_graphs(&mut l, &image, Connectivity::Four, &stats, None);
        assert!(l.graphs, "the switch is left as it was");
        f
    };
    assert!(check(false, false).is_empty());
    let f = check(true, false);
    // Bytes and packed, capture and replay.
    assert_eq!(
        f.iter()
            .filter(|m| m.contains("ran without its CUDA graph"))
            .count(),
        4,
        "{f:?}"
    );
    let f = check(false, true);
    assert!(f.iter().all(|m| m.contains("graph")), "{f:?}");
    assert!(f.iter().any(|m| m.contains("stats:")), "{f:?}");
    // A labeler without graphs is not checked.
    let mut oracle = Oracle;
    assert!(check_graphs(&mut oracle, &image, Connectivity::Four, &stats, None).is_empty());
}

#[test]
fn quick_cpu_selftest_passes_and_names_unknown_algorithms() {
    let opts = SelftestOptions {
        quick: true,
        algorithms: vec!["lsl".into(), "nope".into()],
        only: None,
        verbose: false,
    };
    let report = run(&Backends::cpu_only(), &opts, |_| {});
    assert_eq!(report.algorithms, vec!["lsl".to_string()]);
    assert!(report.checks > 100);
    assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
    assert!(report.failures[0].contains("unknown algorithm 'nope'"));
    assert!(report.failures[0].contains("lsl"), "lists the known ones");
}

/// A GPU algorithm asked for where the GPU cannot be used fails at once, with the reason,
/// instead of building the whole matrix for nothing.
#[test]
fn gpu_algorithms_without_a_gpu_fail_at_once_with_the_reason() {
    let opts = SelftestOptions {
        quick: false,
        algorithms: vec!["ha4".into(), "bfs".into()],
        only: None,
        verbose: false,
    };
    let mut cases_run = 0;
    let report = run(&Backends::cpu_only(), &opts, |_| cases_run += 1);
    assert_eq!(cases_run, 0, "no case is built or run");
    assert!(report.algorithms.is_empty());
    assert_eq!(report.checks, 0);
    assert_eq!(report.failures.len(), 2, "{:?}", report.failures);
    assert!(
        report.failures[0].contains("'ha4' needs the cuda backend, which is not usable here:"),
        "{}",
        report.failures[0]
    );
    assert!(report.failures[1].contains("'bfs' is the reference"));
}
