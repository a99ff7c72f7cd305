//! Candidate quads: a local threshold at one window size, the dark connected components
//! (`ccl`'s labeling and statistics), the outer boundary of each component that could be a
//! marker's border, and the four corners of that boundary when it is a convex quadrilateral.
//!
//! A marker's black border is one dark component whatever its inner bits; its outer boundary is
//! the marker's outline. Components are picked by their statistics first (size, distance to the
//! image border), so only a few boundaries are traced, each in time proportional to its length.

use super::params::DetectorParams;
use crate::ccl::cpu::lsl::Lsl;
use crate::ccl::stats::ComponentStats;
use crate::ccl::{Connectivity, Labeler, Want};
use crate::error::{Error, Result};
#[cfg(test)]
use crate::frame::image::LabelImage;
use crate::frame::image::{BinaryImage, GrayImage};
use crate::threshold::binarize::{Binarizer, Outputs};
use rayon::prelude::*;

/// Components a task of the outline tracing takes at least: most are passed over by their
/// statistics, so a task is a few hundred of them.
const TRACE_CHUNK: usize = 256;

/// A quadrilateral: four corners, clockwise on screen (image y points down).
pub type Quad = [[f64; 2]; 4];

/// The eight neighbours, clockwise on screen from east: (dx, dy).
const STEPS: [(i32, i32); 8] = [
    (1, 0),
    (1, 1),
    (0, 1),
    (-1, 1),
    (-1, 0),
    (-1, -1),
    (0, -1),
    (1, -1),
];

/// The candidate quads of one frame at one threshold window, with the buffers reused from frame
/// to frame.
#[derive(Default)]
pub struct QuadFinder {
    binarizer: Binarizer,
    mask: Option<BinaryImage>,
    labeler: Lsl,
    longest_walk: usize,
}

impl QuadFinder {
    /// Points of the longest outline walk of the last `find` (a trace stopped at its limit
    /// counts the points it walked): the sequential part of the GPU's candidate kernel.
    pub fn longest_walk(&self) -> usize {
        self.longest_walk
    }

    /// The quads of the dark regions of `grey` under the mean-C threshold of `window`: each a
    /// convex 4-gon approximating a component's outer boundary, within the size limits.
    pub fn find(
        &mut self,
        grey: &GrayImage,
        window: u32,
        params: &DetectorParams,
    ) -> Result<Vec<Quad>> {
        let (w, h) = (grey.width, grey.height);
        let mask = match &mut self.mask {
            Some(m) => m,
            None => self.mask.insert(BinaryImage::zeros(w, h)?),
        };
        // Dark = grey ≤ local mean − C: OpenCV's THRESH_BINARY_INV adaptive threshold.
        self.binarizer.adaptive_mean(
            grey,
            window,
            params.threshold_constant,
            true,
            Outputs {
                bytes: Some(mask),
                ..Outputs::default()
            },
        )?;
        // No label image: each outline is traced on the mask from its component's first pixel
        // (`outline_on_mask`), which the labeler gives from its runs.
        let labeling = self.labeler.label(mask, Connectivity::Eight, Want::Stats)?;
        let Some(stats) = labeling.stats else {
            return Err(Error::Invalid("the labeling returned no statistics".into()));
        };
        let starts = self.labeler.component_starts(w);
        let limits = OutlineLimits::of(params, w, h);
        let mask = &*mask;
        // Each component's outline is traced apart (on all cores), the quads kept in the
        // components' order; only the components traced are listed.
        let traced: Vec<(usize, Option<Quad>)> = stats
            .par_iter()
            .with_min_len(TRACE_CHUNK)
            .map_init(Vec::new, |contour, s| {
                let limit = limits.trace_limit(s)?;
                contour.clear();
                let start = (starts.first_column(s)? as i32, s.top as i32);
                let traced = outline_on_mask(mask, start, limit, contour);
                let quad = traced
                    .then(|| candidate_quad(contour, &limits, params, w, h))
                    .flatten();
                Some((contour.len(), quad))
            })
            .flatten()
            .collect();
        self.longest_walk = traced.iter().map(|t| t.0).max().unwrap_or(0);
        Ok(traced.into_iter().filter_map(|t| t.1).collect())
    }
}

/// The candidate quad of a traced outer boundary: a convex 4-gon approximating it, within the
/// size limits, its shortest side long enough and its corners inside the image's border.
fn candidate_quad(
    contour: &[(i32, i32)],
    limits: &OutlineLimits,
    params: &DetectorParams,
    w: u32,
    h: u32,
) -> Option<Quad> {
    let n = contour.len() as f64;
    if n < limits.min_perimeter || n > limits.max_perimeter {
        return None;
    }
    let quad = approximate_quad(contour, n * params.polygon_accuracy_rate)?;
    let min_side = (0..4)
        .map(|k| dist2(quad[k], quad[(k + 1) % 4]))
        .fold(f64::MAX, f64::min);
    if min_side < (n * params.min_corner_distance_rate).powi(2) {
        return None;
    }
    let border = params.min_distance_to_border as f64;
    let inside = quad.iter().all(|&[x, y]| {
        x >= border && y >= border && x <= w as f64 - 1.0 - border && y <= h as f64 - 1.0 - border
    });
    inside.then_some(quad)
}

/// Outline points per pixel of a box's half perimeter (width + height − 2) that a marker's
/// border can have: a convex outline takes at most 2 (each step moves one pixel along x, y or
/// both, and goes once each way across the box), a thin ring that the threshold opened is
/// walked on both of its sides, twice that (docs/algorithms.md, "Outline limits").
pub(crate) const OUTLINE_POINTS_PER_BOX: u64 = 4;
/// Points a marker's outline may have beyond that (the walk back at a corner, noise).
pub(crate) const OUTLINE_SLACK: u64 = 8;

