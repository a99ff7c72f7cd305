//! One JSON object per frame: `{"frame":F,"time_s":T,"file":"","width":W,"height":H,
//! "components":[...],"markers":[...]}`. Each component is an object with the CSV's fields,
//! exactly as a row of `analyze --format jsonl` (`crate::output::export::write_json_row`); each
//! square marker an object with its track, `marker_id`, `dictionary`, `hamming` (bits
//! corrected), `corner0_x` … `corner3_y` (OpenCV's corner order, pixel centres at whole
//! coordinates), `angle_deg`, `rvec` and `tvec` (its pose, `null` without one) and `x_world`,
//! `y_world` (its centre in world coordinates, `null` without a world mapping).
//!
//! In a run of several sources the object also has `"source":K,"source_name":"…",
//! "frame_set":S` after `file` (`super::SourceTag`), and when every source maps into the
//! world each component and each marker ends with its merged world view's `world_track`,
//! `merged_x_world` and `merged_y_world` (as the rows' columns; `null` where empty).
//!
//! Over UDP, a frame whose object would not fit one datagram is sent as several objects, each
//! with some of the components and markers and `"part":P,"parts":N` (P from 0); the frame
//! fields repeat.

use super::SourceTag;
use crate::fiducial::MarkerObservation;
use crate::output::export::write_json_row;
use crate::output::row_text::MergedObservation;
use crate::pipeline::FrameResult;
use serde::Serialize;
use std::io::Write;
use std::ops::Range;

/// A marker as the JSON streams carry it.
#[derive(Serialize)]
struct MarkerRow<'a> {
    track: u64,
    marker_id: u32,
    dictionary: &'a str,
    hamming: u32,
    corner0_x: f32,
    corner0_y: f32,
    corner1_x: f32,
    corner1_y: f32,
    corner2_x: f32,
    corner2_y: f32,
    corner3_x: f32,
    corner3_y: f32,
    angle_deg: f32,
    rvec: Option<[f64; 3]>,
    tvec: Option<[f64; 3]>,
    x_world: Option<f64>,
    y_world: Option<f64>,
}

impl<'a> MarkerRow<'a> {
    fn new(m: &'a MarkerObservation) -> Self {
        let c = m.marker.corners;
        Self {
            track: m.track,
            marker_id: m.marker.id,
            dictionary: &m.dictionary,
            hamming: m.marker.hamming,
            corner0_x: c[0],
            corner0_y: c[1],
            corner1_x: c[2],
            corner1_y: c[3],
            corner2_x: c[4],
            corner2_y: c[5],
            corner3_x: c[6],
            corner3_y: c[7],
            angle_deg: m.marker.angle_deg,
            rvec: m.pose.map(|p| p.rvec),
            tvec: m.pose.map(|p| p.tvec),
            x_world: m.world.map(|w| w[0]),
            y_world: m.world.map(|w| w[1]),
        }
    }
}

/// Which of a frame's rows one object carries.
#[derive(Clone, Debug, PartialEq)]
pub struct Rows {
    pub components: Range<usize>,
    pub markers: Range<usize>,
}

impl Rows {
    /// Every row of `frame`.
    pub fn all(frame: &FrameResult) -> Self {
        Self {
            components: 0..frame.components.len(),
            markers: 0..frame.markers.len(),
        }
    }
}

/// Writes the object for `frame`'s `rows`; `part` = (P, N) for a split frame; `source`: the
/// frame's source in a run of several.
pub fn write_frame(
    out: &mut Vec<u8>,
    frame: &FrameResult,
    source: Option<&SourceTag>,
    rows: &Rows,
    part: Option<(usize, usize)>,
) {
    // Writing into a Vec cannot fail; serde_json fails only on non-string map keys.
    let _ = write!(out, "{{\"frame\":{},\"time_s\":", frame.index);
    let _ = serde_json::to_writer(&mut *out, &frame.time_s);
    out.extend_from_slice(b",\"file\":");
    let _ = serde_json::to_writer(&mut *out, &frame.name);
    if let Some(tag) = source {
        let _ = write!(out, ",\"source\":{},\"source_name\":", tag.index);
        let _ = serde_json::to_writer(&mut *out, &*tag.name);
        let _ = write!(out, ",\"frame_set\":{}", tag.frame_set);
    }
    let _ = write!(
        out,
        ",\"width\":{},\"height\":{}",
        frame.grey.width, frame.grey.height
    );
    if let Some((p, n)) = part {
        let _ = write!(out, ",\"part\":{p},\"parts\":{n}");
    }
    out.extend_from_slice(b",\"components\":[");
    for i in rows.components.clone() {
        if i > rows.components.start {
            out.push(b',');
        }
        let _ = write_json_row(out, frame, i);
        if let Some(m) = source.and_then(|tag| tag.merged.get(i)) {
            write_merged(out, m);
        }
    }
    out.extend_from_slice(b"],\"markers\":[");
    for i in rows.markers.clone() {
        if i > rows.markers.start {
            out.push(b',');
        }
        let _ = serde_json::to_writer(&mut *out, &MarkerRow::new(&frame.markers[i]));
        if let Some(m) = source.and_then(|tag| tag.merged_markers.get(i)) {
            write_merged(out, m);
        }
    }
    out.extend_from_slice(b"]}");
}

