//! One world from several sources: the components of each frame set, in world coordinates
//! (each source through its own mapping), merged into objects and tracked in the world.
//!
//! Merging: observations of different sources closer than the merge radius (world units) are
//! one object; two observations of one source never are (they are two components). The
//! observations are taken heaviest first, each joining the nearest object within the radius
//! that has none of its source yet, else starting one. An observation cut by its frame's edge
//! (its bounding box touches the edge) has a centroid pulled inwards, so it reaches farther (the
//! radius, plus half its bounding box's diagonal, plus the object's own size as its whole
//! observations show it: a sliver of a disc lies within the disc) and counts only where no
//! source sees the object whole.
//!
//! The merged position is the weighted mean of the whole observations (of the cut ones where
//! there is none), each weighted by the inverse variance of its centroid in world units: a
//! centroid's variance in pixels falls with the pixels it is made of, and a pixel is
//! 1/scale world units, so the weight is area (pixels) × scale² (pixels per world unit,
//! `WorldMapping::pixels_per_unit` at the observation). The closer, finer view counts more.
//!
//! Tracking: the objects' world positions, scaled to pixels of the finest source, go to the
//! pipeline's tracker (`track::Tracker`), one frame set a frame, so that the gates and
//! the motion model are the ones each source's own tracker uses. An object that walks from one
//! view into the next is seen by both in the seam band, so it stays one object and keeps its
//! world track.
//!
//! Square markers need no merging by distance: a marker's identity is its (dictionary, ID),
//! its track the same in every source. The markers of one track in a frame set are one object
//! at the weighted mean of their centres' world positions (weighed as components are), and
//! its world track is the marker's track.

use super::frame_sets::Placement;
use crate::error::Result;
use crate::geometry::WorldMapping;
use crate::output::row_text::MergedObservation;
use crate::output::stream::tuio::{WorldMarker, WorldObject, WorldView};
use crate::pipeline::FrameResult;
use crate::track::{Detection, Tracker, TrackerConfig};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

/// The default merge radius, in pixels of the coarsest source.
pub const MERGE_RADIUS_PX: f64 = 3.0;

/// One component of a frame set in the world.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Observation {
    /// The source it is of.
    pub source: usize,
    pub world: [f64; 2],
    /// Its area in pixels.
    pub area: f64,
    /// Image pixels per world unit where it is.
    pub scale: f64,
    /// Its bounding box touches its frame's edge.
    pub cut: bool,
    /// Half its bounding box's diagonal, in world units.
    pub reach: f64,
}

impl Observation {
    /// The inverse variance of its centroid in world units (up to a common factor).
    fn weight(&self) -> f64 {
        self.area * self.scale * self.scale
    }

    /// Every component of `result` (of `source`, mapped by `mapping`): its world position
    /// (the pipeline's `x_world`, `y_world`) and what merging weighs.
    pub fn of_frame(source: usize, result: &FrameResult, mapping: &WorldMapping) -> Vec<Self> {
        let (w, h) = (result.grey.width, result.grey.height);
        result
            .components
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let (x, y) = result.position(i);
                let scale = mapping.pixels_per_unit(x, y);
                let half_diagonal = 0.5 * f64::from(s.width).hypot(f64::from(s.height));
                Observation {
                    source,
                    world: result.world.get(i).copied().unwrap_or([f64::NAN; 2]),
                    area: s.area as f64,
                    scale,
                    cut: s.left == 0
                        || s.top == 0
                        || s.left + s.width >= w
                        || s.top + s.height >= h,
                    reach: half_diagonal / scale,
                }
            })
            .collect()
    }

    /// Every marker of `result` (of `source`, mapped by `mapping`): its centre's world
    /// position and what merging weighs (markers are whole: the detector reads no cut one).
    pub fn of_markers(source: usize, result: &FrameResult, mapping: &WorldMapping) -> Vec<Self> {
        result
            .markers
            .iter()
            .map(|o| {
                let [x, y] = o.marker.centre();
                Observation {
                    source,
                    world: o.world.unwrap_or([f64::NAN; 2]),
                    area: o.marker.area(),
                    scale: mapping.pixels_per_unit(x, y),
                    cut: false,
                    reach: 0.0,
                }
            })
            .collect()
    }

    fn usable(&self) -> bool {
        self.world.iter().all(|v| v.is_finite()) && self.scale.is_finite() && self.scale > 0.0
    }
}