/// The outline lengths a candidate may have in a `w × h` frame, in pixels.
pub(crate) struct OutlineLimits {
    pub min_perimeter: f64,
    pub max_perimeter: f64,
    /// Points after which a boundary trace stops (longer than any candidate's).
    pub longest_trace: usize,
}

impl OutlineLimits {
    pub(crate) fn of(params: &DetectorParams, w: u32, h: u32) -> OutlineLimits {
        let longest = w.max(h) as f64;
        let max_perimeter = params.max_perimeter_rate * longest;
        OutlineLimits {
            min_perimeter: params.min_perimeter_rate * longest,
            max_perimeter,
            longest_trace: (max_perimeter as usize).saturating_add(1),
        }
    }

    /// The points after which the trace of component `s` stops: the fewer of the frame's
    /// `longest_trace` and what a marker's border in `s`'s box can have. None when the
    /// statistics rule the component out before its trace (a box too small or too large for
    /// a candidate's outline). The GPU's
    /// candidate kernel applies the same rule (fid_trace_limit).
    pub(crate) fn trace_limit(&self, s: &ComponentStats) -> Option<usize> {
        // A square of side a has a boundary of about 4a and a box of a to a·√2 a side.
        let box_perimeter = 2.0 * (s.width + s.height) as f64;
        if box_perimeter < self.min_perimeter || box_perimeter > 1.5 * self.max_perimeter {
            return None;
        }
        if s.width < 4 || s.height < 4 {
            return None;
        }
        let half_box = s.width as u64 + s.height as u64 - 2;
        let in_box = OUTLINE_POINTS_PER_BOX * half_box + OUTLINE_SLACK;
        Some((self.longest_trace as u64).min(in_box) as usize)
    }
}

fn dist2(a: [f64; 2], b: [f64; 2]) -> f64 {
    (a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2)
}

/// The outer boundary of the component `s` into `out`, from its first pixel in raster order
/// (the first pixel of its label on row `top`). False when the outline is longer than `limit`
/// points. The reference `outline_on_mask` is checked against.
#[cfg(test)]
pub(crate) fn component_outline(
    labels: &LabelImage,
    s: &ComponentStats,
    limit: usize,
    out: &mut Vec<(i32, i32)>,
) -> bool {
    let (w, h) = (labels.width as i32, labels.height as i32);
    let is = |x: i32, y: i32| {
        x >= 0 && y >= 0 && x < w && y < h && labels.data[(y * w + x) as usize] == s.label
    };
    let row = &labels.data[s.top as usize * w as usize..(s.top as usize + 1) * w as usize];
    let Some(start) = (s.left as usize..(s.left + s.width) as usize).find(|&x| row[x] == s.label)
    else {
        return false;
    };
    trace_outer_boundary(&is, (start as i32, s.top as i32), limit, out)
}

/// The outer boundary of the 8-connected component of `mask` whose first pixel in raster order
/// is `start` (as `component_outline` on its labels): from a pixel of the component every step
/// goes to an 8-neighbour, and a foreground 8-neighbour of a component's pixel is the
/// component's, so the mask answers every question the labels would, alike.
pub(crate) fn outline_on_mask(
    mask: &BinaryImage,
    start: (i32, i32),
    limit: usize,
    out: &mut Vec<(i32, i32)>,
) -> bool {
    let (w, h) = (mask.width as i32, mask.height as i32);
    let is =
        |x: i32, y: i32| x >= 0 && y >= 0 && x < w && y < h && mask.data[(y * w + x) as usize] != 0;
    trace_outer_boundary(&is, start, limit, out)
}

/// The outer boundary of the 8-connected region of `is` that `start` belongs to, clockwise on
/// screen, when `start`'s west neighbour is outside it and no pixel above it is inside (the
/// first pixel of a region in raster order): Moore-neighbour tracing, each boundary pixel once
/// per visit. Stops and returns false after `limit` points (an outline too long to matter).
pub fn trace_outer_boundary(
    is: &impl Fn(i32, i32) -> bool,
    start: (i32, i32),
    limit: usize,
    out: &mut Vec<(i32, i32)>,
) -> bool {
    out.clear();
    out.push(start);
    // The first pixel's west neighbour is background: the search starts from there.
    let mut p = start;
    let mut back = 4usize;
    let mut first_move: Option<(i32, i32)> = None;
    while out.len() <= limit {
        let Some((q, next_back)) = moore_step(is, p, back) else {
            return true; // a single pixel
        };
        if p == start {
            match first_move {
                None => first_move = Some(q),
                Some(m) if m == q => {
                    out.pop(); // the start, reached again
                    return true;
                }
                Some(_) => {}
            }
        }
        back = next_back;
        p = q;
        out.push(p);
    }
    false
}

/// One step of the Moore-neighbour trace standing on `p` with the backtrack `back` (the
/// direction of a neighbour outside the region): the first neighbour inside clockwise after
/// the backtrack, and the new backtrack (the neighbour checked just before it, seen from it;
/// always an even direction). None for a single pixel.
fn moore_step(
    is: &impl Fn(i32, i32) -> bool,
    p: (i32, i32),
    back: usize,
) -> Option<((i32, i32), usize)> {
    let (d, q) = (1..=8).find_map(|k| {
        let d = (back + k) % 8;
        let q = (p.0 + STEPS[d].0, p.1 + STEPS[d].1);
        is(q.0, q.1).then_some((d, q))
    })?;
    let b = STEPS[(d + 7) % 8];
    let b_abs = (p.0 + b.0, p.1 + b.1);
    Some((q, direction(b_abs.0 - q.0, b_abs.1 - q.1)))
}

/// The index in `STEPS` of a neighbour offset.
fn direction(dx: i32, dy: i32) -> usize {
    STEPS.iter().position(|&s| s == (dx, dy)).unwrap_or(4)
}

