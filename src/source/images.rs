//! Still images as a frame source: one image, every image of a folder (sorted by name), or the
//! files a glob pattern matches (sorted by path). Frame i is the i-th image; `time_s` is 0.
//!
//! Every image's header is read when the source is opened. A single image that is not
//! readable, or too large to label, is refused before any frame is decoded. In a folder or a
//! glob, such an image, and one that fails to decode (a damaged or cut-short file), is skipped
//! and recorded for `take_skipped` (it keeps its index), and the images after it are read;
//! only when none of them is readable is opening an error. Hidden files (names starting with
//! a dot) of a folder or a glob are not read. Of an animated GIF only the first frame is an
//! image here; `describe` says so.

use super::{ms_since, Frame, FrameSource, SkipAt, Skipped};
use crate::error::{Error, Result};
use crate::frame::image::{check_size, GrayImage};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// File extensions treated as images when reading a folder (the formats this build decodes).
pub const IMAGE_EXTENSIONS: &[&str] = &[
    "png", "jpg", "jpeg", "bmp", "tif", "tiff", "pgm", "ppm", "pbm", "pnm", "gif", "webp",
];

pub struct ImageSource {
    spec: String,
    paths: Vec<PathBuf>,
    /// Why each image's header is unreadable (None: readable).
    bad_header: Vec<Option<String>>,
    next: usize,
    skipped: Vec<Skipped>,
    /// GIFs with more than one frame: (file name, frames).
    animated: Vec<(String, usize)>,
}

impl ImageSource {
    /// Lists the images of `spec` (file, folder or glob) and checks their headers.
    pub fn open(spec: &str) -> Result<Self> {
        let paths = image_paths(spec)?;
        let single = paths.len() == 1 && Path::new(spec).is_file();
        let mut bad_header = Vec::with_capacity(paths.len());
        let mut first_error = None;
        for p in &paths {
            match check_dimensions(p) {
                Ok(_) => bad_header.push(None),
                Err(e) if single => return Err(e),
                Err(e) => {
                    bad_header.push(Some(reason(&e)));
                    first_error.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_error.filter(|_| bad_header.iter().all(Option::is_some)) {
            return Err(Error::image(
                Path::new(spec),
                format!(
                    "none of its {} image(s) is readable; the first: {e}",
                    paths.len()
                ),
            ));
        }
        let animated = paths
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e.eq_ignore_ascii_case("gif")))
            .filter_map(|p| {
                let frames = gif_frame_count(&std::fs::read(p).ok()?)?;
                (frames > 1).then(|| (file_name(p), frames))
            })
            .collect();
        Ok(Self {
            spec: spec.to_string(),
            paths,
            bad_header,
            next: 0,
            skipped: Vec::new(),
            animated,
        })
    }

    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }
}

impl FrameSource for ImageSource {
    fn describe(&self) -> String {
        let animated = match self.animated.as_slice() {
            [] => String::new(),
            [(_, n)] if self.paths.len() == 1 => {
                format!(" (an animated GIF: only the first of its {n} frames is analysed)")
            }
            [(name, n)] => {
                format!("; {name} is an animated GIF: only the first of its {n} frames is analysed")
            }
            many => format!(
                "; {} animated GIFs: only the first frame of each is analysed",
                many.len()
            ),
        };
        match self.paths.as_slice() {
            [one] => format!("{}{animated}", one.display()),
            many => format!("{} ({} images{animated})", self.spec, many.len()),
        }
    }

    fn is_live(&self) -> bool {
        false
    }

    fn next_frame(&mut self) -> Result<Option<Frame>> {
        loop {
            let Some(path) = self.paths.get(self.next) else {
                return Ok(None);
            };
            let started = Instant::now();
            let index = self.next as u64;
            self.next += 1;
            let loaded = match &self.bad_header[index as usize] {
                Some(why) => Err(why.clone()),
                None => GrayImage::load(path).map_err(|e| reason(&e)),
            };
            match loaded {
                Ok(grey) => {
                    return Ok(Some(Frame {
                        index,
                        time_s: 0.0,
                        grey: grey.into(),
                        captured_at: Instant::now(),
                        decode_ms: ms_since(started),
                        name: file_name(path),
                    }))
                }
                Err(reason) => self.skipped.push(Skipped {
                    at: SkipAt::Frame(index),
                    name: file_name(path),
                    reason,
                }),
            }
        }
    }

