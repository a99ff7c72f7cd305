//! The text of component rows: CSV lines and JSONL records appended to a byte buffer that is
//! reused from frame to frame, so that formatting allocates nothing once the buffer has grown.
//!
//! The text is the same, byte for byte, as Rust's `{}` (CSV) and serde_json (JSONL) give:
//! integers through `itoa`; the CSV's floats through std's formatter where only it gives `{}`'s
//! digits (`zmij` or plain integer arithmetic where they are the same), JSONL's through `zmij`
//! (serde_json's own). What every row of a frame shares is written once a frame (`RowPlan`).
//! The property tests here and in `export` compare both with the formatting they replace.

use super::columns::{Column, Columns};
use crate::ccl::descriptors::ShapeDescriptors;
use crate::ccl::stats::ComponentStats;
use crate::ccl::subpixel::SubpixelCentroid;
use std::io;

/// The text formats of the rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextFormat {
    Csv,
    Jsonl,
}

/// Per-row values beyond the statistics, each aligned with the rows or empty (not computed).
#[derive(Clone, Copy, Debug, Default)]
pub struct RowExtras<'a> {
    pub track_ids: &'a [u64],
    pub subpixel: &'a [SubpixelCentroid],
    pub shapes: &'a [ShapeDescriptors],
    pub world: &'a [[f64; 2]],
    /// The frame was decoded from damaged data (the `damaged` column).
    pub damaged: bool,
    /// Which source the frame is of, in a run of several (the source columns; empty otherwise).
    pub source: Option<SourceColumns<'a>>,
    /// The object of the merged world view each row is an observation of (several sources
    /// that all map into the world: `Column::WORLD_MERGE`).
    pub merged: &'a [MergedObservation],
}

/// Where a row's observation went in the merged world view of several sources: the object's
/// world track (0: none, the observation has no world position) and merged world position.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MergedObservation {
    pub track: u64,
    pub world: [f64; 2],
}

/// The source columns of a frame's rows (`Column::SOURCES`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SourceColumns<'a> {
    /// The source's position among those given, from 0.
    pub index: u64,
    /// The source as given.
    pub name: &'a str,
    /// What the frame's time is measured by (`source::TimeStamp::name`).
    pub time_source: &'static str,
    pub frame_set: u64,
    /// The frame's time minus its set's reference time, in milliseconds.
    pub skew_ms: f64,
}

impl<'a> RowExtras<'a> {
    /// Everything a pipeline result carries beside its statistics.
    pub fn of(result: &'a crate::pipeline::FrameResult) -> Self {
        RowExtras {
            track_ids: &result.track_ids,
            subpixel: &result.subpixel,
            shapes: &result.shapes,
            world: &result.world,
            damaged: false,
            source: None,
            merged: &[],
        }
    }
}

/// One value of a row.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value<'a> {
    UInt(u64),
    Float(f64),
    /// Not computed: an empty CSV field, a JSON null.
    Missing,
    Text(&'a str),
    Bool(bool),
}

/// The rows of one frame: its statistics and whatever of the extras was computed.
#[derive(Clone, Copy, Debug)]
pub struct FrameRows<'a> {
    pub frame: u64,
    pub time_s: f64,
    pub file: &'a str,
    pub stats: &'a [ComponentStats],
    /// Each slice aligned with `stats` or empty (not computed); checked by `check`.
    pub extras: RowExtras<'a>,
}

impl<'a> FrameRows<'a> {
    /// The rows of a pipeline result.
    pub fn of(result: &'a crate::pipeline::FrameResult) -> Self {
        FrameRows {
            frame: result.index,
            time_s: result.time_s,
            file: &result.name,
            stats: &result.components,
            extras: RowExtras::of(result),
        }
    }

