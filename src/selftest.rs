//! `markerscope selftest`: every available algorithm against the oracle over the shapes and random
//! images of DESIGN.md. This is what proves GPU kernels on the GPU machine (CI has no GPU).

use crate::ccl::cpu::oracle::flood_fill;
use crate::ccl::partition::same_partition;
use crate::ccl::{AlgorithmInfo, Backends, Connectivity, Labeler, Want};
use crate::image::BinaryImage;
use crate::shapes::{hard_shapes, random_images, Shape};
use crate::stats::{compare, ComponentStats};

pub struct SelftestOptions {
    /// Small matrix (seconds), for sanitizers and CI.
    pub quick: bool,
    /// Only these algorithms (all available ones when empty).
    pub algorithms: Vec<String>,
    /// Print every case with its time (to find a slow or stuck case).
    pub verbose: bool,
}

#[derive(Default, Debug)]
pub struct SelftestReport {
    pub checks: usize,
    pub failures: Vec<String>,
    pub algorithms: Vec<String>,
}

/// The image matrix: hard shapes at awkward sizes, and random images.
pub fn cases(quick: bool) -> Vec<Shape> {
    let mut v = Vec::new();
    let sizes: &[(u32, u32)] = if quick {
        &[
            (1, 1),
            (1, 17),
            (17, 1),
            (31, 7),
            (33, 9),
            (64, 64),
            (65, 13),
        ]
    } else {
        &[
            (1, 1),
            (1, 300),
            (300, 1),
            (2, 2),
            (31, 31),
            (32, 32),
            (33, 33),
            (63, 17),
            (64, 64),
            (65, 65),
            (127, 9),
            (1000, 5),
            (257, 257),
        ]
    };
    for &(w, h) in sizes {
        v.extend(hard_shapes(w, h));
    }
    if quick {
        v.extend(random_images(97, 61, &[1, 4, 16], 0.25, 11));
    } else {
        v.extend(hard_shapes(4097, 3001));
        v.extend(random_images(257, 255, &[1, 4, 16], 0.1, 7));
        v.extend(random_images(2048, 2048, &[1, 4, 16], 0.2, 23));
        v.extend(random_images(4097, 3001, &[1, 4, 16], 0.1, 5));
    }
    v
}

/// Checks one algorithm on one image against the oracle result; returns the failures.
pub fn check_one(
    labeler: &mut dyn Labeler,
    image: &BinaryImage,
    connectivity: Connectivity,
    oracle_labels: &crate::image::LabelImage,
    oracle_stats: &[ComponentStats],
) -> Vec<String> {
    let mut failures = Vec::new();
    let mut fail = |what: &str, why: String| failures.push(format!("{what}: {why}"));
    // Stats first: it follows the previous image's run, so state left over from it (a stale
    // count or table) shows up as a mismatch instead of happening to match.
    for want in [Want::Stats, Want::Both, Want::Labels] {
        let what = format!("{want:?}");
        match labeler.label(image, connectivity, want) {
            Err(e) => fail(&what, format!("error: {e}")),
            Ok(out) => {
                if out.count as usize != oracle_stats.len() {
                    fail(
                        &what,
                        format!("count {} vs oracle {}", out.count, oracle_stats.len()),
                    );
                }
                if want.labels() {
                    match &out.labels {
                        None => fail(&what, "no label image returned".into()),
                        Some(l) => {
                            if let Err(e) = same_partition(oracle_labels, l) {
                                fail(&what, format!("labels: {e}"));
                            }
                            // With stats, labels must use the same raster-order numbering.
                            if want == Want::Both && l.data != oracle_labels.data {
                                fail(
                                    &what,
                                    "labels are not numbered in raster order of first pixel".into(),
                                );
                            }
                        }
                    }
                }
                if want.stats() {
                    match &out.stats {
                        None => fail(&what, "no statistics returned".into()),
                        Some(s) => {
                            if let Err(e) = compare(oracle_stats, s) {
                                fail(&what, format!("stats: {e}"));
                            }
                        }
                    }
                }
            }
        }
    }
    failures
}