/// The markers of a frame set merged by identity: for each marker (`tracks`, with its
/// `observations`, in the same order), its track and the weighted mean of the world
/// positions of every marker of its track; a marker seen once keeps its own position, one
/// with no world position has none.
pub fn merge_markers(tracks: &[u64], observations: &[Observation]) -> Vec<MergedObservation> {
    let mut objects: HashMap<u64, (WeightedSum, usize, [f64; 2])> = HashMap::new();
    for (&track, o) in tracks.iter().zip(observations) {
        if o.usable() {
            let object = objects
                .entry(track)
                .or_insert_with(|| (WeightedSum::default(), 0, o.world));
            object.0.add(o);
            object.1 += 1;
        }
    }
    tracks
        .iter()
        .zip(observations)
        .map(|(&track, o)| {
            let world = match objects.get(&track) {
                Some(_) if !o.usable() => [f64::NAN; 2],
                Some((_, 1, own)) => *own,
                Some((sum, ..)) => sum.mean().map_or([f64::NAN; 2], |m| m.0),
                None => [f64::NAN; 2],
            };
            MergedObservation { track, world }
        })
        .collect()
}

/// An object of a frame set being gathered: its sources, and the weighted sums of its whole and
/// its cut observations.
#[derive(Debug)]
struct Object {
    /// Where the first (heaviest) observation put it: the others join by their distance to it.
    seed: [f64; 2],
    /// The radius of a disc of its largest whole observation's area (world units).
    extent: f64,
    sources: Vec<usize>,
    whole: WeightedSum,
    cut: WeightedSum,
}

#[derive(Debug, Default)]
struct WeightedSum {
    weight: f64,
    x: f64,
    y: f64,
    /// Σ weight × area in world units.
    area: f64,
}

impl WeightedSum {
    fn add(&mut self, o: &Observation) {
        let w = o.weight();
        self.weight += w;
        self.x += w * o.world[0];
        self.y += w * o.world[1];
        self.area += w * o.area / (o.scale * o.scale);
    }

    /// The mean position and area (world units); None without observations.
    fn mean(&self) -> Option<([f64; 2], f64)> {
        (self.weight > 0.0).then(|| {
            let w = self.weight;
            ([self.x / w, self.y / w], self.area / w)
        })
    }
}

impl Object {
    fn position_and_area(&self) -> ([f64; 2], f64) {
        self.whole
            .mean()
            .or_else(|| self.cut.mean())
            .unwrap_or(([f64::NAN; 2], 0.0))
    }
}

/// The merged world view of a run: objects merged per frame set, tracked from set to set.
pub struct WorldMerge {
    radius: f64,
    /// Tracker pixels per world unit (the finest source's scale).
    tracker_scale: f64,
    tracker: Tracker,
    /// The last set tracked (sets go to the tracker in increasing order).
    last_set: Option<u64>,
    /// The highest world track ID so far.
    tracks: u64,
}

impl WorldMerge {
    /// For sources mapped by `mappings`; `radius`: the merge radius in world units (None:
    /// `MERGE_RADIUS_PX` pixels of the coarsest source).
    pub fn new(mappings: &[&WorldMapping], radius: Option<f64>) -> Result<WorldMerge> {
        let scales: Vec<f64> = mappings
            .iter()
            .map(|m| {
                let n = m.points.len().max(1) as f64;
                let (x, y) = m.points.iter().fold((0.0, 0.0), |a, p| {
                    (a.0 + p.image[0] / n, a.1 + p.image[1] / n)
                });
                m.pixels_per_unit(x, y)
            })
            .filter(|s| s.is_finite() && *s > 0.0)
            .collect();
        let finest = scales.iter().copied().fold(f64::NAN, f64::max);
        let coarsest = scales.iter().copied().fold(f64::NAN, f64::min);
        Ok(WorldMerge {
            radius: radius.unwrap_or(MERGE_RADIUS_PX / coarsest),
            tracker_scale: if finest.is_finite() { finest } else { 1.0 },
            tracker: Tracker::new(TrackerConfig::pipeline())?,
            last_set: None,
            tracks: 0,
        })
    }

