//! Per-component statistics: OpenCV's `connectedComponentsWithStats` layout plus the raw moments.
//!
//! Every backend numbers components 1..N in the raster order of their first pixel (OpenCV's
//! numbering), so the tables of two backends can be compared row by row.

use crate::frame::image::{BinaryImage, LabelImage};
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ComponentStats {
    pub label: u32,
    pub left: u32,
    pub top: u32,
    pub width: u32,
    pub height: u32,
    pub area: u64,
    pub sum_x: u64,
    pub sum_y: u64,
    pub centroid_x: f64,
    pub centroid_y: f64,
}

/// Running sums for one component; turned into `ComponentStats` once complete.
/// Runs are added whole: a run [x0, x1) on row y adds x1 - x0 pixels. Laid out as C (also
/// `struct Background` in kernels/opencv_layout.cu).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Moments {
    pub area: u64,
    pub sum_x: u64,
    pub sum_y: u64,
    pub min_x: u32,
    pub min_y: u32,
    pub max_x: u32,
    pub max_y: u32,
}

impl Default for Moments {
    fn default() -> Self {
        Self::EMPTY
    }
}

impl Moments {
    pub const EMPTY: Moments = Moments {
        area: 0,
        sum_x: 0,
        sum_y: 0,
        min_x: u32::MAX,
        min_y: u32::MAX,
        max_x: 0,
        max_y: 0,
    };

    /// Adds the run of pixels [x0, x1) on row y (x1 exclusive, x1 > x0).
    #[inline]
    pub fn add_run(&mut self, y: u32, x0: u32, x1: u32) {
        let n = (x1 - x0) as u64;
        self.area += n;
        // Σ x for x in [x0, x1) = (x1(x1-1) - x0(x0-1)) / 2, as in the HA4 paper.
        self.sum_x +=
            (x1 as u64 * (x1 as u64).wrapping_sub(1) - x0 as u64 * (x0 as u64).wrapping_sub(1)) / 2;
        self.sum_y += n * y as u64;
        self.min_x = self.min_x.min(x0);
        self.max_x = self.max_x.max(x1 - 1);
        self.min_y = self.min_y.min(y);
        self.max_y = self.max_y.max(y);
    }

    #[inline]
    pub fn add_pixel(&mut self, x: u32, y: u32) {
        self.add_run(y, x, x + 1);
    }

    #[inline]
    pub fn merge(&mut self, o: &Moments) {
        self.area += o.area;
        self.sum_x += o.sum_x;
        self.sum_y += o.sum_y;
        self.min_x = self.min_x.min(o.min_x);
        self.min_y = self.min_y.min(o.min_y);
        self.max_x = self.max_x.max(o.max_x);
        self.max_y = self.max_y.max(o.max_y);
    }

    pub fn to_stats(&self, label: u32) -> ComponentStats {
        ComponentStats {
            label,
            left: self.min_x,
            top: self.min_y,
            width: self.max_x - self.min_x + 1,
            height: self.max_y - self.min_y + 1,
            area: self.area,
            sum_x: self.sum_x,
            sum_y: self.sum_y,
            centroid_x: self.sum_x as f64 / self.area as f64,
            centroid_y: self.sum_y as f64 / self.area as f64,
        }
    }
}

/// Statistics straight from a label image whose labels are 1..=n (pixel by pixel; reference code).
pub fn from_labels(labels: &LabelImage, n: u32) -> Vec<ComponentStats> {
    let mut m = vec![Moments::EMPTY; n as usize];
    let w = labels.width as usize;
    for (i, &l) in labels.data.iter().enumerate() {
        if l != 0 {
            m[l as usize - 1].add_pixel((i % w) as u32, (i / w) as u32);
        }
    }
    m.iter()
        .enumerate()
        .map(|(i, m)| m.to_stats(i as u32 + 1))
        .collect()
}

/// The moments of the background (the zero pixels of a 0/1 mask): OpenCV's row 0 of
/// `connectedComponentsWithStats`. `components` are the mask's statistics rows (every
/// component): the count and sums are the image's less theirs, and only the box needs the
/// pixels, read from the edges inward until a zero is found (a few rows and columns, unless
/// the mask is nearly all foreground). `Moments::EMPTY` when every pixel is foreground.
pub fn background(mask: &BinaryImage, components: &[ComponentStats]) -> Moments {
    background_of_bytes(&mask.data, mask.width, mask.height, components)
}

/// `background` of a mask borrowed from elsewhere: `height` rows of `width` bytes back to
/// back, any non-zero byte foreground.
pub fn background_of_bytes(
    data: &[u8],
    width: u32,
    height: u32,
    components: &[ComponentStats],
) -> Moments {
    let (w, h) = (width as u64, height as u64);
    let foreground: u64 = components.iter().map(|c| c.area).sum();
    let area = w * h - foreground;
    if area == 0 {
        return Moments::EMPTY;
    }
    // Σx over all pixels = h · w(w−1)/2, Σy = w · h(h−1)/2.
    let sum_x = h * (w * (w - 1) / 2) - components.iter().map(|c| c.sum_x).sum::<u64>();
    let sum_y = w * (h * (h - 1) / 2) - components.iter().map(|c| c.sum_y).sum::<u64>();
    let row = |y: u32| &data[y as usize * width as usize..(y as usize + 1) * width as usize];
    let rows = || (0..height).map(|y| (y, row(y)));
    let has_zero = |row: &[u8]| row.contains(&0);
    let min_y = rows().find(|(_, r)| has_zero(r)).map_or(0, |(y, _)| y);
    let max_y = rows()
        .rev()
        .find(|(_, r)| has_zero(r))
        .map_or(0, |(y, _)| y);
    let (mut min_x, mut max_x) = (u32::MAX, 0u32);
    for (_, row) in rows()
        .skip(min_y as usize)
        .take((max_y - min_y + 1) as usize)
    {
        if let Some(x) = row.iter().position(|&v| v == 0) {
            min_x = min_x.min(x as u32);
        }
        if let Some(x) = row.iter().rposition(|&v| v == 0) {
            max_x = max_x.max(x as u32);
        }
        if min_x == 0 && max_x == width - 1 {
            break;
        }
    }
    Moments {
        area,
        sum_x,
        sum_y,
        min_x,
        min_y,
        max_x,
        max_y,
    }
}

