//! TUIO 1.1 over OSC: the frame's components as `/tuio/2Dblb` (the blob profile) and its square
//! markers as `/tuio/2Dobj` (the object profile). Each profile gets its own bundles per frame:
//! `source`, `alive` (the `s` IDs), one `set` per blob or marker and `fseq`.
//!
//! The blobs' `s` IDs are the tracker's IDs. Positions are the components' sub-pixel centroids (their
//! binary centroids without them), normalised to [0, 1] as TUIO requires: x = (cx + 0.5) / width,
//! so that the frame's left edge is 0 and its right edge 1. `w`, `h` are the bounding box over
//! the frame size, `f` the area over the frame's, the angle 0; the velocities (per second) and
//! the motion acceleration follow from the previous frame's position of the same ID.
//!
//! A marker's `s` is its track, its class ID `i` its marker ID, its position the centre of its
//! four corners (normalised as a blob's), its angle `a` the direction of its top edge in radians
//! in [0, 2π), clockwise on screen (the y axis points down); `A` is the rotation speed in turns
//! per second, `r` its change per second. The `2Dobj` bundles are sent while the frame or the
//! previous one had markers, so that a client learns when the last marker has gone.
//!
//! The merged world view of several sources that all map into the world (`WorldView`) has
//! an encoder of its own, whose `source` message says `markerscope:world`: one `2Dblb` bundle
//! per frame set (`fseq` the set's number), the world tracks as `s` IDs, positions normalised
//! to the world's bounds (the sources' frames' corners in the world), x = (X − min X) /
//! (max X − min X), y likewise (the world's axes as they are), `w`, `h` the side of a square of
//! the object's area over the bounds' sides, `f` its area over theirs. With square markers, a
//! `2Dobj` bundle of the same source follows it, while the set or the one before had markers:
//! one `set` per merged marker (`WorldMarker`), `s` its world track (the marker's track), `i`
//! its marker ID, `x`, `y` its merged world position normalised as the blobs', `a` the
//! direction of its top edge in those normalised coordinates, in [0, 2π) from the x axis
//! towards the y axis (clockwise on a screen whose y points down, as a source's markers).
//!
//! A frame whose bundle would not fit one UDP datagram is split into several, each at most
//! `MAX_DATAGRAM` bytes; all parts but the last end with `fseq -1`, the last with the frame's
//! number. While the whole `alive` list takes at most half a datagram, every part repeats it
//! (as TUIO servers do, so that a client that replaces its list with every `alive` keeps the
//! complete list) and carries some of the `set` messages. A longer list cannot be repeated (it
//! would not fit, and repeating it would cost the frame's size times the number of parts), so
//! each part's `alive` then names the IDs of its own `set` messages: the frame's list is the
//! union of its parts' lists up to the `fseq` with its number. Either way a frame costs at most
//! twice its messages' size plus one datagram, and the bundles are built one at a time in one
//! buffer.

use super::osc::{message_len, Arg, Bundle};
use crate::fiducial::MarkerObservation;
use crate::pipeline::FrameResult;
use std::collections::HashMap;
use std::f32::consts::TAU;
use std::io;

/// The blob profile's address (the components).
pub const ADDRESS: &str = "/tuio/2Dblb";
/// The object profile's address (the square markers).
pub const OBJECT_ADDRESS: &str = "/tuio/2Dobj";
/// The `source` message's name.
pub const SOURCE: &str = "markerscope";
/// The largest datagram sent: IPv4's UDP payload limit less a margin.
pub const MAX_DATAGRAM: usize = 65_000;

/// The `source` message's instance for the merged world view.
pub const WORLD_INSTANCE: &str = "world";

/// The merged world view of one frame set (several sources that all map into the world).
#[derive(Clone, Debug, PartialEq)]
pub struct WorldView {
    pub set: u64,
    /// The set's reference time on the run's clock.
    pub time_s: f64,
    /// The world positions the view spans: [min X, min Y, max X, max Y].
    pub bounds: [f64; 4],
    pub objects: Vec<WorldObject>,
    /// The merged square markers (with `--markers`).
    pub markers: Vec<WorldMarker>,
}

/// One square marker of the merged world view: the markers of one track in a frame set.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WorldMarker {
    /// Its world track: the marker's track.
    pub track: u64,
    pub marker_id: u32,
    /// Its merged world position.
    pub x: f64,
    pub y: f64,
    /// The direction of its top edge in the world (radians from the world's x axis towards
    /// its y axis): the weighted mean of the sources' directions.
    pub angle: f64,
}