    /// The merge radius in world units.
    pub fn radius(&self) -> f64 {
        self.radius
    }

    /// World tracks started so far (the tracker's IDs count up from 1).
    pub fn tracks(&self) -> u64 {
        self.tracks
    }

    /// Merges the observations of frame set `set` and tracks the objects: for each
    /// observation, its object's world track and merged position, and the tracked objects. A
    /// set that comes after a later one was tracked is merged but not tracked (world track 0).
    pub fn set(
        &mut self,
        set: u64,
        observations: &[Observation],
    ) -> (Vec<MergedObservation>, Vec<WorldObject>) {
        let (objects, object_of) = self.merge(observations);
        let tracks = if self.last_set.is_none_or(|last| set > last) {
            self.last_set = Some(set);
            let k = self.tracker_scale;
            let detections: Vec<Detection> = objects
                .iter()
                .map(|o| {
                    let ([x, y], area) = o.position_and_area();
                    Detection::point(x * k, y * k, area * k * k)
                })
                .collect();
            let ids = self.tracker.update(set, &detections);
            self.tracks = ids.iter().copied().fold(self.tracks, u64::max);
            ids
        } else {
            vec![0; objects.len()]
        };
        let tracked = objects
            .iter()
            .zip(&tracks)
            .filter(|(_, &track)| track > 0)
            .map(|(o, &track)| {
                let ([x, y], area) = o.position_and_area();
                WorldObject { track, x, y, area }
            })
            .collect();
        let merged = object_of
            .iter()
            .map(|object| match object {
                Some(j) => MergedObservation {
                    track: tracks[*j],
                    world: objects[*j].position_and_area().0,
                },
                None => MergedObservation {
                    track: 0,
                    world: [f64::NAN; 2],
                },
            })
            .collect();
        (merged, tracked)
    }

    /// The objects of one set, and the object of each observation (None: no world position).
    fn merge(&self, observations: &[Observation]) -> (Vec<Object>, Vec<Option<usize>>) {
        // Whole observations first, heaviest first; the order of the rows between equals.
        let mut order: Vec<usize> = (0..observations.len())
            .filter(|&i| observations[i].usable())
            .collect();
        order.sort_by(|&a, &b| {
            let (oa, ob) = (&observations[a], &observations[b]);
            oa.cut
                .cmp(&ob.cut)
                .then(ob.weight().total_cmp(&oa.weight()))
                .then(a.cmp(&b))
        });
        let mut objects: Vec<Object> = Vec::new();
        let mut object_of = vec![None; observations.len()];
        // The objects by the cell of their seed, cells one merge radius wide: a whole
        // observation reaches only the objects of the 3×3 cells around its own. A cut one
        // reaches farther, and is looked for among all (they are few: on the frames' edges).
        let cell = self.radius;
        let cell_of = |p: [f64; 2]| {
            (cell.is_finite() && cell > 0.0)
                .then(|| ((p[0] / cell).floor() as i64, (p[1] / cell).floor() as i64))
        };
        let mut by_cell: HashMap<(i64, i64), Vec<usize>> = HashMap::new();
        let mut near: Vec<usize> = Vec::new();
        for i in order {
            let o = &observations[i];
            near.clear();
            match cell_of(o.world).filter(|_| !o.cut) {
                Some((cx, cy)) => {
                    for (dx, dy) in (-1..=1).flat_map(|dx| (-1..=1).map(move |dy| (dx, dy))) {
                        if let Some(cell) = by_cell.get(&(cx + dx, cy + dy)) {
                            near.extend(cell);
                        }
                    }
                }
                None => near.extend(0..objects.len()),
            }
            let reach = |object: &Object| match o.cut {
                true => self.radius + o.reach + object.extent,
                false => self.radius,
            };
            let nearest = near
                .iter()
                .map(|&j| (j, &objects[j]))
                .filter(|(_, object)| !object.sources.contains(&o.source))
                .map(|(j, object)| {
                    let d = (object.seed[0] - o.world[0]).hypot(object.seed[1] - o.world[1]);
                    (j, d, reach(object))
                })
                .filter(|&(_, d, reach)| d <= reach)
                .map(|(j, d, _)| (j, d))
                .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
            let j = match nearest {
                Some((j, _)) => j,
                None => {
                    if let Some(key) = cell_of(o.world) {
                        by_cell.entry(key).or_default().push(objects.len());
                    }
                    objects.push(Object {
                        seed: o.world,
                        extent: 0.0,
                        sources: Vec::new(),
                        whole: WeightedSum::default(),
                        cut: WeightedSum::default(),
                    });
                    objects.len() - 1
                }
            };
            let object = &mut objects[j];
            object.sources.push(o.source);
            if o.cut {
                object.cut.add(o);
            } else {
                object.whole.add(o);
                let radius = (o.area / std::f64::consts::PI).sqrt() / o.scale;
                object.extent = object.extent.max(radius);
            }
            object_of[i] = Some(j);
        }
        (objects, object_of)
    }
}

