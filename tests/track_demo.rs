//! The tracker in the pipeline, scored against the synthetic demo's ground truth
//! (`MarkerScene::truth`), and the `analyze` track column and `--tracks` export.

use markerscope::analysis::{self, AnalyzeOptions, Output};
use markerscope::ccl::BackendChoice;
use markerscope::ccl::Backends;
use markerscope::pipeline::{Delivery, Pipeline, PipelineEvent, PipelineSettings};
use markerscope::source::synthetic::{MarkerScene, MarkerTruth, SyntheticSource, DEFAULT_SEED};
use markerscope::source::SyntheticKind;
use markerscope::threshold::spec::ThresholdSpec;
use markerscope::track::score::{MotScorer, TrackPoint, TruthPoint};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

const WIDTH: u32 = 1280;
const HEIGHT: u32 = 720;

/// The demo's standard sequence through the pipeline (CPU backend, every frame): 0 ID switches.
///
/// Frames where two markers' discs touch are "don't care" for both markers: they are one
/// component then, which no tracker can split. Those markers, and the components over them,
/// are left out of the score for that frame; hidden markers are not visible, so not scored.
#[test]
fn demo_sequence_is_tracked_without_id_switches() {
    // 600 frames = 10 s: the head-on pair meets twice, and hidden markers come back.
    const FRAMES: u64 = 600;
    let source = SyntheticSource::new(SyntheticKind::Markers, WIDTH, HEIGHT, false).unwrap();
    let settings = PipelineSettings {
        threshold: ThresholdSpec::Fixed(127),
        backend: BackendChoice::Cpu,
        ..PipelineSettings::default()
    };
    let pipeline = Pipeline::start(
        Box::new(source),
        settings,
        Delivery::Lossless,
        Arc::new(Backends::cpu_only()),
    )
    .unwrap();
    let scene = MarkerScene::new(WIDTH, HEIGHT, DEFAULT_SEED).unwrap();
    let mut scorer = MotScorer::new(1.0);
    let (mut frames, mut dont_care, mut track_steps) = (0u64, 0usize, 0usize);
    let (mut sq_binary, mut sq_subpixel, mut measured) = (0.0f64, 0.0f64, 0usize);
    while frames < FRAMES {
        let event = pipeline
            .events()
            .recv_timeout(Duration::from_secs(60))
            .expect("a frame within 60 s");
        let r = match event {
            PipelineEvent::Frame(r) => r,
            PipelineEvent::Notice(_) => continue,
            other => panic!("unexpected event {other:?}"),
        };
        assert_eq!(
            r.index, frames,
            "lossless delivery keeps every frame in order"
        );
        assert_eq!(r.track_ids.len(), r.components.len());
        assert_eq!(r.subpixel.len(), r.components.len());
        track_steps += r.timings.steps.iter().filter(|s| s.step == "track").count();

        let visible: Vec<_> = scene
            .truth(r.index)
            .into_iter()
            .filter(|m| m.visible)
            .collect();
        let touching = |m: &MarkerTruth| {
            visible
                .iter()
                .any(|o| o.id != m.id && (o.x - m.x).hypot(o.y - m.y) <= o.radius + m.radius + 2.0)
        };
        let (merged, clear): (Vec<&MarkerTruth>, Vec<&MarkerTruth>) =
            visible.iter().partition(|m| touching(m));
        dont_care += merged.len();
        let truth: Vec<TruthPoint> = clear
            .iter()
            .map(|m| TruthPoint {
                id: m.id as u64,
                x: m.x,
                y: m.y,
            })
            .collect();
        // Position error of the clear markers: of the components whose box holds the true
        // centre (a small disc can sit in a big one's box), the nearest.
        for m in &clear {
            let near = r
                .components
                .iter()
                .enumerate()
                .filter(|(_, c)| {
                    (c.left as f64..(c.left + c.width) as f64).contains(&m.x)
                        && (c.top as f64..(c.top + c.height) as f64).contains(&m.y)
                })
                .map(|(i, c)| (i, (c.centroid_x - m.x).hypot(c.centroid_y - m.y)))
                .min_by(|a, b| a.1.total_cmp(&b.1));
            if let Some((i, _)) = near {
                let c = &r.components[i];
                let (sx, sy) = r.position(i);
                sq_binary += (c.centroid_x - m.x).powi(2) + (c.centroid_y - m.y).powi(2);
                sq_subpixel += (sx - m.x).powi(2) + (sy - m.y).powi(2);
                measured += 1;
            }
        }
        let points: Vec<TrackPoint> = r
            .components
            .iter()
            .zip(&r.track_ids)
            .filter(|(c, _)| {
                // Components over a merged marker's centre are the merged blob.
                !merged.iter().any(|m| {
                    (c.left as f64..(c.left + c.width) as f64).contains(&m.x)
                        && (c.top as f64..(c.top + c.height) as f64).contains(&m.y)
                })
            })
            .map(|(c, &track)| TrackPoint {
                track,
                x: c.centroid_x,
                y: c.centroid_y,
            })
            .collect();
        // (The scorer matches within 1 px, so the binary centroid is enough to score with.)
        scorer.add_frame(&truth, &points);
        frames += 1;
    }
    pipeline.stop();
    let c = scorer.counts();
    let rms = |sq: f64| (sq / measured.max(1) as f64).sqrt();
    println!(
        "synthetic demo {WIDTH}x{HEIGHT}, {FRAMES} frames through the pipeline \
         ({dont_care} marker-frames with touching discs left out): {c}; \
         position RMS over {measured} marker-frames: sub-pixel {:.4} px, binary {:.4} px",
        rms(sq_subpixel),
        rms(sq_binary)
    );
    assert_eq!(
        track_steps as u64, FRAMES,
        "one \"track\" timing step per frame"
    );
    assert!(dont_care > 0, "the head-on pair should meet in 10 s");
    assert_eq!(c.id_switches, 0, "{c}");
    assert_eq!(c.fragmentations, 0, "{c}");
    assert_eq!((c.misses, c.false_positives), (0, 0), "{c}");
    // The bar for sub-pixel centroids is 0.05 px RMS; the anti-aliased demo discs over
    // noise should meet it, and beat the binary centroid.
    assert!(measured > 8000, "{measured} marker-frames measured");
    assert!(
        rms(sq_subpixel) <= 0.05,
        "sub-pixel RMS {}",
        rms(sq_subpixel)
    );
    assert!(rms(sq_subpixel) < rms(sq_binary));
}