/// One object of the merged world view.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WorldObject {
    /// Its world track (from 1).
    pub track: u64,
    pub x: f64,
    pub y: f64,
    /// Its area in world units².
    pub area: f64,
}

/// Where a blob or marker was in the previous frame.
#[derive(Clone, Copy)]
struct Motion {
    x: f32,
    y: f32,
    /// Radians (markers; 0 for blobs).
    angle: f32,
    speed: f32,
    /// Turns per second (markers).
    turn_speed: f32,
    time_s: f64,
}

/// Velocities from the previous sighting: (X, Y, A, m, r) with the new `Motion`.
fn motion(prev: Option<&Motion>, x: f32, y: f32, angle: f32, time_s: f64) -> ([f32; 5], Motion) {
    let mut now = Motion {
        x,
        y,
        angle,
        speed: 0.0,
        turn_speed: 0.0,
        time_s,
    };
    let mut values = [0.0; 5];
    if let Some(prev) = prev {
        let dt = (time_s - prev.time_s) as f32;
        if dt > 0.0 {
            let (vx, vy) = ((x - prev.x) / dt, (y - prev.y) / dt);
            now.speed = vx.hypot(vy);
            // The shorter way round, in turns.
            let turn = ((angle - prev.angle + TAU / 2.0).rem_euclid(TAU) - TAU / 2.0) / TAU;
            now.turn_speed = turn / dt;
            values = [
                vx,
                vy,
                now.turn_speed,
                (now.speed - prev.speed) / dt,
                (now.turn_speed - prev.turn_speed) / dt,
            ];
        }
    }
    (values, now)
}

/// `s` IDs are int32 in TUIO; tracks count up from 1.
fn session_id(track: u64) -> i32 {
    (track % (i32::MAX as u64 + 1)) as i32
}

/// Turns frames into TUIO bundles, remembering each blob's and marker's last position for
/// velocities.
#[derive(Default)]
pub struct TuioEncoder {
    /// The `source` message's name: `SOURCE` (None), or `SOURCE:K` for source K of a run of
    /// several (TUIO 1.1's `name:instance`).
    source: Option<String>,
    blobs: HashMap<u64, Motion>,
    objects: HashMap<u64, Motion>,
    /// Whether the last `2Dobj` bundle named any marker.
    objects_alive: bool,
    /// The bundle being built (reused from datagram to datagram).
    buffer: Vec<u8>,
}

