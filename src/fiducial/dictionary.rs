//! Marker dictionaries: OpenCV's predefined ArUco and AprilTag tables (embedded from
//! `assets/dictionaries/`, written from `cv2.aruco` by the script there) and custom dictionaries
//! in OpenCV's dictionary file format (`cv2.aruco.Dictionary.writeDictionary`, YAML or JSON).
//!
//! A marker is an N×N grid of cells inside a black border, 1 = white. Its code holds the cells
//! row by row from the top-left, the first cell in the most significant of the N² bits: OpenCV's
//! rotation-0 bit order. Rotation r is the grid OpenCV stores as its r-th rotation
//! (`Dictionary::bytesList`), so a candidate read in rotation r turns its corners as OpenCV does.

use crate::error::{Error, Result};
use std::path::Path;
use std::sync::Arc;

/// The largest marker side a code holds (N² ≤ 64 bits).
pub const MAX_MARKER_SIZE: u32 = 8;

/// One predefined dictionary: its name, the table it takes its first `count` markers from, and
/// OpenCV's maximum number of correctable bits.
struct Predefined {
    name: &'static str,
    table: &'static str,
    count: usize,
    max_correction_bits: u32,
}

const ARUCO_4X4: &str = include_str!("../../assets/dictionaries/aruco_4x4.txt");
const ARUCO_5X5: &str = include_str!("../../assets/dictionaries/aruco_5x5.txt");
const ARUCO_6X6: &str = include_str!("../../assets/dictionaries/aruco_6x6.txt");
const ARUCO_7X7: &str = include_str!("../../assets/dictionaries/aruco_7x7.txt");
const ARUCO_ORIGINAL: &str = include_str!("../../assets/dictionaries/aruco_original.txt");
const APRILTAG_16H5: &str = include_str!("../../assets/dictionaries/apriltag_16h5.txt");
const APRILTAG_25H9: &str = include_str!("../../assets/dictionaries/apriltag_25h9.txt");
const APRILTAG_36H10: &str = include_str!("../../assets/dictionaries/apriltag_36h10.txt");
const APRILTAG_36H11: &str = include_str!("../../assets/dictionaries/apriltag_36h11.txt");
const ARUCO_MIP_36H12: &str = include_str!("../../assets/dictionaries/aruco_mip_36h12.txt");

/// OpenCV's predefined dictionaries, in the order of its `PredefinedDictionaryType` values.
const PREDEFINED: [Predefined; 22] = [
    pre("DICT_4X4_50", ARUCO_4X4, 50, 1),
    pre("DICT_4X4_100", ARUCO_4X4, 100, 1),
    pre("DICT_4X4_250", ARUCO_4X4, 250, 1),
    pre("DICT_4X4_1000", ARUCO_4X4, 1000, 0),
    pre("DICT_5X5_50", ARUCO_5X5, 50, 3),
    pre("DICT_5X5_100", ARUCO_5X5, 100, 3),
    pre("DICT_5X5_250", ARUCO_5X5, 250, 2),
    pre("DICT_5X5_1000", ARUCO_5X5, 1000, 2),
    pre("DICT_6X6_50", ARUCO_6X6, 50, 6),
    pre("DICT_6X6_100", ARUCO_6X6, 100, 5),
    pre("DICT_6X6_250", ARUCO_6X6, 250, 5),
    pre("DICT_6X6_1000", ARUCO_6X6, 1000, 4),
    pre("DICT_7X7_50", ARUCO_7X7, 50, 9),
    pre("DICT_7X7_100", ARUCO_7X7, 100, 8),
    pre("DICT_7X7_250", ARUCO_7X7, 250, 8),
    pre("DICT_7X7_1000", ARUCO_7X7, 1000, 6),
    pre("DICT_ARUCO_ORIGINAL", ARUCO_ORIGINAL, 1024, 1),
    pre("DICT_APRILTAG_16h5", APRILTAG_16H5, 30, 2),
    pre("DICT_APRILTAG_25h9", APRILTAG_25H9, 35, 4),
    pre("DICT_APRILTAG_36h10", APRILTAG_36H10, 2320, 4),
    pre("DICT_APRILTAG_36h11", APRILTAG_36H11, 587, 5),
    pre("DICT_ARUCO_MIP_36h12", ARUCO_MIP_36H12, 250, 5),
];

