//! `markerscope marker`: one marker to print, drawn as OpenCV's `generateImageMarker` draws it
//! (PNG, bit for bit) or as a vector drawing (SVG) whose size is set in print units.

use crate::error::{Error, Result};
use crate::fiducial::{generate_marker, marker_svg, Dictionary};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The units an SVG marker's side may be given in.
const SVG_UNITS: &[&str] = &["px", "mm", "cm", "in", "pt"];

#[derive(clap::Args)]
pub struct MarkerArgs {
    /// A predefined dictionary (DICT_4X4_50 … DICT_7X7_1000, DICT_ARUCO_ORIGINAL,
    /// DICT_APRILTAG_16h5, _25h9, _36h10, _36h11, DICT_ARUCO_MIP_36h12) or an OpenCV dictionary
    /// file (.yml, .yaml, .json).
    pub dictionary: String,
    /// The marker's ID in the dictionary.
    pub id: u32,
    /// The side, border included: pixels for PNG, `--unit`s for SVG.
    #[arg(long, default_value_t = 200.0)]
    pub size: f64,
    /// The black border's width in cells.
    #[arg(long, default_value_t = 1)]
    pub border: u32,
    /// The unit of an SVG marker's side: px, mm, cm, in or pt.
    #[arg(long, default_value = "px")]
    pub unit: String,
    /// The file to write: FILE.png or FILE.svg.
    #[arg(long)]
    pub out: PathBuf,
}

/// What the file name asks for.
enum Format {
    Png,
    Svg,
}

/// Writes the marker `args` asks for; every argument is checked before anything is written.
pub fn run(args: &MarkerArgs) -> Result<()> {
    let format = format_of(&args.out)?;
    let dict = Dictionary::named_or_file(&args.dictionary)?;
    let bytes = match format {
        Format::Png => png(&dict, args)?,
        Format::Svg => {
            if !SVG_UNITS.contains(&args.unit.as_str()) {
                return Err(Error::Invalid(format!(
                    "--unit {}: use one of {}",
                    args.unit,
                    SVG_UNITS.join(", ")
                )));
            }
            marker_svg(&dict, args.id, args.size, &args.unit, args.border)?.into_bytes()
        }
    };
    write_atomically(&args.out, &bytes)
}

fn format_of(path: &Path) -> Result<Format> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    match ext.as_str() {
        "png" => Ok(Format::Png),
        "svg" => Ok(Format::Svg),
        _ => Err(Error::Invalid(format!(
            "--out {}: the file name must end in .png or .svg",
            path.display()
        ))),
    }
}

fn png(dict: &Dictionary, args: &MarkerArgs) -> Result<Vec<u8>> {
    if args.size.fract() != 0.0 || args.size < 1.0 || args.size > u32::MAX as f64 {
        return Err(Error::Invalid(format!(
            "--size {}: a PNG marker's side is a whole number of pixels",
            args.size
        )));
    }
    let image = generate_marker(dict, args.id, args.size as u32, args.border)?;
    let (w, h) = (image.width, image.height);
    let grey = image::GrayImage::from_raw(w, h, image.data.clone())
        .ok_or_else(|| Error::Invalid("marker image of the wrong size".into()))?;
    let mut bytes = Vec::new();
    grey.write_to(
        &mut std::io::Cursor::new(&mut bytes),
        image::ImageFormat::Png,
    )
    .map_err(|e| Error::image(&args.out, format!("cannot encode the PNG: {e}")))?;
    Ok(bytes)
}

/// Written beside the target and renamed into place, so a failed write leaves no partial file.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(Error::Invalid(format!(
            "--out {}: folder {} does not exist; create it first",
            path.display(),
            dir.display()
        )));
    }
    // The temporary file's own name stays out of the message: it is gone when this returns.
    let fail = |e: std::io::Error| Error::Output {
        path: path.to_path_buf(),
        why: e.kind().to_string(),
    };
    let mut temp = tempfile::NamedTempFile::new_in(dir).map_err(fail)?;
    temp.write_all(bytes).map_err(fail)?;
    temp.as_file().sync_all().map_err(fail)?;
    temp.persist(path).map_err(|e| fail(e.error))?;
    Ok(())
}
