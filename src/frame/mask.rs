//! Masks: which pixels are analysed. A mask is ANDed into the thresholded frame before
//! labeling (on the capture thread, right after the fused threshold+pack pass, on the bytes and
//! on the packed bits that GPU labelers upload), so a masked pixel is never foreground on any
//! backend.
//!
//! A `Mask` combines regions of interest (`Roi`: a rectangle or a polygon, kept in a small TOML
//! file, in frame pixels) and a `PixelMask`: a PNG (white or any grey above 127 = analysed,
//! black = masked), or one learned from frames of the empty scene (`StaticMaskLearner`: every
//! pixel that was foreground in any of them, grown by a margin, is masked: static reflections
//! and lamps). Masks combine by intersection. A pixel mask of another size than the frames is
//! scaled to them (nearest pixel); the pipeline says so once.

use crate::error::{Error, Result};
use crate::frame::image::{check_size, decode_jpeg, BinaryImage, PackedBinary};
use std::path::Path;

/// Which pixels are analysed (1) and which are masked (0), as bytes and as packed bits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PixelMask {
    keep: BinaryImage,
    packed: PackedBinary,
}

impl PixelMask {
    /// A mask from one byte per pixel, row-major: non-zero = analysed.
    pub fn from_keep(width: u32, height: u32, mut keep: Vec<u8>) -> Result<PixelMask> {
        check_size(width, height)?;
        if keep.len() != width as usize * height as usize {
            return Err(Error::InvalidSize {
                width,
                height,
                why: format!("the mask holds {} pixels", keep.len()),
            });
        }
        for v in &mut keep {
            *v = (*v != 0) as u8;
        }
        let keep = BinaryImage {
            width,
            height,
            data: keep,
        };
        let packed = PackedBinary::from_binary(&keep);
        Ok(PixelMask { keep, packed })
    }

    pub fn width(&self) -> u32 {
        self.keep.width
    }

    /// The mask as packed bits (1 = analysed), in the layout of `PackedBinary`.
    pub fn packed(&self) -> &PackedBinary {
        &self.packed
    }

    pub fn height(&self) -> u32 {
        self.keep.height
    }

    /// One byte per pixel: 1 = analysed.
    pub fn keep(&self) -> &BinaryImage {
        &self.keep
    }

    /// Pixels masked out.
    pub fn masked_pixels(&self) -> usize {
        self.keep.data.iter().filter(|&&v| v == 0).count()
    }

    /// The region `roi` of a `width × height` frame: a pixel is inside a polygon when its centre
    /// is (even-odd rule).
    pub fn from_roi(roi: &Roi, width: u32, height: u32) -> Result<PixelMask> {
        check_size(width, height)?;
        let mut keep = vec![0u8; width as usize * height as usize];
        match roi {
            Roi::Rect {
                left,
                top,
                width: w,
                height: h,
            } => {
                let (x0, y0) = ((*left).min(width), (*top).min(height));
                let (x1, y1) = (
                    left.saturating_add(*w).min(width),
                    top.saturating_add(*h).min(height),
                );
                for y in y0..y1 {
                    let row = y as usize * width as usize;
                    keep[row + x0 as usize..row + x1 as usize].fill(1);
                }
            }
            Roi::Polygon(points) => {
                // Even-odd rule, one scanline per pixel row through the pixel centres.
                let mut crossings = Vec::new();
                for y in 0..height {
                    let cy = y as f64;
                    crossings.clear();
                    for (i, a) in points.iter().enumerate() {
                        let b = points[(i + 1) % points.len()];
                        if (a[1] <= cy) != (b[1] <= cy) {
                            crossings.push(a[0] + (cy - a[1]) / (b[1] - a[1]) * (b[0] - a[0]));
                        }
                    }
                    crossings.sort_by(f64::total_cmp);
                    let row = y as usize * width as usize;
                    for pair in crossings.chunks_exact(2) {
                        // Pixels whose centre x lies in [pair[0], pair[1]).
                        let from = pair[0].ceil().max(0.0) as usize;
                        let to = (pair[1].ceil().max(0.0) as usize).min(width as usize);
                        if from < to {
                            keep[row + from..row + to].fill(1);
                        }
                    }
                }
            }
        }
        PixelMask::from_keep(width, height, keep)
    }