/// A blob's `set` message's arguments: "set" s x y a w h f X Y A m r.
fn blob_set(s: i32, values: [f32; 11]) -> [Arg<'static>; 13] {
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

/// A marker's `set` message's arguments: "set" s i x y a X Y A m r.
fn object_set(s: i32, class: i32, values: [f32; 8]) -> [Arg<'static>; 11] {
    let [x, y, a, vx, vy, va, m, r] = values.map(Arg::Float);
    [
        Arg::Str("set"),
        Arg::Int(s),
        Arg::Int(class),
        x,
        y,
        a,
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

    /// The encoder of source `index` of a run of several: its bundles' `source` message says
    /// `markerscope:INDEX`.
    pub fn for_source(index: usize) -> Self {
        Self {
            source: Some(format!("{SOURCE}:{index}")),
            ..Self::default()
        }
    }

    /// The encoder of the merged world view: its bundles' `source` message says
    /// `markerscope:world`.
    pub fn for_world() -> Self {
        Self {
            source: Some(format!("{SOURCE}:{WORLD_INSTANCE}")),
            ..Self::default()
        }
    }

    /// Hands each datagram of one frame set's world view to `send` (a `2Dblb` bundle, split
    /// as a frame's when it would not fit one datagram).
    pub fn encode_world_each(
        &mut self,
        view: &WorldView,
        send: &mut dyn FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        let [x0, y0, x1, y1] = view.bounds;
        let (width, height) = ((x1 - x0).max(1e-300), (y1 - y0).max(1e-300));
        let mut next = HashMap::with_capacity(view.objects.len());
        let sets: Vec<[Arg<'static>; 13]> = view
            .objects
            .iter()
            .map(|o| {
                let x = ((o.x - x0) / width) as f32;
                let y = ((o.y - y0) / height) as f32;
                let ([vx, vy, _, accel, _], now) =
                    motion(self.blobs.get(&o.track), x, y, 0.0, view.time_s);
                next.insert(o.track, now);
                let side = o.area.max(0.0).sqrt();
                let values = [
                    x,
                    y,
                    0.0,
                    (side / width) as f32,
                    (side / height) as f32,
                    (o.area / (width * height)) as f32,
                    vx,
                    vy,
                    0.0,
                    accel,
                    0.0,
                ];
                blob_set(session_id(o.track), values)
            })
            .collect();
        self.blobs = next;
        let ids: Vec<i32> = view.objects.iter().map(|o| session_id(o.track)).collect();
        self.send_blobs(&ids, &sets, view.set, send)?;
        if view.markers.is_empty() && !self.objects_alive {
            self.objects.clear();
            return Ok(());
        }
        let markers: Vec<PlacedMarker> = view
            .markers
            .iter()
            .map(|m| PlacedMarker {
                track: m.track,
                id: m.marker_id,
                x: ((m.x - x0) / width) as f32,
                y: ((m.y - y0) / height) as f32,
                // The direction in the normalised coordinates, where a world unit across is
                // 1 / width and one up 1 / height.
                angle: (m.angle.sin() / height)
                    .atan2(m.angle.cos() / width)
                    .rem_euclid(std::f64::consts::TAU) as f32,
            })
            .collect();
        self.send_markers(&markers, view.time_s, view.set, send)
    }

    /// The object profile's bundles of one frame (or frame set) `fseq` at `time_s`; remembers
    /// the markers' motion, and whether they named any.
    fn send_markers(
        &mut self,
        markers: &[PlacedMarker],
        time_s: f64,
        fseq: u64,
        send: &mut dyn FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut next = HashMap::with_capacity(markers.len());
        let sets: Vec<[Arg<'static>; 11]> = markers
            .iter()
            .map(|m| {
                let ([vx, vy, va, accel, turn_accel], now) =
                    motion(self.objects.get(&m.track), m.x, m.y, m.angle, time_s);
                next.insert(m.track, now);
                let class = m.id.min(i32::MAX as u32) as i32;
                let values = [m.x, m.y, m.angle, vx, vy, va, accel, turn_accel];
                object_set(session_id(m.track), class, values)
            })
            .collect();
        self.objects = next;
        let ids: Vec<i32> = markers.iter().map(|m| session_id(m.track)).collect();
        self.objects_alive = !ids.is_empty();
        let source = self.source.as_deref().unwrap_or(SOURCE);
        send_profile(
            &mut self.buffer,
            source,
            OBJECT_ADDRESS,
            &ids,
            &sets,
            fseq,
            send,
        )
    }

    /// The blob profile's bundles of one frame (or frame set) `fseq`.
    fn send_blobs(
        &mut self,
        ids: &[i32],
        sets: &[[Arg<'static>; 13]],
        fseq: u64,
        send: &mut dyn FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        let source = self.source.as_deref().unwrap_or(SOURCE);
        send_profile(&mut self.buffer, source, ADDRESS, ids, sets, fseq, send)
    }

    /// The datagrams for one frame (one per profile unless a frame had to be split), each a
    /// complete bundle.
    pub fn encode(&mut self, frame: &FrameResult) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let _ = self.encode_each(frame, &mut |d: &[u8]| {
            out.push(d.to_vec());
            Ok(())
        });
        out
    }

    /// Hands each datagram of one frame to `send` as it is built (one buffer for all); the
    /// first error ends the frame.
    pub fn encode_each(
        &mut self,
        frame: &FrameResult,
        send: &mut dyn FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        let (ids, sets) = self.blob_sets(frame);
        self.send_blobs(&ids, &sets, frame.index, send)?;
        if frame.markers.is_empty() && !self.objects_alive {
            self.objects.clear();
            return Ok(());
        }
        let markers = placed_markers(frame);
        self.send_markers(&markers, frame.time_s, frame.index, send)
    }

    /// The blobs' IDs and `set` messages; remembers their motion.
    fn blob_sets(&mut self, frame: &FrameResult) -> (Vec<i32>, Vec<[Arg<'static>; 13]>) {
        let width = frame.grey.width.max(1) as f32;
        let height = frame.grey.height.max(1) as f32;
        let frame_area = width * height;
        let n = frame.components.len().min(frame.track_ids.len());
        let mut sets = Vec::with_capacity(n);
        let mut next = HashMap::with_capacity(n);
        for (i, (c, &id)) in frame.components.iter().zip(&frame.track_ids).enumerate() {
            let (cx, cy) = frame.position(i);
            let x = ((cx + 0.5) / width as f64) as f32;
            let y = ((cy + 0.5) / height as f64) as f32;
            let ([vx, vy, _, accel, _], now) = motion(self.blobs.get(&id), x, y, 0.0, frame.time_s);
            next.insert(id, now);
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
            sets.push(blob_set(session_id(id), values));
        }
        self.blobs = next;
        let ids = frame.track_ids[..n]
            .iter()
            .map(|&t| session_id(t))
            .collect();
        (ids, sets)
    }
}

/// A marker as the object profile sends it: its track, ID, position normalised to [0, 1] and
/// direction in radians in [0, 2π).
struct PlacedMarker {
    track: u64,
    id: u32,
    x: f32,
    y: f32,
    angle: f32,
}

/// The markers of `frame`: their centres normalised as blobs' are, their top edges' directions.
fn placed_markers(frame: &FrameResult) -> Vec<PlacedMarker> {
    let width = frame.grey.width.max(1) as f64;
    let height = frame.grey.height.max(1) as f64;
    frame
        .markers
        .iter()
        .map(|m: &MarkerObservation| {
            let [cx, cy] = m.marker.centre();
            PlacedMarker {
                track: m.track,
                id: m.marker.id,
                x: ((cx + 0.5) / width) as f32,
                y: ((cy + 0.5) / height) as f32,
                angle: m.marker.angle_deg.to_radians().rem_euclid(TAU),
            }
        })
        .collect()
}

/// The encoded size of an `alive` message naming `n` IDs.
fn alive_len(address: &str, n: usize) -> usize {
    // The address, the type tags (",s" and an 'i' per ID), "alive", the IDs; strings padded.
    let padded = |len: usize| (len / 4 + 1) * 4;
    padded(address.len()) + padded(2 + n) + padded("alive".len()) + 4 * n
}

/// Sends one profile's bundles for a frame: `ids[k]` is the `s` ID of `sets[k]` (see the
/// module's notes on splitting).
fn send_profile<const N: usize>(
    buffer: &mut Vec<u8>,
    source: &str,
    address: &str,
    ids: &[i32],
    sets: &[[Arg<'static>; N]],
    index: u64,
    send: &mut dyn FnMut(&[u8]) -> io::Result<()>,
) -> io::Result<()> {
    let source = [Arg::Str("source"), Arg::Str(source)];
    let fixed = Bundle::HEADER_LEN
        + message_len(address, &source)
        + 4
        + message_len(address, &[Arg::Str("fseq"), Arg::Int(0)])
        + 4;
    let set_len = sets.first().map_or(0, |s| message_len(address, s) + 4);
    let whole_alive = alive_len(address, ids.len()) + 4;
    // Whether every part repeats the whole list, and how many sets a part carries.
    let (repeat, per_part) = if fixed + whole_alive + set_len * sets.len() <= MAX_DATAGRAM {
        (true, sets.len().max(1))
    } else if fixed + whole_alive <= MAX_DATAGRAM / 2 {
        (
            true,
            ((MAX_DATAGRAM - fixed - whole_alive) / set_len).max(1),
        )
    } else {
        let fits = |k: usize| fixed + alive_len(address, k) + 4 + k * set_len <= MAX_DATAGRAM;
        let mut k = (MAX_DATAGRAM - fixed) / (set_len + 5);
        while k > 1 && !fits(k) {
            k -= 1;
        }
        (false, k.max(1))
    };
    let fseq = (index % (i32::MAX as u64 + 1)) as i32;
    let parts = sets.len().div_ceil(per_part).max(1);
    let mut alive: Vec<Arg> = Vec::with_capacity(1 + if repeat { ids.len() } else { per_part });
    if repeat {
        alive.push(Arg::Str("alive"));
        alive.extend(ids.iter().map(|&s| Arg::Int(s)));
    }
    for part in 0..parts {
        let range = part * per_part..((part + 1) * per_part).min(sets.len());
        if !repeat {
            alive.clear();
            alive.push(Arg::Str("alive"));
            alive.extend(ids[range.clone()].iter().map(|&s| Arg::Int(s)));
        }
        let mut bundle = Bundle::new(std::mem::take(buffer));
        bundle.message(address, &source);
        bundle.message(address, &alive);
        for set in &sets[range] {
            bundle.message(address, set);
        }
        let seq = if part + 1 == parts { fseq } else { -1 };
        bundle.message(address, &[Arg::Str("fseq"), Arg::Int(seq)]);
        let sent = send(bundle.bytes());
        *buffer = bundle.into_bytes();
        sent?;
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ccl::stats::ComponentStats;
    use crate::ccl::{Backend, Connectivity};
    use crate::frame::image::GrayImage;
    use crate::pipeline::FrameTimings;
    use rosc::{OscPacket, OscType};

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
            grey: GrayImage::new(100, 50, vec![0; 5000]).unwrap().into(),
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

    /// The messages of a blob bundle decoded by rosc: (command, arguments after it).
    fn decode(datagram: &[u8]) -> Vec<(String, Vec<OscType>)> {
        decode_at(datagram, ADDRESS)
    }

    /// The messages of a bundle of the profile at `address`, decoded by rosc.
    pub(crate) fn decode_at(datagram: &[u8], address: &str) -> Vec<(String, Vec<OscType>)> {
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
                assert_eq!(m.addr, address);
                let mut args = m.args.into_iter();
                let Some(OscType::String(command)) = args.next() else {
                    panic!("no command")
                };
                (command, args.collect())
            })
            .collect()
    }

    /// Each source of a run of several has its encoder: its own `source` name, and the
    /// velocities of its own tracks (a track ID of another source is another track).
    #[test]
    fn each_source_says_its_name_and_keeps_its_own_motion() {
        let (mut a, mut b) = (TuioEncoder::for_source(0), TuioEncoder::for_source(2));
        a.encode(&frame(0, 0.0, &[(3, 10, 20)]));
        let moved = decode(&a.encode(&frame(1, 1.0, &[(3, 20, 20)]))[0]);
        assert_eq!(moved[0].1, [OscType::String("markerscope:0".into())]);
        assert_ne!(moved[2].1[7], OscType::Float(0.0), "source 0's track moved");
        let first = decode(&b.encode(&frame(1, 1.0, &[(3, 20, 20)]))[0]);
        assert_eq!(first[0].1, [OscType::String("markerscope:2".into())]);
        assert_eq!(
            first[2].1[7],
            OscType::Float(0.0),
            "new to source 2: no velocity"
        );
    }

    #[test]
    fn the_world_view_is_its_own_source_with_positions_normalised_to_the_world() {
        let mut encoder = TuioEncoder::for_world();
        let view = |set: u64, x: f64| WorldView {
            set,
            time_s: set as f64 / 60.0,
            bounds: [0.0, -10.0, 200.0, 90.0],
            objects: vec![WorldObject {
                track: 7,
                x,
                y: 40.0,
                area: 25.0,
            }],
            markers: Vec::new(),
        };
        let mut datagrams = Vec::new();
        for (set, x) in [(3, 50.0), (4, 51.0)] {
            encoder
                .encode_world_each(&view(set, x), &mut |d: &[u8]| {
                    datagrams.push(d.to_vec());
                    Ok(())
                })
                .unwrap();
        }
        let messages = decode(&datagrams[1]);
        assert_eq!(messages[0].1, [OscType::String("markerscope:world".into())]);
        assert_eq!(messages[1].1, [OscType::Int(7)], "alive");
        let set = &messages[2].1;
        assert_eq!(set[0], OscType::Int(7));
        assert!((float(&set[1]) - 51.0 / 200.0).abs() < 1e-6);
        assert!((float(&set[2]) - 0.5).abs() < 1e-6);
        assert!((float(&set[6]) - 25.0 / 20_000.0).abs() < 1e-9);
        // 1 world unit in 1/60 s across 200: the velocity in widths per second.
        assert!((float(&set[7]) - 60.0 / 200.0).abs() < 1e-3, "{set:?}");
        assert_eq!(messages[3].1, [OscType::Int(4)], "fseq");
        assert_eq!(datagrams.len(), 2, "no marker: no 2Dobj bundle");
    }

    /// The merged markers: a `2Dobj` bundle of the world's source after its blobs, the
    /// markers' world tracks as `s`, their IDs as `i`, positions and directions normalised to
    /// the world's bounds; one more (empty) once the last marker has gone.
    #[test]
    fn the_world_view_carries_its_merged_markers_as_objects() {
        let mut encoder = TuioEncoder::for_world();
        let marker = WorldMarker {
            track: 12,
            marker_id: 23,
            x: 50.0,
            y: 15.0,
            angle: std::f64::consts::FRAC_PI_4,
        };
        let view = |set: u64, markers: Vec<WorldMarker>| WorldView {
            set,
            time_s: set as f64 / 60.0,
            bounds: [0.0, -10.0, 200.0, 90.0],
            objects: Vec::new(),
            markers,
        };
        let moved = WorldMarker { x: 52.0, ..marker };
        let mut datagrams = Vec::new();
        for v in [view(3, vec![marker]), view(4, vec![moved]), view(5, vec![])] {
            encoder
                .encode_world_each(&v, &mut |d: &[u8]| {
                    datagrams.push(d.to_vec());
                    Ok(())
                })
                .unwrap();
        }
        // Blobs and objects for the sets with the marker, and for the one after.
        assert_eq!(datagrams.len(), 6);
        let objects = decode_at(&datagrams[3], OBJECT_ADDRESS);
        assert_eq!(objects[0].1, [OscType::String("markerscope:world".into())]);
        assert_eq!(objects[1].1, [OscType::Int(12)], "alive");
        let set = &objects[2].1;
        assert_eq!(set[..2], [OscType::Int(12), OscType::Int(23)]);
        assert!((float(&set[2]) - 52.0 / 200.0).abs() < 1e-6);
        assert!((float(&set[3]) - 0.25).abs() < 1e-6);
        // 45° in the world: half as far across (200) as up (100) in the normalised frame.
        assert!((float(&set[4]) - 2f32.atan()).abs() < 1e-5, "{set:?}");
        assert!(
            (float(&set[5]) - 2.0 * 60.0 / 200.0).abs() < 1e-3,
            "{set:?}"
        );
        assert_eq!(objects[3].1, [OscType::Int(4)], "fseq");
        let gone = decode_at(&datagrams[5], OBJECT_ADDRESS);
        assert_eq!(gone[1].1, [], "the last marker has gone");
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

    /// A marker seen as a square of side 20 px centred at (cx, cy), its top edge at `angle_deg`.
    pub(crate) fn marker(
        track: u64,
        id: u32,
        cx: f32,
        cy: f32,
        angle_deg: f32,
    ) -> MarkerObservation {
        let (sin, cos) = angle_deg.to_radians().sin_cos();
        let mut corners = [0.0; 8];
        for (k, (u, v)) in [(-10.0, -10.0), (10.0, -10.0), (10.0, 10.0), (-10.0, 10.0)]
            .into_iter()
            .enumerate()
        {
            corners[2 * k] = cx + u * cos - v * sin;
            corners[2 * k + 1] = cy + u * sin + v * cos;
        }
        MarkerObservation {
            marker: crate::fiducial::Marker {
                id,
                dictionary: 0,
                hamming: 0,
                corners,
                angle_deg,
            },
            dictionary: "DICT_4X4_50".into(),
            track,
            pose: None,
            world: None,
        }
    }

    fn float(v: &OscType) -> f32 {
        let OscType::Float(f) = v else {
            panic!("{v:?} is not a float")
        };
        *f
    }

    #[test]
    fn markers_are_2dobj_with_track_class_position_angle_and_rotation_speed() {
        let mut enc = TuioEncoder::new();
        let mut f = frame(4, 2.0, &[(1, 10, 10)]);
        f.markers = vec![
            marker(7, 23, 49.5, 24.5, 90.0),
            marker(8, 3, 9.5, 4.5, -90.0),
        ];
        let datagrams = enc.encode(&f);
        assert_eq!(datagrams.len(), 2, "one blob bundle, one object bundle");
        assert_eq!(decode(&datagrams[0])[1].1, [OscType::Int(1)]);
        let msgs = decode_at(&datagrams[1], OBJECT_ADDRESS);
        let commands: Vec<&str> = msgs.iter().map(|m| m.0.as_str()).collect();
        assert_eq!(commands, ["source", "alive", "set", "set", "fseq"]);
        assert_eq!(msgs[1].1, [OscType::Int(7), OscType::Int(8)]);
        assert_eq!(msgs[4].1, [OscType::Int(4)]);
        let set = &msgs[2].1;
        assert_eq!(set.len(), 10, "s i x y a X Y A m r");
        assert_eq!(set[0], OscType::Int(7));
        assert_eq!(set[1], OscType::Int(23));
        // Centre (49.5, 24.5) of a 100×50 frame, normalised as a blob's centroid.
        assert!((float(&set[2]) - 0.5).abs() < 1e-6);
        assert!((float(&set[3]) - 0.5).abs() < 1e-6);
        assert!((float(&set[4]) - std::f32::consts::FRAC_PI_2).abs() < 1e-6);
        // −90° is 3π/2 in [0, 2π).
        assert!((float(&msgs[3].1[4]) - 3.0 * std::f32::consts::FRAC_PI_2).abs() < 1e-5);

        // A quarter of a second later marker 23 turned a quarter turn further (across 180°):
        // one turn per second.
        let mut f = frame(5, 2.25, &[]);
        f.markers = vec![marker(7, 23, 49.5, 24.5, 180.0)];
        let msgs = decode_at(&enc.encode(&f)[1], OBJECT_ADDRESS);
        assert!((float(&msgs[2].1[7]) - 1.0).abs() < 1e-4, "{:?}", msgs[2].1);
        let mut f = frame(6, 2.5, &[]);
        f.markers = vec![marker(7, 23, 49.5, 24.5, -90.0)];
        let msgs = decode_at(&enc.encode(&f)[1], OBJECT_ADDRESS);
        assert!(
            (float(&msgs[2].1[7]) - 1.0).abs() < 1e-4,
            "the shorter way round"
        );

        // The markers gone: one more object bundle says so, then none.
        let gone = enc.encode(&frame(7, 2.75, &[]));
        assert_eq!(gone.len(), 2);
        let msgs = decode_at(&gone[1], OBJECT_ADDRESS);
        assert!(msgs[1].1.is_empty(), "an empty alive list");
        assert_eq!(enc.encode(&frame(8, 3.0, &[])).len(), 1);
    }

    /// 40,000 components (an 800×800 frame with a pixel every 4 px): every datagram fits, the
    /// frame costs a bounded number of bytes, and the parts' alive lists make up the frame's.
    #[test]
    fn a_dense_frame_is_split_over_bundles_that_fit_with_bounded_bytes() {
        let n: u64 = 40_000;
        let marks: Vec<(u64, u32, u32)> = (0..n).map(|i| (i + 1, i as u32 % 98, 1)).collect();
        let mut enc = TuioEncoder::new();
        let (mut bytes, mut parts, mut sets) = (0, 0, 0);
        let mut alive = std::collections::BTreeSet::new();
        let mut fseqs = Vec::new();
        enc.encode_each(&frame(9, 0.0, &marks), &mut |d: &[u8]| {
            assert!(d.len() <= MAX_DATAGRAM, "a datagram of {} bytes", d.len());
            bytes += d.len();
            parts += 1;
            let msgs = decode(d);
            let part_alive: Vec<i32> = msgs[1]
                .1
                .iter()
                .map(|v| match v {
                    OscType::Int(s) => *s,
                    other => panic!("{other:?} in alive"),
                })
                .collect();
            for m in msgs.iter().filter(|m| m.0 == "set") {
                sets += 1;
                assert!(part_alive.contains(&match m.1[0] {
                    OscType::Int(s) => s,
                    _ => panic!("no s ID"),
                }));
            }
            alive.extend(part_alive);
            fseqs.push(msgs.last().unwrap().1.clone());
            Ok(())
        })
        .unwrap();
        // A set message is 84 bytes, an alive entry 5: at most twice that, plus a datagram.
        assert!(bytes <= 2 * 89 * n as usize + MAX_DATAGRAM, "{bytes} bytes");
        assert_eq!(sets, n);
        assert_eq!(alive.len() as u64, n);
        assert_eq!(alive.first(), Some(&1));
        assert_eq!(alive.last(), Some(&(n as i32)));
        assert!(parts > 1);
        let (last, rest) = fseqs.split_last().unwrap();
        assert_eq!(last, &[OscType::Int(9)]);
        assert!(rest.iter().all(|f| f == &[OscType::Int(-1)]));
    }
}