/// `analyze synthetic --tracks`: a `track` column, and one summary row per track that agrees
/// with the rows.
#[test]
fn analyze_writes_track_ids_and_track_summaries() {
    let dir = tempfile::tempdir().unwrap();
    let (out, tracks) = (dir.path().join("rows.csv"), dir.path().join("tracks.csv"));
    let opts = AnalyzeOptions {
        threshold: ThresholdSpec::Fixed(127),
        backend: BackendChoice::Cpu,
        max_frames: Some(30),
        synthetic_size: Some((WIDTH, HEIGHT)),
        tracks: Some(tracks.clone()),
        ..AnalyzeOptions::new("synthetic", Output::File(out.clone()))
    };
    let summary = analysis::run(&opts, |_| {}).unwrap();
    assert_eq!(summary.frames, 30);

    let rows = std::fs::read_to_string(&out).unwrap();
    let mut lines = rows.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    // The track and sub-pixel columns follow the first thirteen; newer columns come after.
    assert_eq!(header[13..16], ["track", "subpixel_x", "subpixel_y"]);
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (frame_col, track_col) = (col("frame"), col("track"));
    // Per track: frames and row count, from the rows.
    let mut seen: BTreeMap<u64, (u64, u64, u64)> = BTreeMap::new();
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        let (frame, track): (u64, u64) =
            (f[frame_col].parse().unwrap(), f[track_col].parse().unwrap());
        assert!(track >= 1);
        let e = seen.entry(track).or_insert((frame, frame, 0));
        e.1 = frame;
        e.2 += 1;
    }
    // 16 markers, some hidden and the head-on pair merged at first: at most 16 tracks in 30 frames
    // of smooth motion, each followed in most frames.
    assert!(
        seen.len() <= 16 && seen.len() >= 10,
        "{} tracks",
        seen.len()
    );
    assert_eq!(summary.tracks, seen.len() as u64);

    let text = std::fs::read_to_string(&tracks).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some(markerscope::output::export::TRACKS_CSV_HEADER)
    );
    let mut ids = HashSet::new();
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        let id: u64 = f[0].parse().unwrap();
        let (first, last, len) = seen[&id];
        assert_eq!(f[1].parse::<u64>().unwrap(), first, "{l}");
        assert_eq!(f[2].parse::<u64>().unwrap(), last, "{l}");
        assert_eq!(f[3].parse::<u64>().unwrap(), len, "{l}");
        assert!(f[4].parse::<f64>().unwrap() > 0.0, "mean area: {l}");
        assert!(f[5].parse::<f64>().unwrap() >= 0.0, "path length: {l}");
        ids.insert(id);
    }
    assert_eq!(ids.len(), seen.len());

    // --tracks may not be the --out file.
    let same = AnalyzeOptions {
        tracks: Some(out.clone()),
        ..opts
    };
    let err = analysis::run(&same, |_| {}).unwrap_err().to_string();
    assert!(err.contains("--tracks"), "{err}");
}
