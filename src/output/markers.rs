//! CSV and JSONL writers for marker tables (`analyze --markers`), one row per marker per
//! frame.
//!
//! Columns: `frame,file,time_s,track,marker_id,dictionary,hamming,centre_x,centre_y,`
//! `corner0_x,corner0_y,corner1_x,corner1_y,corner2_x,corner2_y,corner3_x,corner3_y,angle_deg,`
//! `rvec_x,rvec_y,rvec_z,tvec_x,tvec_y,tvec_z,x_world,y_world,damaged`.
//!
//! `frame`, `file`, `time_s` and `damaged` are as in the component rows
//! (`crate::output::export`).
//! `track` is the marker's identity, one number per (dictionary, ID) kept through occlusion
//! (`crate::fiducial::observation::marker_track`); `marker_id` its ID in `dictionary`
//! (OpenCV's name, or the dictionary file's path); `hamming` the bits corrected when it was
//! read. The corners are in OpenCV's order (clockwise on screen from the marker's top-left
//! corner) and convention (pixel centres at whole coordinates), `centre_x/centre_y` their mean;
//! `angle_deg` the direction of the top edge (corner 0 to corner 1), degrees clockwise on
//! screen from the image's x axis. The pose and world columns are always there, so that a
//! reader finds every column at the same place: `rvec`/`tvec` (`cv2.solvePnP` with
//! `SOLVEPNP_IPPE_SQUARE`, in the unit of the marker length) are empty / null without a marker
//! length and a calibration, `x_world/y_world` (the centre in world coordinates) without a
//! world mapping. Floats use Rust's shortest round-trip formatting (corners and angle as the
//! detector's 32-bit values).
//!
//! Rows of several sources (`analyze A B … --markers`) add the source columns after `damaged`
//! (`Column::SOURCES`, as the component rows have them), and when every source maps into one
//! world, the merged view's (`Column::WORLD_MERGE`): a marker is one object in every source
//! (its `world_track` is its `track`) at the weighted mean of the sources' world positions of
//! its centre. A run of one source writes neither.
//!
//! Skipped input gets JSONL's side record as the component rows do; the CSV stays pure.

use super::columns::Column;
use super::export::{skipped_record, Encoding, Format};
use super::row_text::{csv_field, MergedObservation, SourceColumns, TextFormat};
use crate::fiducial::MarkerObservation;
use crate::source::Skipped;
use serde::Serialize;
use std::io::{self, Write};

/// The CSV header line (without the newline).
pub const MARKER_CSV_HEADER: &str = "frame,file,time_s,track,marker_id,dictionary,hamming,\
centre_x,centre_y,corner0_x,corner0_y,corner1_x,corner1_y,corner2_x,corner2_y,corner3_x,\
corner3_y,angle_deg,rvec_x,rvec_y,rvec_z,tvec_x,tvec_y,tvec_z,x_world,y_world,damaged";

/// One JSONL record; field names and order match the CSV columns.
#[derive(Serialize)]
struct MarkerRecord<'a> {
    frame: u64,
    file: &'a str,
    time_s: f64,
    track: u64,
    marker_id: u32,
    dictionary: &'a str,
    hamming: u32,
    centre_x: f64,
    centre_y: f64,
    corner0_x: f32,
    corner0_y: f32,
    corner1_x: f32,
    corner1_y: f32,
    corner2_x: f32,
    corner2_y: f32,
    corner3_x: f32,
    corner3_y: f32,
    angle_deg: f32,
    rvec_x: Option<f64>,
    rvec_y: Option<f64>,
    rvec_z: Option<f64>,
    tvec_x: Option<f64>,
    tvec_y: Option<f64>,
    tvec_z: Option<f64>,
    x_world: Option<f64>,
    y_world: Option<f64>,
    damaged: bool,
    #[serde(flatten)]
    source: Option<SourceFields<'a>>,
    #[serde(flatten)]
    merged: Option<MergedFields>,
}

/// The source columns of a row (`Column::SOURCES`).
#[derive(Serialize)]
struct SourceFields<'a> {
    source: Option<u64>,
    source_name: Option<&'a str>,
    time_source: Option<&'a str>,
    frame_set: Option<u64>,
    skew_ms: Option<f64>,
}

impl<'a> SourceFields<'a> {
    fn of(source: Option<SourceColumns<'a>>) -> Self {
        SourceFields {
            source: source.map(|s| s.index),
            source_name: source.map(|s| s.name),
            time_source: source.map(|s| s.time_source),
            frame_set: source.map(|s| s.frame_set),
            skew_ms: source.map(|s| s.skew_ms),
        }
    }
}

