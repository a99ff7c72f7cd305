//! `markerscope selftest`: every available algorithm against the oracle over the shapes and random
//! images of DESIGN.md. This is what proves GPU kernels on the GPU machine (CI has no GPU).

mod cases;
mod fiducial;
mod grey;
mod labels;
mod row_filter;
mod sums;
#[cfg(test)]
mod tests;
mod track;

pub use cases::{cases, oracle_of, Case};
use fiducial::check_fiducials;
pub use grey::{check_grey, check_grey_set};
pub use labels::{check_graphs, check_in_flight, check_one};
pub use row_filter::check_row_filter;
pub use sums::{check_shapes, check_weighted};
use track::check_tracking;

use crate::ccl::{AlgorithmInfo, Backends, Connectivity, Labeler, ShapeSumsOn};
use crate::frame::page_lock::PageLocker;

/// A group of checks `selftest` can be restricted to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SelftestGroup {
    /// Every labeling algorithm against the oracle.
    Labeling,
    /// The GPU marker detector against the CPU one (needs a GPU).
    Fiducial,
    /// The GPU tracker against the CPU one (needs a GPU).
    Track,
}

pub struct SelftestOptions {
    /// Small matrix (seconds), for sanitizers and CI.
    pub quick: bool,
    /// Only these algorithms (all available ones when empty); naming some leaves the fiducial
    /// and track groups out unless `only` asks for them.
    pub algorithms: Vec<String>,
    /// Only this group (all when None).
    pub only: Option<SelftestGroup>,
    /// Print every case with its time (to find a slow or stuck case).
    pub verbose: bool,
}

#[derive(Default, Debug)]
pub struct SelftestReport {
    pub checks: usize,
    pub failures: Vec<String>,
    pub algorithms: Vec<String>,
    /// One line per group that was skipped or sums itself up.
    pub notes: Vec<String>,
}

/// Why `name` cannot be checked here: no such algorithm, the reference itself, or its backend
/// is unavailable (and why).
fn not_selectable(backends: &Backends, name: &str) -> String {
    let known = crate::ccl::algorithms();
    match known.iter().find(|a| a.name.eq_ignore_ascii_case(name)) {
        None => format!(
            "unknown algorithm '{name}' (known: {})",
            known.iter().map(|a| a.name).collect::<Vec<_>>().join(", ")
        ),
        Some(a) if a.is_oracle => {
            format!(
                "'{}' is the reference the others are checked against",
                a.name
            )
        }
        Some(a) => format!(
            "algorithm '{}' needs the {} backend, which is not usable here: {}",
            a.name,
            a.backend,
            backends.cuda_unavailable_reason().unwrap_or_default()
        ),
    }
}

/// Runs the groups the options select: the labeling algorithms, then the fiducial detectors
/// and the trackers (each when no algorithm is named, or `only` asks for it); `progress` hears
/// of each case as it starts.
pub fn run(
    backends: &Backends,
    opts: &SelftestOptions,
    mut progress: impl FnMut(&str),
) -> SelftestReport {
    let mut report = SelftestReport::default();
    if matches!(opts.only, None | Some(SelftestGroup::Labeling)) {
        check_labeling(backends, opts, &mut progress, &mut report);
    }
    let selects = |group| match opts.only {
        Some(only) => only == group,
        None => opts.algorithms.is_empty(),
    };
    if selects(SelftestGroup::Fiducial) {
        check_fiducials(backends, opts.quick, &mut report, &mut progress);
    }
    if selects(SelftestGroup::Track) {
        check_tracking(backends, opts.quick, &mut report, &mut progress);
    }
    report
}

/// Notes that `group`, which checks `stage` on the GPU against the CPU, was skipped: `why` there
/// is no GPU.
fn skipped(report: &mut SelftestReport, group: &str, stage: &str, why: impl std::fmt::Display) {
    report
        .notes
        .push(format!("{group}: skipped ({stage} needs a GPU): {why}"));
}

