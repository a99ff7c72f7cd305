//! Marker images to print: the raster equal bit for bit to `cv2.aruco.generateImageMarker`, and
//! the same marker as SVG (one unit a cell, scaled to the size asked).

use super::dictionary::Dictionary;
use crate::error::{Error, Result};
use crate::frame::image::GrayImage;

/// The cells of marker `id` with its black border: `(marker_size + 2·border_bits)²` values,
/// row by row, 0 = black and 255 = white.
pub(super) fn marker_cells(dict: &Dictionary, id: u32, border_bits: u32) -> Result<(u32, Vec<u8>)> {
    let bits = dict.bits(id).ok_or_else(|| {
        Error::Invalid(format!(
            "marker {id} is not in {} (IDs 0 to {})",
            dict.name(),
            dict.len() - 1
        ))
    })?;
    if border_bits == 0 || border_bits > 64 {
        return Err(Error::Invalid(format!(
            "border of {border_bits} cells: give 1 to 64"
        )));
    }
    let n = dict.marker_size();
    let side = n + 2 * border_bits;
    let mut out = vec![0u8; (side * side) as usize];
    for r in 0..n {
        for c in 0..n {
            let v = bits[(r * n + c) as usize] * 255;
            out[((r + border_bits) * side + c + border_bits) as usize] = v;
        }
    }
    Ok((side, out))
}

/// Marker `id` of `dict` as a `size_px`² image with `border_bits` cells of black border: what
/// `cv2.aruco.generateImageMarker(dict, id, size_px, borderBits=border_bits)` returns. Like
/// OpenCV, the cell grid is scaled by nearest neighbour: output pixel x takes cell
/// ⌊x · cells / size⌋ computed as OpenCV's resize does (the reciprocal of the scale in f64), so
/// sizes that are not a multiple of the cells give the same uneven cells.
pub fn generate_marker(
    dict: &Dictionary,
    id: u32,
    size_px: u32,
    border_bits: u32,
) -> Result<GrayImage> {
    let (side, grid) = marker_cells(dict, id, border_bits)?;
    if size_px < side || size_px > 1 << 15 {
        return Err(Error::Invalid(format!(
            "marker size {size_px} px: give at least {side} (one pixel a cell) and at most 32768"
        )));
    }
    // OpenCV's resizeNN: fx = dst / src, source index = min(⌊x · (1 / fx)⌋, src − 1).
    let inv_scale = 1.0 / (size_px as f64 / side as f64);
    let source: Vec<usize> = (0..size_px)
        .map(|x| ((x as f64 * inv_scale).floor() as usize).min(side as usize - 1))
        .collect();
    let s = size_px as usize;
    let mut data = vec![0u8; s * s];
    for (row, &sy) in data.chunks_exact_mut(s).zip(&source) {
        let cells_row = &grid[sy * side as usize..(sy + 1) * side as usize];
        for (p, &sx) in row.iter_mut().zip(&source) {
            *p = cells_row[sx];
        }
    }
    GrayImage::new(size_px, size_px, data)
}

/// Marker `id` as an SVG document `size` units wide (`unit`: "px", "mm", ...): one black
/// square and a white rectangle per run of white cells in a row, edges kept crisp.
pub fn marker_svg(
    dict: &Dictionary,
    id: u32,
    size: f64,
    unit: &str,
    border_bits: u32,
) -> Result<String> {
    let (side, grid) = marker_cells(dict, id, border_bits)?;
    if !(size.is_finite() && size > 0.0) {
        return Err(Error::Invalid(format!(
            "marker size {size}: give a positive number"
        )));
    }
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{size}{unit}\" height=\"{size}{unit}\" \
         viewBox=\"0 0 {side} {side}\" shape-rendering=\"crispEdges\">\n\
         <title>{} marker {id}</title>\n<rect width=\"{side}\" height=\"{side}\" fill=\"#000\"/>\n",
        dict.name()
    );
    svg.push_str(&white_runs_svg(side, &grid));
    svg.push_str("</svg>\n");
    Ok(svg)
}

/// A white rectangle (one cell a unit) per run of white cells in a row of `grid`.
pub(super) fn white_runs_svg(side: u32, grid: &[u8]) -> String {
    let mut svg = String::new();
    for (y, row) in grid.chunks_exact(side as usize).enumerate() {
        let mut x = 0;
        while x < row.len() {
            if row[x] == 0 {
                x += 1;
                continue;
            }
            let start = x;
            while x < row.len() && row[x] != 0 {
                x += 1;
            }
            svg.push_str(&format!(
                "<rect x=\"{start}\" y=\"{y}\" width=\"{}\" height=\"1\" fill=\"#fff\"/>\n",
                x - start
            ));
        }
    }
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_scale_to_whole_pixels_and_bad_requests_are_refused() {
        let d = Dictionary::predefined("DICT_4X4_50").unwrap();
        let img = generate_marker(&d, 0, 60, 1).unwrap();
        // 6 cells of 10 px: the border is black, cell (1, 1) is marker 0's first bit (1).
        assert_eq!(img.data[5 * 60 + 5], 0);
        assert_eq!(img.data[15 * 60 + 15], 255);
        assert_eq!(img.data[15 * 60 + 25], 0);
        for (id, size, border, expected) in [
            (50, 60, 1, "not in DICT_4X4_50"),
            (0, 5, 1, "at least 6"),
            (0, 60, 0, "border of 0 cells"),
        ] {
            let err = generate_marker(&d, id, size, border)
                .unwrap_err()
                .to_string();
            assert!(err.contains(expected), "{err}");
        }
    }

    #[test]
    fn svg_has_a_rectangle_per_white_run() {
        let d = Dictionary::predefined("DICT_4X4_50").unwrap();
        let svg = marker_svg(&d, 0, 50.0, "mm", 1).unwrap();
        // Marker 0: rows 1011, 0101, 0011, 0010 → runs 1 + 1, 1 + 1, 1, 1.
        assert_eq!(svg.matches("fill=\"#fff\"").count(), 6, "{svg}");
        assert!(svg.contains("width=\"50mm\"") && svg.contains("viewBox=\"0 0 6 6\""));
    }
}
