//! Mutation fuzzing of everything a user hands the program as bytes: images of every format
//! this build reads, video clips (MP4, MKV, AVI, MPEG-TS) and the TOML configuration. Valid
//! files are made by the test, then bytes are flipped, runs overwritten, inserted or cut off.
//! Property: every case ends, in a time limit, with a result or an error, never a panic.

use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

/// One case may take this long (decoding a damaged clip included).
const CASE_LIMIT: Duration = Duration::from_secs(20);

/// A change to a valid file.
#[derive(Clone, Debug)]
enum Mutation {
    /// XOR a byte at a position (a fraction of the length) with a mask.
    Flip(f64, u8),
    /// Overwrite a run of bytes with one value.
    Fill(f64, usize, u8),
    /// Insert bytes.
    Insert(f64, Vec<u8>),
    /// Cut the file at a fraction of its length.
    Truncate(f64),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (0.0..1.0f64, 1u8..=255).prop_map(|(p, m)| Mutation::Flip(p, m)),
        2 => (0.0..1.0f64, 1usize..256, any::<u8>()).prop_map(|(p, n, v)| Mutation::Fill(p, n, v)),
        1 => (0.0..1.0f64, prop::collection::vec(any::<u8>(), 1..64))
            .prop_map(|(p, b)| Mutation::Insert(p, b)),
        1 => (0.0..1.0f64).prop_map(Mutation::Truncate),
    ]
}

fn mutate(bytes: &[u8], mutations: &[Mutation]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    for m in mutations {
        if out.is_empty() {
            break;
        }
        let at = |p: f64, len: usize| ((p * len as f64) as usize).min(len - 1);
        match m {
            Mutation::Flip(p, mask) => {
                let i = at(*p, out.len());
                out[i] ^= mask;
            }
            Mutation::Fill(p, n, v) => {
                let i = at(*p, out.len());
                let end = (i + n).min(out.len());
                out[i..end].fill(*v);
            }
            Mutation::Insert(p, b) => {
                let i = at(*p, out.len());
                out.splice(i..i, b.iter().copied());
            }
            Mutation::Truncate(p) => {
                let n = at(*p, out.len());
                out.truncate(n);
            }
        }
    }
    out
}

/// Runs `f` on its own thread: Err when it panics or does not end in CASE_LIMIT.
fn ends_without_panic<T: Send + 'static>(
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        let _ = tx.send(outcome);
    });
    match rx.recv_timeout(CASE_LIMIT) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(_)) => Err(format!("{what}: panicked")),
        Err(_) => Err(format!("{what}: no answer in {CASE_LIMIT:?}")),
    }
}

/// A small grey frame with a few blobs, as a marker image would be.
fn blobs(w: u32, h: u32) -> image::GrayImage {
    image::GrayImage::from_fn(w, h, |x, y| {
        let on = (x / 7 + y / 5) % 4 == 0 && (x % 7) < 4 && (y % 5) < 3;
        image::Luma([if on { 220 } else { (x * 3 + y) as u8 % 40 }])
    })
}

/// One valid file of each image format this build reads, named by its extension.
fn valid_images(dir: &Path) -> Vec<PathBuf> {
    let grey = blobs(61, 37);
    let rgb = image::DynamicImage::ImageLuma8(grey.clone()).to_rgb8();
    let mut paths = Vec::new();
    for ext in ["png", "jpg", "bmp", "tif", "pgm", "gif", "webp"] {
        let path = dir.join(format!("valid.{ext}"));
        match ext {
            "jpg" | "gif" | "webp" => rgb.save(&path),
            _ => grey.save(&path),
        }
        .unwrap_or_else(|e| panic!("{ext}: {e}"));
        paths.push(path);
    }
    paths
}

type Made = std::sync::OnceLock<(tempfile::TempDir, Vec<PathBuf>)>;
static IMAGES: Made = Made::new();
#[cfg(feature = "video")]
static CLIPS: Made = Made::new();

/// The valid files, made on first use in a folder kept for the whole run.
fn made_once(cell: &'static Made, make: fn(&Path) -> Vec<PathBuf>) -> &'static [PathBuf] {
    &cell
        .get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            let files = make(dir.path());
            (dir, files)
        })
        .1
}

