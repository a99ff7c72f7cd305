//! A sheet of markers to print: markers in rows and columns, each labelled with its ID, and a
//! footer that states the scale (the dictionary, the marker side and the gap in their unit)
//! beside a bar one marker side long, to check the print with a ruler.
//!
//! One layout, two drawings: SVG in print units, and a grey PNG in which every marker is
//! `generate_marker`'s image (bit for bit `cv2.aruco.generateImageMarker` at that size) and
//! the words are drawn with a small bitmap font (`glyphs`).
//!
//! Layout, in the unit of the side `s` (border included) and the gap `g`: a label band `s/5`
//! under each marker, a margin of `max(g, s/5)` around the sheet, columns `s + g` apart, rows
//! `s + s/5 + g` apart, and the footer (bar and two lines of text) under the last row.

use super::dictionary::Dictionary;
use super::glyphs;
use super::marker_image::{generate_marker, marker_cells, white_runs_svg};
use crate::error::{Error, Result};
use crate::frame::image::GrayImage;
use std::fmt::Write as _;

/// The most markers on one sheet.
pub const MAX_MARKERS: usize = 10_000;
/// The largest side of a PNG sheet, in pixels.
pub const MAX_PNG_SIDE: u32 = 1 << 15;

/// What a sheet holds and how large it is drawn.
#[derive(Clone, Debug)]
pub struct SheetSpec<'a> {
    pub dictionary: &'a Dictionary,
    pub ids: Vec<u32>,
    pub columns: u32,
    /// A marker's side, its black border included, in the sheet's unit (pixels for a PNG).
    pub size: f64,
    /// The space between neighbouring markers, in the same unit.
    pub gap: f64,
    /// The black border's width in cells.
    pub border_bits: u32,
    /// The footer's two lines: what is printed and at which scale.
    pub statement: [String; 2],
}

/// One thing drawn on the sheet (coordinates from its top-left corner, y down).
#[derive(Clone, Debug, PartialEq)]
enum Item {
    /// Marker `id` with its top-left corner at (x, y), the side `SheetSpec::size`.
    Marker { id: u32, x: f64, y: f64 },
    /// A black rectangle.
    Bar { x: f64, y: f64, w: f64, h: f64 },
    /// A line of text with its top at `y`, `height` tall, starting at `x` or centred on it.
    Text {
        x: f64,
        y: f64,
        height: f64,
        text: String,
        centred: bool,
    },
}

/// The sheet's size and what is drawn on it.
struct Layout {
    width: f64,
    height: f64,
    items: Vec<Item>,
}

/// Width of a line of `n` characters `height` tall (the bitmap font's proportions, which a
/// monospace font's are close to).
fn text_width(n: usize, height: f64) -> f64 {
    n as f64 * height * glyphs::ADVANCE as f64 / glyphs::GLYPH_HEIGHT as f64
}