/// The merged world view's columns of a row (`Column::WORLD_MERGE`).
#[derive(Serialize)]
struct MergedFields {
    world_track: Option<u64>,
    merged_x_world: Option<f64>,
    merged_y_world: Option<f64>,
}

impl MergedFields {
    fn of(merged: Option<&MergedObservation>) -> Self {
        let world = |k: usize| merged.map(|m| m.world[k]).filter(|v| v.is_finite());
        MergedFields {
            world_track: merged.map(|m| m.track).filter(|&t| t > 0),
            merged_x_world: world(0),
            merged_y_world: world(1),
        }
    }
}

/// Which columns the rows have beyond a single source's: the source columns, and the merged
/// world view's (which come only with the source columns).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MarkerColumns {
    pub sources: bool,
    pub world_merge: bool,
}

impl MarkerColumns {
    /// The CSV header line (without the newline).
    pub fn header(self) -> String {
        let mut header = MARKER_CSV_HEADER.to_string();
        let sources = Column::SOURCES.iter().filter(|_| self.sources);
        let merged = Column::WORLD_MERGE.iter().filter(|_| self.world_merge);
        for column in sources.chain(merged) {
            header.push(',');
            header.push_str(column.name());
        }
        header
    }
}

/// The marker rows of one frame: the frame's number, time and file, whether it was decoded
/// from damaged data, its markers, and with several sources its source and each marker's
/// place in the merged world view (in the markers' order; none: empty columns).
pub struct MarkerFrame<'a> {
    pub index: u64,
    pub time_s: f64,
    pub file: &'a str,
    pub damaged: bool,
    pub markers: &'a [MarkerObservation],
    pub source: Option<SourceColumns<'a>>,
    pub merged: &'a [MergedObservation],
}

impl<'a> MarkerRecord<'a> {
    fn new(
        frame: u64,
        time_s: f64,
        file: &'a str,
        damaged: bool,
        o: &'a MarkerObservation,
    ) -> Self {
        let m = &o.marker;
        let c = &m.corners;
        let centre = m.centre();
        let pose = |k: usize| {
            o.pose
                .map(|p| if k < 3 { p.rvec[k] } else { p.tvec[k - 3] })
        };
        // NaN (a point on the plane's horizon) is an empty field / null.
        let world = |k: usize| o.world.map(|w| w[k]).filter(|v| v.is_finite());
        MarkerRecord {
            frame,
            file,
            time_s,
            track: o.track,
            marker_id: m.id,
            dictionary: &o.dictionary,
            hamming: m.hamming,
            centre_x: centre[0],
            centre_y: centre[1],
            corner0_x: c[0],
            corner0_y: c[1],
            corner1_x: c[2],
            corner1_y: c[3],
            corner2_x: c[4],
            corner2_y: c[5],
            corner3_x: c[6],
            corner3_y: c[7],
            angle_deg: m.angle_deg,
            rvec_x: pose(0),
            rvec_y: pose(1),
            rvec_z: pose(2),
            tvec_x: pose(3),
            tvec_y: pose(4),
            tvec_z: pose(5),
            x_world: world(0),
            y_world: world(1),
            damaged,
            source: None,
            merged: None,
        }
    }

    fn write_csv<W: Write>(&self, out: &mut W) -> io::Result<()> {
        let text = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
        write!(
            out,
            "{},{},{},{},{},{},{},{},{}",
            self.frame,
            csv_field(self.file),
            self.time_s,
            self.track,
            self.marker_id,
            csv_field(self.dictionary),
            self.hamming,
            self.centre_x,
            self.centre_y
        )?;
        for v in [
            self.corner0_x,
            self.corner0_y,
            self.corner1_x,
            self.corner1_y,
            self.corner2_x,
            self.corner2_y,
            self.corner3_x,
            self.corner3_y,
            self.angle_deg,
        ] {
            write!(out, ",{v}")?;
        }
        for v in [
            self.rvec_x,
            self.rvec_y,
            self.rvec_z,
            self.tvec_x,
            self.tvec_y,
            self.tvec_z,
            self.x_world,
            self.y_world,
        ] {
            write!(out, ",{}", text(v))?;
        }
        write!(out, ",{}", self.damaged)?;
        if let Some(s) = &self.source {
            let name = s.source_name.map(csv_field);
            let time_source = s.time_source.map(csv_field);
            write!(
                out,
                ",{},{},{},{},{}",
                s.source.map_or(String::new(), |v| v.to_string()),
                name.as_deref().unwrap_or(""),
                time_source.as_deref().unwrap_or(""),
                s.frame_set.map_or(String::new(), |v| v.to_string()),
                text(s.skew_ms)
            )?;
        }
        if let Some(m) = &self.merged {
            write!(
                out,
                ",{},{},{}",
                m.world_track.map_or(String::new(), |v| v.to_string()),
                text(m.merged_x_world),
                text(m.merged_y_world)
            )?;
        }
        writeln!(out)
    }
}

