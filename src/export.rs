//! CSV and JSONL writers for component tables, one row per component.
//!
//! Columns: `frame,label,left,top,width,height,area,centroid_x,centroid_y,sum_x,sum_y,file,time_s`.
//! The first nine are OpenCV's `connectedComponentsWithStats` (without the background row);
//! `frame` is the index of the image or video frame (0 for a single image), `file` the image's
//! file name (empty for video, camera and synthetic frames), `time_s` the frame's presentation
//! time in seconds (video: from the start of the stream; camera: since it was opened;
//! synthetic: frame / 60; images: 0). `time_s` is last so that readers of the older columns
//! by position keep working.
//! Floats use Rust's shortest round-trip formatting, so parsing them gives back the same f64.

use crate::stats::ComponentStats;
use serde::Serialize;
use std::io::{self, Write};
use std::path::Path;

/// The CSV header line (without the newline).
pub const CSV_HEADER: &str =
    "frame,label,left,top,width,height,area,centroid_x,centroid_y,sum_x,sum_y,file,time_s";

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Csv,
    Jsonl,
}

impl Format {
    /// The format a file name asks for by its extension (`.csv`, `.jsonl`/`.ndjson`), if any.
    pub fn from_path(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "csv" => Some(Format::Csv),
            "jsonl" | "ndjson" => Some(Format::Jsonl),
            _ => None,
        }
    }
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
}

/// Streams component rows to `W` in one format. The CSV header is written on creation, so an
/// image without components still yields a valid (header-only) file.
pub struct Exporter<W: Write> {
    out: W,
    format: Format,
    rows: u64,
}

impl<W: Write> Exporter<W> {
    pub fn new(mut out: W, format: Format) -> io::Result<Self> {
        if format == Format::Csv {
            writeln!(out, "{CSV_HEADER}")?;
        }
        Ok(Self {
            out,
            format,
            rows: 0,
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

    /// Writes every component of one frame shown at `time_s` seconds.
    pub fn write_frame_at(
        &mut self,
        frame: u64,
        time_s: f64,
        file: &str,
        stats: &[ComponentStats],
    ) -> io::Result<()> {
        for s in stats {
            match self.format {
                Format::Csv => writeln!(
                    self.out,
                    "{frame},{},{},{},{},{},{},{},{},{},{},{},{time_s}",
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
                    csv_field(file)
                )?,
                Format::Jsonl => {
                    let record = Record {
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
                    };
                    serde_json::to_writer(&mut self.out, &record)?;
                    self.out.write_all(b"\n")?;
                }
            }
            self.rows += 1;
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

/// RFC 4180 quoting: only when the field holds a comma, quote or line break.
fn csv_field(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\"")).into()
    } else {
        s.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Moments;

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
        assert_eq!(lines[1], "0,1,1,0,3,2,4,2,0.25,8,1,a.png,0");
        assert_eq!(lines[2], "0,2,7,9,1,1,1,7,9,7,9,a.png,0");
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
                .ends_with(",\"a,\"\"b\"\".png\",0"),
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
}