fn case_file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, .. ProptestConfig::default() })]

    /// Every image format: loading a mutated file gives a grey image or an error.
    #[test]
    fn mutated_images_load_or_fail_cleanly(
        format in 0usize..7,
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let source = &made_once(&IMAGES, valid_images)[format];
        let bytes = mutate(&std::fs::read(source).unwrap(), &mutations);
        let name = format!("case.{}", source.extension().unwrap().to_str().unwrap());
        let path = case_file(dir.path(), &name, &bytes);
        let result = ends_without_panic("image", move || {
            markerscope::frame::image::GrayImage::load(&path).map(|g| (g.width, g.height))
        });
        prop_assert!(result.is_ok(), "{name} {mutations:?}: {}", result.unwrap_err());
    }

    /// The configuration file: a mutated default.toml gives settings and a list of problems.
    #[cfg(feature = "gui")]
    #[test]
    fn mutated_config_is_read_or_reported(mutations in prop::collection::vec(mutation(), 1..8)) {
        let text = markerscope::ui::config::DEFAULT_CONFIG;
        let bytes = mutate(text.as_bytes(), &mutations);
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let result = ends_without_panic("config", move || {
            let mut settings = markerscope::ui::UiSettings::default();
            settings.apply_toml(&text, "fuzzed").len()
        });
        prop_assert!(result.is_ok(), "{mutations:?}: {}", result.unwrap_err());
    }
}

/// Clips of four containers, made once by the ffmpeg command line.
#[cfg(feature = "video")]
fn valid_clips(dir: &Path) -> Vec<PathBuf> {
    let mut clips = Vec::new();
    for (name, codec) in [
        (
            "clip.mp4",
            &["-c:v", "libx264", "-g", "5", "-pix_fmt", "yuv420p"][..],
        ),
        ("clip.mkv", &["-c:v", "ffv1"][..]),
        ("clip.avi", &["-c:v", "mjpeg"][..]),
        (
            "clip.ts",
            &["-c:v", "libx264", "-g", "5", "-pix_fmt", "yuv420p"][..],
        ),
    ] {
        let path = dir.join(name);
        let input = [
            "-f",
            "lavfi",
            "-i",
            "testsrc2=size=96x64:rate=10:duration=1",
        ];
        crate::util::ffmpeg(&[&input[..], codec, &[path.to_str().unwrap()]].concat());
        clips.push(path);
    }
    clips
}

#[cfg(feature = "video")]
proptest! {
    #![proptest_config(ProptestConfig { cases: 500, .. ProptestConfig::default() })]

    /// Video containers: a mutated clip opens and gives frames until its end, or an error.
    #[test]
    fn mutated_clips_decode_or_fail_cleanly(
        clip in 0usize..4,
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let source = &made_once(&CLIPS, valid_clips)[clip];
        let bytes = mutate(&std::fs::read(source).unwrap(), &mutations);
        let name = format!("case.{}", source.extension().unwrap().to_str().unwrap());
        let path = case_file(dir.path(), &name, &bytes);
        let result = ends_without_panic("clip", move || -> markerscope::Result<u64> {
            let mut source = markerscope::source::SourceSpec::parse(path.to_str().unwrap())?.open()?;
            let mut frames = 0;
            // A damaged frame is an error for that frame; the source goes on to its end.
            for _ in 0..1000 {
                match source.next_frame() {
                    Ok(Some(_)) => frames += 1,
                    Ok(None) => break,
                    Err(_) => {}
                }
            }
            Ok(frames)
        });
        prop_assert!(result.is_ok(), "{name} {mutations:?}: {}", result.unwrap_err());
    }
}

/// The harness starts from files that are valid: each loads whole, so the mutations above
/// reach the decoders' inner parts, not only their first checks.
#[test]
fn the_unmutated_inputs_are_valid() {
    for path in made_once(&IMAGES, valid_images) {
        let g = markerscope::frame::image::GrayImage::load(path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!((g.width, g.height), (61, 37), "{}", path.display());
    }
    #[cfg(feature = "video")]
    for path in made_once(&CLIPS, valid_clips) {
        let mut source = markerscope::source::SourceSpec::parse(path.to_str().unwrap())
            .and_then(|s| s.open())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut frames = 0;
        while let Some(frame) = source.next_frame().unwrap() {
            assert_eq!((frame.grey.width, frame.grey.height), (96, 64));
            frames += 1;
        }
        assert_eq!(frames, 10, "{}", path.display());
    }
}