    /// Every extra either one per row or absent.
    pub fn check(&self) -> io::Result<()> {
        for (what, n) in [
            ("track IDs", self.extras.track_ids.len()),
            ("sub-pixel centroids", self.extras.subpixel.len()),
            ("shape descriptors", self.extras.shapes.len()),
            ("world positions", self.extras.world.len()),
            ("merged world positions", self.extras.merged.len()),
        ] {
            if n != 0 && n != self.stats.len() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "frame {}: {n} {what} for {} components",
                        self.frame,
                        self.stats.len()
                    ),
                ));
            }
        }
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.stats.len()
    }

    pub fn is_empty(&self) -> bool {
        self.stats.is_empty()
    }

    /// The value of `column` in row `i`.
    #[inline]
    pub fn value(&self, column: Column, i: usize) -> Value<'a> {
        let s = &self.stats[i];
        let sub = self.extras.subpixel.get(i);
        let shape = |f: fn(&crate::ccl::descriptors::ShapeDescriptors) -> f64| {
            self.extras
                .shapes
                .get(i)
                .map_or(Value::Missing, |d| Value::Float(f(d)))
        };
        // NaN (a point on the plane's horizon) is an empty field / null.
        let world = |k: usize| match self.extras.world.get(i) {
            Some(w) if w[k].is_finite() => Value::Float(w[k]),
            _ => Value::Missing,
        };
        let merged = |k: usize| match self.extras.merged.get(i) {
            Some(m) if m.world[k].is_finite() => Value::Float(m.world[k]),
            _ => Value::Missing,
        };
        let source = self.extras.source;
        match column {
            Column::Frame => Value::UInt(self.frame),
            Column::Label => Value::UInt(s.label.into()),
            Column::Left => Value::UInt(s.left.into()),
            Column::Top => Value::UInt(s.top.into()),
            Column::Width => Value::UInt(s.width.into()),
            Column::Height => Value::UInt(s.height.into()),
            Column::Area => Value::UInt(s.area),
            Column::CentroidX => Value::Float(s.centroid_x),
            Column::CentroidY => Value::Float(s.centroid_y),
            Column::SumX => Value::UInt(s.sum_x),
            Column::SumY => Value::UInt(s.sum_y),
            Column::File => Value::Text(self.file),
            Column::TimeS => Value::Float(self.time_s),
            Column::Track => self
                .extras
                .track_ids
                .get(i)
                .map_or(Value::Missing, |&t| Value::UInt(t)),
            Column::SubpixelX => sub.map_or(Value::Missing, |c| Value::Float(c.x)),
            Column::SubpixelY => sub.map_or(Value::Missing, |c| Value::Float(c.y)),
            Column::Mu20 => shape(|d| d.mu20),
            Column::Mu02 => shape(|d| d.mu02),
            Column::Mu11 => shape(|d| d.mu11),
            Column::OrientationDeg => shape(|d| d.orientation_deg),
            Column::MajorAxis => shape(|d| d.major_axis),
            Column::MinorAxis => shape(|d| d.minor_axis),
            Column::Eccentricity => shape(|d| d.eccentricity),
            Column::InertiaRatio => shape(|d| d.inertia_ratio),
            Column::Perimeter => shape(|d| d.perimeter),
            Column::Circularity => shape(|d| d.circularity),
            Column::XWorld => world(0),
            Column::YWorld => world(1),
            Column::Damaged => Value::Bool(self.extras.damaged),
            Column::Source => source.map_or(Value::Missing, |s| Value::UInt(s.index)),
            Column::SourceName => source.map_or(Value::Missing, |s| Value::Text(s.name)),
            Column::TimeSource => source.map_or(Value::Missing, |s| Value::Text(s.time_source)),
            Column::FrameSet => source.map_or(Value::Missing, |s| Value::UInt(s.frame_set)),
            Column::SkewMs => source.map_or(Value::Missing, |s| Value::Float(s.skew_ms)),
            Column::WorldTrack => match self.extras.merged.get(i) {
                Some(m) if m.track > 0 => Value::UInt(m.track),
                _ => Value::Missing,
            },
            Column::MergedXWorld => merged(0),
            Column::MergedYWorld => merged(1),
        }
    }

    /// Whether `column` can differ from row to row of the frame: the statistics, and the
    /// extras that were computed. The frame's own columns (its number, time, file, source)
    /// and the extras not computed are the same in every row.
    fn per_row(&self, column: Column) -> bool {
        let extras = &self.extras;
        match column {
            Column::Label
            | Column::Left
            | Column::Top
            | Column::Width
            | Column::Height
            | Column::Area
            | Column::CentroidX
            | Column::CentroidY
            | Column::SumX
            | Column::SumY => true,
            Column::Track => !extras.track_ids.is_empty(),
            Column::SubpixelX | Column::SubpixelY => !extras.subpixel.is_empty(),
            Column::Mu20
            | Column::Mu02
            | Column::Mu11
            | Column::OrientationDeg
            | Column::MajorAxis
            | Column::MinorAxis
            | Column::Eccentricity
            | Column::InertiaRatio
            | Column::Perimeter
            | Column::Circularity => !extras.shapes.is_empty(),
            Column::XWorld | Column::YWorld => !extras.world.is_empty(),
            Column::WorldTrack | Column::MergedXWorld | Column::MergedYWorld => {
                !extras.merged.is_empty()
            }
            Column::Frame
            | Column::File
            | Column::TimeS
            | Column::Damaged
            | Column::Source
            | Column::SourceName
            | Column::TimeSource
            | Column::FrameSet
            | Column::SkewMs => false,
        }
    }

    /// Rows `range` in a text format, appended to `out`.
    pub fn text(
        &self,
        format: TextFormat,
        columns: &Columns,
        range: std::ops::Range<usize>,
        out: &mut Vec<u8>,
    ) {
        if range.is_empty() {
            return;
        }
        let plan = self.plan(format, columns);
        for i in range {
            let mut start = 0;
            for &(end, column) in &plan.pieces {
                // Mostly a CSV's comma: pushed, not copied.
                match &plan.text[start..end] {
                    [byte] => out.push(*byte),
                    run => out.extend_from_slice(run),
                }
                start = end;
                if let Some(column) = column {
                    push_value(out, format, self.value(column, i));
                }
            }
        }
    }

    /// The frame's row in `format` with what is the same in every row written once. Needs a
    /// row (the values of the frame's columns are read from row 0).
    fn plan(&self, format: TextFormat, columns: &Columns) -> RowPlan {
        let mut plan = RowPlan {
            text: Vec::new(),
            pieces: Vec::new(),
        };
        let text = &mut plan.text;
        for (k, &column) in columns.as_slice().iter().enumerate() {
            match format {
                TextFormat::Csv if k > 0 => text.push(b','),
                TextFormat::Csv => {}
                TextFormat::Jsonl => {
                    text.extend_from_slice(if k == 0 { b"{\"" } else { b",\"" });
                    text.extend_from_slice(column.name().as_bytes());
                    text.extend_from_slice(b"\":");
                }
            }
            if self.per_row(column) {
                plan.pieces.push((text.len(), Some(column)));
            } else {
                push_value(text, format, self.value(column, 0));
            }
        }
        if format == TextFormat::Jsonl {
            if columns.as_slice().is_empty() {
                text.push(b'{');
            }
            text.push(b'}');
        }
        text.push(b'\n');
        plan.pieces.push((text.len(), None));
        plan
    }
}