    fn take_skipped(&mut self) -> Vec<Skipped> {
        std::mem::take(&mut self.skipped)
    }

    fn frame_count(&self) -> Option<u64> {
        Some(self.paths.len() as u64)
    }

    fn seek(&mut self, index: u64) -> Result<()> {
        if index >= self.paths.len() as u64 {
            return Err(Error::Invalid(format!(
                "{}: cannot seek to image {index}: there are {} images",
                self.spec,
                self.paths.len()
            )));
        }
        self.next = index as usize;
        Ok(())
    }
}

/// An image error without the path (the skip record names the file).
fn reason(e: &Error) -> String {
    match e {
        Error::Image { why, .. } => why.clone(),
        e => e.to_string(),
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map_or_else(|| path.to_string_lossy(), |n| n.to_string_lossy())
        .into_owned()
}

/// The frames (image descriptors) of a GIF, read from its block structure without decoding;
/// None when the structure is not readable.
fn gif_frame_count(bytes: &[u8]) -> Option<usize> {
    // Sub-blocks (a length byte, then the data) up to the zero-length terminator.
    fn skip_sub_blocks(bytes: &[u8], mut at: usize) -> Option<usize> {
        loop {
            let len = *bytes.get(at)? as usize;
            at += 1 + len;
            if len == 0 {
                return Some(at);
            }
        }
    }
    if !bytes.starts_with(b"GIF") || bytes.len() < 13 {
        return None;
    }
    let table = |flags: u8| {
        if flags & 0x80 != 0 {
            3 << ((flags & 7) + 1)
        } else {
            0
        }
    };
    let mut at = 13 + table(bytes[10]);
    let mut frames = 0;
    loop {
        match *bytes.get(at)? {
            0x3B => return Some(frames),
            0x21 => at = skip_sub_blocks(bytes, at + 2)?,
            0x2C => {
                frames += 1;
                let flags = *bytes.get(at + 9)?;
                // Descriptor, local colour table, LZW code size, then the data.
                at = skip_sub_blocks(bytes, at + 10 + table(flags) + 1)?;
            }
            _ => return Some(frames),
        }
    }
}

/// Does `spec` look like a glob pattern (`*`, `?` or `[`)?
pub fn is_glob(spec: &str) -> bool {
    spec.contains(['*', '?', '['])
}

/// The image files of a source spec (one file, a folder, or a glob), in the order they are read.
pub fn image_paths(spec: &str) -> Result<Vec<PathBuf>> {
    let path = Path::new(spec);
    if is_glob(spec) && !path.exists() {
        list_glob(spec)
    } else {
        list_inputs(path)
    }
}

fn is_hidden(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with('.'))
}

/// The files a glob matches, sorted by path; hidden files only when the pattern names the dot.
fn list_glob(pattern: &str) -> Result<Vec<PathBuf>> {
    let bad = |why: String| Error::image(Path::new(pattern), why);
    let options = glob::MatchOptions {
        require_literal_leading_dot: true,
        ..Default::default()
    };
    let entries =
        glob::glob_with(pattern, options).map_err(|e| bad(format!("bad glob pattern: {e}")))?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| bad(format!("cannot read {}", e.path().display())))?;
        if path.is_file() {
            files.push(path);
        }
    }
    if files.is_empty() {
        return Err(bad("the pattern matches no files".into()));
    }
    files.sort();
    Ok(files)
}

/// The images to analyze: the file itself, or every image file of a folder sorted by name
/// (hidden files left out).
pub fn list_inputs(input: &Path) -> Result<Vec<PathBuf>> {
    let meta =
        std::fs::metadata(input).map_err(|e| Error::image(input, format!("cannot read: {e}")))?;
    if !meta.is_dir() {
        return Ok(vec![input.to_path_buf()]);
    }
    let entries = std::fs::read_dir(input)
        .map_err(|e| Error::image(input, format!("cannot list folder: {e}")))?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::image(input, format!("cannot list folder: {e}")))?;
        let path = entry.path();
        if path.is_file() && has_image_extension(&path) && !is_hidden(&path) {
            files.push(path);
        }
    }
    if files.is_empty() {
        return Err(Error::image(
            input,
            format!(
                "the folder contains no image files ({})",
                IMAGE_EXTENSIONS.join(", ")
            ),
        ));
    }
    files.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
    Ok(files)
}