const fn pre(
    name: &'static str,
    table: &'static str,
    count: usize,
    max_correction_bits: u32,
) -> Predefined {
    Predefined {
        name,
        table,
        count,
        max_correction_bits,
    }
}

/// The names of the predefined dictionaries, as OpenCV spells them.
pub fn predefined_names() -> impl Iterator<Item = &'static str> {
    PREDEFINED.iter().map(|p| p.name)
}

/// A set of markers of one size, with the number of bit errors a reading may have.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dictionary {
    /// Shared, so that every marker found can carry it without a copy.
    name: Arc<str>,
    marker_size: u32,
    max_correction_bits: u32,
    /// Each marker's code in OpenCV's four rotations.
    rotations: Vec<[u64; 4]>,
}

/// A code read from a candidate that matched a marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identified {
    pub id: u32,
    /// The rotation (0..4) of the marker the reading matched.
    pub rotation: u8,
    /// Bits that differed from the marker.
    pub hamming: u32,
}

impl Dictionary {
    /// A predefined dictionary by name: OpenCV's (`DICT_6X6_250`, `DICT_APRILTAG_36h11`, ...),
    /// in any case, with or without `DICT_`.
    pub fn predefined(name: &str) -> Result<Dictionary> {
        let wanted = name.trim().to_ascii_uppercase();
        let wanted = wanted.strip_prefix("DICT_").unwrap_or(&wanted);
        let found = PREDEFINED
            .iter()
            .find(|p| p.name[5..].eq_ignore_ascii_case(wanted))
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "unknown marker dictionary '{name}'; available: {}",
                    predefined_names().collect::<Vec<_>>().join(", ")
                ))
            })?;
        let (marker_size, codes) = parse_table(found.table)
            .map_err(|why| Error::Invalid(format!("embedded dictionary {}: {why}", found.name)))?;
        if codes.len() < found.count {
            return Err(Error::Invalid(format!(
                "embedded dictionary {}: {} markers, expected {}",
                found.name,
                codes.len(),
                found.count
            )));
        }
        Dictionary::from_codes(
            found.name,
            marker_size,
            found.max_correction_bits,
            &codes[..found.count],
        )
    }

    /// A predefined dictionary by name (`predefined`), or an OpenCV dictionary file (`load`)
    /// when `spec` ends in .yml, .yaml or .json.
    pub fn named_or_file(spec: &str) -> Result<Dictionary> {
        let path = Path::new(spec.trim());
        let is_file = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| ["yml", "yaml", "json"].contains(&e.to_ascii_lowercase().as_str()));
        if is_file {
            Dictionary::load(path)
        } else {
            Dictionary::predefined(spec)
        }
    }

    /// A dictionary of the given codes (rotation 0, bit order as the module says).
    pub fn from_codes(
        name: &str,
        marker_size: u32,
        max_correction_bits: u32,
        codes: &[u64],
    ) -> Result<Dictionary> {
        if !(2..=MAX_MARKER_SIZE).contains(&marker_size) {
            return Err(Error::Invalid(format!(
                "marker dictionary '{name}': marker size {marker_size} is not in 2..={MAX_MARKER_SIZE}"
            )));
        }
        if codes.is_empty() {
            return Err(Error::Invalid(format!(
                "marker dictionary '{name}' has no markers"
            )));
        }
        let bits = marker_size * marker_size;
        let mask = if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        if let Some(i) = codes.iter().position(|c| c & !mask != 0) {
            return Err(Error::Invalid(format!(
                "marker dictionary '{name}': marker {i} has more than {bits} bits"
            )));
        }
        let rotations = codes
            .iter()
            .map(|&c| {
                let r1 = rotate(c, marker_size);
                let r2 = rotate(r1, marker_size);
                [c, r1, r2, rotate(r2, marker_size)]
            })
            .collect();
        Ok(Dictionary {
            name: Arc::from(name),
            marker_size,
            max_correction_bits,
            rotations,
        })
    }

    /// Reads a dictionary file as `cv2.aruco.Dictionary.writeDictionary` writes it (YAML or
    /// JSON: `markersize`, `maxCorrectionBits`, `marker_0` … as strings of 0 and 1).
    pub fn load(path: &Path) -> Result<Dictionary> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        Self::parse_opencv(&path.display().to_string(), &text)
    }

    /// Parses the text of an OpenCV dictionary file; `name` names it in errors and results.
    pub fn parse_opencv(name: &str, text: &str) -> Result<Dictionary> {
        let bad = |why: String| {
            Error::Invalid(format!(
                "marker dictionary file {name}: {why}; expected OpenCV's dictionary format \
                 (markersize, maxCorrectionBits, marker_0, marker_1, ... as cv2.aruco's \
                 writeDictionary writes them)"
            ))
        };
        let mut marker_size = None;
        let mut max_correction_bits = None;
        let mut count = None;
        let mut markers: Vec<(usize, String)> = Vec::new();
        for line in text.lines() {
            let line = line.trim().trim_end_matches(',');
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let key = key.trim().trim_matches('"');
            let value = value.trim().trim_matches('"').trim_matches('\'');
            let number = |what: &str| {
                value
                    .parse::<u32>()
                    .map_err(|_| bad(format!("{what} '{value}' is not a whole number")))
            };
            match key {
                "markersize" => marker_size = Some(number("markersize")?),
                "maxCorrectionBits" => max_correction_bits = Some(number("maxCorrectionBits")?),
                "nmarkers" => count = Some(number("nmarkers")? as usize),
                _ => {
                    if let Some(i) = key.strip_prefix("marker_") {
                        let i = i
                            .parse::<usize>()
                            .map_err(|_| bad(format!("'{key}' is not marker_<number>")))?;
                        markers.push((i, value.to_string()));
                    }
                }
            }
        }
        let marker_size = marker_size.ok_or_else(|| bad("no markersize".into()))?;
        let max_correction_bits =
            max_correction_bits.ok_or_else(|| bad("no maxCorrectionBits".into()))?;
        if !(2..=MAX_MARKER_SIZE).contains(&marker_size) {
            return Err(bad(format!(
                "markersize {marker_size} is not in 2..={MAX_MARKER_SIZE}"
            )));
        }
        markers.sort_by_key(|m| m.0);
        if let Some((k, (i, _))) = markers.iter().enumerate().find(|(k, (i, _))| k != i) {
            return Err(bad(format!("marker_{k} is missing (next is marker_{i})")));
        }
        if let Some(n) = count {
            if n != markers.len() {
                return Err(bad(format!(
                    "nmarkers is {n} but the file has {} markers",
                    markers.len()
                )));
            }
        }
        let bits = (marker_size * marker_size) as usize;
        let codes = markers
            .iter()
            .map(|(i, s)| {
                if s.len() != bits || !s.bytes().all(|b| b == b'0' || b == b'1') {
                    return Err(bad(format!(
                        "marker_{i} is not {bits} characters of 0 and 1: '{s}'"
                    )));
                }
                Ok(s.bytes().fold(0u64, |c, b| (c << 1) | (b - b'0') as u64))
            })
            .collect::<Result<Vec<u64>>>()?;
        if codes.is_empty() {
            return Err(bad("no markers".into()));
        }
        Dictionary::from_codes(name, marker_size, max_correction_bits, &codes)
    }

    /// The dictionary in OpenCV's file format (YAML, as `writeDictionary` writes it).
    pub fn to_opencv_yaml(&self) -> String {
        let mut out = format!(
            "%YAML 1.2\n---\nnmarkers: {}\nmarkersize: {}\nmaxCorrectionBits: {}\n",
            self.len(),
            self.marker_size,
            self.max_correction_bits
        );
        let bits = self.marker_size * self.marker_size;
        for (i, r) in self.rotations.iter().enumerate() {
            let s: String = (0..bits)
                .map(|k| {
                    if r[0] >> (bits - 1 - k) & 1 == 1 {
                        '1'
                    } else {
                        '0'
                    }
                })
                .collect();
            out.push_str(&format!("marker_{i}: \"{s}\"\n"));
        }
        out
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name, shared (a marker found carries it).
    pub fn shared_name(&self) -> Arc<str> {
        self.name.clone()
    }

    /// Cells per side of the inner grid (without the border).
    pub fn marker_size(&self) -> u32 {
        self.marker_size
    }

    pub fn max_correction_bits(&self) -> u32 {
        self.max_correction_bits
    }

    pub fn len(&self) -> usize {
        self.rotations.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rotations.is_empty()
    }

    /// Marker `id`'s code (rotation 0), or None past the end.
    pub fn code(&self, id: u32) -> Option<u64> {
        self.rotations.get(id as usize).map(|r| r[0])
    }

    /// Marker `id`'s code in OpenCV's rotation `r` (0..4).
    pub fn rotated_code(&self, id: u32, r: usize) -> Option<u64> {
        self.rotations.get(id as usize).map(|c| c[r % 4])
    }

    /// Marker `id`'s cells row by row from the top-left, 1 = white.
    pub fn bits(&self, id: u32) -> Option<Vec<u8>> {
        let code = self.code(id)?;
        let n = self.marker_size * self.marker_size;
        Some((0..n).map(|k| (code >> (n - 1 - k) & 1) as u8).collect())
    }

    /// Marker `id` as OpenCV's `bytesList` row holds it: the cells of rotations 0 to 3, each
    /// packed eight to a byte from the most significant bit, the last byte filled from the
    /// least significant one, one rotation after the other.
    pub fn opencv_bytes(&self, id: u32) -> Option<Vec<u8>> {
        let rot = self.rotations.get(id as usize)?;
        let bits = self.marker_size * self.marker_size;
        let mut out = Vec::new();
        for &code in rot {
            let mut byte = 0u8;
            for k in 0..bits {
                byte = (byte << 1) | (code >> (bits - 1 - k) & 1) as u8;
                if k % 8 == 7 {
                    out.push(byte);
                    byte = 0;
                }
            }
            if bits % 8 != 0 {
                out.push(byte);
            }
        }
        Some(out)
    }

    /// The marker a read code (rotation as read) stands for: the first marker within
    /// `max_hamming` bits in any rotation, with its closest rotation (OpenCV's `identify`).
    pub fn identify(&self, code: u64, max_hamming: u32) -> Option<Identified> {
        for (id, rot) in self.rotations.iter().enumerate() {
            let (mut best, mut rotation) = (u32::MAX, 0u8);
            for (r, c) in rot.iter().enumerate() {
                let d = (c ^ code).count_ones();
                if d < best {
                    (best, rotation) = (d, r as u8);
                }
            }
            if best <= max_hamming {
                return Some(Identified {
                    id: id as u32,
                    rotation,
                    hamming: best,
                });
            }
        }
        None
    }
}