/// Adds a component's or marker's merged world view fields to the object just written
/// (before its `}`).
fn write_merged(out: &mut Vec<u8>, m: &MergedObservation) {
    if out.last() != Some(&b'}') {
        return;
    }
    out.pop();
    let finite = |v: f64| v.is_finite().then_some(v);
    out.extend_from_slice(b",\"world_track\":");
    let _ = serde_json::to_writer(&mut *out, &(m.track > 0).then_some(m.track));
    out.extend_from_slice(b",\"merged_x_world\":");
    let _ = serde_json::to_writer(&mut *out, &finite(m.world[0]));
    out.extend_from_slice(b",\"merged_y_world\":");
    let _ = serde_json::to_writer(&mut *out, &finite(m.world[1]));
    out.push(b'}');
}

/// The whole frame as one object.
pub fn encode_frame(frame: &FrameResult, source: Option<&SourceTag>) -> Vec<u8> {
    let mut out =
        Vec::with_capacity(128 + 320 * frame.components.len() + 400 * frame.markers.len());
    write_frame(&mut out, frame, source, &Rows::all(frame), None);
    out
}

/// Part `p` of `parts` of the range `0..n`.
fn share(n: usize, p: usize, parts: usize) -> Range<usize> {
    n * p / parts..n * (p + 1) / parts
}