pub fn has_image_extension(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| IMAGE_EXTENSIONS.iter().any(|x| x.eq_ignore_ascii_case(e)))
}

/// Reads only the header and checks the size, so a huge or empty image is refused before any
/// pixel buffer is allocated.
pub fn check_dimensions(path: &Path) -> Result<(u32, u32)> {
    let (w, h) = image::ImageReader::open(path)
        .map_err(|e| Error::image(path, format!("cannot open: {e}")))?
        .with_guessed_format()
        .map_err(|e| Error::image(path, format!("cannot read: {e}")))?
        .into_dimensions()
        .map_err(|e| Error::image(path, format!("not a readable image: {e}")))?;
    check_size(w, h).map_err(|e| Error::image(path, e.to_string()))?;
    Ok((w, h))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_png(path: &Path, w: u32, h: u32, v: u8) {
        image::GrayImage::from_pixel(w, h, image::Luma([v]))
            .save(path)
            .unwrap();
    }

    #[test]
    fn glob_folder_and_single_file_in_order() {
        let dir = tempfile::tempdir().unwrap();
        for (name, v) in [("b.png", 2), ("a.png", 1), ("c.bmp", 3)] {
            write_png(&dir.path().join(name), 4, 3, v);
        }
        let pattern = format!("{}/*.png", dir.path().display());
        let mut src = ImageSource::open(&pattern).unwrap();
        assert_eq!(src.frame_count(), Some(2));
        let a = src.next_frame().unwrap().unwrap();
        let b = src.next_frame().unwrap().unwrap();
        assert_eq!((a.index, a.name.as_str(), a.grey.data[0]), (0, "a.png", 1));
        assert_eq!((b.index, b.name.as_str(), b.grey.data[0]), (1, "b.png", 2));
        assert!(src.next_frame().unwrap().is_none());
        src.seek(1).unwrap();
        assert_eq!(src.next_frame().unwrap().unwrap().name, "b.png");
        assert!(src.seek(2).is_err());

        let folder = ImageSource::open(dir.path().to_str().unwrap()).unwrap();
        assert_eq!(folder.frame_count(), Some(3));
        let one = ImageSource::open(dir.path().join("c.bmp").to_str().unwrap()).unwrap();
        assert_eq!(one.frame_count(), Some(1));

        let err = ImageSource::open(&format!("{}/*.jpg", dir.path().display()))
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("*.jpg") && err.contains("matches no files"),
            "{err}"
        );
    }

    #[test]
    fn a_bad_image_in_a_folder_is_skipped_and_a_single_one_fails_at_open() {
        let dir = tempfile::tempdir().unwrap();
        write_png(&dir.path().join("a.png"), 4, 3, 1);
        std::fs::write(dir.path().join("b.png"), b"garbage").unwrap();
        write_png(&dir.path().join("c.png"), 4, 3, 3);
        // Hidden files (AppleDouble companions) are not read.
        std::fs::write(dir.path().join("._a.png"), b"resource fork").unwrap();
        let mut src = ImageSource::open(dir.path().to_str().unwrap()).unwrap();
        assert_eq!(src.frame_count(), Some(3));
        assert_eq!(src.next_frame().unwrap().unwrap().name, "a.png");
        assert!(src.take_skipped().is_empty());
        let c = src.next_frame().unwrap().unwrap();
        assert_eq!((c.index, c.name.as_str()), (2, "c.png"));
        let skipped = src.take_skipped();
        assert_eq!(skipped.len(), 1);
        assert_eq!(skipped[0].at, SkipAt::Frame(1));
        assert_eq!(skipped[0].name, "b.png");
        assert!(src.next_frame().unwrap().is_none());

        let err = ImageSource::open(dir.path().join("b.png").to_str().unwrap())
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("b.png"), "{err}");
        let pattern = format!("{}/b*.png", dir.path().display());
        let err = ImageSource::open(&pattern).err().unwrap().to_string();
        assert!(err.contains("none of its 1 image(s)"), "{err}");
    }
}