    /// Pixels analysed by both.
    pub fn intersect(&self, other: &PixelMask) -> Result<PixelMask> {
        let other = other.scaled(self.width(), self.height());
        let keep = self
            .keep
            .data
            .iter()
            .zip(&other.keep.data)
            .map(|(a, b)| a & b)
            .collect();
        PixelMask::from_keep(self.width(), self.height(), keep)
    }

    /// This mask for `width × height` frames: itself, or scaled to them (nearest pixel).
    pub fn scaled(&self, width: u32, height: u32) -> PixelMask {
        if (width, height) == (self.width(), self.height()) || width == 0 || height == 0 {
            return self.clone();
        }
        let (sw, sh) = (self.width() as u64, self.height() as u64);
        let mut keep = Vec::with_capacity(width as usize * height as usize);
        for y in 0..height as u64 {
            // The source pixel under the centre of the target pixel.
            let sy = ((2 * y + 1) * sh / (2 * height as u64)).min(sh - 1);
            let row = &self.keep.data[(sy * sw) as usize..((sy + 1) * sw) as usize];
            keep.extend((0..width as u64).map(|x| {
                let sx = ((2 * x + 1) * sw / (2 * width as u64)).min(sw - 1);
                row[sx as usize]
            }));
        }
        // Sizes were checked when `self` was made and `width × height` fits any frame.
        PixelMask {
            packed: PackedBinary::from_binary(&BinaryImage {
                width,
                height,
                data: keep.clone(),
            }),
            keep: BinaryImage {
                width,
                height,
                data: keep,
            },
        }
    }

    /// Clears the masked pixels of a thresholded frame of this mask's size: its bytes and/or
    /// its packed words (padding bits stay 0: the mask's are 0 too).
    pub fn apply(&self, bytes: Option<&mut [u8]>, words: Option<&mut [u32]>) {
        if let Some(bytes) = bytes {
            for (b, k) in bytes.iter_mut().zip(&self.keep.data) {
                *b &= k;
            }
        }
        if let Some(words) = words {
            for (w, k) in words.iter_mut().zip(&self.packed.words) {
                *w &= k;
            }
        }
    }

    /// A grey PNG: 255 = analysed, 0 = masked; any grey above 127 reads as analysed. A JPEG
    /// cut short or with damaged data is refused, as an image source's is (`decode_jpeg`).
    pub fn load_png(path: &Path) -> Result<PixelMask> {
        let unreadable =
            |e: &dyn std::fmt::Display| Error::image(path, format!("cannot read the mask: {e}"));
        let reader = image::ImageReader::open(path)
            .and_then(|r| r.with_guessed_format())
            .map_err(|e| unreadable(&e))?;
        let img = if reader.format() == Some(image::ImageFormat::Jpeg) {
            let bytes = std::fs::read(path).map_err(|e| unreadable(&e))?;
            decode_jpeg(&bytes).map_err(|e| unreadable(&e))?
        } else {
            reader.decode().map_err(|e| unreadable(&e))?
        }
        .into_luma8();
        let (w, h) = img.dimensions();
        let keep = img
            .into_raw()
            .into_iter()
            .map(|v| (v > 127) as u8)
            .collect();
        PixelMask::from_keep(w, h, keep).map_err(|e| Error::image(path, e.to_string()))
    }

    pub fn save_png(&self, path: &Path) -> Result<()> {
        let png = self.png(path)?;
        // Written whole and checked: a full disk is an error, not a short file.
        std::fs::write(path, png)
            .map_err(|e| Error::image(path, format!("cannot save the mask: {e}")))
    }

    /// The mask as PNG bytes (white = analysed); `path` names it in errors.
    pub fn png(&self, path: &Path) -> Result<Vec<u8>> {
        let data = self.keep.data.iter().map(|&k| k * 255).collect();
        let img = image::GrayImage::from_raw(self.width(), self.height(), data)
            .ok_or_else(|| Error::image(path, "mask buffer of the wrong size"))?;
        let mut png = std::io::Cursor::new(Vec::new());
        img.write_to(&mut png, image::ImageFormat::Png)
            .map_err(|e| Error::image(path, format!("cannot encode the mask: {e}")))?;
        Ok(png.into_inner())
    }
}

