//! Several sources in one run (`analyze A B …`): each source's rows as it alone gives them,
//! the source columns, frame sets on one clock, and sources that fail to open or end early.

use crate::util::{ffmpeg, markerscope_command, require_ffmpeg};
use std::path::Path;

/// The source columns, after the 29 of a run of one source.
const SOURCE_COLUMNS: &str = "source,source_name,time_source,frame_set,skew_ms";

pub(crate) struct Run {
    pub code: Option<i32>,
    pub stderr: String,
}

/// `markerscope analyze` on the CPU, synthetic frames of 320×240, with `args`.
pub(crate) fn analyze(args: &[&str]) -> Run {
    analyze_with_env(args, &[])
}

/// `analyze` with the environment variables `envs` set.
fn analyze_with_env(args: &[&str], envs: &[(&str, &str)]) -> Run {
    let mut full = vec!["analyze", "--backend", "cpu", "--size", "320x240"];
    full.extend_from_slice(args);
    let out = markerscope_command(&full)
        .envs(envs.iter().copied())
        .output()
        .expect("running markerscope");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    Run {
        code: out.status.code(),
        stderr,
    }
}

/// A CSV's header and rows, each row split into its fields.
pub(crate) fn read_csv(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header = lines
        .next()
        .unwrap()
        .split(',')
        .map(str::to_string)
        .collect();
    // The synthetic sources' rows have no quoted field.
    let rows = lines
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    (header, rows)
}

/// A clip of `frames` frames at `rate` frames/s, `size` (`WxH`), lossless.
fn clip(dir: &Path, name: &str, size: &str, rate: u32, frames: u32) -> String {
    require_ffmpeg();
    let path = dir.join(name);
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        &format!("testsrc2=size={size}:rate={rate}"),
        "-frames:v",
        &frames.to_string(),
        "-c:v",
        "ffv1",
        path.to_str().unwrap(),
    ]);
    path.to_str().unwrap().to_string()
}

#[test]
fn each_sources_rows_are_those_it_gives_alone() {
    let dir = tempfile::tempdir().unwrap();
    let sources = ["synthetic", "synthetic:markers"];
    let multi = dir.path().join("multi.csv");
    let run = analyze(&[
        sources[0],
        sources[1],
        "--max-frames",
        "12",
        "--out",
        multi.to_str().unwrap(),
    ]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.stderr.contains("source 0 (synthetic): 12 frame(s)")
            && run
                .stderr
                .contains("source 1 (synthetic:markers): 12 frame(s)"),
        "{}",
        run.stderr
    );
    let (header, rows) = read_csv(&multi);
    assert_eq!(header.len(), 34);
    assert_eq!(header[29..].join(","), SOURCE_COLUMNS);
    for (k, source) in sources.iter().enumerate() {
        let alone = dir.path().join(format!("alone-{k}.csv"));
        let run = analyze(&[
            source,
            "--max-frames",
            "12",
            "--out",
            alone.to_str().unwrap(),
        ]);
        assert_eq!(run.code, Some(0), "{}", run.stderr);
        let (alone_header, alone_rows) = read_csv(&alone);
        assert_eq!(alone_header[..], header[..29]);
        let mine: Vec<Vec<String>> = rows
            .iter()
            .filter(|r| r[29] == k.to_string())
            .map(|r| {
                assert_eq!(r[30], *source);
                assert_eq!(r[31], "synthetic");
                r[..29].to_vec()
            })
            .collect();
        assert!(!mine.is_empty());
        assert_eq!(mine, alone_rows, "source {k}");
    }
}

#[test]
fn a_known_offset_is_the_skew_of_each_frame_in_its_set() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rows.csv");
    let run = analyze(&[
        "synthetic",
        "synthetic",
        "--offset",
        "0",
        "--offset",
        "0.005",
        "--max-frames",
        "20",
        "--columns",
        "frame,time_s,source,frame_set,skew_ms",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.stderr.contains("20 frame set(s) of 2 source(s)"),
        "{}",
        run.stderr
    );
    let (header, rows) = read_csv(&out);
    assert_eq!(header.join(","), "frame,time_s,source,frame_set,skew_ms");
    let mut seen = [0usize; 2];
    for r in &rows {
        let frame: u64 = r[0].parse().unwrap();
        let time_s: f64 = r[1].parse().unwrap();
        let source: usize = r[2].parse().unwrap();
        let skew_ms: f64 = r[4].parse().unwrap();
        seen[source] += 1;
        // The synthetic frames are rendered at 60 frames/s; the second source runs 5 ms late.
        let offset = [0.0, 0.005][source];
        assert!(
            (time_s - (frame as f64 / 60.0 + offset)).abs() < 1e-9,
            "{r:?}"
        );
        assert_eq!(r[3], frame.to_string(), "the frame's set: {r:?}");
        assert!((skew_ms - offset * 1e3).abs() < 1.0, "{r:?}");
    }
    assert!(seen[0] > 0 && seen[0] == seen[1], "{seen:?}");
}

