//! Marker detection on the CPU: candidate quads at several threshold windows
//! (`candidates`), sub-pixel corners (`corners`), the cells read and decoded against each
//! dictionary (`decode`, `Dictionary::identify`); the same marker found at several windows is
//! kept once. This is the reference a GPU detector is checked against.

use super::candidates::{Quad, QuadFinder};
use super::corners::refine_quad;
use super::decode::read_cells;
use super::dictionary::{Dictionary, Identified};
use super::params::DetectorParams;
use crate::error::{Error, Result};
use crate::frame::image::GrayImage;
use rayon::prelude::*;

/// A detected marker.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Marker {
    pub id: u32,
    /// Index of its dictionary in the list `detect` was given.
    pub dictionary: usize,
    /// Bits that differed from the dictionary's marker.
    pub hamming: u32,
    /// Corners x0 y0 … x3 y3, OpenCV's order: clockwise on screen from the marker's top-left,
    /// pixel centres at whole coordinates.
    pub corners: [f32; 8],
    /// Direction of the marker's top edge (corner 0 to corner 1), degrees clockwise on screen
    /// from the image's x axis, in (−180, 180].
    pub angle_deg: f32,
}

impl Marker {
    pub fn corner(&self, k: usize) -> [f64; 2] {
        [self.corners[2 * k] as f64, self.corners[2 * k + 1] as f64]
    }

    pub fn centre(&self) -> [f64; 2] {
        let c = (0..4)
            .map(|k| self.corner(k))
            .fold([0.0, 0.0], |s, p| [s[0] + p[0], s[1] + p[1]]);
        [c[0] / 4.0, c[1] / 4.0]
    }

    /// The area inside the corners, in square pixels.
    pub fn area(&self) -> f64 {
        let twice: f64 = (0..4)
            .map(|k| {
                let (a, b) = (self.corner(k), self.corner((k + 1) % 4));
                a[0] * b[1] - b[0] * a[1]
            })
            .sum();
        twice.abs() / 2.0
    }
}

/// What `detect` found: the markers, and the candidate quads that decoded as none.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Detections {
    pub markers: Vec<Marker>,
    /// Corners of rejected candidates (as `Marker::corners`, from their first outline corner).
    pub rejected: Vec<[f32; 8]>,
}

/// The markers of `dictionaries` in a grey frame (one-shot; `Detector` keeps its buffers
/// between frames).
pub fn detect(
    grey: &GrayImage,
    params: &DetectorParams,
    dictionaries: &[&Dictionary],
) -> Result<Detections> {
    Detector::new(params.clone())?.detect(grey, dictionaries)
}

/// A detector that reuses its threshold and label buffers from frame to frame.
pub struct Detector {
    params: DetectorParams,
    windows: Vec<u32>,
    finders: Vec<QuadFinder>,
}

impl Detector {
    pub fn new(params: DetectorParams) -> Result<Self> {
        let windows = params.windows()?;
        let finders = windows.iter().map(|_| QuadFinder::default()).collect();
        Ok(Self {
            params,
            windows,
            finders,
        })
    }

    pub fn params(&self) -> &DetectorParams {
        &self.params
    }

    pub fn detect(&mut self, grey: &GrayImage, dictionaries: &[&Dictionary]) -> Result<Detections> {
        check_dictionaries(dictionaries)?;
        let params = &self.params;
        // The quads of every window, the same outline found twice kept once.
        let found: Vec<Result<Vec<Quad>>> = self
            .finders
            .par_iter_mut()
            .zip(&self.windows)
            .map(|(finder, &window)| {
                // A frame of another size gets fresh buffers.
                finder.find(grey, window, params)
            })
            .collect();
        let mut quads: Vec<Quad> = Vec::new();
        for q in found {
            for quad in q? {
                add_distinct(&mut quads, quad);
            }
        }
        let largest_grid = largest_grid(dictionaries);
        let results: Vec<Outcome> = quads
            .par_iter()
            .map(|quad| decode_quad(grey, quad, params, dictionaries, largest_grid))
            .collect();
        Ok(merge(results))
    }
}

/// A detection needs at least one dictionary.
pub(crate) fn check_dictionaries(dictionaries: &[&Dictionary]) -> Result<()> {
    if dictionaries.is_empty() {
        return Err(Error::Invalid("give at least one marker dictionary".into()));
    }
    Ok(())
}

/// Cells across the largest marker of the dictionaries, its border included.
pub(crate) fn largest_grid(dictionaries: &[&Dictionary]) -> f64 {
    dictionaries
        .iter()
        .map(|d| d.marker_size() + 2)
        .max()
        .unwrap_or(6) as f64
}

/// Adds `quad` to the quads found so far (in window order, each window's in its components'
/// order) unless one of them is the same outline.
pub(crate) fn add_distinct(quads: &mut Vec<Quad>, quad: Quad) {
    if !quads.iter().any(|k| same_outline(k, &quad)) {
        quads.push(quad);
    }
}

