//! Still images as a frame source: one image, every image of a folder (sorted by name), or the
//! files a glob pattern matches (sorted by path). Frame i is the i-th image; `time_s` is 0.
//!
//! Every image's header is read when the source is opened, so a file that is not an image, or
//! one too large to label, is refused before any frame is decoded.

use super::{ms_since, Frame, FrameSource};
use crate::error::{Error, Result};
use crate::frame::image::{check_size, GrayImage};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// File extensions treated as images when reading a folder (the formats this build decodes).
pub const IMAGE_EXTENSIONS: &[&str] = &[
    "png", "jpg", "jpeg", "bmp", "tif", "tiff", "pgm", "ppm", "pbm", "pnm", "gif", "webp",
];

pub struct ImageSource {
    spec: String,
    paths: Vec<PathBuf>,
    next: usize,
}

impl ImageSource {
    /// Lists the images of `spec` (file, folder or glob) and checks their headers.
    pub fn open(spec: &str) -> Result<Self> {
        let path = Path::new(spec);
        let paths = if is_glob(spec) && !path.exists() {
            list_glob(spec)?
        } else {
            list_inputs(path)?
        };
        for p in &paths {
            check_dimensions(p)?;
        }
        Ok(Self {
            spec: spec.to_string(),
            paths,
            next: 0,
        })
    }

    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }
}

impl FrameSource for ImageSource {
    fn describe(&self) -> String {
        match self.paths.as_slice() {
            [one] => one.display().to_string(),
            many => format!("{} ({} images)", self.spec, many.len()),
        }
    }

    fn is_live(&self) -> bool {
        false
    }

    fn next_frame(&mut self) -> Result<Option<Frame>> {
        let Some(path) = self.paths.get(self.next) else {
            return Ok(None);
        };
        let started = Instant::now();
        let grey = GrayImage::load(path)?;
        let decode_ms = ms_since(started);
        let index = self.next as u64;
        self.next += 1;
        Ok(Some(Frame {
            index,
            time_s: 0.0,
            grey: Arc::new(grey),
            captured_at: Instant::now(),
            decode_ms,
            name: file_name(path),
        }))
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

fn file_name(path: &Path) -> String {
    path.file_name()
        .map_or_else(|| path.to_string_lossy(), |n| n.to_string_lossy())
        .into_owned()
}

/// Does `spec` look like a glob pattern (`*`, `?` or `[`)?
pub fn is_glob(spec: &str) -> bool {
    spec.contains(['*', '?', '['])
}

/// The files a glob matches, sorted by path.
fn list_glob(pattern: &str) -> Result<Vec<PathBuf>> {
    let bad = |why: String| Error::image(Path::new(pattern), why);
    let entries = glob::glob(pattern).map_err(|e| bad(format!("bad glob pattern: {e}")))?;
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

/// The images to analyze: the file itself, or every image file of a folder sorted by name.
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
        if path.is_file() && has_image_extension(&path) {
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
    fn bad_header_fails_at_open() {
        let dir = tempfile::tempdir().unwrap();
        write_png(&dir.path().join("a.png"), 4, 3, 1);
        std::fs::write(dir.path().join("b.png"), b"garbage").unwrap();
        let err = ImageSource::open(dir.path().to_str().unwrap())
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("b.png"), "{err}");
    }
}