/// The code of the grid OpenCV calls the next rotation: cell (row, col) of the result is cell
/// (col, n − 1 − row) of `code`.
fn rotate(code: u64, n: u32) -> u64 {
    let bits = n * n;
    let get = |row: u32, col: u32| code >> (bits - 1 - (row * n + col)) & 1;
    let mut out = 0u64;
    for row in 0..n {
        for col in 0..n {
            out = (out << 1) | get(col, n - 1 - row);
        }
    }
    out
}

/// An embedded table: `markersize N`, then one hexadecimal code a line ('#' lines are comments).
fn parse_table(text: &str) -> std::result::Result<(u32, Vec<u64>), String> {
    let mut lines = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'));
    let size = lines
        .next()
        .and_then(|l| l.strip_prefix("markersize "))
        .and_then(|n| n.trim().parse::<u32>().ok())
        .ok_or("no 'markersize N' line")?;
    let codes = lines
        .map(|l| u64::from_str_radix(l, 16).map_err(|_| format!("'{l}' is not a hex code")))
        .collect::<std::result::Result<Vec<u64>, String>>()?;
    Ok((size, codes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_predefined_dictionary_loads_with_its_size() {
        for name in predefined_names() {
            let d = Dictionary::predefined(name).unwrap();
            assert_eq!(d.name(), name);
            // DICT_NxN_K holds K markers.
            if let Ok(n) = name.rsplit('_').next().unwrap().parse::<usize>() {
                assert_eq!(d.len(), n, "{name}");
            }
        }
        let d = Dictionary::predefined("apriltag_36H11").unwrap();
        assert_eq!(
            (d.len(), d.marker_size(), d.max_correction_bits()),
            (587, 6, 5)
        );
        // OpenCV's first 4×4 marker, as cv2.aruco's bytesList holds it.
        let d = Dictionary::predefined("DICT_4X4_50").unwrap();
        assert_eq!(
            d.opencv_bytes(0).unwrap(),
            [181, 50, 235, 72, 76, 173, 18, 215]
        );
    }

    #[test]
    fn unknown_names_list_the_dictionaries() {
        let err = Dictionary::predefined("DICT_9X9_7")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("DICT_9X9_7")
                && err.contains("DICT_4X4_50")
                && err.contains("DICT_APRILTAG_36h11"),
            "{err}"
        );
    }

    #[test]
    fn four_rotations_come_back_and_identify_finds_them() {
        let d = Dictionary::predefined("DICT_5X5_100").unwrap();
        for id in [0u32, 7, 99] {
            let c = d.code(id).unwrap();
            let mut r = c;
            for _ in 0..4 {
                r = rotate(r, 5);
            }
            assert_eq!(r, c);
            for rot in 0..4 {
                let read = d.rotated_code(id, rot).unwrap();
                let found = d.identify(read, 0).unwrap();
                assert_eq!(
                    (found.id, found.rotation as usize, found.hamming),
                    (id, rot, 0)
                );
                let found = d.identify(read ^ 0b100, 1).unwrap();
                assert_eq!((found.id, found.hamming), (id, 1));
            }
        }
    }

    #[test]
    fn opencv_files_round_trip_and_damage_is_named() {
        let d = Dictionary::predefined("DICT_4X4_50").unwrap();
        let yaml = d.to_opencv_yaml();
        let back = Dictionary::parse_opencv("d.yml", &yaml).unwrap();
        assert_eq!(back.rotations, d.rotations);
        assert_eq!(back.max_correction_bits(), 1);
        let json = "{\n \"nmarkers\": 2,\n \"markersize\": 4,\n \"maxCorrectionBits\": 3,\n \
                    \"marker_0\": \"1011010100110010\",\n \"marker_1\": \"0000111110011010\"\n}";
        let j = Dictionary::parse_opencv("d.json", json).unwrap();
        assert_eq!(
            (j.len(), j.code(0), j.max_correction_bits()),
            (2, d.code(0), 3)
        );
        for (text, expected) in [
            (
                "markersize: 4\nmarker_0: \"1011\"\n",
                "no maxCorrectionBits",
            ),
            (
                "maxCorrectionBits: 1\nmarker_0: \"1011\"\n",
                "no markersize",
            ),
            (
                "markersize: 2\nmaxCorrectionBits: 0\nmarker_0: \"1021\"\n",
                "0 and 1",
            ),
            (
                "markersize: 2\nmaxCorrectionBits: 0\nmarker_1: \"1011\"\n",
                "marker_0 is missing",
            ),
            ("markersize: 2\nmaxCorrectionBits: 0\n", "no markers"),
            (
                "markersize: x\nmaxCorrectionBits: 0\n",
                "not a whole number",
            ),
            (
                "markersize: 9\nmaxCorrectionBits: 0\nmarker_0: \"1\"\n",
                "not in 2..=8",
            ),
            (
                "nmarkers: 3\nmarkersize: 2\nmaxCorrectionBits: 0\nmarker_0: \"1011\"\n",
                "nmarkers is 3",
            ),
        ] {
            let err = Dictionary::parse_opencv("bad.yml", text)
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(expected) && err.contains("bad.yml"),
                "{text:?}: {err}"
            );
        }
    }
}
