//! CSV and JSONL writers for component tables, one row per component.
//!
//! Columns: `frame,label,left,top,width,height,area,centroid_x,centroid_y,sum_x,sum_y,file,time_s,track,subpixel_x,subpixel_y`.
//! The first nine are OpenCV's `connectedComponentsWithStats` (without the background row);
//! `frame` is the index of the image or video frame (0 for a single image), `file` the image's
//! file name (empty for video, camera and synthetic frames), `time_s` the frame's presentation
//! time in seconds (video: from the start of the stream; camera: since it was opened;
//! synthetic: frame / 60; images: 0). `track` is the tracker's ID for the component (stable
//! across frames; empty / null when the rows were not tracked). `subpixel_x`, `subpixel_y` are
//! the grey-weighted centroid (`crate::ccl::subpixel`; empty / null when it was not computed).
//! Then the shape descriptors (`crate::ccl::descriptors`; empty / null when not computed):
//! `mu20,mu02,mu11,orientation_deg,major_axis,minor_axis,eccentricity,inertia_ratio,perimeter,circularity`,
//! and the world position `x_world,y_world` (`crate::geometry`; empty / null without a mapping),
//! and `damaged`: `true` when the frame was decoded from damaged video data (it decodes only with
//! errors, or is predicted from such data with no keyframe since; `crate::source::SkipAt::Damaged`),
//! so that its results may carry the damage; `false` otherwise.
//! New columns go last so that readers of the older columns by position keep working.
//!
//! Track summaries (`analyze --tracks`) are a second CSV, one row per track:
//! `track,first_frame,last_frame,length,mean_area,path_length,last_x,last_y` (or Parquet or
//! Arrow with those columns: `crate::output::tracks`).
//! Floats use Rust's shortest round-trip formatting, so parsing them gives back the same f64.
//!
//! Skipped input (a damaged video frame or image, undecodable data; `crate::source::Skipped`):
//! JSONL gets a side record in stream order, `{"skipped":{"frame":12,"file":"","reason":"..."}}`
//! for a frame or image left out, `{"skipped":{"before_frame":40,"file":"","reason":"..."}}` for
//! data that gave no frame; rows have no `skipped` key. The component CSV stays pure; the list
//! can go to a CSV of its own (`analyze --skipped`): `frame,before_frame,file,reason`, one of
//! the first two empty. A frame analysed but flagged damaged gets no side record (its rows say
//! `damaged`); in the skipped CSV it is listed with its frame and a reason that begins
//! `analysed, flagged damaged:`.

use super::columnar::Columnar;
use super::columns::Columns;
use super::row_text::{csv_field, FrameRows, RowExtras, TextFormat};
use crate::ccl::descriptors::ShapeDescriptors;
use crate::ccl::stats::ComponentStats;
use crate::ccl::subpixel::SubpixelCentroid;
use crate::source::{SkipAt, Skipped};
use crate::track::TrackSummary;
use serde::Serialize;
use std::io::{self, Write};
use std::path::Path;

/// The CSV header line (without the newline).
pub const CSV_HEADER: &str = "frame,label,left,top,width,height,area,centroid_x,centroid_y,\
sum_x,sum_y,file,time_s,track,subpixel_x,subpixel_y,mu20,mu02,mu11,orientation_deg,major_axis,\
minor_axis,eccentricity,inertia_ratio,perimeter,circularity,x_world,y_world,damaged";

/// The header of the skipped-input CSV (`analyze --skipped`).
pub const SKIPPED_CSV_HEADER: &str = "frame,before_frame,file,reason";

/// The header of the track summary CSV.
pub const TRACKS_CSV_HEADER: &str =
    "track,first_frame,last_frame,length,mean_area,path_length,last_x,last_y";

/// The format of the rows (`analyze --format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Csv,
    Jsonl,
    /// Apache Parquet (`crate::output::columnar`).
    Parquet,
    /// Arrow IPC file (`crate::output::columnar`).
    Arrow,
}