#[test]
fn a_source_that_ends_early_leaves_the_others_going_at_their_own_size_and_rate() {
    let dir = tempfile::tempdir().unwrap();
    // 4 frames at 30 frames/s beside synthetic frames at 60 frames/s, of another size.
    let short = clip(dir.path(), "short.mkv", "160x120", 30, 4);
    let out = dir.path().join("rows.jsonl");
    let run = analyze(&[
        "synthetic",
        &short,
        "--threshold",
        "fixed:100",
        "--max-frames",
        "16",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.stderr.contains("source 0 (synthetic): 16 frame(s)")
            && run
                .stderr
                .contains(&format!("source 1 ({short}): 4 frame(s)"))
            && run.stderr.contains("times: file")
            && run.stderr.contains("in 4 of the 16 frame sets"),
        "{}",
        run.stderr
    );
    let mut sets = std::collections::BTreeMap::new();
    for line in std::fs::read_to_string(&out).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        for key in SOURCE_COLUMNS.split(',') {
            assert!(v.get(key).is_some(), "{key} missing from {line}");
        }
        if v["source"] == 1 {
            assert_eq!(v["source_name"], short.as_str());
            assert_eq!(v["time_source"], "file");
            sets.insert(
                v["frame"].as_u64().unwrap(),
                v["frame_set"].as_u64().unwrap(),
            );
        }
    }
    // The clip's frames join every other set of the faster source.
    let expected: std::collections::BTreeMap<u64, u64> = (0..4).map(|i| (i, 2 * i)).collect();
    assert_eq!(sets, expected);
}