/// What is analysed: the pixels of a pixel mask (a PNG, a learned static mask), and inside
/// every region of interest. Regions are in frame pixels, so they apply to frames of any size
/// as they are; a pixel mask of another size than the frames is scaled to them (nearest pixel).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Mask {
    pub pixels: Option<PixelMask>,
    pub rois: Vec<Roi>,
}

impl Eq for Mask {}

impl Mask {
    /// A mask file: a `.toml` region of interest, else a PNG pixel mask.
    pub fn load(path: &Path) -> Result<Mask> {
        let is_toml = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e.eq_ignore_ascii_case("toml"));
        if is_toml {
            let text = Error::read_text_input(path).map_err(|e| Error::io(path, e))?;
            let roi = Roi::parse_toml(&text).map_err(|why| Error::image(path, why))?;
            return Ok(Mask {
                pixels: None,
                rois: vec![roi],
            });
        }
        Ok(Mask {
            pixels: Some(PixelMask::load_png(path)?),
            rois: Vec::new(),
        })
    }

    /// Pixels both masks analyse.
    pub fn and(mut self, other: Mask) -> Result<Mask> {
        self.pixels = match (self.pixels, other.pixels) {
            (Some(a), Some(b)) => Some(a.intersect(&b)?),
            (a, b) => a.or(b),
        };
        self.rois.extend(other.rois);
        Ok(self)
    }

    pub fn is_empty(&self) -> bool {
        self.pixels.is_none() && self.rois.is_empty()
    }

    /// The pixel mask's own size, when it has one.
    pub fn pixel_size(&self) -> Option<(u32, u32)> {
        self.pixels.as_ref().map(|p| (p.width(), p.height()))
    }

    /// The mask for `width × height` frames.
    pub fn fit(&self, width: u32, height: u32) -> Result<PixelMask> {
        let mut fitted = match &self.pixels {
            Some(p) => p.scaled(width, height),
            None => PixelMask::from_keep(width, height, vec![1; width as usize * height as usize])?,
        };
        for roi in &self.rois {
            fitted = fitted.intersect(&PixelMask::from_roi(roi, width, height)?)?;
        }
        Ok(fitted)
    }
}

/// A region of interest in the frame's pixel-index coordinates, those of the centroids (x
/// right, y down; pixel (x, y) is centred on (x, y)). A rectangle covers the pixels
/// left..left + width and top..top + height.
#[derive(Clone, Debug, PartialEq)]
pub enum Roi {
    Rect {
        left: u32,
        top: u32,
        width: u32,
        height: u32,
    },
    /// Three or more corners, in order (the last joins the first).
    Polygon(Vec<[f64; 2]>),
}

impl Roi {
    /// `[roi]` with `rect = [left, top, width, height]` or `polygon = [[x, y], ...]`.
    pub fn parse_toml(text: &str) -> std::result::Result<Roi, String> {
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| format!("not valid TOML: {}", e.message()))?;
        let roi = table
            .get("roi")
            .and_then(|v| v.as_table())
            .ok_or("expected a [roi] table with rect = [left, top, width, height] or polygon = [[x, y], ...]")?;
        let number = |v: &toml::Value| {
            v.as_float()
                .or_else(|| v.as_integer().map(|i| i as f64))
                .filter(|f| f.is_finite())
                .ok_or_else(|| format!("expected a number, got {v}"))
        };
        match (roi.get("rect"), roi.get("polygon")) {
            (Some(rect), None) => {
                let v = rect
                    .as_array()
                    .filter(|a| a.len() == 4)
                    .ok_or("roi.rect: expected [left, top, width, height]")?;
                let mut n = [0u32; 4];
                for (o, x) in n.iter_mut().zip(v) {
                    *o = x
                        .as_integer()
                        .and_then(|i| u32::try_from(i).ok())
                        .ok_or_else(|| format!("roi.rect: expected whole numbers >= 0, got {x}"))?;
                }
                if n[2] == 0 || n[3] == 0 {
                    return Err("roi.rect: width and height must be at least 1".into());
                }
                Ok(Roi::Rect {
                    left: n[0],
                    top: n[1],
                    width: n[2],
                    height: n[3],
                })
            }
            (None, Some(polygon)) => {
                let list = polygon
                    .as_array()
                    .ok_or("roi.polygon: expected a list of [x, y] points")?;
                let points = list
                    .iter()
                    .map(|p| match p.as_array().map(|a| a.as_slice()) {
                        Some([x, y]) => Ok([number(x)?, number(y)?]),
                        _ => Err(format!("roi.polygon: expected [x, y], got {p}")),
                    })
                    .collect::<std::result::Result<Vec<_>, String>>()?;
                if points.len() < 3 {
                    return Err("roi.polygon: needs at least 3 points".into());
                }
                Ok(Roi::Polygon(points))
            }
            _ => Err("[roi]: give either rect or polygon".into()),
        }
    }

    pub fn to_toml(&self) -> String {
        match self {
            Roi::Rect {
                left,
                top,
                width,
                height,
            } => format!("[roi]\nrect = [{left}, {top}, {width}, {height}]\n"),
            Roi::Polygon(points) => {
                let list: Vec<String> = points
                    .iter()
                    .map(|p| format!("[{:?}, {:?}]", p[0], p[1]))
                    .collect();
                format!("[roi]\npolygon = [{}]\n", list.join(", "))
            }
        }
    }
}

