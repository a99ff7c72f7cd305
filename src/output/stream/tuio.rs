//! TUIO 1.1 `/tuio/2Dblb` (the blob profile) over OSC: one bundle per frame with `source`,
//! `alive` (the `s` IDs of the frame's components), one `set` per component and `fseq`.
//!
//! The blobs' `s` IDs are the tracker's IDs. Positions are the components' sub-pixel centroids (their
//! binary centroids without them), normalised to [0, 1] as TUIO requires: x = (cx + 0.5) / width,
//! so that the frame's left edge is 0 and its right edge 1. `w`, `h` are the bounding box over
//! the frame size, `f` the area over the frame's, the angle 0; the velocities (per second) and
//! the motion acceleration follow from the previous frame's position of the same ID.
//!
//! A frame whose bundle would not fit one UDP datagram is split as TUIO servers do: each part
//! repeats `source` and `alive` and carries some of the `set` messages; all parts but the last
//! end with `fseq -1`, the last with the frame's number.

use super::osc::{message_len, Arg, Bundle};
use crate::pipeline::FrameResult;
use std::collections::HashMap;

pub const ADDRESS: &str = "/tuio/2Dblb";
/// The `source` message's name.
pub const SOURCE: &str = "markerscope";
/// The largest datagram sent: IPv4's UDP payload limit less a margin.
pub const MAX_DATAGRAM: usize = 65_000;

/// Where a blob was in the previous frame.
#[derive(Clone, Copy)]
struct Motion {
    x: f32,
    y: f32,
    speed: f32,
    time_s: f64,
}

/// Turns frames into TUIO bundles, remembering each blob's last position for velocities.
#[derive(Default)]
pub struct TuioEncoder {
    last: HashMap<u64, Motion>,
    /// The `s` IDs of the previous frame (reused).
    alive: Vec<i32>,
    spare: Vec<Vec<u8>>,
}

/// One `set` message's arguments after the command: s x y a w h f X Y A m r.
fn set_args(s: i32, values: [f32; 11]) -> [Arg<'static>; 13] {
    let [x, y, a, w, h, f, vx, vy, va, m, r] = values.map(Arg::Float);
    [
        Arg::Str("set"),
        Arg::Int(s),
        x,
        y,
        a,
        w,
        h,
        f,
        vx,
        vy,
        va,
        m,
        r,
    ]
}

