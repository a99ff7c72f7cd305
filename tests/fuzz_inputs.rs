//! Mutation fuzzing of everything a user hands the program as bytes: images of every format
//! this build reads and video clips (MP4, MKV, AVI, MPEG-TS); the window's TOML settings are
//! fuzzed the same way in its unit tests. Valid files are made by the test, then bytes are
//! flipped, runs overwritten, inserted or cut off (`mutation`).
//! Property: every case ends, in a time limit, with a result or an error, never a panic.

use crate::mutation::{ends_without_panic, mutate, mutation};
use proptest::prelude::*;
use std::path::{Path, PathBuf};

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
