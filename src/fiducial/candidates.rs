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
use crate::frame::image::{BinaryImage, GrayImage, LabelImage};
use crate::threshold::binarize::{Binarizer, Outputs};

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
    contour: Vec<(i32, i32)>,
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
        let labeling = self.labeler.label(mask, Connectivity::Eight, Want::Both)?;
        let (Some(labels), Some(stats)) = (labeling.labels, labeling.stats) else {
            return Err(Error::Invalid(
                "the labeling returned no label image or statistics".into(),
            ));
        };
        let limits = OutlineLimits::of(params, w, h);
        let mut quads = Vec::new();
        self.longest_walk = 0;
        for s in &stats {
            let Some(limit) = limits.trace_limit(s) else {
                continue;
            };
            let traced = component_outline(&labels, s, limit, &mut self.contour);
            self.longest_walk = self.longest_walk.max(self.contour.len());
            if !traced {
                continue;
            }
            if let Some(quad) = candidate_quad(&self.contour, &limits, params, w, h) {
                quads.push(quad);
            }
        }
        Ok(quads)
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
/// points.
fn component_outline(
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
        let mut next = None;
        for k in 1..=8 {
            let d = (back + k) % 8;
            let q = (p.0 + STEPS[d].0, p.1 + STEPS[d].1);
            if is(q.0, q.1) {
                next = Some((d, q));
                break;
            }
        }
        let Some((d, q)) = next else {
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
        // The neighbour checked just before q (background) seen from q.
        let b = STEPS[(d + 7) % 8];
        let b_abs = (p.0 + b.0, p.1 + b.1);
        back = direction(b_abs.0 - q.0, b_abs.1 - q.1);
        p = q;
        out.push(p);
    }
    false
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

#[cfg(test)]
mod tests {
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

    /// The dark components of `grey` under the threshold of `window`: labels and statistics.
    fn components(
        grey: &GrayImage,
        window: u32,
        params: &DetectorParams,
    ) -> (LabelImage, Vec<ComponentStats>) {
        let mut mask = BinaryImage::zeros(grey.width, grey.height).unwrap();
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
}