pub fn run(
    backends: &Backends,
    opts: &SelftestOptions,
    mut progress: impl FnMut(&str),
) -> SelftestReport {
    let mut report = SelftestReport::default();
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
            report.failures.push(format!(
                "algorithm '{name}' is unknown or not available on this machine"
            ));
        }
    }
    report.algorithms = selected.iter().map(|a| a.name.to_string()).collect();
    let cases = cases(opts.quick);
    for connectivity in [Connectivity::Four, Connectivity::Eight] {
        let mut labelers: Vec<(&str, Box<dyn Labeler>)> = Vec::new();
        for a in selected.iter().filter(|a| a.supports(connectivity)) {
            match backends.create(a.name, connectivity) {
                Ok(l) => labelers.push((a.name, l)),
                Err(e) => report
                    .failures
                    .push(format!("{}: cannot create: {e}", a.name)),
            }
        }
        if labelers.is_empty() {
            continue;
        }
        for (i, case) in cases.iter().enumerate() {
            progress(&format!(
                "[{connectivity}-conn {}/{}] {}",
                i + 1,
                cases.len(),
                case.name
            ));
            let (labels, moments) = flood_fill(&case.image, connectivity);
            let stats: Vec<ComponentStats> = moments
                .iter()
                .enumerate()
                .map(|(i, m)| m.to_stats(i as u32 + 1))
                .collect();
            for (name, labeler) in labelers.iter_mut() {
                report.checks += 1;
                let start = std::time::Instant::now();
                if opts.verbose {
                    print!("{name} {connectivity}-conn {} ... ", case.name);
                    let _ = std::io::Write::flush(&mut std::io::stdout());
                }
                for f in check_one(labeler.as_mut(), &case.image, connectivity, &labels, &stats) {
                    report
                        .failures
                        .push(format!("{name} {connectivity}-conn on {}: {f}", case.name));
                }
                if opts.verbose {
                    println!("{:.1} ms", start.elapsed().as_secs_f64() * 1e3);
                }
            }
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ccl::cpu::oracle::Oracle;
    use crate::ccl::Labeling;

    /// Wraps the oracle and breaks one thing about its output.
    enum Fault {
        None,
        /// Numbers components in reverse order (same partition, wrong numbering).
        ReverseNumbering,
        /// Reports the count of the previous image (the stale-state bug selftest must catch).
        StaleCount,
        /// Merges components 1 and 2.
        MergeFirstTwo,
    }

    struct Faulty {
        fault: Fault,
        last_count: u32,
    }

    impl Labeler for Faulty {
        fn name(&self) -> &'static str {
            "faulty"
        }
        fn label(
            &mut self,
            image: &BinaryImage,
            c: Connectivity,
            want: Want,
        ) -> crate::Result<Labeling> {
            let mut out = Oracle.label(image, c, want)?;
            let n = out.count;
            match self.fault {
                Fault::None => {}
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
    }

    fn run_faulty(fault: Fault, image: &BinaryImage) -> Vec<String> {
        let (labels, moments) = flood_fill(image, Connectivity::Four);
        let stats: Vec<_> = moments
            .iter()
            .enumerate()
            .map(|(i, m)| m.to_stats(i as u32 + 1))
            .collect();
        let mut l = Faulty {
            fault,
            last_count: 0,
        };
        check_one(&mut l, image, Connectivity::Four, &labels, &stats)
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
    }

    #[test]
    fn quick_cpu_selftest_passes_and_names_unknown_algorithms() {
        let opts = SelftestOptions {
            quick: true,
            algorithms: vec!["lsl".into(), "nope".into()],
            verbose: false,
        };
        let report = run(&Backends::cpu_only(), &opts, |_| {});
        assert_eq!(report.algorithms, vec!["lsl".to_string()]);
        assert!(report.checks > 100);
        assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
        assert!(report.failures[0].contains("'nope'"));
    }
}