/// The detections from the candidates' outcomes, in the candidates' order: the same marker
/// found twice (from two outlines) kept once, the one with fewer bit errors; rejected outlines
/// on a marker left out.
pub(crate) fn merge(outcomes: impl IntoIterator<Item = Outcome>) -> Detections {
    let mut out = Detections::default();
    for outcome in outcomes {
        match outcome {
            Outcome::Marker(m) => {
                let size = side(&m);
                let duplicate = out.markers.iter_mut().find(|k| {
                    k.dictionary == m.dictionary && k.id == m.id && {
                        let (a, b) = (k.centre(), m.centre());
                        (a[0] - b[0]).hypot(a[1] - b[1]) < 0.3 * size
                    }
                });
                match duplicate {
                    Some(k) if m.hamming < k.hamming => *k = m,
                    Some(_) => {}
                    None => out.markers.push(m),
                }
            }
            Outcome::Rejected(q) => out.rejected.push(flat(&q)),
        }
    }
    // A rejected outline on a marker is one of its inner shapes or a second outline of it.
    let markers = &out.markers;
    out.rejected.retain(|r| {
        let c = [
            (r[0] + r[2] + r[4] + r[6]) as f64 / 4.0,
            (r[1] + r[3] + r[5] + r[7]) as f64 / 4.0,
        ];
        !markers.iter().any(|m| inside(m, c))
    });
    out
}

/// What became of one candidate quad.
pub(crate) enum Outcome {
    Marker(Marker),
    Rejected(Quad),
}

/// Refines, reads and decodes one candidate against each dictionary.
fn decode_quad(
    grey: &GrayImage,
    quad: &Quad,
    params: &DetectorParams,
    dictionaries: &[&Dictionary],
    largest_grid: f64,
) -> Outcome {
    let perimeter: f64 = (0..4)
        .map(|k| (quad[k][0] - quad[(k + 1) % 4][0]).hypot(quad[k][1] - quad[(k + 1) % 4][1]))
        .sum();
    let refined = if params.refine_corners {
        match refine_quad(grey, quad, perimeter / 4.0 / largest_grid) {
            Some(q) => q,
            None => return Outcome::Rejected(*quad),
        }
    } else {
        *quad
    };
    for (index, dict) in dictionaries.iter().enumerate() {
        let n = dict.marker_size();
        let Some(reading) = read_cells(
            grey,
            &refined,
            n,
            params.cell_margin,
            params.min_cell_std_dev,
        ) else {
            continue;
        };
        let limits = ErrorLimits::of(dict, params);
        if reading.border_errors > limits.border {
            continue;
        }
        if let Some(found) = dict.identify(reading.code, limits.hamming) {
            return Outcome::Marker(marker_of(&refined, found, index));
        }
    }
    Outcome::Rejected(refined)
}

/// The errors a reading of one dictionary's markers may have.
pub(crate) struct ErrorLimits {
    /// Border cells that may read white.
    pub border: u32,
    /// Bits that may differ from the marker's code.
    pub hamming: u32,
}

impl ErrorLimits {
    pub(crate) fn of(dict: &Dictionary, params: &DetectorParams) -> ErrorLimits {
        let n = dict.marker_size();
        ErrorLimits {
            border: ((n * n) as f64 * params.max_border_error_rate) as u32,
            hamming: (dict.max_correction_bits() as f64 * params.error_correction_rate) as u32,
        }
    }
}

/// The marker a refined quad decoded as: corner k of the marker is the quad's corner
/// k − rotation (OpenCV's turn).
pub(crate) fn marker_of(refined: &Quad, found: Identified, dictionary: usize) -> Marker {
    let r = found.rotation as usize;
    let corners: Quad = std::array::from_fn(|k| refined[(k + 4 - r) % 4]);
    let angle = (corners[1][1] - corners[0][1])
        .atan2(corners[1][0] - corners[0][0])
        .to_degrees();
    Marker {
        id: found.id,
        dictionary,
        hamming: found.hamming,
        corners: flat(&corners),
        angle_deg: angle as f32,
    }
}

fn flat(q: &Quad) -> [f32; 8] {
    std::array::from_fn(|i| q[i / 2][i % 2] as f32)
}

/// Mean side length of a marker.
fn side(m: &Marker) -> f64 {
    (0..4)
        .map(|k| {
            let (a, b) = (m.corner(k), m.corner((k + 1) % 4));
            (a[0] - b[0]).hypot(a[1] - b[1])
        })
        .sum::<f64>()
        / 4.0
}

/// Whether the point lies inside the marker's outline (clockwise on screen).
fn inside(m: &Marker, p: [f64; 2]) -> bool {
    (0..4).all(|k| {
        let (a, b) = (m.corner(k), m.corner((k + 1) % 4));
        (b[0] - a[0]) * (p[1] - a[1]) - (b[1] - a[1]) * (p[0] - a[0]) >= 0.0
    })
}

/// Two outlines of one shape: every corner of one within two pixels (and a 20th of the side) of
/// a corner of the other.
fn same_outline(a: &Quad, b: &Quad) -> bool {
    let size = (a[0][0] - a[2][0]).hypot(a[0][1] - a[2][1]);
    let tolerance = (2.0 + 0.05 * size).powi(2);
    a.iter().all(|p| {
        b.iter()
            .any(|q| (p[0] - q[0]).powi(2) + (p[1] - q[1]).powi(2) <= tolerance)
    })
}
