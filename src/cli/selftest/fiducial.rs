//! The fiducial group: the GPU marker detector against the CPU one (the reference) on rendered
//! scenes of several dictionaries, sizes and marker counts, under perspective, blur, noise and
//! uneven light, and on marker-free clutter: the same markers (dictionary, ID, bit errors),
//! corners within 1e-3 px, the same number of rejected candidates.
// Without CUDA the group only reports that it was skipped: its scenes and comparison go unused.
#![cfg_attr(not(feature = "cuda"), allow(dead_code, unused_imports))]

use super::SelftestReport;
use crate::ccl::Backends;
use crate::fiducial::dictionary::Dictionary;
use crate::fiducial::render::{render_scene, SceneSpec};
use crate::fiducial::Detections;

/// The most two detectors' corners of one marker may differ by, in pixels (each coordinate).
pub const CORNER_TOLERANCE: f64 = 1e-3;

/// A rendered scene and the dictionaries it is searched for (markers drawn from the first).
pub struct FiducialScene {
    pub dictionaries: &'static [&'static str],
    pub spec: SceneSpec,
}

impl FiducialScene {
    pub fn describe(&self) -> String {
        let s = &self.spec;
        format!(
            "{} {}x{}, {} marker(s), {} clutter, seed {}",
            self.dictionaries.join("+"),
            s.width,
            s.height,
            s.markers,
            s.clutter,
            s.seed
        )
    }
}

/// The scenes of the group: a few for `--quick`, more otherwise.
pub fn scenes(quick: bool) -> Vec<FiducialScene> {
    let scene =
        |dictionaries, width, height, markers, sides: (f64, f64), clutter, seed| FiducialScene {
            dictionaries,
            spec: SceneSpec {
                width,
                height,
                markers,
                min_side: sides.0,
                max_side: sides.1,
                clutter,
                seed,
                ..SceneSpec::default()
            },
        };
    let harsh = |mut s: FiducialScene| {
        s.spec.blur_sigma = 2.0;
        s.spec.noise_sigma = 8.0;
        s.spec.light_gradient = 0.8;
        s.spec.perspective = 0.2;
        s
    };
    const D4: &[&str] = &["DICT_4X4_50"];
    const TAG: &[&str] = &["DICT_APRILTAG_36h11"];
    const D7: &[&str] = &["DICT_7X7_1000"];
    const TWO: &[&str] = &["DICT_APRILTAG_36h11", "DICT_4X4_50"];
    const CLUTTER: &[&str] = &["DICT_4X4_50", "DICT_7X7_1000"];
    let mut list = vec![
        scene(D4, 320, 240, 1, (60.0, 100.0), 5, 1),
        scene(TAG, 640, 480, 6, (50.0, 110.0), 15, 2),
        scene(D7, 1280, 720, 16, (60.0, 140.0), 30, 3),
        scene(TWO, 1920, 1080, 100, (40.0, 90.0), 40, 4),
        scene(CLUTTER, 1920, 1080, 0, (60.0, 180.0), 300, 5),
        harsh(scene(D4, 800, 600, 12, (50.0, 120.0), 20, 6)),
        // Small markers in dim light: edges off the outline's sides by up to a pixel and a
        // half, measured with the edge fit's extra profile point.
        harsh(scene(D4, 960, 540, 24, (18.0, 50.0), 20, 15)),
    ];
    if !quick {
        list.extend([
            scene(D4, 1920, 1080, 16, (60.0, 180.0), 40, 7),
            scene(TAG, 1920, 1080, 16, (60.0, 180.0), 40, 8),
            scene(D7, 1920, 1080, 100, (45.0, 90.0), 40, 9),
            scene(D4, 321, 239, 3, (30.0, 60.0), 10, 10),
            harsh(scene(TAG, 1280, 720, 20, (40.0, 120.0), 60, 11)),
            harsh(scene(D7, 1920, 1080, 30, (60.0, 160.0), 80, 12)),
            scene(CLUTTER, 640, 480, 0, (60.0, 180.0), 150, 13),
            scene(TWO, 1024, 768, 40, (30.0, 80.0), 30, 14),
        ]);
    }
    list
}