/// Streams marker rows to `W` in one format. The CSV header is written on creation, so a run
/// without markers still yields a valid (header-only) file.
pub struct MarkerExporter<W: Write> {
    out: W,
    format: TextFormat,
    columns: MarkerColumns,
    rows: u64,
}

impl<W: Write> MarkerExporter<W> {
    /// The rows of one source. Marker rows are text: a columnar `format` is refused.
    pub fn new(out: W, format: Format) -> io::Result<Self> {
        Self::with_columns(out, format, MarkerColumns::default())
    }

    /// Rows with `columns` beyond a single source's.
    pub fn with_columns(mut out: W, format: Format, columns: MarkerColumns) -> io::Result<Self> {
        let Encoding::Text(format) = format.encoding() else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "marker rows are written as CSV or JSONL",
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
        })
    }

    /// Writes every marker of one frame shown at `time_s` seconds; `damaged`: the frame was
    /// decoded from damaged data.
    pub fn write_frame(
        &mut self,
        frame: u64,
        time_s: f64,
        file: &str,
        damaged: bool,
        markers: &[MarkerObservation],
    ) -> io::Result<()> {
        self.write_rows(&MarkerFrame {
            index: frame,
            time_s,
            file,
            damaged,
            markers,
            source: None,
            merged: &[],
        })
    }

    /// Writes every marker of `frame`, with the columns the exporter was made with.
    pub fn write_rows(&mut self, frame: &MarkerFrame<'_>) -> io::Result<()> {
        for (i, o) in frame.markers.iter().enumerate() {
            let mut record =
                MarkerRecord::new(frame.index, frame.time_s, frame.file, frame.damaged, o);
            if self.columns.sources {
                record.source = Some(SourceFields::of(frame.source));
            }
            if self.columns.world_merge {
                record.merged = Some(MergedFields::of(frame.merged.get(i)));
            }
            match self.format {
                TextFormat::Csv => record.write_csv(&mut self.out)?,
                TextFormat::Jsonl => {
                    serde_json::to_writer(&mut self.out, &record)?;
                    self.out.write_all(b"\n")?;
                }
            }
            self.rows += 1;
        }
        Ok(())
    }

    /// Records skipped input as the component rows do (`Exporter::write_skipped`): a JSONL
    /// side record, nothing in a CSV.
    pub fn write_skipped(&mut self, skipped: &Skipped) -> io::Result<()> {
        if self.format == TextFormat::Jsonl {
            let mut record = Vec::new();
            skipped_record(skipped, &mut record);
            self.out.write_all(&record)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fiducial::{marker_track, Marker, Pose};
    use std::sync::Arc;

    fn observation(pose: bool, world: bool) -> MarkerObservation {
        MarkerObservation {
            marker: Marker {
                id: 7,
                dictionary: 0,
                hamming: 1,
                corners: [10.0, 20.0, 30.5, 20.0, 30.5, 40.25, 10.0, 40.25],
                angle_deg: 0.0,
            },
            dictionary: Arc::from("DICT_4X4_50"),
            track: marker_track(0, 7),
            pose: pose.then_some(Pose {
                rvec: [0.1, -0.2, 3.0],
                tvec: [0.01, 0.02, 0.5],
                reprojection_error: 0.0,
            }),
            world: world.then_some([1.5, f64::NAN]),
        }
    }

    #[test]
    fn csv_rows_have_every_column_and_empty_pose_and_world_when_off() {
        let mut w = MarkerExporter::new(Vec::new(), Format::Csv).unwrap();
        w.write_frame(3, 0.05, "a,b.png", false, &[observation(false, false)])
            .unwrap();
        w.write_frame(4, 0.1, "", true, &[observation(true, true)])
            .unwrap();
        assert_eq!(w.rows(), 2);
        let text = String::from_utf8(w.finish().unwrap()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], MARKER_CSV_HEADER);
        let columns = MARKER_CSV_HEADER.split(',').count();
        assert_eq!(columns, 27);
        assert_eq!(
            lines[1],
            "3,\"a,b.png\",0.05,1000000000000007,7,DICT_4X4_50,1,20.25,30.125,10,20,30.5,20,30.5,\
             40.25,10,40.25,0,,,,,,,,,false"
        );
        let posed: Vec<&str> = lines[2].split(',').collect();
        assert_eq!(posed.len(), columns);
        assert_eq!(
            &posed[18..],
            ["0.1", "-0.2", "3", "0.01", "0.02", "0.5", "1.5", "", "true"]
        );
    }

    #[test]
    fn jsonl_fields_match_the_csv_columns() {
        let mut w = MarkerExporter::new(Vec::new(), Format::Jsonl).unwrap();
        w.write_frame(4, 0.1, "", false, &[observation(true, false)])
            .unwrap();
        let text = String::from_utf8(w.finish().unwrap()).unwrap();
        let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(v.as_object().unwrap().len(), 27);
        // Every column, in the CSV's order.
        let mut at = 0;
        for key in MARKER_CSV_HEADER.split(',') {
            let found = text[at..].find(&format!("\"{key}\":"));
            at += found.unwrap_or_else(|| panic!("{key} missing or out of order in {text}"));
        }
        assert_eq!(v["marker_id"], 7);
        assert_eq!(v["dictionary"], "DICT_4X4_50");
        assert_eq!(v["rvec_z"], 3.0);
        assert!(v["x_world"].is_null());
        assert_eq!(v["damaged"], false);
    }

    #[test]
    fn skipped_input_is_a_jsonl_side_record_only() {
        let skip = Skipped {
            at: crate::source::SkipAt::Frame(2),
            name: String::new(),
            reason: "damaged".into(),
        };
        let mut csv = MarkerExporter::new(Vec::new(), Format::Csv).unwrap();
        csv.write_skipped(&skip).unwrap();
        let text = String::from_utf8(csv.finish().unwrap()).unwrap();
        assert_eq!(text.trim(), MARKER_CSV_HEADER);
        let mut jsonl = MarkerExporter::new(Vec::new(), Format::Jsonl).unwrap();
        jsonl.write_skipped(&skip).unwrap();
        let text = String::from_utf8(jsonl.finish().unwrap()).unwrap();
        assert!(text.starts_with("{\"skipped\":{\"frame\":2"), "{text}");
    }

    #[test]
    fn rows_of_several_sources_add_the_source_and_merged_columns() {
        let columns = MarkerColumns {
            sources: true,
            world_merge: true,
        };
        let source = SourceColumns {
            index: 1,
            name: "b,c.mp4",
            time_source: "file",
            frame_set: 4,
            skew_ms: -1.5,
        };
        let merged = [MergedObservation {
            track: marker_track(0, 7),
            world: [2.5, f64::NAN],
        }];
        let markers = [observation(false, true), observation(false, false)];
        let frame = MarkerFrame {
            index: 3,
            time_s: 0.05,
            file: "",
            damaged: false,
            markers: &markers,
            source: Some(source),
            merged: &merged,
        };
        let mut csv = MarkerExporter::with_columns(Vec::new(), Format::Csv, columns).unwrap();
        csv.write_rows(&frame).unwrap();
        let text = String::from_utf8(csv.finish().unwrap()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            format!(
                "{MARKER_CSV_HEADER},source,source_name,time_source,frame_set,skew_ms,\
                 world_track,merged_x_world,merged_y_world"
            )
        );
        assert!(
            lines[1].ends_with(",false,1,\"b,c.mp4\",file,4,-1.5,1000000000000007,2.5,"),
            "{}",
            lines[1]
        );
        // A marker with no merged view: empty merged columns.
        assert!(
            lines[2].ends_with(",false,1,\"b,c.mp4\",file,4,-1.5,,,"),
            "{}",
            lines[2]
        );

        let mut jsonl = MarkerExporter::with_columns(Vec::new(), Format::Jsonl, columns).unwrap();
        jsonl.write_rows(&frame).unwrap();
        let text = String::from_utf8(jsonl.finish().unwrap()).unwrap();
        let mut at = 0;
        for key in lines[0].split(',') {
            let found = text[at..].find(&format!("\"{key}\":"));
            at += found.unwrap_or_else(|| panic!("{key} missing or out of order in {text}"));
        }
        let v: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(v.as_object().unwrap().len(), 35);
        assert_eq!(v["source_name"], "b,c.mp4");
        assert_eq!(v["skew_ms"], -1.5);
        assert_eq!(v["world_track"], 1000000000000007u64);
        assert!(v["merged_y_world"].is_null());
    }
}
