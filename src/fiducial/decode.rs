//! Reading a candidate's cells: the homography from the marker's cell grid to the quad, a few
//! grey samples inside each cell (away from its edges), Otsu's split of the cell values into
//! black and white, the border check, and the code of the inner cells.

use super::candidates::Quad;
use super::corners::bilinear;
use super::pose::square_homography;
use crate::frame::image::GrayImage;

/// What the cells of a candidate read as, for one marker size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CellReading {
    /// The inner cells row by row from the quad's first corner, 1 = white, first cell in the
    /// most significant bit.
    pub code: u64,
    /// Border cells that read white.
    pub border_errors: u32,
    /// Mean grey of the white cells minus that of the black ones.
    pub contrast: f64,
}

/// Samples per cell side (a 3×3 grid in each cell).
const SAMPLES: usize = 3;

/// Reads the `marker_size`² inner cells and the one-cell border of `quad`. `margin` is the share
/// of a cell's side left out at each of its edges. None when the quad does not map to a grid,
/// a sample falls outside the image, or the cells all look alike (their spread below
/// `min_std_dev`).
pub fn read_cells(
    grey: &GrayImage,
    quad: &Quad,
    marker_size: u32,
    margin: f64,
    min_std_dev: f64,
) -> Option<CellReading> {
    let cells = (marker_size + 2) as usize;
    let side = cells as f64;
    let grid = [[0.0, 0.0], [side, 0.0], [side, side], [0.0, side]];
    let h = square_homography(&grid, quad)?;
    let mut values = [0.0f64; 100];
    let inner = 1.0 - 2.0 * margin;
    for r in 0..cells {
        for c in 0..cells {
            let mut sum = 0.0;
            for i in 0..SAMPLES {
                for j in 0..SAMPLES {
                    let u = c as f64 + margin + inner * (j as f64 + 0.5) / SAMPLES as f64;
                    let v = r as f64 + margin + inner * (i as f64 + 0.5) / SAMPLES as f64;
                    let w = h[2][0] * u + h[2][1] * v + h[2][2];
                    if w.abs() < 1e-12 {
                        return None;
                    }
                    let x = (h[0][0] * u + h[0][1] * v + h[0][2]) / w;
                    let y = (h[1][0] * u + h[1][1] * v + h[1][2]) / w;
                    sum += bilinear(grey, x, y)?;
                }
            }
            values[r * cells + c] = sum / (SAMPLES * SAMPLES) as f64;
        }
    }
    let values = &values[..cells * cells];
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    if var.sqrt() < min_std_dev {
        return None;
    }
    let (level, contrast) = otsu_split(values);
    let mut code = 0u64;
    let mut border_errors = 0;
    for r in 0..cells {
        for c in 0..cells {
            let white = values[r * cells + c] > level;
            if r == 0 || c == 0 || r == cells - 1 || c == cells - 1 {
                border_errors += white as u32;
            } else {
                code = (code << 1) | white as u64;
            }
        }
    }
    Some(CellReading {
        code,
        border_errors,
        contrast,
    })
}

/// Otsu's threshold over a few values: the level between the two classes that maximises their
/// between-class variance, and the difference of the class means.
fn otsu_split(values: &[f64]) -> (f64, f64) {
    let mut sorted = [0.0f64; 100];
    let sorted = &mut sorted[..values.len()];
    sorted.copy_from_slice(values);
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let total: f64 = sorted.iter().sum();
    let (mut best, mut level, mut contrast) = (-1.0, sorted[0], 0.0);
    let mut low = 0.0;
    for k in 1..n {
        low += sorted[k - 1];
        let (n0, n1) = (k as f64, (n - k) as f64);
        let (m0, m1) = (low / n0, (total - low) / n1);
        let between = n0 * n1 * (m1 - m0).powi(2);
        if between > best && sorted[k] > sorted[k - 1] {
            best = between;
            level = 0.5 * (sorted[k - 1] + sorted[k]);
            contrast = m1 - m0;
        }
    }
    (level, contrast)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn otsu_splits_two_groups() {
        let (level, contrast) = otsu_split(&[10.0, 12.0, 200.0, 11.0, 190.0, 205.0]);
        assert!(level > 12.0 && level < 190.0, "{level}");
        assert!((contrast - (595.0 / 3.0 - 11.0)).abs() < 1e-9);
    }
}