impl SheetSpec<'_> {
    /// Refuses what cannot be laid out: no IDs, IDs out of the dictionary or twice, no
    /// columns, a side or gap that is not a positive (gap: non-negative) number.
    fn check(&self) -> Result<()> {
        if self.ids.is_empty() || self.ids.len() > MAX_MARKERS {
            return Err(Error::Invalid(format!(
                "{} markers: give 1 to {MAX_MARKERS} IDs",
                self.ids.len()
            )));
        }
        let mut seen = std::collections::HashSet::new();
        for &id in &self.ids {
            if id as usize >= self.dictionary.len() {
                return Err(Error::Invalid(format!(
                    "marker {id} is not in {} (IDs 0 to {})",
                    self.dictionary.name(),
                    self.dictionary.len() - 1
                )));
            }
            if !seen.insert(id) {
                return Err(Error::Invalid(format!(
                    "marker {id} is asked for twice: two printed markers with one ID are \
                     two markers the detector cannot tell apart"
                )));
            }
        }
        if self.columns == 0 {
            return Err(Error::Invalid("0 columns: give at least 1".into()));
        }
        if !(self.size.is_finite() && self.size > 0.0) {
            return Err(Error::Invalid(format!(
                "marker size {}: give a positive number",
                self.size
            )));
        }
        if !(self.gap.is_finite() && self.gap >= 0.0) {
            return Err(Error::Invalid(format!(
                "gap {}: give a number >= 0",
                self.gap
            )));
        }
        Ok(())
    }

    /// Where everything goes; `round` snaps the label band to whole units (pixels).
    fn layout(&self, round: bool) -> Layout {
        let (s, g) = (self.size, self.gap);
        let snap = |v: f64| if round { v.round().max(1.0) } else { v };
        // Text in a PNG is a whole number of font pixels tall.
        let glyph = glyphs::GLYPH_HEIGHT as f64;
        let snap_text = |v: f64| {
            if round {
                (v / glyph).floor().max(1.0) * glyph
            } else {
                v
            }
        };
        let label = snap(s / 5.0);
        let margin = g.max(label);
        let columns = self.columns.min(self.ids.len() as u32) as usize;
        let rows = self.ids.len().div_ceil(columns);
        let mut items = Vec::with_capacity(self.ids.len() * 2 + 4);
        for (k, &id) in self.ids.iter().enumerate() {
            let x = margin + (k % columns) as f64 * (s + g);
            let y = margin + (k / columns) as f64 * (s + label + g);
            items.push(Item::Marker { id, x, y });
            items.push(Item::Text {
                x: x + s / 2.0,
                y: snap(y + s + label * 0.2),
                height: snap_text(label * 0.6),
                text: id.to_string(),
                centred: true,
            });
        }
        // The footer: the bar (one marker side), then the two lines.
        let top = margin + rows as f64 * (s + label) + (rows - 1) as f64 * g + label * 0.5;
        let line = snap_text(label * 0.45);
        items.push(Item::Bar {
            x: margin,
            y: snap(top),
            w: s,
            h: snap(label * 0.15),
        });
        let mut widest: f64 = 0.0;
        for (n, text) in self.statement.iter().enumerate() {
            widest = widest.max(text_width(text.chars().count(), line));
            items.push(Item::Text {
                x: margin,
                y: snap(top + label * 0.4 + n as f64 * line * 1.6),
                height: line,
                text: text.clone(),
                centred: false,
            });
        }
        let markers_width = columns as f64 * s + (columns - 1) as f64 * g;
        Layout {
            width: 2.0 * margin + markers_width.max(widest),
            height: snap(top + label * 0.4 + 2.0 * line * 1.6) + margin,
            items,
        }
    }
}

/// The sheet as an SVG document `unit`s wide ("mm", "px", ...), one user unit a `unit`.
pub fn sheet_svg(spec: &SheetSpec, unit: &str) -> Result<String> {
    spec.check()?;
    let layout = spec.layout(false);
    let (w, h) = (layout.width, layout.height);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}{unit}\" height=\"{h}{unit}\" \
         viewBox=\"0 0 {w} {h}\">\n<title>{} markers</title>\n\
         <rect width=\"{w}\" height=\"{h}\" fill=\"#fff\"/>\n",
        spec.dictionary.name()
    );
    for item in &layout.items {
        // Writing into a String cannot fail.
        let _ = match item {
            Item::Marker { id, x, y } => {
                let (side, grid) = marker_cells(spec.dictionary, *id, spec.border_bits)?;
                let scale = spec.size / side as f64;
                let _ = write!(
                    svg,
                    "<g transform=\"translate({x} {y}) scale({scale})\" \
                     shape-rendering=\"crispEdges\">\n<rect width=\"{side}\" height=\"{side}\" \
                     fill=\"#000\"/>\n"
                );
                svg.push_str(&white_runs_svg(side, &grid));
                writeln!(svg, "</g>")
            }
            Item::Bar { x, y, w, h } => {
                writeln!(
                    svg,
                    "<rect x=\"{x}\" y=\"{y}\" width=\"{w}\" height=\"{h}\" fill=\"#000\"/>"
                )
            }
            Item::Text {
                x,
                y,
                height,
                text,
                centred,
            } => {
                let anchor = if *centred { "middle" } else { "start" };
                // The font size of capitals `height` tall; the baseline at the text's bottom.
                writeln!(
                    svg,
                    "<text x=\"{x}\" y=\"{}\" font-family=\"monospace\" font-size=\"{}\" \
                     text-anchor=\"{anchor}\">{}</text>",
                    y + height,
                    height / 0.72,
                    xml_escape(text)
                )
            }
        };
    }
    svg.push_str("</svg>\n");
    Ok(svg)
}