#[test]
fn parquet_carries_the_source_columns() {
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rows.parquet");
    let run = analyze(&[
        "synthetic",
        "synthetic:markers",
        "--max-frames",
        "4",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let file = std::fs::File::open(&out).unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
    let names: Vec<String> = reader
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(names[29..].join(","), SOURCE_COLUMNS);
    let mut sources = std::collections::BTreeSet::new();
    for batch in reader.build().unwrap() {
        let batch = batch.unwrap();
        let source = batch
            .column(29)
            .as_any()
            .downcast_ref::<arrow_array::UInt64Array>()
            .unwrap();
        sources.extend(source.iter().flatten());
    }
    assert_eq!(sources.into_iter().collect::<Vec<_>>(), [0, 1]);
}

#[test]
fn a_source_that_fails_to_open_is_named_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rows.csv");
    let missing = dir.path().join("missing.mp4");
    let run = analyze(&[
        "synthetic",
        missing.to_str().unwrap(),
        "--max-frames",
        "3",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(
        run.stderr
            .contains(&format!("source 1 ({})", missing.display())),
        "{}",
        run.stderr
    );
    assert!(!out.exists());
    for (args, why) in [
        (
            &[
                "synthetic",
                "synthetic",
                "--offset",
                "0",
                "--offset",
                "1",
                "--offset",
                "2",
            ][..],
            "3 --offset values for 2 source(s)",
        ),
        (
            &["synthetic", "synthetic:nope"][..],
            "source 1 (synthetic:nope)",
        ),
        (
            &["synthetic", "synthetic", "--tracks", "t.csv"][..],
            "--tracks works with one source",
        ),
    ] {
        let mut full = args.to_vec();
        full.extend(["--max-frames", "3", "--out", out.to_str().unwrap()]);
        let run = analyze(&full);
        assert_eq!(run.code, Some(2), "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(why), "{args:?}: {}", run.stderr);
    }
}

/// A run of eight sources ends when its last frame set is written: the frames each endless
/// source made past `--max-frames`, queued for tracking behind results no one reads, are
/// dropped at the stop, not tracked and offered to the consumer 50 ms each, pipeline after
/// pipeline (5–7 s on a 16-thread host; 5 s in a debug build on 2 cores, against 0.5–0.7 now). The
/// random frames cost their sources nothing to make and their consumer much to write, so the
/// queues are full when the run ends; the pool of 16 threads makes the tracking stage take
/// frames ahead on any host, as it does on one of 4 threads or more. Timed: run alone in CI.
#[test]
fn a_run_of_eight_sources_ends_with_its_frames() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rows.csv");
    let mut args = vec!["synthetic:random"; 8];
    args.extend([
        "--max-frames",
        "10",
        "--verbose",
        "--out",
        out.to_str().unwrap(),
    ]);
    let started = std::time::Instant::now();
    let run = analyze_with_env(&args, &[("RAYON_NUM_THREADS", "16")]);
    let took = started.elapsed();
    let stderr = run.stderr;
    assert_eq!(run.code, Some(0), "{stderr}");
    assert!(
        stderr.contains("10 frame set(s) of 8 source(s)"),
        "{stderr}"
    );
    assert!(
        took < std::time::Duration::from_secs(3),
        "the run took {took:?}: {stderr}"
    );
}

/// A UDP socket on a free local port that waits up to 5 s for each datagram.
pub fn udp_listener() -> std::net::UdpSocket {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    socket
}

#[test]
fn json_stream_messages_name_their_source_and_frame_set() {
    let socket = udp_listener();
    let url = format!("udp://{}", socket.local_addr().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rows.csv");
    let run = analyze(&[
        "synthetic",
        "synthetic:markers",
        "--max-frames",
        "3",
        "--stream",
        &url,
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let mut seen = std::collections::BTreeSet::new();
    let mut buffer = vec![0u8; 1 << 16];
    while seen.len() < 6 {
        let n = socket.recv(&mut buffer).expect("every frame's message");
        let v: serde_json::Value = serde_json::from_slice(&buffer[..n]).unwrap();
        let source = v["source"].as_u64().unwrap();
        assert_eq!(
            v["source_name"],
            ["synthetic", "synthetic:markers"][source as usize]
        );
        assert_eq!(v["frame_set"], v["frame"], "{v}");
        seen.insert((source, v["frame"].as_u64().unwrap()));
    }
}

/// One source writes the columns it always has; named, the source columns are filled for it.
#[test]
fn one_source_has_no_source_columns_unless_named() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rows.csv");
    let run = analyze(&[
        "synthetic",
        "--max-frames",
        "3",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(!run.stderr.contains("frame set"), "{}", run.stderr);
    let (header, _) = read_csv(&out);
    assert_eq!(header.len(), 29);
    let run = analyze(&[
        "synthetic",
        "--max-frames",
        "3",
        "--offset",
        "0.25",
        "--columns",
        "frame,time_s,source,source_name,time_source,frame_set,skew_ms",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let (_, rows) = read_csv(&out);
    assert!(!rows.is_empty());
    for r in rows {
        let frame: f64 = r[0].parse().unwrap();
        let time_s: f64 = r[1].parse().unwrap();
        assert!((time_s - (frame / 60.0 + 0.25)).abs() < 1e-9, "{r:?}");
        assert_eq!(r[2..6], ["0", "synthetic", "synthetic", &r[0][..]]);
        assert_eq!(r[6], "0");
    }
    let run = analyze(&["synthetic", "--max-frames", "3", "--offset", "soon"]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("--offset"), "{}", run.stderr);
}

/// The start delays of the live sources (ms): their true offsets on the one clock.
const LIVE_DELAYS_MS: [f64; 4] = [0.0, 3.0, 7.0, 11.0];

/// How far a live frame's skew may be from its true offset (ms), for all but
/// `LIVE_SKEW_OUTLIERS` of the frames, and for every frame. Live frames are stamped when they
/// reach markerscope, so each skew carries the two frames' wake-up delays: on an idle machine
/// they are tens of microseconds; on the 2-core CI machine shared with other builds, about 1
/// frame in 500 is woken 1 to 3.5 ms late (a frame more than 4.3 ms late would leave its set).
const LIVE_SKEW_TOLERANCE_MS: f64 = 1.0;
const LIVE_SKEW_OUTLIERS: f64 = 0.02;
const LIVE_SKEW_WORST_MS: f64 = 4.0;

/// The rows of a CSV as (source, frame) → (frame set, skew in ms), one per frame.
fn frames_in_sets(path: &Path) -> std::collections::BTreeMap<(usize, u64), (u64, f64)> {
    let (header, rows) = read_csv(path);
    let at = |name: &str| header.iter().position(|h| h == name).unwrap();
    let (source, frame, set, skew) = (at("source"), at("frame"), at("frame_set"), at("skew_ms"));
    rows.iter()
        .map(|r| {
            let key = (r[source].parse().unwrap(), r[frame].parse().unwrap());
            (key, (r[set].parse().unwrap(), r[skew].parse().unwrap()))
        })
        .collect()
}

/// 4 live synthetic sources at 60 frames/s, started together, each captured a known delay
/// after the others (`synthetic?live,delay=S`): every frame set holds one frame of each, each
/// frame's skew is its true offset from the set's first frame (its capture time, frame / 60 +
/// its delay, minus that frame's), and no source starves another.
#[test]
fn four_live_sources_form_frame_sets_with_their_true_offsets() {
    on_a_quiet_run(four_live_sources);
}

/// Runs a timed check up to three times, passing when one run holds: live frames are stamped
/// at arrival, so a frame that a busy machine wakes late shows as skew or a late message, and
/// can leave its frame set. Each failed run's reason is printed.
fn on_a_quiet_run(check: fn()) {
    for run in 1..=3 {
        if std::panic::catch_unwind(check).is_ok() {
            return;
        }
        eprintln!("run {run} did not hold (above); measuring again");
    }
    panic!("no run of three held");
}

fn four_live_sources() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rows.csv");
    let sources: Vec<String> = LIVE_DELAYS_MS
        .iter()
        .map(|ms| format!("synthetic?live,delay={}", ms / 1e3))
        .collect();
    let mut args: Vec<&str> = sources.iter().map(String::as_str).collect();
    args.extend([
        "--max-frames",
        "120",
        "--columns",
        "frame,source,time_source,frame_set,skew_ms",
        "--out",
        out.to_str().unwrap(),
    ]);
    let run = analyze(&args);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    // Every source gave all its frames, none dropped, each in a set of its own time.
    for (k, name) in sources.iter().enumerate() {
        let (before, after) = (
            format!("source {k} ({name}): 120 frame(s), "),
            "0 skipped, 0 dropped; in 120 of the 120 frame sets; times: arrival",
        );
        assert!(
            run.stderr
                .lines()
                .any(|l| l.starts_with(&before) && l.ends_with(after)),
            "{}",
            run.stderr
        );
    }
    let frames = frames_in_sets(&out);
    assert_eq!(frames.len(), 4 * 120);
    let mut sets: std::collections::BTreeMap<u64, Vec<(usize, u64, f64)>> = Default::default();
    for (&(source, frame), &(set, skew)) in &frames {
        sets.entry(set).or_default().push((source, frame, skew));
    }
    let capture_ms = |source: usize, frame: u64| frame as f64 * 1e3 / 60.0 + LIVE_DELAYS_MS[source];
    let mut errors = Vec::new();
    for (set, members) in &sets {
        let mut by_source: Vec<usize> = members.iter().map(|m| m.0).collect();
        by_source.sort();
        assert_eq!(by_source, [0, 1, 2, 3], "set {set}: {members:?}");
        // The set's reference is its first frame (skew 0).
        let &(reference, reference_frame, _) = members.iter().find(|m| m.2 == 0.0).unwrap();
        for &(source, frame, skew) in members {
            let truth = capture_ms(source, frame) - capture_ms(reference, reference_frame);
            errors.push((skew - truth).abs());
        }
    }
    errors.sort_by(f64::total_cmp);
    let n = errors.len();
    let mean = errors.iter().sum::<f64>() / n as f64;
    let beyond = errors
        .iter()
        .filter(|&&e| e > LIVE_SKEW_TOLERANCE_MS)
        .count();
    let figures = format!(
        "skew minus true offset over {n} frames: mean {mean:.3} ms, median {:.3} ms, 99th \
         percentile {:.3} ms, worst {:.3} ms; {beyond} beyond {LIVE_SKEW_TOLERANCE_MS} ms",
        errors[n / 2],
        errors[n * 99 / 100],
        errors[n - 1]
    );
    eprintln!("{figures}");
    assert!(
        beyond as f64 <= LIVE_SKEW_OUTLIERS * n as f64 && errors[n - 1] <= LIVE_SKEW_WORST_MS,
        "{figures}"
    );
}

/// A live source that stalls for a second (`synthetic?live,stall=30-90`: frames 30 to 89 never
/// come) beside two that do not: the others are not held up meanwhile (their frames reach the
/// stream at most the live wait, 0.2 s, later than usual), the stalled source's missing frames
/// are counted (it is in fewer sets), and it comes back into the sets of its frames' time.
#[test]
fn a_stalled_live_source_holds_up_no_other_and_rejoins_the_sets() {
    on_a_quiet_run(a_stalled_live_source);
}

fn a_stalled_live_source() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(std::time::Duration::from_millis(200)))
        .unwrap();
    let url = format!("udp://{}", socket.local_addr().unwrap());
    let done = std::sync::Arc::new(AtomicBool::new(false));
    let clock = std::time::Instant::now();
    // Each message: when it came (s), its source, frame and time.
    let receiver = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut got = Vec::new();
            let mut buffer = vec![0u8; 1 << 16];
            loop {
                match socket.recv(&mut buffer) {
                    Ok(n) => {
                        let v: serde_json::Value = serde_json::from_slice(&buffer[..n]).unwrap();
                        got.push((
                            clock.elapsed().as_secs_f64(),
                            v["source"].as_u64().unwrap(),
                            v["frame"].as_u64().unwrap(),
                            v["time_s"].as_f64().unwrap(),
                        ));
                    }
                    Err(_) if done.load(Ordering::Relaxed) => return got,
                    Err(_) => {}
                }
            }
        })
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rows.csv");
    let sources = [
        "synthetic?live",
        "synthetic?live,stall=30-90",
        "synthetic?live,delay=0.002",
    ];
    let mut args = sources.to_vec();
    args.extend([
        "--max-frames",
        "120",
        "--columns",
        "frame,source,time_source,frame_set,skew_ms",
        "--stream",
        &url,
        "--out",
        out.to_str().unwrap(),
    ]);
    let run = analyze(&args);
    done.store(true, Ordering::Relaxed);
    let messages = receiver.join().unwrap();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    // 120 sets of the others' frames; the stalled source's last 60 frames come after theirs.
    for (k, name) in sources.iter().enumerate() {
        let line = format!("source {k} ({name}): 120 frame(s), ");
        assert!(
            run.stderr.lines().any(|l| l.starts_with(&line)
                && l.ends_with("0 dropped; in 120 of the 180 frame sets; times: arrival")),
            "{}",
            run.stderr
        );
    }
    let frames = frames_in_sets(&out);
    let stalled: Vec<u64> = frames.keys().filter(|k| k.0 == 1).map(|k| k.1).collect();
    let expected: Vec<u64> = (0..30).chain(90..180).collect();
    assert_eq!(stalled, expected, "the stalled source's frames");
    // Before and after the stall, each frame of the stalled source is in the set of the
    // others' frame of its time; meanwhile their sets go on without it.
    for i in 0..120 {
        let set_of = |k: usize| frames.get(&(k, i)).map(|f| f.0);
        assert_eq!(set_of(0), set_of(2), "frame {i}");
        let expected = (!(30..90).contains(&i)).then(|| set_of(0).unwrap());
        assert_eq!(set_of(1), expected, "frame {i}");
    }
    // The others' frames reach the stream as soon during the stall as before it.
    for k in [0, 2] {
        let late: Vec<(u64, f64)> = messages
            .iter()
            .filter(|m| m.1 == k)
            .map(|m| (m.2, m.0 - m.3))
            .collect();
        assert!(late.len() >= 110, "source {k}: {} messages", late.len());
        let usual = late.iter().map(|l| l.1).fold(f64::INFINITY, f64::min);
        let worst_in_stall = late
            .iter()
            .filter(|l| (30..90).contains(&l.0))
            .map(|l| l.1 - usual)
            .fold(0.0, f64::max);
        assert!(
            worst_in_stall < 0.5,
            "source {k}: frames held up to {worst_in_stall:.3} s during the stall"
        );
    }
}