/// A frame placed in its frame set.
pub(super) struct Placed {
    pub source: usize,
    pub time_s: f64,
    pub placement: Placement,
    pub result: Arc<FrameResult>,
}

/// The frame sets of a run whose sources all map into the world: each set's frames held until
/// no later frame can join it (frames come in time order: once one is more than the longest
/// span of a set, a frame period, past the set's reference time), then merged and tracked,
/// and handed on with the merged columns of their rows, in the order they came.
pub(super) struct WorldSets {
    merge: WorldMerge,
    /// The mapping of each source.
    mappings: Vec<Arc<WorldMapping>>,
    /// The sets not merged yet, oldest first: their ID, reference time and frames.
    open: VecDeque<(u64, f64, Vec<Placed>)>,
    /// The newest set seen.
    newest: Option<u64>,
    /// The world positions the sources' frames span so far: [min X, min Y, max X, max Y].
    bounds: [f64; 4],
    /// The markers (their tracks) the merged view has placed.
    markers: HashSet<u64>,
}

/// A frame set merged: its frames, each with the merged world view's columns of its rows, in
/// the order they came, and the set's world view.
pub(super) struct MergedSet {
    pub frames: Vec<MergedFrame>,
    pub view: WorldView,
}

/// A frame of a merged set, with the merged world view's columns of its component rows and of
/// its marker rows.
pub(super) struct MergedFrame {
    pub frame: Placed,
    pub components: Vec<MergedObservation>,
    pub markers: Vec<MergedObservation>,
}

impl WorldSets {
    pub(super) fn new(mappings: Vec<Arc<WorldMapping>>, radius: Option<f64>) -> Result<Self> {
        let refs: Vec<&WorldMapping> = mappings.iter().map(Arc::as_ref).collect();
        Ok(WorldSets {
            merge: WorldMerge::new(&refs, radius)?,
            mappings,
            open: VecDeque::new(),
            newest: None,
            bounds: [
                f64::INFINITY,
                f64::INFINITY,
                f64::NEG_INFINITY,
                f64::NEG_INFINITY,
            ],
            markers: HashSet::new(),
        })
    }