/// The sheet as a grey image: `spec.size` and `spec.gap` in whole pixels.
pub fn sheet_png(spec: &SheetSpec) -> Result<GrayImage> {
    spec.check()?;
    for (what, v) in [("marker size", spec.size), ("gap", spec.gap)] {
        if v.fract() != 0.0 || v > MAX_PNG_SIDE as f64 {
            return Err(Error::Invalid(format!(
                "{what} {v}: a PNG sheet takes whole pixels (at most {MAX_PNG_SIDE})"
            )));
        }
    }
    let layout = spec.layout(true);
    let (w, h) = (layout.width.ceil(), layout.height.ceil());
    if w > MAX_PNG_SIDE as f64 || h > MAX_PNG_SIDE as f64 {
        return Err(Error::Invalid(format!(
            "a sheet of {w}×{h} px: at most {MAX_PNG_SIDE} px a side; use fewer columns or \
             rows, smaller markers, or an SVG"
        )));
    }
    let (w, h) = (w as u32, h as u32);
    let mut data = vec![255u8; w as usize * h as usize];
    let side = spec.size as u32;
    for item in &layout.items {
        match item {
            Item::Marker { id, x, y } => {
                let marker = generate_marker(spec.dictionary, *id, side, spec.border_bits)?;
                let (x, y) = (*x as usize, *y as usize);
                for (r, row) in marker.data.chunks_exact(side as usize).enumerate() {
                    let at = (y + r) * w as usize + x;
                    data[at..at + side as usize].copy_from_slice(row);
                }
            }
            Item::Bar { x, y, w: bw, h: bh } => {
                for v in *y as u32..(*y + *bh) as u32 {
                    let at = (v * w) as usize;
                    data[at + *x as usize..at + (*x + *bw) as usize].fill(0);
                }
            }
            Item::Text {
                x,
                y,
                height,
                text,
                centred,
            } => {
                let scale = ((*height / glyphs::GLYPH_HEIGHT as f64).floor() as u32).max(1);
                let tw = glyphs::text_width(text, scale);
                let left = if *centred {
                    (*x - tw as f64 / 2.0).max(0.0)
                } else {
                    *x
                };
                glyphs::draw_text(&mut data, w, (left as u32, *y as u32), text, scale, 0);
            }
        }
    }
    GrayImage::new(w, h, data)
}

/// IDs as "0-11", "3,5,7" or both ("0-3,8"), in the order given.
pub fn parse_ids(text: &str) -> Result<Vec<u32>> {
    let bad = |why: &str| Error::Invalid(format!("--ids {text}: {why}; e.g. 0-11 or 0-3,8,10"));
    let mut ids = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        let number = |s: &str| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| bad("expected whole numbers"))
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (number(a)?, number(b)?);
                if a > b {
                    return Err(bad("a range goes from the smaller ID to the larger"));
                }
                if (b - a) as usize >= MAX_MARKERS {
                    return Err(bad(&format!("at most {MAX_MARKERS} markers a sheet")));
                }
                ids.extend(a..=b);
            }
            None => ids.push(number(part)?),
        }
        if ids.len() > MAX_MARKERS {
            return Err(bad(&format!("at most {MAX_MARKERS} markers a sheet")));
        }
    }
    Ok(ids)
}

fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(dict: &Dictionary, ids: Vec<u32>, columns: u32, size: f64, gap: f64) -> SheetSpec<'_> {
        SheetSpec {
            dictionary: dict,
            ids,
            columns,
            size,
            gap,
            border_bits: 1,
            statement: ["DICT_4X4_50 side 60 px".into(), "print at 100 %".into()],
        }
    }

    #[test]
    fn png_markers_are_opencv_images_at_their_place_with_their_ids() {
        let d = Dictionary::predefined("DICT_4X4_50").unwrap();
        let s = spec(&d, vec![0, 1, 2, 7, 9], 3, 60.0, 10.0);
        let sheet = sheet_png(&s).unwrap();
        let w = sheet.width as usize;
        // Label band 12 px, margin 12 px: marker k at (12 + 70·col, 12 + 82·row).
        for (k, &id) in s.ids.iter().enumerate() {
            let (x, y) = (12 + 70 * (k % 3), 12 + 82 * (k / 3));
            let want = generate_marker(&d, id, 60, 1).unwrap();
            for r in 0..60 {
                assert_eq!(
                    &sheet.data[(y + r) * w + x..(y + r) * w + x + 60],
                    &want.data[r * 60..(r + 1) * 60],
                    "marker {id} row {r}"
                );
            }
            // Its label: ink in the band under it, and white around the marker.
            let band = (y + 62..y + 72).flat_map(|v| (x..x + 60).map(move |u| v * w + u));
            assert!(
                band.into_iter().any(|i| sheet.data[i] == 0),
                "label of {id}"
            );
            assert_eq!(sheet.data[(y - 1) * w + x], 255);
        }
        // The scale bar: one marker side long, black, under the last row.
        let bar_row = (0..sheet.height as usize)
            .rev()
            .find(|&v| (12..72).all(|u| sheet.data[v * w + u] == 0))
            .expect("a bar");
        assert!(bar_row > 12 + 82 + 60);
        assert_eq!(
            sheet.data[bar_row * w + 72],
            255,
            "the bar ends at one side"
        );
    }

    #[test]
    fn svg_states_its_unit_and_bad_sheets_are_refused() {
        let d = Dictionary::predefined("DICT_APRILTAG_36h11").unwrap();
        let svg = sheet_svg(&spec(&d, vec![3, 4], 4, 60.0, 10.0), "mm").unwrap();
        // Two markers in one row: 12 + 60 + 10 + 60 + 12 = 154 mm wide at least.
        assert!(svg.contains("width=\"154mm\""), "{}", &svg[..200]);
        assert_eq!(svg.matches("<g transform").count(), 2);
        assert!(svg.contains(">3</text>") && svg.contains(">4</text>"));
        assert!(svg.contains("print at 100 %"));
        for (s, expected) in [
            (spec(&d, vec![], 4, 60.0, 10.0), "0 markers"),
            (
                spec(&d, vec![587], 4, 60.0, 10.0),
                "not in DICT_APRILTAG_36h11",
            ),
            (spec(&d, vec![1, 1], 4, 60.0, 10.0), "twice"),
            (spec(&d, vec![1], 0, 60.0, 10.0), "0 columns"),
            (spec(&d, vec![1], 2, -1.0, 10.0), "positive"),
            (spec(&d, vec![1], 2, 60.0, f64::NAN), "gap"),
        ] {
            let err = sheet_svg(&s, "mm").unwrap_err().to_string();
            assert!(err.contains(expected), "{err}");
        }
        let err = sheet_png(&spec(&d, vec![1], 1, 60.5, 10.0))
            .unwrap_err()
            .to_string();
        assert!(err.contains("whole pixels"), "{err}");
        let err = sheet_png(&spec(&d, vec![1, 2], 2, 20000.0, 0.0))
            .unwrap_err()
            .to_string();
        assert!(err.contains("at most 32768"), "{err}");
    }

    #[test]
    fn ids_are_ranges_and_lists() {
        assert_eq!(parse_ids("0-3,8, 10").unwrap(), [0, 1, 2, 3, 8, 10]);
        assert_eq!(parse_ids("5").unwrap(), [5]);
        for bad in ["", "3-1", "a", "0-99999", "1,,2"] {
            assert!(parse_ids(bad).is_err(), "{bad}");
        }
    }
}