/// The closed boundary as a convex quadrilateral, clockwise on screen, when the Douglas–Peucker
/// simplification at `epsilon` pixels leaves four corners; None otherwise.
pub fn approximate_quad(contour: &[(i32, i32)], epsilon: f64) -> Option<Quad> {
    let n = contour.len();
    if n < 8 {
        return None;
    }
    let pt = |i: usize| {
        let (x, y) = contour[i % n];
        [x as f64, y as f64]
    };
    // Two far-apart points are corners of any convex outline: the farthest from the first
    // point, and the farthest from that one.
    let farthest = |from: usize| {
        (0..n)
            .max_by(|&a, &b| dist2(pt(a), pt(from)).total_cmp(&dist2(pt(b), pt(from))))
            .unwrap_or(0)
    };
    let a = farthest(0);
    let b = farthest(a);
    if a == b {
        return None;
    }
    let (a, b) = (a.min(b), a.max(b));
    let mut corners = vec![a];
    simplify(&pt, a, b, epsilon, &mut corners, 8)?;
    corners.push(b);
    simplify(&pt, b, a + n, epsilon, &mut corners, 8)?;
    if corners.len() != 4 {
        return None;
    }
    let mut quad = [
        pt(corners[0]),
        pt(corners[1]),
        pt(corners[2]),
        pt(corners[3]),
    ];
    // Convex: every turn the same way.
    let turn = |k: usize| {
        let (p, q, r) = (quad[k], quad[(k + 1) % 4], quad[(k + 2) % 4]);
        (q[0] - p[0]) * (r[1] - q[1]) - (q[1] - p[1]) * (r[0] - q[0])
    };
    let turns = [turn(0), turn(1), turn(2), turn(3)];
    if !(turns.iter().all(|&t| t > 0.0) || turns.iter().all(|&t| t < 0.0)) {
        return None;
    }
    if turns[0] < 0.0 {
        quad.swap(1, 3);
    }
    Some(quad)
}

/// Douglas–Peucker between contour indices `from` and `to` (exclusive ends, `to` may pass the
/// end of the contour): pushes the kept points in order. None once more than `max` are kept.
fn simplify(
    pt: &impl Fn(usize) -> [f64; 2],
    from: usize,
    to: usize,
    epsilon: f64,
    out: &mut Vec<usize>,
    max: usize,
) -> Option<()> {
    if to <= from + 1 {
        return Some(());
    }
    let (p, q) = (pt(from), pt(to));
    let (dx, dy) = (q[0] - p[0], q[1] - p[1]);
    let len = dx.hypot(dy).max(1e-12);
    let (mut best, mut at) = (-1.0, from);
    for i in from + 1..to {
        let r = pt(i);
        let d = ((r[0] - p[0]) * dy - (r[1] - p[1]) * dx).abs() / len;
        if d > best {
            (best, at) = (d, i);
        }
    }
    if best <= epsilon {
        return Some(());
    }
    simplify(pt, from, at, epsilon, out, max)?;
    out.push(at);
    if out.len() > max {
        return None;
    }
    simplify(pt, at, to, epsilon, out, max)
}

/// The outline trace cut into segments between seed states and chained again: the form the
/// GPU's `fid_long_outline` walks in parallel, here to prove that the chain is the sequential
/// trace (`trace_outer_boundary`) point for point. A trace state is a pixel and its
/// backtrack, and the next state depends on nothing else, so from a seed state the rest of
/// the trace is that seed's walk whichever walker reached it.
#[cfg(test)]
pub(crate) mod seeded_trace {
    use super::{moore_step, STEPS};

    /// Rows and columns of a box that carry seeds, at most this many each way (the GPU's
    /// FID_SEED_LINES).
    pub const SEED_LINES: u32 = 64;
    /// Seed pixels an outline may have at most (the GPU's FID_SEED_SLOTS): a box with more
    /// on its seed lines takes every other line until they fit.
    pub const SEED_SLOTS: usize = 256;
    /// Outlines whose limit passes this many points are traced by seeds (FID_SEEDED_FROM);
    /// shorter ones by one warp's walk.
    pub const SEEDED_FROM: usize = 512;

    /// A seed line: a row (y = top + k · 2^shift) or a column (x = left + k · 2^shift).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
    enum Line {
        Row(i32),
        Column(i32),
    }

    impl Line {
        /// The pixel at `v` along the line (its x on a row, its y on a column).
        fn pixel(self, v: i32) -> (i32, i32) {
            match self {
                Line::Row(y) => (v, y),
                Line::Column(x) => (x, v),
            }
        }
    }

    /// The seed pixels of a component's box: on every `1 << shift`-th row from the top each
    /// pixel of the label whose west or east neighbour is not the label, on every such column
    /// from the left each whose north or south neighbour is not (the ends of the label's runs
    /// on the line). With more than `slots` of them the spacing doubles until they fit;
    /// where even one row and one column have too many, only each line's two extremes are
    /// seeds. The slots are ordered by (rows before columns, line, position along it); a pixel
    /// on both a seed row and a seed column takes its row's slot when it ends a run there.
    pub struct Seeds {
        left: i32,
        top: i32,
        shift: u32,
        /// Per slot its line and the pixel's x (rows) or y (columns), in order.
        at: Vec<(Line, i32)>,
    }