impl TuioEncoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// The datagrams for one frame (one unless it had to be split), each a complete bundle.
    pub fn encode(&mut self, frame: &FrameResult) -> Vec<Vec<u8>> {
        let width = frame.grey.width.max(1) as f32;
        let height = frame.grey.height.max(1) as f32;
        let frame_area = width * height;
        // `s` IDs are int32 in TUIO; the tracker's IDs count up from 1.
        let blob_id = |id: u64| (id % (i32::MAX as u64 + 1)) as i32;
        self.alive.clear();
        self.alive
            .extend(frame.track_ids.iter().map(|&id| blob_id(id)));
        let mut sets = Vec::with_capacity(frame.components.len());
        let mut next = HashMap::with_capacity(frame.components.len());
        for (i, c) in frame.components.iter().enumerate() {
            let Some(&id) = frame.track_ids.get(i) else {
                break;
            };
            let (cx, cy) = frame.position(i);
            let x = ((cx + 0.5) / width as f64) as f32;
            let y = ((cy + 0.5) / height as f64) as f32;
            let (mut vx, mut vy, mut accel) = (0.0, 0.0, 0.0);
            let mut speed = 0.0;
            if let Some(prev) = self.last.get(&id) {
                let dt = (frame.time_s - prev.time_s) as f32;
                if dt > 0.0 {
                    vx = (x - prev.x) / dt;
                    vy = (y - prev.y) / dt;
                    speed = vx.hypot(vy);
                    accel = (speed - prev.speed) / dt;
                }
            }
            next.insert(
                id,
                Motion {
                    x,
                    y,
                    speed,
                    time_s: frame.time_s,
                },
            );
            let values = [
                x,
                y,
                0.0,
                c.width as f32 / width,
                c.height as f32 / height,
                c.area as f32 / frame_area,
                vx,
                vy,
                0.0,
                accel,
                0.0,
            ];
            sets.push(set_args(blob_id(id), values));
        }
        self.last = next;
        self.bundles(&sets, frame.index)
    }

    fn bundles(&mut self, sets: &[[Arg<'static>; 13]], index: u64) -> Vec<Vec<u8>> {
        let alive: Vec<Arg> = std::iter::once(Arg::Str("alive"))
            .chain(self.alive.iter().map(|&s| Arg::Int(s)))
            .collect();
        let source = [Arg::Str("source"), Arg::Str(SOURCE)];
        let fseq_len = message_len(ADDRESS, &[Arg::Str("fseq"), Arg::Int(0)]) + 4;
        let fixed = Bundle::HEADER_LEN
            + message_len(ADDRESS, &source)
            + 4
            + message_len(ADDRESS, &alive)
            + 4
            + fseq_len;
        let set_len = sets.first().map_or(0, |s| message_len(ADDRESS, s) + 4);
        // At least one set per part, even when alive alone is near the limit.
        let per_part = if set_len == 0 {
            1
        } else {
            (MAX_DATAGRAM.saturating_sub(fixed) / set_len).max(1)
        };
        let fseq = (index % (i32::MAX as u64 + 1)) as i32;
        let parts: Vec<&[[Arg; 13]]> = if sets.is_empty() {
            vec![&[]]
        } else {
            sets.chunks(per_part).collect()
        };
        let last = parts.len() - 1;
        let mut out = Vec::with_capacity(parts.len());
        for (n, part) in parts.into_iter().enumerate() {
            let mut bundle = Bundle::new(self.spare.pop().unwrap_or_default());
            bundle.message(ADDRESS, &source);
            bundle.message(ADDRESS, &alive);
            for set in part {
                bundle.message(ADDRESS, set);
            }
            let seq = if n == last { fseq } else { -1 };
            bundle.message(ADDRESS, &[Arg::Str("fseq"), Arg::Int(seq)]);
            out.push(bundle.into_bytes());
        }
        out
    }

    /// Hands sent datagrams back so their buffers are reused.
    pub fn recycle(&mut self, datagrams: Vec<Vec<u8>>) {
        self.spare.extend(datagrams);
        self.spare.truncate(8);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ccl::stats::ComponentStats;
    use crate::ccl::{Backend, Connectivity};
    use crate::frame::image::GrayImage;
    use crate::pipeline::FrameTimings;
    use rosc::{OscPacket, OscType};
    use std::sync::Arc;

    /// A 100×50 frame with one 2×2 component per (track, x, y) at (x, y).
    pub(crate) fn frame(index: u64, time_s: f64, marks: &[(u64, u32, u32)]) -> FrameResult {
        let components = marks
            .iter()
            .enumerate()
            .map(|(i, &(_, x, y))| ComponentStats {
                label: i as u32 + 1,
                left: x,
                top: y,
                width: 2,
                height: 2,
                area: 4,
                sum_x: 4 * x as u64 + 2,
                sum_y: 4 * y as u64 + 2,
                centroid_x: x as f64 + 0.5,
                centroid_y: y as f64 + 0.5,
            })
            .collect();
        FrameResult {
            index,
            time_s,
            name: String::new(),
            grey: Arc::new(GrayImage::new(100, 50, vec![0; 5000]).unwrap()),
            binary: None,
            labels: None,
            components,
            track_ids: marks.iter().map(|m| m.0).collect(),
            ended_tracks: Vec::new(),
            subpixel: Vec::new(),
            shapes: Vec::new(),
            world: Vec::new(),
            markers: Vec::new(),
            all_count: marks.len() as u32,
            timings: FrameTimings::default(),
            algorithm: "test",
            backend: Backend::Cpu,
            connectivity: Connectivity::Eight,
        }
    }

    /// The messages of a bundle decoded by rosc: (command, arguments after it).
    fn decode(datagram: &[u8]) -> Vec<(String, Vec<OscType>)> {
        let (rest, packet) = rosc::decoder::decode_udp(datagram).unwrap();
        assert!(rest.is_empty());
        let OscPacket::Bundle(bundle) = packet else {
            panic!("not a bundle")
        };
        bundle
            .content
            .into_iter()
            .map(|p| {
                let OscPacket::Message(m) = p else {
                    panic!("nested bundle")
                };
                assert_eq!(m.addr, ADDRESS);
                let mut args = m.args.into_iter();
                let Some(OscType::String(command)) = args.next() else {
                    panic!("no command")
                };
                (command, args.collect())
            })
            .collect()
    }

    #[test]
    fn a_frame_is_source_alive_set_fseq_with_normalised_positions_and_velocities() {
        let mut enc = TuioEncoder::new();
        let first = enc.encode(&frame(7, 1.0, &[(3, 10, 20), (5, 60, 30)]));
        assert_eq!(first.len(), 1);
        let msgs = decode(&first[0]);
        let commands: Vec<&str> = msgs.iter().map(|m| m.0.as_str()).collect();
        assert_eq!(commands, ["source", "alive", "set", "set", "fseq"]);
        assert_eq!(msgs[0].1, [OscType::String(SOURCE.into())]);
        assert_eq!(msgs[1].1, [OscType::Int(3), OscType::Int(5)]);
        assert_eq!(msgs[4].1, [OscType::Int(7)]);
        // Centroid (10.5, 20.5) of a 100×50 frame: ((10.5 + 0.5) / 100, (20.5 + 0.5) / 50).
        let set = &msgs[2].1;
        assert_eq!(set.len(), 12);
        assert_eq!(set[0], OscType::Int(3));
        assert_eq!(set[1], OscType::Float(0.11));
        assert_eq!(set[2], OscType::Float(0.42));
        assert_eq!(set[4], OscType::Float(0.02)); // w = 2 / 100
        assert_eq!(set[5], OscType::Float(0.04)); // h = 2 / 50
        assert_eq!(set[6], OscType::Float(4.0 / 5000.0)); // area / frame area
        assert_eq!(set[7], OscType::Float(0.0)); // no velocity in a blob's first frame

        // Half a second later track 3 moved 10 px right: X = 0.1 / 0.5 s.
        let second = enc.encode(&frame(8, 1.5, &[(3, 20, 20)]));
        let msgs = decode(&second[0]);
        assert_eq!(msgs[1].1, [OscType::Int(3)]);
        let OscType::Float(vx) = msgs[2].1[7] else {
            panic!()
        };
        assert!((vx - 0.2).abs() < 1e-5, "{vx}");
        assert_eq!(msgs[2].1[8], OscType::Float(0.0));
    }

    #[test]
    fn an_empty_frame_still_says_alive_and_fseq() {
        let msgs = decode(&TuioEncoder::new().encode(&frame(2, 0.0, &[]))[0]);
        let commands: Vec<&str> = msgs.iter().map(|m| m.0.as_str()).collect();
        assert_eq!(commands, ["source", "alive", "fseq"]);
        assert!(msgs[1].1.is_empty());
    }

    #[test]
    fn a_large_frame_is_split_into_datagrams_that_fit_with_fseq_minus_one() {
        let marks: Vec<(u64, u32, u32)> = (0..3000).map(|i| (i + 1, i as u32 % 98, 1)).collect();
        let datagrams = TuioEncoder::new().encode(&frame(9, 0.0, &marks));
        assert!(datagrams.len() > 1);
        let mut sets = 0;
        for (n, d) in datagrams.iter().enumerate() {
            assert!(d.len() <= MAX_DATAGRAM, "{}", d.len());
            let msgs = decode(d);
            assert_eq!(msgs[1].1.len(), 3000, "alive is complete in every part");
            sets += msgs.iter().filter(|m| m.0 == "set").count();
            let fseq = &msgs.last().unwrap().1;
            let want = if n + 1 == datagrams.len() { 9 } else { -1 };
            assert_eq!(fseq, &[OscType::Int(want)]);
        }
        assert_eq!(sets, 3000);
    }
}
