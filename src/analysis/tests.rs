use super::*;
use crate::source::SkipAt;

fn write_png(path: &Path, w: u32, h: u32, f: impl Fn(u32, u32) -> u8) {
    let img = image::GrayImage::from_fn(w, h, |x, y| image::Luma([f(x, y)]));
    img.save(path).unwrap();
}

fn opts(input: &Path, output: Output) -> AnalyzeOptions {
    AnalyzeOptions {
        threshold: ThresholdSpec::Fixed(127),
        backend: BackendChoice::Cpu,
        ..AnalyzeOptions::new(input.to_str().unwrap(), output)
    }
}

#[test]
fn folder_is_sorted_by_name_and_skips_other_files() {
    let dir = tempfile::tempdir().unwrap();
    write_png(&dir.path().join("b.png"), 4, 4, |x, _| {
        if x == 0 {
            255
        } else {
            0
        }
    });
    write_png(&dir.path().join("a.PNG"), 4, 4, |x, y| {
        if x == y {
            255
        } else {
            0
        }
    });
    std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
    std::fs::create_dir(dir.path().join("sub.png")).unwrap();
    let files = list_inputs(dir.path()).unwrap();
    let names: Vec<_> = files
        .iter()
        .map(|p| p.file_name().unwrap().to_str().unwrap())
        .collect();
    assert_eq!(names, ["a.PNG", "b.png"]);

    let out = dir.path().join("out.jsonl");
    let summary = run(&opts(dir.path(), Output::File(out.clone())), |_| {}).unwrap();
    assert_eq!(summary.frames, 2);
    assert_eq!(summary.stopped_by, None);
    assert_eq!(summary.components, 2);
    assert_eq!(summary.algorithm, "lsl");
    let text = std::fs::read_to_string(&out).unwrap();
    let rows: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows[0]["frame"], 0);
    assert_eq!(rows[0]["file"], "a.PNG");
    assert_eq!(rows[0]["area"], 4);
    assert_eq!(rows[1]["frame"], 1);
    assert_eq!(rows[1]["height"], 4);
    // No temporary file left beside the output.
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty());
}

#[test]
fn empty_folder_and_missing_path_are_errors_naming_the_input() {
    let dir = tempfile::tempdir().unwrap();
    let err = list_inputs(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains(&dir.path().display().to_string()) && err.contains("no image files"),
        "{err}"
    );
    let missing = dir.path().join("nope.png");
    let err = list_inputs(&missing).unwrap_err().to_string();
    assert!(err.contains("nope.png"), "{err}");
}

#[test]
fn a_bad_image_is_skipped_and_nothing_analysed_leaves_no_output_file() {
    let dir = tempfile::tempdir().unwrap();
    write_png(&dir.path().join("a.png"), 4, 4, |_, _| 255);
    std::fs::write(dir.path().join("b.png"), b"not a png").unwrap();
    let out = dir.path().join("out.csv");
    let summary = run(&opts(dir.path(), Output::File(out.clone())), |_| {}).unwrap();
    assert_eq!((summary.frames, summary.skipped_frames), (1, 1));
    assert_eq!(summary.skipped[0].name, "b.png");
    assert_eq!(summary.skipped[0].at, SkipAt::Frame(1));
    std::fs::remove_file(&out).unwrap();

    // A header that reads but data that does not decode: nothing analysed, no output.
    let mut cut = std::fs::read(dir.path().join("a.png")).unwrap();
    cut.truncate(cut.len() - 20);
    let single = dir.path().join("cut.png");
    std::fs::write(&single, cut).unwrap();
    let err = run(&opts(&single, Output::File(out.clone())), |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("cut.png") && err.contains("nothing could be analysed"),
        "{err}"
    );
    assert!(!out.exists());
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        3,
        "temp file removed"
    );
}

#[test]
fn a_device_output_is_written_in_place_not_replaced() {
    let dir = tempfile::tempdir().unwrap();
    write_png(&dir.path().join("a.png"), 4, 4, |_, _| 255);
    let null = Path::new("/dev/null");
    let before = std::fs::metadata(null).unwrap();
    assert!(!before.is_file());
    run(&opts(dir.path(), Output::File(null.to_path_buf())), |_| {}).unwrap();
    assert!(
        !std::fs::metadata(null).unwrap().is_file(),
        "/dev/null replaced"
    );
}

#[test]
fn unknown_algorithm_fails_before_work() {
    let dir = tempfile::tempdir().unwrap();
    write_png(&dir.path().join("a.png"), 4, 4, |_, _| 255);
    let mut o = opts(dir.path(), Output::File(dir.path().join("o.csv")));
    o.algorithm = Some("nope".into());
    let err = run(&o, |_| {}).unwrap_err();
    assert!(matches!(err, Error::UnknownAlgorithm { .. }), "{err}");
    assert!(!dir.path().join("o.csv").exists());
}

/// The summary names the output when it is the slowest stage and a real share of the run.
#[test]
fn the_summary_names_the_output_when_it_sets_the_rate() {
    use crate::ccl::StepTime;
    use crate::output::writer::OutputTimes;
    let summary = |format_ms: f64, write_ms: f64, elapsed_s: f64| AnalyzeSummary {
        source: String::new(),
        sources: Vec::new(),
        frame_sets: 0,
        world: None,
        frames: 100,
        components: 0,
        algorithm: String::new(),
        elapsed_s,
        dropped: 0,
        stopped_by: None,
        rss_kb: [None; 3],
        tracks: 0,
        markers: None,
        mean_steps: vec![
            StepTime::new("threshold", 2.0),
            StepTime::new("track", 3.0),
            StepTime::new(OUTPUT_FORMAT_STEP, format_ms / 100.0),
            StepTime::new(OUTPUT_WRITE_STEP, write_ms / 100.0),
        ],
        mean_latency_ms: 0.0,
        output: OutputTimes {
            rows: 0,
            frames: 100,
            format_ms,
            write_ms,
        },
        skipped: Vec::new(),
        skipped_frames: 0,
        skipped_data: 0,
        damaged_frames: 0,
        streams: Vec::new(),
        recording: None,
        recording_failed: None,
    };
    // 14.2 ms a frame over 100 frames in 1.5 s: the output sets the rate.
    assert_eq!(
        summary(310.0, 1110.0, 1.5).output_bottleneck().as_deref(),
        Some("output: 14.2 ms a frame (format 3.1, write 11.1), the slowest stage")
    );
    // Faster than the tracker: not named.
    assert_eq!(summary(100.0, 100.0, 1.5).output_bottleneck(), None);
    // The slowest of tiny steps, but a sliver of the run: not named.
    assert_eq!(summary(310.0, 1110.0, 60.0).output_bottleneck(), None);
}