/// Learns a static mask from frames of the scene without markers: every pixel that is
/// foreground in any of them, grown by `margin` pixels, is masked.
pub struct StaticMaskLearner {
    width: u32,
    height: u32,
    seen: Vec<u8>,
    frames: u32,
    margin: u32,
}

impl StaticMaskLearner {
    pub fn new(margin: u32) -> Self {
        Self {
            width: 0,
            height: 0,
            seen: Vec::new(),
            frames: 0,
            margin,
        }
    }

    /// Adds a thresholded frame (one byte per pixel, 1 = foreground). A frame of another size
    /// starts the learning again.
    pub fn add(&mut self, binary: &BinaryImage) {
        if (binary.width, binary.height) != (self.width, self.height) {
            self.width = binary.width;
            self.height = binary.height;
            self.seen = vec![0; binary.data.len()];
            self.frames = 0;
        }
        for (s, b) in self.seen.iter_mut().zip(&binary.data) {
            *s |= b;
        }
        self.frames += 1;
    }

    pub fn frames(&self) -> u32 {
        self.frames
    }

    /// The mask: what was never foreground, less a margin around what was.
    pub fn finish(&self) -> Result<PixelMask> {
        let (w, h) = (self.width as usize, self.height as usize);
        let r = self.margin as usize;
        // Grow the seen pixels by r: a max filter over rows, then over columns.
        let mut rows = vec![0u8; w * h];
        for y in 0..h {
            let src = &self.seen[y * w..(y + 1) * w];
            let dst = &mut rows[y * w..(y + 1) * w];
            for (x, &v) in src.iter().enumerate() {
                if v != 0 {
                    dst[x.saturating_sub(r)..(x + r + 1).min(w)].fill(1);
                }
            }
        }
        let mut grown = vec![0u8; w * h];
        for y in 0..h {
            for x in 0..w {
                if rows[y * w + x] != 0 {
                    for yy in y.saturating_sub(r)..(y + r + 1).min(h) {
                        grown[yy * w + x] = 1;
                    }
                }
            }
        }
        let keep = grown.into_iter().map(|g| 1 - g).collect();
        PixelMask::from_keep(self.width, self.height, keep)
    }
}

