//! A fixed test frame: a grid of bright discs on a dark ramp, with a known number of
//! components for a wide range of thresholds. The window's still frame, its redraw benchmark
//! and the tests use it.

use crate::error::{Error, Result};
use crate::frame::image::GrayImage;

/// Whether `cols × rows` discs of radius `radius` fit apart in `width × height` (`disc_grid`).
pub fn disc_grid_fits(width: u32, height: u32, cols: u32, rows: u32, radius: f32) -> Result<()> {
    let (cw, ch) = (width as f32 / cols as f32, height as f32 / rows as f32);
    if cols == 0 || rows == 0 || 2.0 * radius + 1.0 >= cw.min(ch) {
        return Err(Error::Invalid(format!(
            "{cols}×{rows} discs of radius {radius} do not fit apart in {width}×{height}"
        )));
    }
    Ok(())
}

/// `cols × rows` discs of radius `radius` centred in equal cells, grey 220 on a 20..60 ramp:
/// exactly `cols × rows` components for any threshold between 60 and 219.
pub fn disc_grid(width: u32, height: u32, cols: u32, rows: u32, radius: f32) -> Result<GrayImage> {
    disc_grid_fits(width, height, cols, rows, radius)?;
    let (cw, ch) = (width as f32 / cols as f32, height as f32 / rows as f32);
    let mut data = Vec::with_capacity(width as usize * height as usize);
    for y in 0..height {
        for x in 0..width {
            let (cx, cy) = (
                ((x as f32 / cw).floor() + 0.5) * cw,
                ((y as f32 / ch).floor() + 0.5) * ch,
            );
            let (dx, dy) = (x as f32 + 0.5 - cx, y as f32 + 0.5 - cy);
            let inside = dx * dx + dy * dy <= radius * radius;
            data.push(if inside {
                220
            } else {
                20 + (40 * x / width) as u8
            });
        }
    }
    GrayImage::new(width, height, data)
}