impl Format {
    /// The format a file name asks for by its extension (`.csv`, `.jsonl`/`.ndjson`,
    /// `.parquet`/`.pq`, `.arrow`/`.feather`), if any.
    pub fn from_path(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "csv" => Some(Format::Csv),
            "jsonl" | "ndjson" => Some(Format::Jsonl),
            "parquet" | "pq" => Some(Format::Parquet),
            "arrow" | "feather" => Some(Format::Arrow),
            _ => None,
        }
    }

    /// How the rows are encoded: as text lines, or in columnar batches.
    pub fn encoding(self) -> Encoding {
        match self {
            Format::Csv => Encoding::Text(TextFormat::Csv),
            Format::Jsonl => Encoding::Text(TextFormat::Jsonl),
            Format::Parquet => Encoding::Columnar(Columnar::Parquet),
            Format::Arrow => Encoding::Columnar(Columnar::Arrow),
        }
    }
}

/// A format by how it is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    Text(TextFormat),
    Columnar(Columnar),
}

/// One JSONL record; field names and order match the CSV columns.
#[derive(Serialize)]
struct Record<'a> {
    frame: u64,
    label: u32,
    left: u32,
    top: u32,
    width: u32,
    height: u32,
    area: u64,
    centroid_x: f64,
    centroid_y: f64,
    sum_x: u64,
    sum_y: u64,
    file: &'a str,
    time_s: f64,
    track: Option<u64>,
    subpixel_x: Option<f64>,
    subpixel_y: Option<f64>,
    mu20: Option<f64>,
    mu02: Option<f64>,
    mu11: Option<f64>,
    orientation_deg: Option<f64>,
    major_axis: Option<f64>,
    minor_axis: Option<f64>,
    eccentricity: Option<f64>,
    inertia_ratio: Option<f64>,
    perimeter: Option<f64>,
    circularity: Option<f64>,
    x_world: Option<f64>,
    y_world: Option<f64>,
    damaged: bool,
}

impl<'a> Record<'a> {
    /// One row: its statistics and whatever of the extras was computed for it.
    #[allow(clippy::too_many_arguments)]
    fn new(
        frame: u64,
        time_s: f64,
        file: &'a str,
        s: &ComponentStats,
        track: Option<u64>,
        sub: Option<&SubpixelCentroid>,
        shape: Option<&ShapeDescriptors>,
        world: Option<&[f64; 2]>,
    ) -> Self {
        let shape_field = |f: fn(&ShapeDescriptors) -> f64| shape.map(f);
        // NaN (a point on the plane's horizon) is an empty field / null.
        let world_field = |k: usize| world.map(|w| w[k]).filter(|v| v.is_finite());
        Record {
            frame,
            label: s.label,
            left: s.left,
            top: s.top,
            width: s.width,
            height: s.height,
            area: s.area,
            centroid_x: s.centroid_x,
            centroid_y: s.centroid_y,
            sum_x: s.sum_x,
            sum_y: s.sum_y,
            file,
            time_s,
            track,
            subpixel_x: sub.map(|c| c.x),
            subpixel_y: sub.map(|c| c.y),
            mu20: shape_field(|d| d.mu20),
            mu02: shape_field(|d| d.mu02),
            mu11: shape_field(|d| d.mu11),
            orientation_deg: shape_field(|d| d.orientation_deg),
            major_axis: shape_field(|d| d.major_axis),
            minor_axis: shape_field(|d| d.minor_axis),
            eccentricity: shape_field(|d| d.eccentricity),
            inertia_ratio: shape_field(|d| d.inertia_ratio),
            perimeter: shape_field(|d| d.perimeter),
            circularity: shape_field(|d| d.circularity),
            x_world: world_field(0),
            y_world: world_field(1),
            damaged: false,
        }
    }
}

/// The JSONL side record of skipped input.
#[derive(Serialize)]
struct SkippedRecord<'a> {
    skipped: SkippedFields<'a>,
}

#[derive(Serialize)]
struct SkippedFields<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    frame: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    before_frame: Option<u64>,
    file: &'a str,
    reason: &'a str,
}

/// Streams component rows to `W` in one format. The CSV header is written on creation, so an
/// image without components still yields a valid (header-only) file.
pub struct Exporter<W: Write> {
    out: W,
    format: TextFormat,
    columns: Columns,
    rows: u64,
    /// The text of a frame's rows, reused from frame to frame.
    text: Vec<u8>,
}

impl<W: Write> Exporter<W> {
    /// Every column (`CSV_HEADER`).
    pub fn new(out: W, format: Format) -> io::Result<Self> {
        Self::with_columns(out, format, Columns::all())
    }