    impl Seeds {
        pub fn of(
            is: &impl Fn(i32, i32) -> bool,
            (left, top, w, h): (i32, i32, i32, i32),
            (lines, slots): (u32, usize),
        ) -> Seeds {
            let longer = w.max(h) as u32;
            let mut shift = longer.div_ceil(lines).next_power_of_two().trailing_zeros();
            let ends = |line: Line| -> Vec<(Line, i32)> {
                let on = |v: i32| {
                    let (x, y) = line.pixel(v);
                    is(x, y)
                };
                let along = match line {
                    Line::Row(_) => left..left + w,
                    Line::Column(_) => top..top + h,
                };
                along
                    .filter(|&v| on(v) && !(on(v - 1) && on(v + 1)))
                    .map(|v| (line, v))
                    .collect()
            };
            let seed_lines = |shift: u32| {
                let rows = (top..top + h).step_by(1 << shift).map(Line::Row);
                rows.chain((left..left + w).step_by(1 << shift).map(Line::Column))
            };
            loop {
                let at: Vec<(Line, i32)> = seed_lines(shift).flat_map(ends).collect();
                if at.len() <= slots {
                    return Seeds::ordered(left, top, shift, at);
                }
                if 1u32 << shift >= longer {
                    break;
                }
                shift += 1;
            }
            // Even the first row and column have too many: each line's extremes only, on the
            // spacing of `lines` (the start, the top row's leftmost pixel, stays a seed).
            shift = longer.div_ceil(lines).next_power_of_two().trailing_zeros();
            let at = seed_lines(shift)
                .flat_map(|line| {
                    let all = ends(line);
                    let extremes = [all.first().copied(), all.last().copied()];
                    let two = all.len() > 1;
                    extremes.into_iter().take(1 + two as usize).flatten()
                })
                .collect();
            Seeds::ordered(left, top, shift, at)
        }

        /// Seeds of `at` (each pixel in its first line: its row when it is on one).
        fn ordered(left: i32, top: i32, shift: u32, mut at: Vec<(Line, i32)>) -> Seeds {
            at.sort();
            let row_slot = |&(line, v): &(Line, i32)| match line {
                Line::Column(x) => at.binary_search(&(Line::Row(v), x)).is_err(),
                Line::Row(_) => true,
            };
            let at = at.iter().filter(|s| row_slot(s)).copied().collect();
            Seeds {
                left,
                top,
                shift,
                at,
            }
        }

        pub fn slots(&self) -> usize {
            self.at.len()
        }

        /// The pixel of seed slot `slot`.
        pub fn pixel(&self, slot: usize) -> Option<(i32, i32)> {
            let (line, v) = *self.at.get(slot)?;
            Some(line.pixel(v))
        }

        /// The slot whose pixel `p` is: its row's when it has one, else its column's.
        pub fn slot_of(&self, p: (i32, i32)) -> Option<usize> {
            let mask = (1 << self.shift) - 1;
            let (u, v) = (p.0 - self.left, p.1 - self.top);
            let row = (v & mask == 0)
                .then(|| self.at.binary_search(&(Line::Row(p.1), p.0)).ok())
                .flatten();
            row.or_else(|| {
                (u & mask == 0)
                    .then(|| self.at.binary_search(&(Line::Column(p.0), p.1)).ok())
                    .flatten()
            })
        }
    }