/// Checks every selected algorithm on every case, at both connectivities.
fn check_labeling(
    backends: &Backends,
    opts: &SelftestOptions,
    progress: &mut impl FnMut(&str),
    report: &mut SelftestReport,
) {
    let selected = select_algorithms(backends, opts, report);
    report.algorithms = selected.iter().map(|a| a.name.to_string()).collect();
    if selected.is_empty() {
        return; // nothing to check: skip building the images
    }
    let locker = backends.page_locker();
    let cases = cases(opts.quick);
    for connectivity in [Connectivity::Four, Connectivity::Eight] {
        let mut labelers = create_labelers(backends, &selected, connectivity, report);
        if labelers.is_empty() {
            continue;
        }
        for (i, shape) in cases.iter().enumerate() {
            progress(&format!(
                "[{connectivity}-conn {}/{}] {}",
                i + 1,
                cases.len(),
                shape.name
            ));
            let (labels, stats) = oracle_of(&shape.image, connectivity);
            let case = Case {
                image: &shape.image,
                connectivity,
                labels: &labels,
                stats: &stats,
            };
            for (info, labeler) in labelers.iter_mut() {
                report.checks += 1;
                let start = std::time::Instant::now();
                if opts.verbose {
                    print!("{} {connectivity}-conn {} ... ", info.name, shape.name);
                    let _ = std::io::Write::flush(&mut std::io::stdout());
                }
                let failures = check_case(
                    labeler.as_mut(),
                    info,
                    &case,
                    i,
                    backends,
                    locker.as_deref(),
                );
                report.failures.extend(
                    failures.into_iter().map(|f| {
                        format!("{} {connectivity}-conn on {}: {f}", info.name, shape.name)
                    }),
                );
                if opts.verbose {
                    println!("{:.1} ms", start.elapsed().as_secs_f64() * 1e3);
                }
            }
        }
    }
    check_device_levels(backends, &selected, report);
}

/// The available algorithms the options name (all but the oracle when they name none); each
/// name that cannot be checked here is a failure, with the reason.
fn select_algorithms<'a>(
    backends: &'a Backends,
    opts: &SelftestOptions,
    report: &mut SelftestReport,
) -> Vec<&'a AlgorithmInfo> {
    let selected: Vec<&AlgorithmInfo> = backends
        .available()
        .filter(|a| !a.is_oracle)
        .filter(|a| {
            opts.algorithms.is_empty()
                || opts
                    .algorithms
                    .iter()
                    .any(|n| n.eq_ignore_ascii_case(a.name))
        })
        .collect();
    for name in &opts.algorithms {
        if !selected.iter().any(|a| a.name.eq_ignore_ascii_case(name)) {
            report.failures.push(not_selectable(backends, name));
        }
    }
    selected
}

/// One labeler per selected algorithm that supports `connectivity`; one that cannot be made
/// is a failure.
fn create_labelers<'a>(
    backends: &Backends,
    selected: &[&'a AlgorithmInfo],
    connectivity: Connectivity,
    report: &mut SelftestReport,
) -> Vec<(&'a AlgorithmInfo, Box<dyn Labeler>)> {
    let mut labelers = Vec::new();
    for &a in selected.iter().filter(|a| a.supports(connectivity)) {
        match backends.create(a.name, connectivity) {
            Ok(l) => labelers.push((a, l)),
            Err(e) => report
                .failures
                .push(format!("{}: cannot create: {e}", a.name)),
        }
    }
    labelers
}

/// Every check of one labeler on one case, the `i`-th of the matrix (its place picks each
/// check's flavour); returns the failures.
fn check_case(
    labeler: &mut dyn Labeler,
    info: &AlgorithmInfo,
    case: &Case<'_>,
    i: usize,
    backends: &Backends,
    locker: Option<&dyn PageLocker>,
) -> Vec<String> {
    let (image, connectivity) = (case.image, case.connectivity);
    let (labels, stats) = (case.labels, case.stats);
    let mut failures = check_one(labeler, image, connectivity, labels, stats);
    failures.extend(check_graphs(labeler, image, connectivity, stats, locker));
    failures.extend(check_in_flight(labeler, image, connectivity, stats));
    failures.extend(check_weighted(labeler, case, i));
    // Fused shape sums are not used with sub-pixel weights (flavours 0 mod 3): those cases once
    // more without weights, so that the fused path sees every image.
    let again = info.shape_sums == ShapeSumsOn::Fused && i % 3 == 0;
    for flavour in [i, i + 1].into_iter().take(if again { 2 } else { 1 }) {
        failures.extend(check_shapes(labeler, case, flavour));
    }
    failures.extend(check_grey(labeler, info, image, connectivity, i, backends));
    failures.extend(check_grey_set(
        labeler,
        info,
        image,
        connectivity,
        i,
        backends,
    ));
    failures.extend(check_row_filter(labeler, case, i));
    failures
}

/// The levels the GPU picks from a histogram (`grey_level`) against the host's
/// (`level_from_histogram`), over many histograms, every global threshold and both polarities:
/// once per run, when a selected algorithm thresholds on the GPU.
#[cfg(feature = "cuda")]
fn check_device_levels(
    backends: &Backends,
    selected: &[&AlgorithmInfo],
    report: &mut SelftestReport,
) {
    if !selected.iter().any(|a| a.thresholds_grey) {
        return;
    }
    let Ok(gpu) = backends.gpu() else { return };
    let (checks, failures) = crate::threshold::gpu::check_levels(gpu.clone());
    report.checks += checks;
    report.failures.extend(failures);
}

#[cfg(not(feature = "cuda"))]
fn check_device_levels(_: &Backends, _: &[&AlgorithmInfo], _: &mut SelftestReport) {}