    /// Adds a frame; the frames of the sets that are complete now (`span_s`: how far past a
    /// set's reference time a frame may still join it).
    pub(super) fn add(&mut self, frame: Placed, span_s: f64) -> Vec<MergedSet> {
        let (set, time_s) = (frame.placement.set, frame.time_s);
        let mut out = Vec::new();
        if self.newest.is_none_or(|newest| set > newest) {
            self.newest = Some(set);
            let reference_s = time_s - frame.placement.skew_s;
            self.open.push_back((set, reference_s, vec![frame]));
        } else if let Some(open) = self.open.iter_mut().find(|(id, ..)| *id == set) {
            open.2.push(frame);
        } else {
            // Its set was merged already (a live source's frame come late): merged alone.
            let reference_s = time_s - frame.placement.skew_s;
            out.push(self.merge_set(set, reference_s, vec![frame]));
        }
        while self
            .open
            .front()
            .is_some_and(|(_, reference_s, _)| *reference_s < time_s - span_s)
        {
            if let Some((set, reference_s, frames)) = self.open.pop_front() {
                out.push(self.merge_set(set, reference_s, frames));
            }
        }
        out
    }

    /// What the merged world view did so far.
    pub(super) fn summary(&self) -> super::WorldSummary {
        super::WorldSummary {
            tracks: self.merge.tracks(),
            markers: self.markers.len() as u64,
            merge_radius: self.merge.radius(),
        }
    }

    /// The frames of every set still open (the sources ended).
    pub(super) fn finish(&mut self) -> Vec<MergedSet> {
        let mut out = Vec::new();
        while let Some((set, reference_s, frames)) = self.open.pop_front() {
            out.push(self.merge_set(set, reference_s, frames));
        }
        out
    }

    fn merge_set(&mut self, set: u64, reference_s: f64, frames: Vec<Placed>) -> MergedSet {
        let observations: Vec<Vec<Observation>> = frames
            .iter()
            .map(|f| {
                self.extend_bounds(f);
                Observation::of_frame(f.source, &f.result, &self.mappings[f.source])
            })
            .collect();
        let all: Vec<Observation> = observations.iter().flatten().copied().collect();
        let (merged, objects) = self.merge.set(set, &all);
        let mut merged = merged.into_iter();
        let (markers, world_markers) = self.merge_markers(&frames);
        let mut markers = markers.into_iter();
        let frames = frames
            .into_iter()
            .zip(&observations)
            .map(|(frame, observed)| MergedFrame {
                components: merged.by_ref().take(observed.len()).collect(),
                markers: markers.by_ref().take(frame.result.markers.len()).collect(),
                frame,
            })
            .collect();
        MergedSet {
            frames,
            view: WorldView {
                set,
                time_s: reference_s,
                bounds: self.bounds,
                objects,
                markers: world_markers,
            },
        }
    }

    /// The merged view's columns of the marker rows of `frames`, in their order, and the
    /// view's markers: one per track with a world position, its direction the weighted mean of
    /// its observations' (weighed as their positions are).
    fn merge_markers(&mut self, frames: &[Placed]) -> (Vec<MergedObservation>, Vec<WorldMarker>) {
        let mut tracks = Vec::new();
        let mut observations = Vec::new();
        for f in frames {
            tracks.extend(f.result.markers.iter().map(|o| o.track));
            observations.extend(Observation::of_markers(
                f.source,
                &f.result,
                &self.mappings[f.source],
            ));
        }
        let merged = merge_markers(&tracks, &observations);
        let mut view: Vec<WorldMarker> = Vec::new();
        // Per marker of the view: Σ weight × (cos, sin) of its directions.
        let mut turns: Vec<[f64; 2]> = Vec::new();
        let seen = frames.iter().flat_map(|f| {
            let mapping = &self.mappings[f.source];
            f.result.markers.iter().map(move |m| (m, mapping))
        });
        for (((m, mapping), o), at) in seen.zip(&observations).zip(&merged) {
            if !at.world.iter().all(|v| v.is_finite()) {
                continue;
            }
            let k = match view.iter().position(|v| v.track == at.track) {
                Some(k) => k,
                None => {
                    view.push(WorldMarker {
                        track: at.track,
                        marker_id: m.marker.id,
                        x: at.world[0],
                        y: at.world[1],
                        angle: 0.0,
                    });
                    turns.push([0.0; 2]);
                    view.len() - 1
                }
            };
            // The top edge, corner 0 to corner 1, in the world.
            let ([x0, y0], [x1, y1]) = (m.marker.corner(0), m.marker.corner(1));
            let ([a, b], [c, d]) = (mapping.to_world(x0, y0), mapping.to_world(x1, y1));
            let angle = (d - b).atan2(c - a);
            if angle.is_finite() {
                turns[k][0] += o.weight() * angle.cos();
                turns[k][1] += o.weight() * angle.sin();
            }
        }
        for (marker, [cos, sin]) in view.iter_mut().zip(turns) {
            marker.angle = sin.atan2(cos);
        }
        self.markers.extend(view.iter().map(|m| m.track));
        (merged, view)
    }