    /// Where a walk from a seed state stopped.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub enum Stop {
        /// On seed state `state` (slot · 4 + backtrack / 2).
        Seed(usize),
        /// At the start pixel about to make the first move again: the outline is closed.
        End,
        /// After `limit` steps without either.
        Limit,
    }

    /// A walk from a seed state: where it stopped and after how many steps.
    #[derive(Clone, Copy, Debug)]
    pub struct Segment {
        pub stop: Stop,
        pub steps: usize,
    }

    pub fn state_of(slot: usize, back: usize) -> usize {
        4 * slot + back / 2
    }

    /// The walk from seed state (p, back) until it stands on a seed state, closes the outline
    /// (Jacob's rule: at `start` with `first_move` next) or has taken `limit` steps.
    pub fn walk(
        is: &impl Fn(i32, i32) -> bool,
        seeds: &Seeds,
        (mut p, mut back): ((i32, i32), usize),
        (start, first_move): ((i32, i32), (i32, i32)),
        limit: usize,
    ) -> Segment {
        let mut steps = 0;
        loop {
            let Some((q, next_back)) = moore_step(is, p, back) else {
                // Only a single pixel has no neighbour: the start's case, handled before.
                return Segment {
                    stop: Stop::End,
                    steps,
                };
            };
            if steps > 0 {
                if p == start && q == first_move {
                    return Segment {
                        stop: Stop::End,
                        steps,
                    };
                }
                if let Some(slot) = seeds.slot_of(p) {
                    return Segment {
                        stop: Stop::Seed(state_of(slot, back)),
                        steps,
                    };
                }
            }
            if steps == limit {
                return Segment {
                    stop: Stop::Limit,
                    steps,
                };
            }
            (p, back) = (q, next_back);
            steps += 1;
        }
    }

    /// What the seeded trace did besides its points.
    #[derive(Default, Debug)]
    pub struct Chained {
        /// Segments chained from the start to the end (or to the limit).
        pub segments: usize,
        /// Steps of the longest chained segment: the GPU's sequential part.
        pub longest_segment: usize,
        /// Steps of the longest walk of any seed, chained or not.
        pub longest_walk: usize,
    }

    /// `trace_outer_boundary(is, start, limit, out)` by seeds: every seed state walks to the
    /// next (they are independent: the GPU walks them side by side), then the walks are chained
    /// from the start state and the chained walks' points concatenated. `start` is the
    /// region's first pixel in raster order and `bbox` (left, top, width, height) its box.
    pub fn trace_by_seeds(
        is: &impl Fn(i32, i32) -> bool,
        start: (i32, i32),
        bbox: (i32, i32, i32, i32),
        spacing: (u32, usize),
        limit: usize,
        out: &mut Vec<(i32, i32)>,
    ) -> (bool, Chained) {
        out.clear();
        out.push(start);
        let mut chained = Chained::default();
        if limit == 0 {
            return (false, chained); // stopped before the first step
        }
        let Some((first_move, _)) = moore_step(is, start, 4) else {
            return (true, chained); // a single pixel
        };
        let seeds = Seeds::of(is, bbox, spacing);
        let start_state = state_of(seeds.slot_of(start).expect("the start is a seed"), 4);
        // Every seed state: a seed pixel (in its first slot) and a backtrack outside.
        let walks: Vec<Option<Segment>> = (0..4 * seeds.slots())
            .map(|state| {
                let (slot, back) = (state / 4, 2 * (state % 4));
                let p = seeds.pixel(slot)?;
                let outside = !is(p.0 + STEPS[back].0, p.1 + STEPS[back].1);
                (seeds.slot_of(p) == Some(slot) && outside)
                    .then(|| walk(is, &seeds, (p, back), (start, first_move), limit))
            })
            .collect();
        chained.longest_walk = walks.iter().flatten().map(|s| s.steps).max().unwrap_or(0);
        // The chain: from the start state each walk leads to the state the next one starts
        // from. `steps` counts the trace's steps before the current walk.
        let (mut state, mut steps) = (start_state, 0);
        let mut order = Vec::new();
        let closed = loop {
            let segment = walks[state].expect("a walk stops only on seed states");
            order.push((state, segment.steps));
            chained.longest_segment = chained.longest_segment.max(segment.steps);
            match segment.stop {
                Stop::End => break steps + segment.steps < limit,
                Stop::Limit => break false,
                Stop::Seed(next) => {
                    steps += segment.steps;
                    if steps >= limit {
                        break false;
                    }
                    state = next;
                }
            }
        };
        chained.segments = order.len();
        // The points: each chained walk's own pixels (its last state is the next walk's
        // first), up to the end; a trace stopped at the limit has limit + 1.
        let total = if closed {
            steps_to_end(&order)
        } else {
            limit + 1
        };
        out.clear();
        for (i, &(state, steps)) in order.iter().enumerate() {
            let (slot, mut back) = (state / 4, 2 * (state % 4));
            let mut p = seeds.pixel(slot).expect("a seed");
            let stopped_at_limit = i + 1 == order.len() && !closed;
            let take = if stopped_at_limit { steps + 1 } else { steps };
            for j in 0..take {
                if j > 0 {
                    (p, back) = moore_step(is, p, back).expect("a walked step");
                }
                if out.len() == total {
                    break;
                }
                out.push(p);
            }
        }
        (closed, chained)
    }

    fn steps_to_end(order: &[(usize, usize)]) -> usize {
        order.iter().map(|&(_, steps)| steps).sum()
    }

    /// The dark components of `grey` under the threshold of `window`: labels and statistics
    /// (the CPU detector's first two steps for one window).
    pub fn components(
        grey: &crate::frame::image::GrayImage,
        window: u32,
        params: &crate::fiducial::params::DetectorParams,
    ) -> (
        crate::frame::image::LabelImage,
        Vec<crate::ccl::stats::ComponentStats>,
    ) {
        use crate::ccl::{cpu::lsl::Lsl, Connectivity, Labeler, Want};
        use crate::threshold::binarize::{Binarizer, Outputs};
        let mut mask = crate::frame::image::BinaryImage::zeros(grey.width, grey.height).unwrap();
        let outputs = Outputs {
            bytes: Some(&mut mask),
            ..Outputs::default()
        };
        Binarizer::default()
            .adaptive_mean(grey, window, params.threshold_constant, true, outputs)
            .unwrap();
        let labeling = Lsl::new()
            .label(&mask, Connectivity::Eight, Want::Both)
            .unwrap();
        (labeling.labels.unwrap(), labeling.stats.unwrap())
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use crate::ccl::cpu::lsl::Lsl;
        use crate::ccl::{Connectivity, Labeler, Want};
        use crate::fiducial::candidates::trace_outer_boundary;
        use crate::frame::image::{BinaryImage, LabelImage};

        /// The GPU's seed lines and cap.
        const FULL: (u32, usize) = (SEED_LINES, SEED_SLOTS);

        /// Every component of `labels` traced sequentially and by seeds (with `lines` seed
        /// lines) without a limit and at limits around and below its outline's length: the
        /// same points and the same answer. Returns the components, and for those with 40
        /// outline points or more their number, their chained segments and the longest one.
        fn check_every_component(
            labels: &LabelImage,
            spacing: (u32, usize),
        ) -> (usize, [usize; 3]) {
            let (w, h) = (labels.width as i32, labels.height as i32);
            let mut boxes = std::collections::BTreeMap::new();
            for y in 0..h {
                for x in 0..w {
                    let l = labels.data[(y * w + x) as usize];
                    if l != 0 {
                        let b = boxes.entry(l).or_insert((x, y, x, y));
                        *b = (b.0.min(x), b.1, b.2.max(x), y);
                    }
                }
            }
            let (mut seq, mut by_seeds) = (Vec::new(), Vec::new());
            let (mut components, mut long) = (0, [0; 3]);
            for (&l, &(x0, y0, x1, y1)) in &boxes {
                let is = |x: i32, y: i32| {
                    x >= 0 && y >= 0 && x < w && y < h && labels.data[(y * w + x) as usize] == l
                };
                let start = ((x0..=x1).find(|&x| is(x, y0)).unwrap(), y0);
                let bbox = (x0, y0, x1 - x0 + 1, y1 - y0 + 1);
                let whole = trace_outer_boundary(&is, start, 1 << 24, &mut seq);
                let n = seq.len();
                for limit in [1 << 24, n + 1, n, n.saturating_sub(1), n / 2, n / 7, 3, 0] {
                    let closed = trace_outer_boundary(&is, start, limit, &mut seq);
                    let (seeded, chained) =
                        trace_by_seeds(&is, start, bbox, spacing, limit, &mut by_seeds);
                    assert_eq!(
                        (seeded, &by_seeds),
                        (closed, &seq),
                        "label {l} box {bbox:?} limit {limit} seeds {spacing:?}"
                    );
                    if limit == 1 << 24 && n >= 40 {
                        assert!(whole && closed);
                        long[0] += 1;
                        long[1] += chained.segments;
                        long[2] = long[2].max(chained.longest_segment);
                    }
                }
                components += 1;
            }
            (components, long)
        }

        fn labelled(m: &BinaryImage) -> LabelImage {
            let labeling = Lsl::new().label(m, Connectivity::Eight, Want::Labels);
            labeling.unwrap().labels.unwrap()
        }

        /// A small xorshift generator: the same images on every run.
        struct Random(u64);

        impl Random {
            fn next(&mut self) -> u64 {
                self.0 ^= self.0 << 13;
                self.0 ^= self.0 >> 7;
                self.0 ^= self.0 << 17;
                self.0
            }
            fn below(&mut self, n: i32) -> i32 {
                (self.next() % n.max(1) as u64) as i32
            }
        }

        /// A random binary image: noise, filled and hollow boxes (rings with gaps), discs,
        /// one-pixel lines and spurs (random walks), many of them cut by the frame's edge.
        fn random_image(r: &mut Random, w: i32, h: i32) -> BinaryImage {
            let mut on = vec![false; (w * h) as usize];
            let mut set = |x: i32, y: i32, v: bool| {
                if x >= 0 && y >= 0 && x < w && y < h {
                    on[(y * w + x) as usize] = v;
                }
            };
            let density = r.below(40);
            for y in 0..h {
                for x in 0..w {
                    if r.below(100) < density / 3 {
                        set(x, y, true);
                    }
                }
            }
            for _ in 0..r.below(12) + 2 {
                let (cx, cy) = (r.below(w + 10) - 5, r.below(h + 10) - 5);
                let (a, b) = (r.below(w / 2) + 1, r.below(h / 2) + 1);
                match r.below(5) {
                    0 | 1 => {
                        let t = r.below(4) + 1;
                        let hollow = r.below(2) == 0;
                        for y in cy..cy + b {
                            for x in cx..cx + a {
                                let edge =
                                    x < cx + t || y < cy + t || x >= cx + a - t || y >= cy + b - t;
                                if !hollow || edge {
                                    set(x, y, r.below(40) != 0);
                                }
                            }
                        }
                    }
                    2 => {
                        let rad = a.min(b);
                        for y in cy - rad..=cy + rad {
                            for x in cx - rad..=cx + rad {
                                if (x - cx).pow(2) + (y - cy).pow(2) <= rad * rad {
                                    set(x, y, true);
                                }
                            }
                        }
                    }
                    3 => {
                        let (dx, dy) = (r.below(3) - 1, r.below(3) - 1);
                        for k in 0..a.max(b) * 2 {
                            set(cx + k * dx, cy + k * dy, true);
                        }
                    }
                    _ => {
                        let (mut x, mut y) = (cx, cy);
                        for _ in 0..a * b {
                            set(x, y, true);
                            x += r.below(3) - 1;
                            y += r.below(3) - 1;
                        }
                    }
                }
                // Holes and cuts.
                for _ in 0..r.below(20) {
                    set(r.below(w), r.below(h), false);
                }
            }
            BinaryImage::from_fn(w as u32, h as u32, |x, y| {
                on[(y as i32 * w + x as i32) as usize]
            })
            .unwrap()
        }

        /// The GPU kernel cuts outlines at the same seeds as this proof.
        #[test]
        fn the_kernel_seeds_as_the_proof_does() {
            let source = include_str!("../../kernels/fiducial.cu");
            for line in [
                format!("#define FID_SEED_LINES {SEED_LINES}\n"),
                format!("#define FID_SEED_SLOTS {SEED_SLOTS}\n"),
                format!("#define FID_SEEDED_FROM {SEEDED_FROM}\n"),
            ] {
                assert!(source.contains(&line), "{line}");
            }
        }

        #[test]
        fn the_seeded_trace_is_the_sequential_trace_on_random_images() {
            let mut r = Random(0x9e37_79b9_7f4a_7c15);
            let (mut components, mut long) = (0, [0; 3]);
            for image in 0..120 {
                let (w, h) = (r.below(150) + 8, r.below(100) + 8);
                let labels = labelled(&random_image(&mut r, w, h));
                // The GPU's seeds, coarse and fine lines, and caps that thin the lines or
                // leave only their extremes.
                for spacing in [
                    FULL,
                    (3, SEED_SLOTS),
                    (1 << 12, SEED_SLOTS),
                    (1 << 12, 64),
                    (1 << 12, 8),
                ] {
                    let (c, [n, s, l]) = check_every_component(&labels, spacing);
                    assert!(c > 0, "image {image}");
                    components += c;
                    if spacing == FULL {
                        long = [long[0] + n, long[1] + s, long[2].max(l)];
                    }
                }
            }
            let [n, segments, longest] = long;
            eprintln!("{components} components; {n} of 40 points or more: {segments} segments, the longest {longest} steps");
            assert!(components > 3000, "{components}");
            // The long outlines were cut: their chains have several segments each.
            assert!(n > 200 && segments > 4 * n, "{segments} segments for {n}");
        }

        #[test]
        fn the_seeded_trace_is_the_sequential_trace_on_marker_scenes() {
            use crate::fiducial::params::DetectorParams;
            use crate::fiducial::render::{render_scene, SceneSpec};
            use crate::fiducial::Dictionary;
            let params = DetectorParams::default();
            let mut checked = 0;
            for (name, seed) in [("DICT_4X4_50", 11), ("DICT_APRILTAG_36h11", 12)] {
                let dict = Dictionary::predefined(name).unwrap();
                let spec = SceneSpec {
                    width: 480,
                    height: 360,
                    markers: 8,
                    min_side: 20.0,
                    max_side: 120.0,
                    perspective: 0.25,
                    seed,
                    ..SceneSpec::default()
                };
                let scene = render_scene(&dict, &spec).unwrap();
                for window in params.windows().unwrap() {
                    let (labels, _) = components(&scene.image, window, &params);
                    checked += check_every_component(&labels, FULL).0;
                }
            }
            assert!(checked > 1000, "{checked}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::seeded_trace::components;
    use super::*;

    fn labels_of(w: u32, h: u32, inside: impl Fn(i32, i32) -> bool) -> BinaryImage {
        BinaryImage::from_fn(w, h, |x, y| inside(x as i32, y as i32)).unwrap()
    }

    fn trace(m: &BinaryImage, start: (i32, i32), out: &mut Vec<(i32, i32)>) {
        let (w, h) = (m.width as i32, m.height as i32);
        let is = |x: i32, y: i32| x >= 0 && y >= 0 && x < w && y < h && m.get(x as u32, y as u32);
        assert!(trace_outer_boundary(&is, start, 10_000, out));
    }

    #[test]
    fn traces_a_ring_clockwise_and_finds_its_corners() {
        // A 20×20 ring, 3 px thick, at (5, 7).
        let l = labels_of(40, 40, |x, y| {
            let (u, v) = (x - 5, y - 7);
            (0..20).contains(&u)
                && (0..20).contains(&v)
                && !((3..17).contains(&u) && (3..17).contains(&v))
        });
        let mut c = Vec::new();
        trace(&l, (5, 7), &mut c);
        assert_eq!(c.len(), 76, "{c:?}");
        assert_eq!((c[0], c[1]), ((5, 7), (6, 7)));
        let q = approximate_quad(&c, 76.0 * 0.03).unwrap();
        let mut corners: Vec<[i32; 2]> = q.iter().map(|p| [p[0] as i32, p[1] as i32]).collect();
        corners.sort();
        assert_eq!(corners, [[5, 7], [5, 26], [24, 7], [24, 26]]);
        // Clockwise on screen: the second corner is to the right of or below the first.
        let cross =
            (q[1][0] - q[0][0]) * (q[2][1] - q[0][1]) - (q[1][1] - q[0][1]) * (q[2][0] - q[0][0]);
        assert!(cross > 0.0);
    }

    #[test]
    fn a_single_pixel_and_a_disc_are_no_quads() {
        let l = labels_of(10, 10, |x, y| x == 4 && y == 4);
        let mut c = Vec::new();
        trace(&l, (4, 4), &mut c);
        assert_eq!(c, [(4, 4)]);
        let l = labels_of(60, 60, |x, y| (x - 30).pow(2) + (y - 30).pow(2) <= 400);
        trace(&l, (30, 10), &mut c);
        assert!(c.len() > 60);
        assert!(approximate_quad(&c, c.len() as f64 * 0.03).is_none());
    }

    #[test]
    fn an_outline_starts_at_its_own_component() {
        // A diamond with its top at (20, 5) and a dot on the same row inside its box.
        let m = labels_of(40, 40, |x, y| {
            (x == 11 && y == 5)
                || ((x - 20).abs() + (y - 15).abs() <= 10 && (x - 20).abs() + (y - 15).abs() >= 7)
        });
        let labeling = Lsl::new()
            .label(&m, Connectivity::Eight, Want::Both)
            .unwrap();
        let (labels, stats) = (labeling.labels.unwrap(), labeling.stats.unwrap());
        let diamond = stats.iter().find(|s| s.width == 21).unwrap();
        let mut c = Vec::new();
        assert!(component_outline(&labels, diamond, 1000, &mut c));
        assert_eq!(c[0], (20, 5));
        let q = approximate_quad(&c, c.len() as f64 * 0.03).unwrap();
        assert!(q.contains(&[10.0, 15.0]), "{q:?}");
        assert!(
            !component_outline(&labels, diamond, 20, &mut c),
            "longer than the limit"
        );
    }

    #[test]
    fn the_trace_limit_keeps_every_candidate_of_rotated_and_perspective_markers() {
        use crate::fiducial::render::{render_scene, SceneSpec};
        use crate::fiducial::Dictionary;
        let params = DetectorParams::default();
        let (mut checked, mut most) = (0, 0.0f64);
        // From the smallest markers the detector takes (an outline of 3 % of the frame's
        // longer side) to large ones, whose thin rings the smallest window gives; 45° turns
        // and strong perspective among them.
        for (name, markers, sides, seed) in [
            ("DICT_4X4_50", 16, (8.0, 24.0), 1),
            ("DICT_4X4_50", 6, (24.0, 120.0), 2),
            ("DICT_7X7_50", 12, (10.0, 40.0), 3),
            ("DICT_7X7_50", 3, (60.0, 200.0), 4),
            ("DICT_APRILTAG_36h11", 8, (20.0, 90.0), 5),
        ] {
            let dict = Dictionary::predefined(name).unwrap();
            let spec = SceneSpec {
                width: 640,
                height: 480,
                markers,
                min_side: sides.0,
                max_side: sides.1,
                perspective: 0.25,
                seed,
                ..SceneSpec::default()
            };
            let scene = render_scene(&dict, &spec).unwrap();
            let (w, h) = (spec.width, spec.height);
            let limits = OutlineLimits::of(&params, w, h);
            for window in params.windows().unwrap() {
                let (labels, stats) = components(&scene.image, window, &params);
                let mut c = Vec::new();
                for s in &stats {
                    if s.width < 4 || s.height < 4 {
                        continue;
                    }
                    assert!(component_outline(&labels, s, 1 << 30, &mut c));
                    if candidate_quad(&c, &limits, &params, w, h).is_none() {
                        continue;
                    }
                    checked += 1;
                    let half_box = (s.width + s.height - 2) as f64;
                    most = most.max(c.len() as f64 / half_box);
                    let limit = limits.trace_limit(s);
                    assert!(
                        limit.is_some_and(|l| c.len() <= l),
                        "{name} window {window}: outline of {} points, limit {limit:?}, {s:?}",
                        c.len()
                    );
                }
            }
        }
        eprintln!("{checked} candidates, outlines up to {most:.2} (W + H - 2)");
        assert!(checked > 100, "only {checked} candidates");
    }

    #[test]
    fn a_snake_longer_than_any_marker_in_its_box_is_stopped_at_the_limit() {
        // A one-pixel serpentine of 21 rows in a 200 × 41 box: its outline walks both sides of
        // 4,200 pixels, longer than a 1080p frame's longest trace.
        let m = labels_of(1920, 1080, |x, y| {
            let (u, v) = (x - 10, y - 10);
            (0..200).contains(&u)
                && (0..41).contains(&v)
                && (v % 2 == 0 || (v % 4 == 1 && u == 199) || (v % 4 == 3 && u == 0))
        });
        let labeling = Lsl::new()
            .label(&m, Connectivity::Eight, Want::Both)
            .unwrap();
        let (labels, stats) = (labeling.labels.unwrap(), labeling.stats.unwrap());
        let snake = stats.iter().find(|s| s.width == 200).unwrap();
        let limits = OutlineLimits::of(&DetectorParams::default(), 1920, 1080);
        let mut c = Vec::new();
        assert!(component_outline(&labels, snake, 1 << 30, &mut c));
        assert!(c.len() > limits.longest_trace, "{}", c.len());
        let limit = limits.trace_limit(snake).unwrap();
        assert_eq!(limit, 4 * (200 + 41 - 2) + 8);
        assert!(!component_outline(&labels, snake, limit, &mut c));
        assert_eq!(c.len(), limit + 1);
    }

    #[test]
    fn clutter_outlines_stop_at_what_their_boxes_allow() {
        use crate::fiducial::render::{render_scene, SceneSpec};
        use crate::frame::random_image::{generate, RandomImageSpec};
        let params = DetectorParams::default();
        // The bench's scenes as their sources make them: 16 markers at 1080p, and the
        // papers' random images (frames 3, 5 and 7 of `synthetic:random`).
        let dict = crate::fiducial::Dictionary::predefined("DICT_4X4_50").unwrap();
        let scene = render_scene(&dict, &SceneSpec::default()).unwrap();
        let mut frames = vec![("markers", scene.image)];
        for k in [3u32, 5, 7] {
            let spec = RandomImageSpec {
                width: 1920,
                height: 1080,
                density: k as f64 / 10.0,
                granularity: [1, 4, 16][(k % 3) as usize],
                seed: k,
            };
            let binary = generate(&spec).unwrap();
            let data = binary.data.iter().map(|&v| v * 255).collect();
            frames.push(("random", GrayImage::new(1920, 1080, data).unwrap()));
        }
        let limits = OutlineLimits::of(&params, 1920, 1080);
        let mut finder = QuadFinder::default();
        for (name, grey) in &frames {
            for window in params.windows().unwrap() {
                finder.find(grey, window, &params).unwrap();
                let (_, stats) = components(grey, window, &params);
                let most = stats
                    .iter()
                    .filter_map(|s| limits.trace_limit(s))
                    .max()
                    .unwrap_or(0);
                eprintln!(
                    "{name} window {window}: longest walk {}",
                    finder.longest_walk()
                );
                assert!(finder.longest_walk() <= most + 1);
            }
        }
    }

    /// Outlines traced on the mask from the labeler's first columns (no label image) are those
    /// traced on the labels, at every limit, for every component: the bench scene's frames at
    /// each window, and random masks in strips of a few rows (components across the strips'
    /// borders, first pixels in a lower strip than other pixels of their row's runs).
    #[test]
    fn outlines_on_the_mask_are_those_on_the_labels() {
        let check = |mask: &BinaryImage, strip_rows: Option<usize>| -> usize {
            let lsl = || strip_rows.map_or_else(Lsl::new, Lsl::with_strip_rows);
            let mut alone = lsl();
            let stats = alone
                .label(mask, Connectivity::Eight, Want::Stats)
                .unwrap()
                .stats
                .unwrap();
            let starts = alone.component_starts(mask.width);
            let starts: Vec<Option<u32>> = stats.iter().map(|s| starts.first_column(s)).collect();
            let labeling = lsl().label(mask, Connectivity::Eight, Want::Both).unwrap();
            let labels = labeling.labels.unwrap();
            assert_eq!(labeling.stats.as_ref(), Some(&stats));
            let w = mask.width as usize;
            let (mut on_labels, mut on_mask) = (Vec::new(), Vec::new());
            for (s, start) in stats.iter().zip(&starts) {
                let row = &labels.data[s.top as usize * w..][..w];
                let first = row.iter().position(|&l| l == s.label).map(|x| x as u32);
                assert_eq!(*start, first, "component {s:?}");
                let start = (first.unwrap() as i32, s.top as i32);
                for limit in [1 << 24, 40, 7, 0] {
                    let a = component_outline(&labels, s, limit, &mut on_labels);
                    let b = outline_on_mask(mask, start, limit, &mut on_mask);
                    assert_eq!(
                        (b, &on_mask),
                        (a, &on_labels),
                        "component {s:?} limit {limit}"
                    );
                }
            }
            stats.len()
        };
        use crate::fiducial::render::{render_scene, SceneSpec};
        use crate::frame::random_image::RandomImageSpec;
        let params = DetectorParams::default();
        let dict = crate::fiducial::Dictionary::predefined("DICT_4X4_50").unwrap();
        let mut components = 0;
        for seed in 1..=2 {
            let spec = SceneSpec {
                width: 640,
                height: 360,
                seed,
                ..SceneSpec::default()
            };
            let grey = render_scene(&dict, &spec).unwrap().image;
            for window in params.windows().unwrap() {
                let mut mask = BinaryImage::zeros(640, 360).unwrap();
                let out = Outputs {
                    bytes: Some(&mut mask),
                    ..Outputs::default()
                };
                Binarizer::default()
                    .adaptive_mean(&grey, window, params.threshold_constant, true, out)
                    .unwrap();
                components += check(&mask, None);
            }
        }
        for (k, density) in [(0, 0.3), (1, 0.5), (2, 0.8)] {
            let mask = crate::frame::random_image::generate(&RandomImageSpec {
                width: 97,
                height: 61,
                density,
                granularity: 1,
                seed: 7 + k as u32,
            })
            .unwrap();
            components += check(&mask, Some(1 + k));
        }
        assert!(components > 1000, "only {components} components checked");
    }
}