/// Compares the GPU's detections with the CPU's on one scene; returns the checks made and the
/// failures: the same markers (dictionary, ID, bit errors), each one's corners within
/// CORNER_TOLERANCE, and as many rejected candidates.
pub fn compare(what: &str, cpu: &Detections, gpu: &Detections) -> (usize, Vec<String>) {
    let mut checks = 0;
    let mut failures = Vec::new();
    let key = |m: &crate::fiducial::Marker| (m.dictionary, m.id, m.hamming);
    let keys = |d: &Detections| {
        let mut k: Vec<_> = d.markers.iter().map(key).collect();
        k.sort();
        k
    };
    let (cpu_keys, gpu_keys) = (keys(cpu), keys(gpu));
    checks += 1;
    if cpu_keys != gpu_keys {
        failures.push(format!(
            "{what}: markers (dictionary, id, bit errors) {gpu_keys:?}, the CPU's {cpu_keys:?}"
        ));
    }
    for m in &cpu.markers {
        let Some(g) = gpu.markers.iter().find(|g| key(g) == key(m)) else {
            continue; // counted above
        };
        checks += 1;
        let off = m
            .corners
            .iter()
            .zip(&g.corners)
            .map(|(a, b)| (*a as f64 - *b as f64).abs())
            .fold(0.0, f64::max);
        if !(off <= CORNER_TOLERANCE) {
            failures.push(format!(
                "{what}: marker {} of dictionary {}: corners {:?}, the CPU's {:?} ({off:.2e} px apart)",
                m.id, m.dictionary, g.corners, m.corners
            ));
        }
    }
    checks += 1;
    if cpu.rejected.len() != gpu.rejected.len() {
        failures.push(format!(
            "{what}: {} rejected candidates, the CPU {}",
            gpu.rejected.len(),
            cpu.rejected.len()
        ));
    }
    (checks, failures)
}

/// Runs the group; without a GPU it is skipped, and the report says why.
pub fn check_fiducials(
    backends: &Backends,
    quick: bool,
    report: &mut SelftestReport,
    progress: &mut dyn FnMut(&str),
) {
    #[cfg(feature = "cuda")]
    match backends.gpu() {
        Ok(gpu) => run_group(gpu.clone(), quick, report, progress),
        Err(e) => super::skipped(report, "fiducial", "the GPU detector", e),
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = (quick, progress);
        let why = backends.cuda_unavailable_reason().unwrap_or_default();
        super::skipped(report, "fiducial", "the GPU detector", why);
    }
}