/// The frame as objects of at most `max_len` bytes each (one when it fits), components and
/// markers shared out evenly. A single row longer than that (a file name of tens of
/// kilobytes) still goes out alone.
pub fn encode_frame_parts(
    frame: &FrameResult,
    source: Option<&SourceTag>,
    max_len: usize,
) -> Vec<Vec<u8>> {
    let whole = encode_frame(frame, source);
    let (n, k) = (frame.components.len(), frame.markers.len());
    let most = n.max(k);
    if whole.len() <= max_len || most <= 1 {
        return vec![whole];
    }
    let mut parts = (whole.len().div_ceil(max_len) + 1).min(most);
    loop {
        let encoded: Vec<Vec<u8>> = (0..parts)
            .map(|p| {
                let mut out = Vec::with_capacity(max_len);
                let rows = Rows {
                    components: share(n, p, parts),
                    markers: share(k, p, parts),
                };
                write_frame(&mut out, frame, source, &rows, Some((p, parts)));
                out
            })
            .collect();
        if parts == most || encoded.iter().all(|e| e.len() <= max_len) {
            return encoded;
        }
        parts = (parts * 2).min(most);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::stream::tuio::tests::{frame, marker};
    use std::sync::Arc;

    #[test]
    fn a_frame_of_one_of_several_sources_names_it_and_its_set() {
        let f = frame(4, 0.25, &[(1, 10, 10)]);
        let alone: serde_json::Value = serde_json::from_slice(&encode_frame(&f, None)).unwrap();
        assert!(alone.get("source").is_none() && alone.get("frame_set").is_none());
        let tag = SourceTag {
            index: 1,
            name: "cam \"b\".mp4".into(),
            frame_set: 9,
            merged: Arc::new([]),
            merged_markers: Arc::new([]),
        };
        for text in [encode_frame(&f, Some(&tag))]
            .into_iter()
            .chain(encode_frame_parts(&f, Some(&tag), 10))
        {
            let v: serde_json::Value = serde_json::from_slice(&text).unwrap();
            assert_eq!(v["source"], 1);
            assert_eq!(v["source_name"], "cam \"b\".mp4");
            assert_eq!(v["frame_set"], 9);
            assert_eq!(v["frame"], 4);
            assert!(v["components"][0].get("world_track").is_none());
        }
    }

    #[test]
    fn components_carry_their_merged_world_view() {
        let f = frame(4, 0.25, &[(1, 10, 10), (2, 30, 10)]);
        let tag = SourceTag {
            index: 0,
            name: "a".into(),
            frame_set: 4,
            merged: Arc::new([
                MergedObservation {
                    track: 5,
                    world: [1.5, -2.0],
                },
                MergedObservation {
                    track: 0,
                    world: [f64::NAN; 2],
                },
            ]),
            merged_markers: Arc::new([]),
        };
        let v: serde_json::Value = serde_json::from_slice(&encode_frame(&f, Some(&tag))).unwrap();
        let components = v["components"].as_array().unwrap();
        assert_eq!(components[0]["track"], 1);
        assert_eq!(components[0]["world_track"], 5);
        assert_eq!(components[0]["merged_x_world"], 1.5);
        assert_eq!(components[0]["merged_y_world"], -2.0);
        assert!(components[1]["world_track"].is_null());
        assert!(components[1]["merged_x_world"].is_null());
    }

    #[test]
    fn markers_carry_their_row_fields() {
        let mut f = frame(3, 0.5, &[(1, 10, 10)]);
        let mut m = marker(7, 23, 49.5, 24.5, 90.0);
        m.pose = Some(crate::fiducial::Pose {
            rvec: [3.0, 0.1, 0.2],
            tvec: [0.1, -0.2, 0.9],
            reprojection_error: 0.0,
        });
        m.world = Some([12.5, -3.0]);
        f.markers = vec![m, marker(8, 5, 10.0, 10.0, 0.0)];
        let v: serde_json::Value = serde_json::from_slice(&encode_frame(&f, None)).unwrap();
        assert_eq!(v["components"].as_array().unwrap().len(), 1);
        let markers = v["markers"].as_array().unwrap();
        assert_eq!(markers.len(), 2);
        let first = &markers[0];
        assert_eq!(first["track"], 7);
        assert_eq!(first["marker_id"], 23);
        assert_eq!(first["dictionary"], "DICT_4X4_50");
        assert_eq!(first["hamming"], 0);
        assert_eq!(first["angle_deg"], 90.0);
        // Corner 0 of a square turned 90° clockwise sits at the bottom left of its centre.
        assert_eq!(first["corner0_x"], 59.5);
        assert_eq!(first["corner0_y"], 14.5);
        assert_eq!(first["tvec"], serde_json::json!([0.1, -0.2, 0.9]));
        assert_eq!(first["x_world"], 12.5);
        assert!(markers[1]["rvec"].is_null() && markers[1]["y_world"].is_null());
    }

    /// With several sources in one world, each marker ends with its merged world view's
    /// fields, after those it has alone.
    #[test]
    fn markers_carry_their_merged_world_view() {
        let mut f = frame(3, 0.5, &[]);
        f.markers = vec![
            marker(7, 23, 49.5, 24.5, 90.0),
            marker(8, 5, 10.0, 10.0, 0.0),
        ];
        let tag = SourceTag {
            index: 1,
            name: "b".into(),
            frame_set: 3,
            merged: Arc::new([]),
            merged_markers: Arc::new([
                MergedObservation {
                    track: 7,
                    world: [12.5, -3.0],
                },
                MergedObservation {
                    track: 8,
                    world: [f64::NAN; 2],
                },
            ]),
        };
        for text in [encode_frame(&f, Some(&tag))]
            .into_iter()
            .chain(encode_frame_parts(&f, Some(&tag), 300))
        {
            let v: serde_json::Value = serde_json::from_slice(&text).unwrap();
            for m in v["markers"].as_array().unwrap() {
                let alone = serde_json::to_value(MarkerRow::new(&f.markers[0])).unwrap();
                let keys: Vec<&String> = m.as_object().unwrap().keys().collect();
                let mut expected: Vec<&String> = alone.as_object().unwrap().keys().collect();
                let merged = ["world_track", "merged_x_world", "merged_y_world"].map(String::from);
                expected.extend(&merged);
                expected.sort();
                assert_eq!(keys, expected);
                match m["track"].as_u64() {
                    Some(7) => {
                        assert_eq!(m["world_track"], 7);
                        assert_eq!(m["merged_x_world"], 12.5);
                        assert_eq!(m["merged_y_world"], -3.0);
                    }
                    _ => assert!(m["merged_x_world"].is_null() && m["world_track"] == 8),
                }
            }
        }
        // The merged fields follow the marker's own, as the rows' columns do.
        let text = String::from_utf8(encode_frame(&f, Some(&tag))).unwrap();
        assert!(
            text.contains("\"y_world\":null,\"world_track\":7,"),
            "{text}"
        );
        let alone: serde_json::Value = serde_json::from_slice(&encode_frame(&f, None)).unwrap();
        assert!(alone["markers"][0].get("world_track").is_none());
    }

    #[test]
    fn a_frame_too_large_for_a_datagram_shares_its_markers_out_among_the_parts() {
        let marks: Vec<(u64, u32, u32)> = (0..400).map(|i| (i + 1, i as u32 % 98, 1)).collect();
        let mut f = frame(4, 0.0, &marks);
        f.markers = (0..60)
            .map(|i| marker(i + 1, i as u32, 50.0, 25.0, 0.0))
            .collect();
        let parts = encode_frame_parts(&f, None, 20_000);
        assert!(parts.len() > 1);
        let (mut components, mut ids) = (0, Vec::new());
        for (p, part) in parts.iter().enumerate() {
            assert!(part.len() <= 20_000, "{}", part.len());
            let v: serde_json::Value = serde_json::from_slice(part).unwrap();
            assert_eq!(v["part"], p);
            assert_eq!(v["parts"], parts.len());
            components += v["components"].as_array().unwrap().len();
            ids.extend(
                v["markers"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|m| m["marker_id"].as_u64().unwrap()),
            );
        }
        assert_eq!(components, 400);
        assert_eq!(ids, (0..60).collect::<Vec<u64>>());
    }
}