/// Compares two statistics tables row by row; both must use the raster-order numbering.
/// Integer fields must be equal; centroids within 1e-9 relative.
pub fn compare(expected: &[ComponentStats], actual: &[ComponentStats]) -> Result<(), String> {
    if expected.len() != actual.len() {
        return Err(format!(
            "component count differs: expected {}, got {}",
            expected.len(),
            actual.len()
        ));
    }
    for (e, a) in expected.iter().zip(actual) {
        let ints_equal = e.label == a.label
            && e.left == a.left
            && e.top == a.top
            && e.width == a.width
            && e.height == a.height
            && e.area == a.area
            && e.sum_x == a.sum_x
            && e.sum_y == a.sum_y;
        let close = |x: f64, y: f64| (x - y).abs() <= 1e-9 * x.abs().max(1.0);
        if !ints_equal || !close(e.centroid_x, a.centroid_x) || !close(e.centroid_y, a.centroid_y) {
            return Err(format!(
                "component {} differs:\n  expected {e:?}\n  got      {a:?}",
                e.label
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_sums_match_pixel_sums() {
        let mut by_run = Moments::EMPTY;
        let mut by_pixel = Moments::EMPTY;
        for (y, x0, x1) in [(0u32, 0u32, 1u32), (3, 5, 17), (7, 1, 2), (9, 0, 64)] {
            by_run.add_run(y, x0, x1);
            for x in x0..x1 {
                by_pixel.add_pixel(x, y);
            }
        }
        assert_eq!(by_run, by_pixel);
        let s = by_run.to_stats(1);
        assert_eq!((s.left, s.top, s.width, s.height), (0, 0, 64, 10));
    }

    /// Statistics of the mask's foreground pixels as one row (enough for `background`, which
    /// only sums the rows).
    fn foreground_row(mask: &BinaryImage) -> Vec<ComponentStats> {
        let mut m = Moments::EMPTY;
        for y in 0..mask.height {
            for x in 0..mask.width {
                if mask.get(x, y) {
                    m.add_pixel(x, y);
                }
            }
        }
        if m.area == 0 {
            Vec::new()
        } else {
            vec![m.to_stats(1)]
        }
    }

    #[test]
    fn background_moments_are_those_of_the_zero_pixels() {
        let shapes = [
            BinaryImage::from_fn(70, 5, |x, y| (x * 7 + y * 3) % 5 < 2 || y == 4).unwrap(),
            // Background only inside: a frame of foreground around it.
            BinaryImage::from_fn(9, 8, |x, y| x == 0 || y == 0 || x == 8 || y == 7 || x == 4)
                .unwrap(),
            BinaryImage::from_fn(1, 1, |_, _| false).unwrap(),
            BinaryImage::from_fn(1, 300, |_, y| y % 3 == 0).unwrap(),
            BinaryImage::from_fn(300, 1, |x, _| x % 7 != 3).unwrap(),
        ];
        for mask in &shapes {
            let mut expected = Moments::EMPTY;
            for y in 0..mask.height {
                for x in 0..mask.width {
                    if !mask.get(x, y) {
                        expected.add_pixel(x, y);
                    }
                }
            }
            let size = (mask.width, mask.height);
            assert_eq!(
                background(mask, &foreground_row(mask)),
                expected,
                "{size:?}"
            );
            // Foreground as any non-zero byte (a numpy mask of 0 / 255).
            let bytes: Vec<u8> = mask.data.iter().map(|&v| v * 255).collect();
            assert_eq!(
                background_of_bytes(&bytes, mask.width, mask.height, &foreground_row(mask)),
                expected,
                "{size:?}, 0 / 255"
            );
        }
        let framed = background(&shapes[1], &foreground_row(&shapes[1]));
        assert_eq!(
            (framed.min_x, framed.min_y, framed.max_x, framed.max_y),
            (1, 1, 7, 6)
        );
        let full = BinaryImage::from_fn(3, 2, |_, _| true).unwrap();
        assert_eq!(background(&full, &foreground_row(&full)), Moments::EMPTY);
    }

    #[test]
    fn compare_reports_the_differing_component() {
        let mut m = Moments::EMPTY;
        m.add_run(0, 0, 3);
        let a = vec![m.to_stats(1)];
        let mut b = a.clone();
        assert!(compare(&a, &b).is_ok());
        b[0].area = 4;
        let err = compare(&a, &b).unwrap_err();
        assert!(err.contains("component 1"), "{err}");
    }
}