/// A frame's row as text: literal runs (separators, keys, the values that are the same in
/// every row) between the values that differ from row to row.
struct RowPlan {
    text: Vec<u8>,
    /// Each piece: where its literal run in `text` ends, then the column whose value follows
    /// (none after the last run, which ends the row).
    pieces: Vec<(usize, Option<Column>)>,
}

/// One value as a CSV field (RFC 4180 quoting, empty when missing) or a JSON value.
#[inline]
fn push_value(out: &mut Vec<u8>, format: TextFormat, value: Value<'_>) {
    match (format, value) {
        (_, Value::UInt(v)) => push_uint(out, v),
        (_, Value::Bool(v)) => push_bool(out, v),
        (TextFormat::Csv, Value::Float(v)) => push_display_f64(out, v),
        (TextFormat::Csv, Value::Missing) => {}
        (TextFormat::Csv, Value::Text(text)) => out.extend_from_slice(csv_field(text).as_bytes()),
        (TextFormat::Jsonl, Value::Float(v)) => push_json_f64(out, v),
        (TextFormat::Jsonl, Value::Missing) => out.extend_from_slice(b"null"),
        (TextFormat::Jsonl, Value::Text(s)) => push_json_str(out, s),
    }
}

/// RFC 4180 quoting: only when the field holds a comma, quote or line break.
pub(crate) fn csv_field(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\"")).into()
    } else {
        s.into()
    }
}

