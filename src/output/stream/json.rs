//! One JSON object per frame: `{"frame":F,"time_s":T,"file":"","width":W,"height":H,
//! "components":[...]}`, each component an object with the CSV's fields, exactly as a row of
//! `analyze --format jsonl` (`crate::output::export::write_json_row`).
//!
//! Over UDP, a frame whose object would not fit one datagram is sent as several objects, each
//! with some of the components and `"part":P,"parts":N` (P from 0); the frame fields repeat.

use crate::output::export::write_json_row;
use crate::pipeline::FrameResult;
use std::io::Write;
use std::ops::Range;

/// Writes the object for `frame`'s components in `range`; `part` = (P, N) for a split frame.
pub fn write_frame(
    out: &mut Vec<u8>,
    frame: &FrameResult,
    range: Range<usize>,
    part: Option<(usize, usize)>,
) {
    // Writing into a Vec cannot fail; serde_json fails only on non-string map keys.
    let _ = write!(out, "{{\"frame\":{},\"time_s\":", frame.index);
    let _ = serde_json::to_writer(&mut *out, &frame.time_s);
    out.extend_from_slice(b",\"file\":");
    let _ = serde_json::to_writer(&mut *out, &frame.name);
    let _ = write!(
        out,
        ",\"width\":{},\"height\":{}",
        frame.grey.width, frame.grey.height
    );
    if let Some((p, n)) = part {
        let _ = write!(out, ",\"part\":{p},\"parts\":{n}");
    }
    out.extend_from_slice(b",\"components\":[");
    for i in range.clone() {
        if i > range.start {
            out.push(b',');
        }
        let _ = write_json_row(out, frame, i);
    }
    out.extend_from_slice(b"]}");
}

/// The whole frame as one object.
pub fn encode_frame(frame: &FrameResult) -> Vec<u8> {
    let mut out = Vec::with_capacity(128 + 320 * frame.components.len());
    write_frame(&mut out, frame, 0..frame.components.len(), None);
    out
}

/// The frame as objects of at most `max_len` bytes each (one when it fits). A single component
/// longer than that (a file name of tens of kilobytes) still goes out alone.
pub fn encode_frame_parts(frame: &FrameResult, max_len: usize) -> Vec<Vec<u8>> {
    let whole = encode_frame(frame);
    let n = frame.components.len();
    if whole.len() <= max_len || n <= 1 {
        return vec![whole];
    }
    let mut parts = whole.len().div_ceil(max_len) + 1;
    loop {
        let per = n.div_ceil(parts.min(n));
        let count = n.div_ceil(per);
        let encoded: Vec<Vec<u8>> = (0..count)
            .map(|p| {
                let mut out = Vec::with_capacity(max_len);
                write_frame(
                    &mut out,
                    frame,
                    p * per..((p + 1) * per).min(n),
                    Some((p, count)),
                );
                out
            })
            .collect();
        if per == 1 || encoded.iter().all(|e| e.len() <= max_len) {
            return encoded;
        }
        parts *= 2;
    }
}