    /// The bounds, grown to the world corners of `frame`'s image.
    fn extend_bounds(&mut self, frame: &Placed) {
        let (w, h) = (
            f64::from(frame.result.grey.width) - 0.5,
            f64::from(frame.result.grey.height) - 0.5,
        );
        let mapping = &self.mappings[frame.source];
        for [x, y] in [[-0.5, -0.5], [w, -0.5], [w, h], [-0.5, h]] {
            let [wx, wy] = mapping.to_world(x, y);
            if wx.is_finite() && wy.is_finite() {
                let b = &mut self.bounds;
                *b = [b[0].min(wx), b[1].min(wy), b[2].max(wx), b[3].max(wy)];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::view_scene::{ViewScene, PIXELS_PER_MM};

    /// The observations two views of 320×240 make of the world in `frame`: each disc by every
    /// view that sees it whole, at its true position; `stalled` views give none.
    fn observe(views: &[ViewScene], frame: u64, stalled: &[usize]) -> Vec<(u32, Observation)> {
        let mut out = Vec::new();
        for (k, view) in views.iter().enumerate() {
            if stalled.contains(&k) {
                continue;
            }
            let mapping = mapping_of(view);
            for m in view.truth(frame) {
                // Back into the view's pixels: seen whole there?
                let corner = mapping.to_world(0.0, 0.0);
                let x = (m.x - corner[0]) * PIXELS_PER_MM;
                let r = m.radius * PIXELS_PER_MM;
                if x - r > 0.5 && x + r < 318.5 {
                    let area = std::f64::consts::PI * r * r;
                    let o = Observation {
                        source: k,
                        world: [m.x, m.y],
                        area,
                        scale: PIXELS_PER_MM,
                        cut: false,
                        reach: r / PIXELS_PER_MM,
                    };
                    out.push((m.id, o));
                }
            }
        }
        out
    }

    fn mapping_of(view: &ViewScene) -> WorldMapping {
        let file = view.reference_file();
        WorldMapping::new(file.points, None, &file.units).unwrap()
    }

    #[test]
    fn a_stalled_view_leaves_the_others_objects_and_tracks_as_they_were() {
        let views: Vec<ViewScene> = (0..2)
            .map(|k| ViewScene::new(k, 2, 320, 240).unwrap())
            .collect();
        let mappings: Vec<WorldMapping> = views.iter().map(mapping_of).collect();
        let mut merge = WorldMerge::new(&[&mappings[0], &mappings[1]], None).unwrap();
        // 3 px of either view.
        assert!((merge.radius() - 3.0 / PIXELS_PER_MM).abs() < 1e-9);
        let mut previous: Vec<Option<u64>> = vec![None; 6];
        let (mut kept, mut seen_by_0_throughout) = (0, 0);
        for frame in 0..400 {
            // View 1 stalls for frames 150 to 249, then comes back.
            let stalled: &[usize] = if (150..250).contains(&frame) {
                &[1]
            } else {
                &[]
            };
            let observed = observe(&views, frame, stalled);
            let observations: Vec<Observation> = observed.iter().map(|(_, o)| *o).collect();
            let (merged, _) = merge.set(frame, &observations);
            let mut now: Vec<Option<u64>> = vec![None; 6];
            for ((id, o), m) in observed.iter().zip(&merged) {
                // One object a disc, where the disc is.
                assert!(
                    now[*id as usize].is_none_or(|t| t == m.track),
                    "frame {frame}"
                );
                now[*id as usize] = Some(m.track);
                assert!((m.world[0] - o.world[0]).abs() < 1e-9, "frame {frame}");
            }
            let objects: std::collections::HashSet<u64> = merged.iter().map(|m| m.track).collect();
            assert_eq!(objects.len(), now.iter().flatten().count(), "frame {frame}");
            // The discs view 0 sees in both frames keep their track, the stall's edges too.
            for (id, (before, after)) in previous.iter().zip(&now).enumerate() {
                let by_0 = observed
                    .iter()
                    .any(|(i, o)| *i == id as u32 && o.source == 0);
                if let (Some(b), Some(a), true) = (before, after, by_0) {
                    seen_by_0_throughout += 1;
                    kept += usize::from(a == b);
                }
            }
            previous = now;
        }
        assert!(seen_by_0_throughout > 1000, "{seen_by_0_throughout}");
        assert_eq!(kept, seen_by_0_throughout);
    }

    #[test]
    fn whole_views_outweigh_a_cut_one_and_one_source_never_merges_with_itself() {
        let views: Vec<ViewScene> = (0..2)
            .map(|k| ViewScene::new(k, 2, 320, 240).unwrap())
            .collect();
        let mappings: Vec<WorldMapping> = views.iter().map(mapping_of).collect();
        let mut merge = WorldMerge::new(&[&mappings[0], &mappings[1]], Some(1.0)).unwrap();
        let at = |source, x: f64, area, scale, cut| Observation {
            source,
            world: [x, 10.0],
            area,
            scale,
            cut,
            reach: 3.0,
        };
        let (merged, objects) = merge.set(
            0,
            &[
                // One object seen whole by two sources (the finer view weighs 4 times as
                // much) and cut by a third source's frame edge, 2.5 units off (within its
                // reach): it joins, and does not count.
                at(0, 100.0, 50.0, 2.0, false),
                at(1, 100.5, 50.0, 4.0, false),
                at(2, 102.5, 20.0, 2.0, true),
                // Two components of one source, 0.5 apart: two objects.
                at(1, 200.0, 50.0, 2.0, false),
                at(1, 200.5, 50.0, 2.0, false),
            ],
        );
        let expected = (100.0 * 200.0 + 100.5 * 800.0) / 1000.0;
        for m in &merged[..3] {
            assert!((m.world[0] - expected).abs() < 1e-9, "{m:?}");
            assert_eq!(m.track, merged[0].track);
        }
        assert_ne!(merged[3].track, merged[4].track);
        let tracks: std::collections::HashSet<u64> = merged.iter().map(|m| m.track).collect();
        assert_eq!(tracks.len(), 3);
        assert_eq!(objects.len(), 3);
        assert!(objects
            .iter()
            .any(|o| o.track == merged[0].track && o.x == merged[0].world[0]));
    }

    #[test]
    fn markers_of_one_track_merge_by_weight_and_a_lone_one_keeps_its_position() {
        let at = |source, world: [f64; 2], area, scale| Observation {
            source,
            world,
            area,
            scale,
            cut: false,
            reach: 0.0,
        };
        let observations = [
            at(0, [1.0, 2.0], 100.0, 1.0),
            at(1, [3.0, 4.0], 100.0, 2.0),
            at(1, [0.1, 0.3], 50.0, 2.0),
            at(0, [f64::NAN; 2], 80.0, 1.0),
        ];
        let merged = merge_markers(&[7, 7, 9, 11], &observations);
        // Weights 100 and 400: the finer view counts four times as much.
        let mean = [(1.0 + 4.0 * 3.0) / 5.0, (2.0 + 4.0 * 4.0) / 5.0];
        for m in &merged[..2] {
            assert_eq!(m.track, 7);
            assert!((m.world[0] - mean[0]).abs() < 1e-12 && (m.world[1] - mean[1]).abs() < 1e-12);
        }
        assert_eq!(
            merged[2],
            MergedObservation {
                track: 9,
                world: [0.1, 0.3]
            }
        );
        assert_eq!(merged[3].track, 11);
        assert!(merged[3].world.iter().all(|v| v.is_nan()));
    }
}