/// `true` / `false`, as `{}` and JSON write a bool.
fn push_bool(out: &mut Vec<u8>, v: bool) {
    out.extend_from_slice(if v { b"true" } else { b"false" });
}

fn push_uint(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// A JSON string with serde_json's escaping.
fn push_json_str(out: &mut Vec<u8>, s: &str) {
    // Writing into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// As serde_json writes an f64: the shortest round-trip digits, null when not finite.
fn push_json_f64(out: &mut Vec<u8>, v: f64) {
    if v.is_finite() {
        out.extend_from_slice(zmij::Buffer::new().format_finite(v).as_bytes());
    } else {
        out.extend_from_slice(b"null");
    }
}

/// As Rust's `{}` writes an f64: the shortest digits that read back as the same number, the
/// closest to it where several are as short, in plain decimal notation (`1e-7` is
/// `0.0000001`, `2.0` is `2`, `-0.0` is `-0`), and `NaN`, `inf`, `-inf`. Written by std's own
/// formatter straight into the buffer, but for the numbers whose text faster ways give
/// exactly: faster formatters (zmij, ryu) pick another last digit for some 17-digit numbers
/// (a tie, which std rounds up and they to even), which would change the CSV's text.
pub fn push_display_f64(out: &mut Vec<u8>, v: f64) {
    use std::io::Write;
    if push_short_dyadic(out, v) || push_long_fraction(out, v) {
        return;
    }
    // Writing into a Vec cannot fail.
    let _ = write!(out, "{v}");
}

/// A number of 256ths below 2^20 in magnitude (most centroids: a pixel's index, a half, a
/// quarter …), written as its exact decimal; false (nothing written) for any other number.
/// That decimal has at most 15 significant digits (7 before the point, 8 after), and two
/// decimals of at most 15 digits never read back as the same double, so it is the only
/// shortest decimal that reads back as `v`: what `{}` writes.
fn push_short_dyadic(out: &mut Vec<u8>, v: f64) -> bool {
    const LIMIT: f64 = (1u64 << 20) as f64;
    let scaled = v * 256.0;
    // The scaling by a power of two is exact.
    if v.is_nan() || v.abs() >= LIMIT || scaled.fract() != 0.0 {
        return false;
    }
    let m = scaled.abs() as u64;
    if v.is_sign_negative() {
        out.push(b'-');
    }
    push_uint(out, m >> 8);
    let r = m & 255;
    if r != 0 {
        // r / 256 = r · 390625 / 10^8: eight digits, the trailing zeros left out.
        let mut digits = r * 390_625;
        let mut width = 8;
        while digits % 10 == 0 {
            digits /= 10;
            width -= 1;
        }
        out.push(b'.');
        let mut buffer = itoa::Buffer::new();
        let text = buffer.format(digits);
        out.resize(out.len() + width - text.len(), b'0');
        out.extend_from_slice(text.as_bytes());
    }
    true
}

/// A number from 2^-10 to 2^20 in magnitude with at least 24 bits after the binary point
/// (most centroids: a sum divided by an area), written by zmij; false (nothing written) for
/// any other number. zmij and std both write the shortest digits that read back as `v`, the
/// closest to `v` where several are as short; they part only where two are equally close (a
/// tie) or one lies on an end of the interval that reads back as `v`. Neither can happen here:
/// `v` (f ≥ 24 bits after the point, its first digit at most 4 places after it) has an exact
/// decimal of f digits after the point, at least 21 significant, and the interval's ends one
/// bit more; a tie between 17-digit decimals has 18, an end that is a candidate at most 17. In
/// this range zmij writes plain decimal notation, as std does.
fn push_long_fraction(out: &mut Vec<u8>, v: f64) -> bool {
    const LIMIT: f64 = (1u64 << 20) as f64;
    const SMALLEST: f64 = 1.0 / 1024.0;
    let magnitude = v.abs();
    // NaN fails both comparisons.
    if !(SMALLEST..LIMIT).contains(&magnitude) {
        return false;
    }
    // A normal number: mantissa · 2^exponent, the hidden bit included.
    let bits = magnitude.to_bits();
    let exponent = ((bits >> 52) & 0x7ff) as i32 - 1075;
    let mantissa = (bits & ((1u64 << 52) - 1)) | (1u64 << 52);
    let fraction_bits = -(exponent + mantissa.trailing_zeros() as i32);
    if fraction_bits < 24 {
        return false;
    }
    out.extend_from_slice(zmij::Buffer::new().format_finite(v).as_bytes());
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn display(v: f64) -> String {
        let mut out = Vec::new();
        push_display_f64(&mut out, v);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn floats_are_written_as_rust_writes_them() {
        for v in [
            0.0,
            -0.0,
            1.0,
            -2.0,
            0.25,
            0.1,
            1e-7,
            1.5e-300,
            f64::MIN_POSITIVE,
            5e-324,
            -5e-324,
            131894245002172.13,
            1e15,
            1e16,
            1.2345e21,
            1e300,
            f64::MAX,
            f64::MIN,
            123456789.125,
            f64::NAN,
            -f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            (2u64.pow(53) + 1) as f64,
            0.5,
            -0.5,
            1.0 / 256.0,
            -1.0 / 256.0,
            255.0 / 256.0,
            1048575.99609375,
            1048576.0,
            -1048576.0,
            1048576.5,
            1919.5,
            3.0 / 512.0,
        ] {
            assert_eq!(display(v), format!("{v}"), "{v:e}");
        }
    }

    /// Every bit pattern: subnormals, huge and tiny numbers, integers, NaNs.
    fn any_f64() -> impl Strategy<Value = f64> {
        prop_oneof![
            any::<u64>().prop_map(f64::from_bits),
            any::<i64>().prop_map(|i| i as f64),
            any::<i32>().prop_map(|i| f64::from(i) / 1024.0),
            (-(1i64 << 28)..1i64 << 28).prop_map(|i| i as f64 / 256.0),
            (any::<i32>(), 0i32..10).prop_map(|(i, k)| f64::from(i) / 2f64.powi(k)),
            (0u64..1 << 52).prop_map(f64::from_bits),
            any::<f64>(),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]

        /// Centroids (a sum of coordinates divided by an area) and numbers around the ends of
        /// the range zmij writes: the text std gives.
        #[test]
        fn centroids_are_byte_identical_to_std(
            area in 1u64..5000,
            x in 0u64..8192,
            rest in 0u64..5000,
            k in 0i32..34,
            sign in any::<bool>(),
        ) {
            let centroid = (x * area + rest % area) as f64 / area as f64;
            prop_assert_eq!(display(centroid), format!("{centroid}"));
            let scaled = centroid * 2f64.powi(k - 23);
            let v = if sign { -scaled } else { scaled };
            prop_assert_eq!(display(v), format!("{v}"));
        }

        #[test]
        fn display_f64_is_byte_identical_to_std(v in any_f64()) {
            prop_assert_eq!(display(v), format!("{v}"));
        }

        #[test]
        fn json_f64_is_byte_identical_to_serde_json(v in any_f64()) {
            let mut out = Vec::new();
            push_json_f64(&mut out, v);
            prop_assert_eq!(out, serde_json::to_vec(&v).unwrap());
        }
    }
}