    /// Only `columns`, in their order (the header names them). The columnar formats are
    /// written in batches (`crate::output::writer::RowWriter`), not row by row.
    pub fn with_columns(mut out: W, format: Format, columns: Columns) -> io::Result<Self> {
        let Encoding::Text(format) = format.encoding() else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{format:?} rows are written in batches, not row by row"),
            ));
        };
        if format == TextFormat::Csv {
            writeln!(out, "{}", columns.header())?;
        }
        Ok(Self {
            out,
            format,
            columns,
            rows: 0,
            text: Vec::new(),
        })
    }

    /// Writes every component of one frame (`time_s` = 0: still images).
    pub fn write_frame(
        &mut self,
        frame: u64,
        file: &str,
        stats: &[ComponentStats],
    ) -> io::Result<()> {
        self.write_frame_at(frame, 0.0, file, stats)
    }

    /// Writes every component of one frame shown at `time_s` seconds (not tracked).
    pub fn write_frame_at(
        &mut self,
        frame: u64,
        time_s: f64,
        file: &str,
        stats: &[ComponentStats],
    ) -> io::Result<()> {
        self.write_rows(&FrameRows {
            frame,
            time_s,
            file,
            stats,
            extras: RowExtras::default(),
        })
    }

    /// Writes every component of one frame with its track ID (`track_ids[i]` for `stats[i]`)
    /// and its sub-pixel centroid (`subpixel[i]`; pass an empty slice when none was computed).
    pub fn write_tracked_frame_at(
        &mut self,
        frame: u64,
        time_s: f64,
        file: &str,
        stats: &[ComponentStats],
        track_ids: &[u64],
        subpixel: &[SubpixelCentroid],
    ) -> io::Result<()> {
        let extras = RowExtras {
            track_ids,
            subpixel,
            ..RowExtras::default()
        };
        self.write_frame_with(frame, time_s, file, stats, &extras)
    }

    /// Writes every component of one frame with its track ID (required: one per row) and the
    /// other per-row values of `extras` that were computed (empty slices: empty columns).
    pub fn write_frame_with(
        &mut self,
        frame: u64,
        time_s: f64,
        file: &str,
        stats: &[ComponentStats],
        extras: &RowExtras<'_>,
    ) -> io::Result<()> {
        if extras.track_ids.len() != stats.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "frame {frame}: {} track IDs for {} components",
                    extras.track_ids.len(),
                    stats.len()
                ),
            ));
        }
        self.write_rows(&FrameRows {
            frame,
            time_s,
            file,
            stats,
            extras: *extras,
        })
    }

    /// Writes the rows of one frame (each extra one per row or absent).
    pub fn write_rows(&mut self, rows: &FrameRows<'_>) -> io::Result<()> {
        rows.check()?;
        self.text.clear();
        rows.text(self.format, &self.columns, 0..rows.len(), &mut self.text);
        self.out.write_all(&self.text)?;
        self.rows += rows.len() as u64;
        Ok(())
    }

    /// Records skipped input: a JSONL side record; nothing in a CSV, nor for a frame analysed
    /// and flagged damaged (see the module docs).
    pub fn write_skipped(&mut self, skipped: &Skipped) -> io::Result<()> {
        if self.format == TextFormat::Jsonl {
            self.text.clear();
            skipped_record(skipped, &mut self.text);
            self.out.write_all(&self.text)?;
        }
        Ok(())
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Flushes and hands back the writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Component `i` of a pipeline result as a JSON object with the CSV's fields (a JSONL row
/// without its newline).
pub fn write_json_row<W: Write>(
    out: &mut W,
    result: &crate::pipeline::FrameResult,
    i: usize,
) -> io::Result<()> {
    let record = Record::new(
        result.index,
        result.time_s,
        &result.name,
        &result.components[i],
        result.track_ids.get(i).copied(),
        result.subpixel.get(i),
        result.shapes.get(i),
        result.world.get(i),
    );
    serde_json::to_writer(out, &record).map_err(io::Error::from)
}

/// Writes the track summary CSV (`TRACKS_CSV_HEADER`), one row per track.
pub fn write_track_summaries<W: Write>(out: W, tracks: &[TrackSummary]) -> io::Result<W> {
    let mut w = TrackWriter::new(out)?;
    w.write(tracks)?;
    w.finish()
}

/// The track summary CSV written as tracks end (`TRACKS_CSV_HEADER` first), so that nothing
/// need be held for the tracks already written.
pub struct TrackWriter<W: Write> {
    out: W,
}

impl<W: Write> TrackWriter<W> {
    pub fn new(mut out: W) -> io::Result<Self> {
        writeln!(out, "{TRACKS_CSV_HEADER}")?;
        Ok(Self { out })
    }

    /// One row per track.
    pub fn write(&mut self, tracks: &[TrackSummary]) -> io::Result<()> {
        for t in tracks {
            writeln!(
                self.out,
                "{},{},{},{},{},{},{},{}",
                t.id,
                t.first_frame,
                t.last_frame,
                t.length,
                t.mean_area,
                t.path_length,
                t.last_x,
                t.last_y
            )?;
        }
        Ok(())
    }

    /// Flushes and hands back the writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// One row of the skipped-input CSV (`SKIPPED_CSV_HEADER`).
pub fn write_skipped_csv_row<W: Write>(out: &mut W, skipped: &Skipped) -> io::Result<()> {
    let (frame, before, flag) = match skipped.at {
        SkipAt::Frame(i) => (i.to_string(), String::new(), ""),
        SkipAt::Before(i) => (String::new(), i.to_string(), ""),
        SkipAt::Damaged(i) => (i.to_string(), String::new(), "analysed, flagged damaged: "),
    };
    writeln!(
        out,
        "{frame},{before},{},{}",
        csv_field(&skipped.name),
        csv_field(&format!("{flag}{}", skipped.reason))
    )
}

/// The JSONL side record of skipped input (with its newline), appended to `out`; nothing for
/// a frame analysed and flagged damaged.
pub(super) fn skipped_record(skipped: &Skipped, out: &mut Vec<u8>) {
    let (frame, before_frame) = match skipped.at {
        SkipAt::Frame(i) => (Some(i), None),
        SkipAt::Before(i) => (None, Some(i)),
        // Its rows carry the flag (the `damaged` column).
        SkipAt::Damaged(_) => return,
    };
    let record = SkippedRecord {
        skipped: SkippedFields {
            frame,
            before_frame,
            file: &skipped.name,
            reason: &skipped.reason,
        },
    };
    // Writing into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, &record);
    out.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ccl::stats::Moments;

    fn sample() -> Vec<ComponentStats> {
        let mut a = Moments::EMPTY;
        a.add_run(0, 1, 4);
        a.add_run(1, 2, 3);
        let mut b = Moments::EMPTY;
        b.add_pixel(7, 9);
        vec![a.to_stats(1), b.to_stats(2)]
    }

    fn csv(frames: &[(u64, &str, Vec<ComponentStats>)]) -> String {
        let mut e = Exporter::new(Vec::new(), Format::Csv).unwrap();
        for (f, name, s) in frames {
            e.write_frame(*f, name, s).unwrap();
        }
        String::from_utf8(e.finish().unwrap()).unwrap()
    }

    #[test]
    fn csv_has_the_opencv_columns_first() {
        let text = csv(&[(0, "a.png", sample())]);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("frame,label,left,top,width,height,area,centroid_x,centroid_y")
        );
        // Pixels (1,0) (2,0) (3,0) (2,1): centroid (2, 0.25).
        assert_eq!(
            lines[1],
            "0,1,1,0,3,2,4,2,0.25,8,1,a.png,0,,,,,,,,,,,,,,,,false"
        );
        assert_eq!(
            lines[2],
            "0,2,7,9,1,1,1,7,9,7,9,a.png,0,,,,,,,,,,,,,,,,false"
        );
        assert_eq!(lines.len(), 3);
    }

    #[test]
    fn csv_header_only_without_components_and_quotes_odd_names() {
        assert_eq!(csv(&[(0, "x.png", vec![])]), format!("{CSV_HEADER}\n"));
        let text = csv(&[(3, "a,\"b\".png", sample()[..1].to_vec())]);
        assert!(
            text.lines()
                .nth(1)
                .unwrap()
                .ends_with(",\"a,\"\"b\"\".png\",0,,,,,,,,,,,,,,,,false"),
            "{text}"
        );
    }

    #[test]
    fn floats_round_trip_exactly() {
        let mut m = Moments::EMPTY;
        for (y, x0, x1) in [(0, 0, 3), (1, 5, 6), (2, 1, 2)] {
            m.add_run(y, x0, x1);
        }
        let s = m.to_stats(1); // centroid_x = 8/5... and centroid_y = 3/5 (not exact in binary)
        let text = csv(&[(0, "f", vec![s])]);
        let row: Vec<&str> = text.lines().nth(1).unwrap().split(',').collect();
        assert_eq!(
            row[7].parse::<f64>().unwrap().to_bits(),
            s.centroid_x.to_bits()
        );
        assert_eq!(
            row[8].parse::<f64>().unwrap().to_bits(),
            s.centroid_y.to_bits()
        );

        let mut e = Exporter::new(Vec::new(), Format::Jsonl).unwrap();
        e.write_frame(0, "f", &[s]).unwrap();
        let text = String::from_utf8(e.finish().unwrap()).unwrap();
        let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(
            v["centroid_x"].as_f64().unwrap().to_bits(),
            s.centroid_x.to_bits()
        );
        assert_eq!(
            v["centroid_y"].as_f64().unwrap().to_bits(),
            s.centroid_y.to_bits()
        );
    }

    #[test]
    fn jsonl_one_object_per_component_with_the_csv_fields() {
        let mut e = Exporter::new(Vec::new(), Format::Jsonl).unwrap();
        e.write_frame(0, "a.png", &sample()).unwrap();
        e.write_frame_at(1, 0.5, "b.png", &sample()[1..]).unwrap();
        assert_eq!(e.rows(), 3);
        let text = String::from_utf8(e.finish().unwrap()).unwrap();
        let rows: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(rows.len(), 3);
        let keys: Vec<&str> = rows[0]
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        let columns: Vec<&str> = CSV_HEADER.split(',').collect();
        let mut sorted_keys = keys.clone();
        let mut sorted_columns = columns.clone();
        sorted_keys.sort();
        sorted_columns.sort();
        assert_eq!(sorted_keys, sorted_columns);
        assert_eq!(rows[2]["frame"], 1);
        assert_eq!(rows[2]["file"], "b.png");
        assert_eq!(rows[2]["time_s"], 0.5);
        assert_eq!(rows[0]["area"], 4);
    }

    /// The shape and world columns come last, filled where computed; a world position at
    /// infinity (NaN) is an empty field / null; a slice of the wrong length is an error.
    #[test]
    fn shape_and_world_columns_follow_the_subpixel_ones() {
        let shapes: Vec<ShapeDescriptors> = sample()
            .iter()
            .map(|s| crate::ccl::descriptors::ShapeSums::default().descriptors(s))
            .collect();
        let world = [[1.5, -2.0], [f64::NAN, 3.0]];
        let ids = [1, 2];
        let extras = RowExtras {
            track_ids: &ids,
            shapes: &shapes,
            world: &world,
            ..RowExtras::default()
        };
        let mut e = Exporter::new(Vec::new(), Format::Csv).unwrap();
        e.write_frame_with(0, 0.0, "", &sample(), &extras).unwrap();
        let bad = RowExtras {
            world: &world[..1],
            ..extras
        };
        let err = e.write_frame_with(0, 0.0, "", &sample(), &bad).unwrap_err();
        assert!(
            err.to_string()
                .contains("1 world positions for 2 components"),
            "{err}"
        );
        let text = String::from_utf8(e.finish().unwrap()).unwrap();
        let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split(',').collect()).collect();
        let header = &rows[0];
        assert_eq!(header.len(), 29);
        let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
        assert_eq!(col("mu20"), 16);
        assert_eq!(rows[1][col("x_world")], "1.5");
        assert_eq!(rows[1][col("y_world")], "-2");
        assert_eq!(rows[2][col("x_world")], "");
        assert_eq!(
            rows[1][col("circularity")].parse::<f64>().unwrap(),
            shapes[0].circularity
        );
        let mut e = Exporter::new(Vec::new(), Format::Jsonl).unwrap();
        e.write_frame_with(0, 0.0, "", &sample(), &extras).unwrap();
        let text = String::from_utf8(e.finish().unwrap()).unwrap();
        let v: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(v[0]["x_world"], 1.5);
        assert!(v[1]["x_world"].is_null());
        assert_eq!(v[1]["mu20"].as_f64().unwrap(), shapes[1].mu20);
    }

    /// `damaged` is the last column, `false` unless the frame was flagged; JSONL rows say it
    /// too, and a flagged frame gets no side record (its rows carry the flag).
    #[test]
    fn damaged_frames_are_flagged_in_the_last_column() {
        let ids = [1, 2];
        let flagged = RowExtras {
            track_ids: &ids,
            damaged: true,
            ..RowExtras::default()
        };
        let clean = RowExtras {
            damaged: false,
            ..flagged
        };
        let flag = Skipped {
            at: SkipAt::Damaged(3),
            name: String::new(),
            reason: "predicted from damage".into(),
        };
        for format in [Format::Csv, Format::Jsonl] {
            let mut e = Exporter::new(Vec::new(), format).unwrap();
            e.write_frame_with(2, 0.0, "", &sample(), &clean).unwrap();
            e.write_skipped(&flag).unwrap();
            e.write_frame_with(3, 0.1, "", &sample(), &flagged).unwrap();
            let text = String::from_utf8(e.finish().unwrap()).unwrap();
            let flags: Vec<String> = match format {
                Format::Csv => {
                    assert!(CSV_HEADER.ends_with(",y_world,damaged"));
                    text.lines()
                        .skip(1)
                        .map(|l| l.rsplit(',').next().unwrap().to_string())
                        .collect()
                }
                Format::Jsonl => text
                    .lines()
                    .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
                    .map(|v| v["damaged"].to_string())
                    .collect(),
                Format::Parquet | Format::Arrow => unreachable!("text formats only"),
            };
            assert_eq!(flags, ["false", "false", "true", "true"], "{format:?}");
        }
        let mut csv = Vec::new();
        write_skipped_csv_row(&mut csv, &flag).unwrap();
        assert_eq!(
            String::from_utf8(csv).unwrap(),
            "3,,,\"analysed, flagged damaged: predicted from damage\"\n"
        );
    }

    #[test]
    fn format_from_extension() {
        assert_eq!(Format::from_path(Path::new("out.CSV")), Some(Format::Csv));
        assert_eq!(
            Format::from_path(Path::new("a/b.jsonl")),
            Some(Format::Jsonl)
        );
        assert_eq!(Format::from_path(Path::new("b.txt")), None);
        assert_eq!(Format::from_path(Path::new("-")), None);
    }

    #[test]
    fn tracked_rows_carry_the_track_id_and_the_subpixel_centroid() {
        let sub = [
            SubpixelCentroid::from_sums(1, 4, 9, 1),
            SubpixelCentroid::from_sums(2, 8, 56, 72),
        ];
        let mut e = Exporter::new(Vec::new(), Format::Csv).unwrap();
        e.write_tracked_frame_at(4, 0.25, "", &sample(), &[17, 3], &[])
            .unwrap();
        e.write_tracked_frame_at(5, 0.5, "", &sample(), &[17, 3], &sub)
            .unwrap();
        assert!(e
            .write_tracked_frame_at(5, 0.0, "", &sample(), &[1], &[])
            .is_err());
        assert!(e
            .write_tracked_frame_at(5, 0.0, "", &sample(), &[1, 2], &sub[..1])
            .is_err());
        let text = String::from_utf8(e.finish().unwrap()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        // No shape or world columns; not damaged.
        let none = ",,,,,,,,,,,,,false";
        assert_eq!(
            lines[1],
            "4,1,1,0,3,2,4,2,0.25,8,1,,0.25,17,,".to_string() + none
        );
        assert_eq!(
            lines[2],
            "4,2,7,9,1,1,1,7,9,7,9,,0.25,3,,".to_string() + none
        );
        assert_eq!(
            lines[3],
            "5,1,1,0,3,2,4,2,0.25,8,1,,0.5,17,2.25,0.25".to_string() + none
        );
        assert_eq!(
            lines[4],
            "5,2,7,9,1,1,1,7,9,7,9,,0.5,3,7,9".to_string() + none
        );
        assert_eq!(lines.len(), 5);

        let mut e = Exporter::new(Vec::new(), Format::Jsonl).unwrap();
        e.write_tracked_frame_at(0, 0.0, "", &sample(), &[5, 6], &sub)
            .unwrap();
        e.write_frame(1, "", &sample()[..1]).unwrap();
        let text = String::from_utf8(e.finish().unwrap()).unwrap();
        let rows: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(rows[1]["track"], 6);
        assert_eq!(rows[0]["subpixel_x"], 2.25);
        assert_eq!(rows[1]["subpixel_y"], 9.0);
        assert!(rows[2]["track"].is_null());
        assert!(rows[2]["subpixel_x"].is_null());
    }

    #[test]
    fn skipped_input_is_a_jsonl_side_record_and_a_csv_row_of_its_own() {
        let frame = Skipped {
            at: SkipAt::Frame(12),
            name: "b.jpg".into(),
            reason: "damaged, \"cut\"".into(),
        };
        let data = Skipped {
            at: SkipAt::Before(40),
            name: String::new(),
            reason: "undecodable data".into(),
        };
        let mut e = Exporter::new(Vec::new(), Format::Jsonl).unwrap();
        e.write_skipped(&frame).unwrap();
        e.write_skipped(&data).unwrap();
        let text = String::from_utf8(e.finish().unwrap()).unwrap();
        let rows: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(
            rows[0],
            serde_json::json!({"skipped": {"frame": 12, "file": "b.jpg", "reason": "damaged, \"cut\""}})
        );
        assert_eq!(
            rows[1],
            serde_json::json!({"skipped": {"before_frame": 40, "file": "", "reason": "undecodable data"}})
        );
        let mut e = Exporter::new(Vec::new(), Format::Csv).unwrap();
        e.write_skipped(&frame).unwrap();
        assert_eq!(
            String::from_utf8(e.finish().unwrap()).unwrap(),
            format!("{CSV_HEADER}\n"),
            "the component CSV stays pure"
        );
        let mut csv = Vec::new();
        write_skipped_csv_row(&mut csv, &frame).unwrap();
        write_skipped_csv_row(&mut csv, &data).unwrap();
        assert_eq!(
            String::from_utf8(csv).unwrap(),
            "12,,b.jpg,\"damaged, \"\"cut\"\"\"\n,40,,undecodable data\n"
        );
    }

    #[test]
    fn track_summaries_csv() {
        let t = TrackSummary {
            id: 2,
            first_frame: 10,
            last_frame: 19,
            length: 9,
            mean_area: 50.5,
            path_length: 12.25,
            last_x: 3.5,
            last_y: 4.0,
        };
        let text = String::from_utf8(write_track_summaries(Vec::new(), &[t]).unwrap()).unwrap();
        assert_eq!(
            text,
            format!("{TRACKS_CSV_HEADER}\n2,10,19,9,50.5,12.25,3.5,4\n")
        );
    }
}

/// The new row text against the formatting it replaced (`{}` and serde_json, kept here as the
/// reference), over random rows: odd floats, names that need quoting or escaping, extras
/// present or not.
#[cfg(test)]
mod byte_identity {
    use super::*;
    use proptest::prelude::*;

    /// The rows as `Exporter` wrote them before: `write!` with `{}`, serde_json's records.
    fn reference(format: Format, rows: &FrameRows<'_>) -> Vec<u8> {
        let mut out = Vec::new();
        let text = |v: Option<String>| v.unwrap_or_default();
        let extras = &rows.extras;
        for (i, s) in rows.stats.iter().enumerate() {
            let track = extras.track_ids.get(i).copied();
            let (sub, shape, world) = (
                extras.subpixel.get(i),
                extras.shapes.get(i),
                extras.world.get(i),
            );
            let shape_values = shape.map(|d| {
                [
                    d.mu20,
                    d.mu02,
                    d.mu11,
                    d.orientation_deg,
                    d.major_axis,
                    d.minor_axis,
                    d.eccentricity,
                    d.inertia_ratio,
                    d.perimeter,
                    d.circularity,
                ]
            });
            let world_field = |k: usize| world.map(|w| w[k]).filter(|v| v.is_finite());
            match format {
                Format::Csv => {
                    write!(
                        out,
                        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                        rows.frame,
                        s.label,
                        s.left,
                        s.top,
                        s.width,
                        s.height,
                        s.area,
                        s.centroid_x,
                        s.centroid_y,
                        s.sum_x,
                        s.sum_y,
                        csv_field(rows.file),
                        rows.time_s,
                        text(track.map(|t| t.to_string())),
                        text(sub.map(|c| c.x.to_string())),
                        text(sub.map(|c| c.y.to_string())),
                    )
                    .unwrap();
                    for k in 0..10 {
                        let v = shape_values.map(|v| v[k].to_string());
                        write!(out, ",{}", text(v)).unwrap();
                    }
                    for k in 0..2 {
                        write!(out, ",{}", text(world_field(k).map(|v| v.to_string()))).unwrap();
                    }
                    writeln!(out, ",{}", extras.damaged).unwrap();
                }
                Format::Jsonl => {
                    let mut record = Record::new(
                        rows.frame,
                        rows.time_s,
                        rows.file,
                        s,
                        track,
                        sub,
                        shape,
                        world,
                    );
                    record.damaged = extras.damaged;
                    serde_json::to_writer(&mut out, &record).unwrap();
                    out.push(b'\n');
                }
                Format::Parquet | Format::Arrow => unreachable!("text formats only"),
            }
        }
        out
    }

    fn odd_f64() -> impl Strategy<Value = f64> {
        prop_oneof![
            any::<u64>().prop_map(f64::from_bits),
            any::<i32>().prop_map(|i| f64::from(i) / 8.0),
            Just(-0.0),
            Just(f64::NAN),
            Just(f64::INFINITY),
            (0u64..1 << 52).prop_map(f64::from_bits),
        ]
    }

    fn stats() -> impl Strategy<Value = ComponentStats> {
        (any::<[u32; 5]>(), any::<[u64; 3]>(), odd_f64(), odd_f64()).prop_map(|(u, w, cx, cy)| {
            ComponentStats {
                label: u[0],
                left: u[1],
                top: u[2],
                width: u[3],
                height: u[4],
                area: w[0],
                sum_x: w[1],
                sum_y: w[2],
                centroid_x: cx,
                centroid_y: cy,
            }
        })
    }

    fn shape() -> impl Strategy<Value = ShapeDescriptors> {
        prop::collection::vec(odd_f64(), 10).prop_map(|v| ShapeDescriptors {
            label: 1,
            mu20: v[0],
            mu02: v[1],
            mu11: v[2],
            orientation_deg: v[3],
            major_axis: v[4],
            minor_axis: v[5],
            eccentricity: v[6],
            inertia_ratio: v[7],
            perimeter: v[8],
            circularity: v[9],
        })
    }

    /// A frame of random rows, with each extra present or not.
    #[allow(clippy::type_complexity)]
    fn random_frame() -> impl Strategy<
        Value = (
            u64,
            f64,
            String,
            Vec<ComponentStats>,
            [bool; 4],
            Vec<(u64, f64, f64, ShapeDescriptors, [f64; 2])>,
        ),
    > {
        (1usize..6).prop_flat_map(|n| {
            (
                any::<u64>(),
                odd_f64(),
                "[a-z,\"\\n\\\\é\\u{1}]{0,6}",
                prop::collection::vec(stats(), n),
                any::<[bool; 4]>(),
                prop::collection::vec(
                    (
                        any::<u64>(),
                        odd_f64(),
                        odd_f64(),
                        shape(),
                        [odd_f64(), odd_f64()],
                    ),
                    n,
                ),
            )
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        #[test]
        fn csv_and_jsonl_rows_are_byte_identical_to_the_former_text(
            (frame, time_s, file, stats, present, extra) in random_frame()
        ) {
            let ids: Vec<u64> = extra.iter().map(|e| e.0).collect();
            let sub: Vec<SubpixelCentroid> = extra
                .iter()
                .map(|e| SubpixelCentroid { x: e.1, y: e.2, ..SubpixelCentroid::from_sums(1, 1, 0, 0) })
                .collect();
            let shapes: Vec<ShapeDescriptors> = extra.iter().map(|e| e.3).collect();
            let world: Vec<[f64; 2]> = extra.iter().map(|e| e.4).collect();
            let pick = |on: bool, n: usize| if on { n } else { 0 };
            let rows = FrameRows {
                frame,
                time_s,
                file: &file,
                stats: &stats,
                extras: RowExtras {
                    track_ids: &ids[..pick(present[0], ids.len())],
                    subpixel: &sub[..pick(present[1], sub.len())],
                    shapes: &shapes[..pick(present[2], shapes.len())],
                    world: &world[..pick(present[3], world.len())],
                    // Either flag, from a random number.
                    damaged: frame % 2 == 1,
                    source: None,
                    merged: &[],
                },
            };
            for format in [Format::Csv, Format::Jsonl] {
                let mut e = Exporter::new(Vec::new(), format).unwrap();
                e.write_rows(&rows).unwrap();
                let mut text = e.finish().unwrap();
                if format == Format::Csv {
                    text.drain(..CSV_HEADER.len() + 1);
                }
                let expected = reference(format, &rows);
                prop_assert_eq!(
                    String::from_utf8_lossy(&text),
                    String::from_utf8_lossy(&expected)
                );
            }
        }
    }
}