#[cfg(test)]
mod tests {
    /// A JPEG mask cut short is refused, not read as keeping everything past the cut.
    #[test]
    fn a_truncated_jpeg_mask_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mask.jpg");
        image::GrayImage::from_fn(64, 64, |x, _| image::Luma([if x < 32 { 0 } else { 255 }]))
            .save(&path)
            .unwrap();
        assert!(PixelMask::load_png(&path).is_ok());
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
        let err = PixelMask::load_png(&path).unwrap_err().to_string();
        assert!(err.contains("damaged JPEG"), "{err}");
    }

    /// A region-of-interest file that never ends (`/dev/zero`) is refused, not read until
    /// memory runs out.
    #[cfg(unix)]
    #[test]
    fn an_endless_roi_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let zero = dir.path().join("zero.toml");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let err = Mask::load(&zero).unwrap_err().to_string();
        assert!(err.contains("larger than"), "{err}");
    }

    use super::*;

    fn kept(m: &PixelMask) -> Vec<u8> {
        m.keep().data.clone()
    }

    #[test]
    fn a_rect_and_a_polygon_keep_the_pixels_whose_centre_is_inside() {
        let m = PixelMask::from_roi(
            &Roi::Rect {
                left: 1,
                top: 1,
                width: 2,
                height: 1,
            },
            4,
            3,
        )
        .unwrap();
        assert_eq!(kept(&m), [0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0]);
        // A triangle over the top-left half of a 4×4 frame: centres with x + y < 3.5.
        let tri = Roi::Polygon(vec![[-0.5, -0.5], [3.5, -0.5], [-0.5, 3.5]]);
        let m = PixelMask::from_roi(&tri, 4, 4).unwrap();
        for y in 0..4 {
            for x in 0..4 {
                let inside = (x + y) as f64 + 1.0 < 4.0;
                assert_eq!(m.keep().data[y * 4 + x] == 1, inside, "({x}, {y})");
            }
        }
    }

    #[test]
    fn apply_clears_masked_bytes_and_bits() {
        let m =
            PixelMask::from_keep(70, 2, (0..140).map(|i| (i % 3 != 0) as u8).collect()).unwrap();
        let mut bytes = vec![1u8; 140];
        let mut packed = PackedBinary::from_binary(&BinaryImage {
            width: 70,
            height: 2,
            data: bytes.clone(),
        });
        m.apply(Some(&mut bytes), Some(&mut packed.words));
        assert_eq!(bytes, kept(&m));
        assert_eq!(packed.unpack().data, kept(&m));
    }

    #[test]
    fn scaling_is_nearest_pixel() {
        let m = PixelMask::from_keep(2, 1, vec![1, 0]).unwrap();
        assert_eq!(kept(&m.scaled(4, 2)), [1, 1, 0, 0, 1, 1, 0, 0]);
        assert_eq!(kept(&m.scaled(2, 1)), [1, 0]);
    }

    #[test]
    fn roi_files_round_trip_and_bad_ones_say_why() {
        for roi in [
            Roi::Rect {
                left: 3,
                top: 4,
                width: 5,
                height: 6,
            },
            Roi::Polygon(vec![[1.5, 2.0], [30.0, 2.0], [12.25, 40.0]]),
        ] {
            assert_eq!(Roi::parse_toml(&roi.to_toml()).unwrap(), roi);
        }
        for (text, says) in [
            ("x = 1", "[roi]"),
            ("[roi]\nrect = [1, 2, 3]", "left, top, width, height"),
            ("[roi]\nrect = [1, 2, 0, 3]", "at least 1"),
            ("[roi]\npolygon = [[1, 2], [3, 4]]", "at least 3"),
            ("[roi]\npolygon = [[1, 2], [3, \"a\"], [5, 6]]", "number"),
            ("[roi]\nrect = [0, 0, 1, 1]\npolygon = []", "either"),
        ] {
            let err = Roi::parse_toml(text).unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
        }
    }

    #[test]
    fn the_learned_mask_covers_what_was_bright_and_a_margin() {
        let mut learner = StaticMaskLearner::new(1);
        let mut frame = BinaryImage {
            width: 5,
            height: 5,
            data: vec![0; 25],
        };
        frame.data[12] = 1; // the centre, in one frame only
        learner.add(&frame);
        learner.add(&BinaryImage {
            width: 5,
            height: 5,
            data: vec![0; 25],
        });
        assert_eq!(learner.frames(), 2);
        let m = learner.finish().unwrap();
        for y in 0..5 {
            for x in 0..5 {
                let near = (x as i32 - 2).abs() <= 1 && (y as i32 - 2).abs() <= 1;
                assert_eq!(m.keep().data[y * 5 + x] == 0, near, "({x}, {y})");
            }
        }
    }

    #[test]
    fn png_masks_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.png");
        let m = PixelMask::from_keep(3, 2, vec![1, 0, 1, 0, 1, 1]).unwrap();
        m.save_png(&path).unwrap();
        assert_eq!(Mask::load(&path).unwrap().pixels, Some(m));
        let err = Mask::load(&dir.path().join("none.png"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("none.png"), "{err}");
    }
}
