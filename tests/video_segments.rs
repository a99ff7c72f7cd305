//! A video decoded by several decoders at once, each from its own IDR keyframes (what NVDEC
//! decoding does), gives exactly what one decoder gives from the start: the same frames with
//! the same indices and times, the same frames and data left out with the same reasons, and
//! the same notices. Checked here with FFmpeg's CPU decoders, on clips cut into many segments.

use crate::util::ffmpeg;
use markerscope::source::video::{self, VideoDecoding};
use markerscope::source::FrameSource;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::Path;

/// Everything a source gives, in order: per frame its index, time, size and a digest of its
/// pixels; what it left out; its notices.
#[derive(Debug, PartialEq)]
struct Decoded {
    frames: Vec<(u64, u64, u32, u32, u64)>,
    skipped: Vec<String>,
    notices: Vec<String>,
}

fn decode_all(mut source: Box<dyn FrameSource>) -> Decoded {
    let mut d = Decoded {
        frames: Vec::new(),
        skipped: Vec::new(),
        notices: Vec::new(),
    };
    loop {
        let next = source.next_frame().expect("no error");
        d.skipped
            .extend(source.take_skipped().iter().map(|s| s.to_string()));
        d.notices.extend(source.take_notices());
        let Some(frame) = next else { break };
        let mut h = DefaultHasher::new();
        frame.grey.data.hash(&mut h);
        d.frames.push((
            frame.index,
            frame.time_s.to_bits(),
            frame.grey.width,
            frame.grey.height,
            h.finish(),
        ));
    }
    d
}

fn one_decoder(path: &Path) -> Decoded {
    decode_all(video::open_with(path, false, VideoDecoding::Cpu).unwrap())
}

fn three_decoders(path: &Path) -> Decoded {
    decode_all(video::open_in_segments(path, VideoDecoding::Cpu, 3, 5).unwrap())
}

/// FFmpeg's test pattern, `size` at 30 frames/s for `seconds`, encoded with `args` into `out`.
fn encode(size: &str, seconds: f64, args: &[&str], out: &str) {
    let pattern = format!("testsrc2=size={size}:rate=30:duration={seconds}");
    ffmpeg(&[&["-f", "lavfi", "-i", &pattern][..], args, &[out]].concat());
}

#[test]
fn segments_decode_to_the_frames_of_one_decoder() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name);
    let s = |name: &str| p(name).to_str().unwrap().to_string();
    let h264 = ["-c:v", "libx264", "-pix_fmt", "yuv420p", "-bf", "3"];
    // H.264 with B-frames and an IDR picture every 10 frames, with audio interleaved (MP4,
    // lengths before the NAL units); the same as a transport stream (start codes).
    let with_audio = [
        "-f",
        "lavfi",
        "-i",
        "sine=duration=3",
        "-c:a",
        "aac",
        "-g",
        "10",
    ];
    encode(
        "320x240",
        3.0,
        &[&with_audio[..], &h264].concat(),
        &s("gop10.mp4"),
    );
    ffmpeg(&[
        "-i",
        &s("gop10.mp4"),
        "-c",
        "copy",
        "-f",
        "mpegts",
        &s("gop10.ts"),
    ]);
    // Open groups of pictures: the keyframes are I pictures that later pictures reach across,
    // not IDR pictures; no cut may be made there.
    let open_gop = ["-g", "10", "-x264-params", "open-gop=1"];
    encode(
        "320x240",
        3.0,
        &[&h264[..], &open_gop].concat(),
        &s("open.mp4"),
    );
    // HEVC, closed groups of pictures (IDR every 10 frames).
    let x265 = ["-c:v", "libx265", "-pix_fmt", "yuv420p", "-x265-params"];
    let closed = "keyint=10:min-keyint=10:open-gop=0:log-level=error";
    encode(
        "320x240",
        3.0,
        &[&x265[..], &[closed]].concat(),
        &s("hevc.mp4"),
    );
    for (clip, min_segments) in [
        ("gop10.mp4", 6),
        ("gop10.ts", 6),
        ("open.mp4", 1),
        ("hevc.mp4", 6),
    ] {
        let segments = video::segment_count(&p(clip), 5).unwrap();
        assert!(segments >= min_segments, "{clip}: {segments} segments");
        let one = one_decoder(&p(clip));
        assert_eq!(one.frames.len(), 90, "{clip}");
        assert_eq!(three_decoders(&p(clip)), one, "{clip}: {segments} segments");
    }
    // The H.264 clip's IDR pictures are 10 frames apart: with at least 25 frames a segment,
    // three segments of 30 (the last 30 frames are not cut short).
    assert_eq!(video::segment_count(&p("gop10.mp4"), 25).unwrap(), 3);
    assert_eq!(video::segment_count(&p("gop10.mp4"), 85).unwrap(), 1);
}