#[cfg(feature = "cuda")]
fn run_group(
    gpu: std::sync::Arc<crate::gpu::Gpu>,
    quick: bool,
    report: &mut SelftestReport,
    progress: &mut dyn FnMut(&str),
) {
    use crate::fiducial::gpu::GpuDetector;
    use crate::fiducial::{Detector, DetectorParams};
    let params = DetectorParams::default();
    // One detector of each for every scene: the GPU's buffers are reused and regrown as the
    // frame size changes.
    let detectors =
        Detector::new(params.clone()).and_then(|cpu| Ok((cpu, GpuDetector::new(gpu, params)?)));
    let (mut cpu, mut gpu) = match detectors {
        Ok(d) => d,
        Err(e) => {
            report
                .failures
                .push(format!("fiducial: cannot make the detectors: {e}"));
            return;
        }
    };
    let (checks_before, failures_before) = (report.checks, report.failures.len());
    let list = scenes(quick);
    for (i, scene) in list.iter().enumerate() {
        let what = format!("fiducial {}", scene.describe());
        progress(&format!("[fiducial {}/{}] {what}", i + 1, list.len()));
        let dicts: Result<Vec<Dictionary>, _> = scene
            .dictionaries
            .iter()
            .map(|n| Dictionary::predefined(n))
            .collect();
        let found = dicts.and_then(|dicts| {
            let rendered = render_scene(&dicts[0], &scene.spec)?;
            let refs: Vec<&Dictionary> = dicts.iter().collect();
            let on_cpu = cpu.detect(&rendered.image, &refs)?;
            let on_gpu = gpu.detect(&rendered.image, &refs)?;
            Ok((rendered.markers.len(), on_cpu, on_gpu))
        });
        match found {
            Err(e) => report.failures.push(format!("{what}: {e}")),
            Ok((drawn, on_cpu, on_gpu)) => {
                report.checks += 1;
                if drawn > 0 && on_cpu.markers.is_empty() {
                    report.failures.push(format!(
                        "{what}: the CPU found none of the {drawn} markers drawn: the \
                         comparison would prove nothing"
                    ));
                }
                let (checks, failures) = compare(&what, &on_cpu, &on_gpu);
                report.checks += checks;
                report.failures.extend(failures);
            }
        }
    }
    report.notes.push(format!(
        "fiducial: the GPU marker detector against the CPU's on {} scenes: {} checks, {} failures",
        list.len(),
        report.checks - checks_before,
        report.failures.len() - failures_before
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fiducial::Marker;

    fn marker(id: u32, x: f32) -> Marker {
        Marker {
            id,
            dictionary: 0,
            hamming: 0,
            corners: [x, 10.0, x + 20.0, 10.0, x + 20.0, 30.0, x, 30.0],
            angle_deg: 0.0,
        }
    }

    /// Equal detections pass; a corner 2e-3 px off, a missing or different marker and another
    /// rejected count each fail, every comparison counted.
    #[test]
    fn compare_counts_checks_and_finds_every_difference() {
        let cpu = Detections {
            markers: vec![marker(3, 10.0), marker(7, 100.0)],
            rejected: vec![[0.0; 8]],
        };
        assert_eq!(compare("s", &cpu, &cpu), (4, vec![]));
        let mut gpu = cpu.clone();
        gpu.markers.reverse();
        assert_eq!(
            compare("s", &cpu, &gpu),
            (4, vec![]),
            "order does not matter"
        );
        gpu.markers[0].corners[5] += 2e-3;
        let (checks, f) = compare("s", &cpu, &gpu);
        assert_eq!((checks, f.len()), (4, 1), "{f:?}");
        assert!(f[0].contains("marker 7"), "{f:?}");
        let mut gpu = cpu.clone();
        gpu.markers[1].id = 8;
        gpu.rejected.clear();
        let (_, f) = compare("s", &cpu, &gpu);
        assert_eq!(f.len(), 2, "{f:?}");
        assert!(
            f[0].contains("markers") && f[1].contains("rejected"),
            "{f:?}"
        );
        let mut gpu = cpu.clone();
        gpu.markers[0].hamming = 1;
        assert_eq!(compare("s", &cpu, &gpu).1.len(), 1);
    }

    /// The scenes cover the dictionaries, sizes and marker counts the group promises, and each
    /// can be rendered (the largest checked by its parameters only: rendering is slow here).
    #[test]
    fn scenes_cover_dictionaries_sizes_and_counts() {
        for quick in [true, false] {
            let list = scenes(quick);
            let names: Vec<&str> = list
                .iter()
                .flat_map(|s| s.dictionaries.iter().copied())
                .collect();
            for name in ["DICT_4X4_50", "DICT_APRILTAG_36h11", "DICT_7X7_1000"] {
                assert!(names.contains(&name), "{name}");
            }
            assert!(list
                .iter()
                .any(|s| (s.spec.width, s.spec.height) == (320, 240)));
            assert!(list
                .iter()
                .any(|s| (s.spec.width, s.spec.height) == (1920, 1080)));
            assert!(list.iter().any(|s| s.spec.markers == 1));
            assert!(list.iter().any(|s| s.spec.markers == 100));
            assert!(list.iter().any(|s| s.spec.markers == 0));
            assert!(list.iter().any(|s| s.dictionaries.len() > 1));
            for s in &list {
                let dict = Dictionary::predefined(s.dictionaries[0]).unwrap();
                assert!(s.spec.markers <= dict.len(), "{}", s.describe());
            }
        }
        let small = &scenes(true)[0];
        let dict = Dictionary::predefined(small.dictionaries[0]).unwrap();
        assert_eq!(render_scene(&dict, &small.spec).unwrap().markers.len(), 1);
    }

    /// Without a GPU the group runs nothing and says it was skipped, and why.
    #[test]
    fn skipped_without_a_gpu_with_the_reason() {
        let backends = Backends::cpu_only();
        let mut report = SelftestReport::default();
        let mut calls = 0;
        check_fiducials(&backends, true, &mut report, &mut |_| calls += 1);
        assert_eq!((calls, report.checks, report.failures.len()), (0, 0, 0));
        assert_eq!(report.notes.len(), 1);
        assert!(
            report.notes[0].starts_with("fiducial: skipped"),
            "{:?}",
            report.notes
        );
        assert!(
            report.notes[0].contains("--backend cpu") || report.notes[0].contains("not requested")
        );
    }
}