#[test]
fn segments_of_damaged_and_joined_streams_leave_out_what_one_decoder_leaves_out() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name);
    let s = |name: &str| p(name).to_str().unwrap().to_string();
    let gop10 = ["-c:v", "libx264", "-pix_fmt", "yuv420p", "-g", "10"];
    encode("320x240", 3.0, &gop10, &s("clean.mp4"));
    // 2 KB of noise in the middle: damaged frames, undecodable data, and the frames predicted
    // from them left out up to the next keyframe.
    let mut bytes = std::fs::read(p("clean.mp4")).unwrap();
    let mid = bytes.len() / 2;
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for b in &mut bytes[mid..mid + 2048] {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = (x >> 24) as u8;
    }
    std::fs::write(p("noisy.mp4"), &bytes).unwrap();
    // Two transport streams of different sizes joined byte for byte: the size changes at frame
    // 100; the timestamps start again there, and the second stream's data
    // ends before the first's (the last segment alone must not take the file for cut short).
    let ts = [
        "-c:v",
        "libx264",
        "-g",
        "10",
        "-bsf:v",
        "h264_mp4toannexb",
        "-f",
        "mpegts",
    ];
    for (name, size, seconds) in [("a.ts", "192x144", 10.0 / 3.0), ("b.ts", "96x72", 3.0)] {
        encode(size, seconds, &ts, &s(name));
    }
    let mut joined = std::fs::read(p("a.ts")).unwrap();
    joined.extend(std::fs::read(p("b.ts")).unwrap());
    std::fs::write(p("joined.ts"), joined).unwrap();
    // Cut short: the last third of the file gone, its last frame's data cut in the middle.
    ffmpeg(&[
        "-i",
        &s("clean.mp4"),
        "-c",
        "copy",
        "-f",
        "mpegts",
        &s("whole.ts"),
    ]);
    let whole = std::fs::read(p("whole.ts")).unwrap();
    std::fs::write(p("cut.ts"), &whole[..whole.len() * 2 / 3]).unwrap();

    for clip in ["noisy.mp4", "joined.ts", "cut.ts"] {
        let segments = video::segment_count(&p(clip), 5).unwrap();
        assert!(segments >= 3, "{clip}: {segments} segments");
        let one = one_decoder(&p(clip));
        // The same file gives the same frames, to the bit, and the same flags on every run.
        assert_eq!(one_decoder(&p(clip)), one, "{clip}: again");
        if clip == "noisy.mp4" {
            assert!(!one.skipped.is_empty(), "{clip}: the damage is seen");
        }
        if clip == "cut.ts" {
            assert!(one.frames.len() >= 55, "{clip}: {}", one.frames.len());
        }
        // The pixels of a frame decoded from damaged data are FFmpeg's concealment, which
        // depends on what the decoder decoded before the last keyframe (`ffmpeg -threads 1
        // -f framemd5` from the file's start and from the keyframe differ there too): a
        // segment starts at a keyframe, one decoder reads on through it. Everything else
        // agrees, flags included.
        assert_eq!(
            without_damaged_pixels(three_decoders(&p(clip))),
            without_damaged_pixels(one),
            "{clip}"
        );
    }
}

/// `d` without the pixel digests of the frames it flags as damaged.
fn without_damaged_pixels(mut d: Decoded) -> Decoded {
    let flagged: Vec<u64> = d
        .skipped
        .iter()
        .filter_map(|s| {
            let (frame, _) = s
                .strip_prefix("frame ")?
                .split_once(" (analysed, flagged damaged)")?;
            frame.parse().ok()
        })
        .collect();
    for f in &mut d.frames {
        if flagged.contains(&f.0) {
            f.4 = 0;
        }
    }
    d
}

#[test]
fn a_segmented_source_dropped_early_stops_its_threads() {
    let dir = tempfile::tempdir().unwrap();
    let clip = dir.path().join("long.mp4");
    let gop10 = ["-c:v", "libx264", "-g", "10"];
    encode("320x240", 10.0, &gop10, clip.to_str().unwrap());
    for frames in [0, 1, 25] {
        let mut source = video::open_in_segments(&clip, VideoDecoding::Cpu, 3, 5).unwrap();
        for i in 0..frames {
            assert_eq!(source.next_frame().unwrap().unwrap().index, i);
        }
        // Dropping returns (the decoders wait on full queues; the planner on them).
        drop(source);
    }
}
