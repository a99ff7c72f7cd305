//! Image types shared by every stage: grey frames, binary masks (bytes and bit-packed) and label images.

use super::page_lock::{bytes_of, PageLock, PageLocker};
use crate::error::{Error, Result};
use std::path::Path;

/// Largest pixel count we accept: labels are u32 and 0 is background, and GPU kernels use
/// `y * width + x + 1` as a provisional label, so every linear index + 1 must fit in u32.
pub const MAX_PIXELS: u64 = u32::MAX as u64 - 1;

/// Checks that `width × height` is a size every backend can label.
pub fn check_size(width: u32, height: u32) -> Result<()> {
    if width == 0 || height == 0 {
        return Err(Error::InvalidSize {
            width,
            height,
            why: "the image is empty".into(),
        });
    }
    if width as u64 * height as u64 > MAX_PIXELS {
        return Err(Error::InvalidSize {
            width,
            height,
            why: format!("more than {MAX_PIXELS} pixels do not fit 32-bit labels"),
        });
    }
    Ok(())
}

/// The environment variable that caps the memory a run may use in all (`2G`, `512M`, bytes),
/// where the machine has more than the run should take (a host shared with other work).
pub const MEMORY_LIMIT_ENV: &str = "MARKERSCOPE_MEMORY_LIMIT";

/// Memory the process can be given for new allocations now, in bytes: the host's
/// (`MemAvailable`), or less where the process's control group has a memory limit (a container,
/// a systemd slice: its limit less its use) or `MEMORY_LIMIT_ENV` caps the run (that cap less
/// what the process holds); None where none of them can be read.
pub fn available_memory() -> Option<u64> {
    let host = (|| {
        let text = std::fs::read_to_string("/proc/meminfo").ok()?;
        let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    })();
    let capped = memory_limit()
        .ok()
        .flatten()
        .map(|cap| cap.saturating_sub(resident_memory().unwrap_or(0)));
    [host, cgroup_memory_left(), capped]
        .into_iter()
        .flatten()
        .min()
}

/// The process's resident memory now (`VmRSS`), in bytes.
pub fn resident_memory() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// `MEMORY_LIMIT_ENV`: None when unset or empty, an error when it is not a size.
pub fn memory_limit() -> Result<Option<u64>> {
    match std::env::var(MEMORY_LIMIT_ENV) {
        Ok(text) if !text.trim().is_empty() => {
            parse_memory_size(&text).map(Some).ok_or_else(|| {
                Error::Invalid(format!(
                    "{MEMORY_LIMIT_ENV}={text:?} is not a memory size: give bytes, or a number \
                 with K, M or G (powers of 1024), e.g. 512M or 2G"
                ))
            })
        }
        _ => Ok(None),
    }
}

/// Bytes, or a number with K, M, G or T (powers of 1024, `KiB`/`KB`/`k` alike); at least 1.
fn parse_memory_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let number: f64 = number.parse().ok()?;
    let unit = unit.trim().to_ascii_lowercase();
    let unit = unit.trim_end_matches('b').trim_end_matches('i');
    let scale: u64 = match unit {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        "t" => 1 << 40,
        _ => return None,
    };
    let bytes = number * scale as f64;
    (bytes.is_finite() && bytes >= 1.0 && bytes < u64::MAX as f64).then_some(bytes as u64)
}

/// What the process's control group may still use: its memory limit less its use (cgroup v2
/// `memory.max` and `memory.current` of every group from the process's up to the root; v1
/// `memory.limit_in_bytes` and `memory.usage_in_bytes`). None without a limit.
fn cgroup_memory_left() -> Option<u64> {
    let read = |path: std::path::PathBuf| -> Option<u64> {
        std::fs::read_to_string(path).ok()?.trim().parse().ok()
    };
    let groups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mut left: Option<u64> = None;
    let mut tighter = |limit: Option<u64>, used: Option<u64>| {
        // v1 says "no limit" with a number near 2⁶³.
        if let (Some(limit), Some(used)) = (limit.filter(|&l| l < 1 << 60), used) {
            let here = limit.saturating_sub(used);
            left = Some(left.map_or(here, |l| l.min(here)));
        }
    };
    for line in groups.lines() {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next(), fields.next()?, fields.next()?);
        let path = path.trim_start_matches('/');
        if controllers.is_empty() {
            // v2: the group and each one above it.
            let mut dir = std::path::Path::new("/sys/fs/cgroup").join(path);
            loop {
                tighter(
                    read(dir.join("memory.max")),
                    read(dir.join("memory.current")),
                );
                if !dir.pop() || !dir.starts_with("/sys/fs/cgroup") {
                    break;
                }
            }
        } else if controllers.split(',').any(|c| c == "memory") {
            let dir = std::path::Path::new("/sys/fs/cgroup/memory").join(path);
            tighter(
                read(dir.join("memory.limit_in_bytes")),
                read(dir.join("memory.usage_in_bytes")),
            );
        }
    }
    left
}

/// The least memory a frame size takes in the frame path, per pixel: the grey frames waiting in
/// the queues (about six), the mask and its packed bits, one labeler's labels and scratch (9).
/// Measured (CPU backend, peak resident memory over 30 frames of a sparse scene, `synthetic`):
/// 13 bytes a pixel at 4000×4000 (208 MB), 12.3 at 8000×8000 (785 MB).
pub const FRAME_PATH_BYTES_PER_PX: u64 = 16;

/// Refuses a frame size whose frame path cannot fit in the memory available now, so that a job
/// too large for the machine is an error before it starts, not a process killed half way.
pub fn check_frame_memory(width: u32, height: u32) -> Result<()> {
    memory_limit()?;
    let Some(available) = available_memory() else {
        return Ok(());
    };
    let needed = width as u64 * height as u64 * FRAME_PATH_BYTES_PER_PX;
    if needed <= available {
        return Ok(());
    }
    Err(Error::InvalidSize {
        width,
        height,
        why: format!(
            "analysing frames of this size needs at least {:.1} GiB of memory \
             ({FRAME_PATH_BYTES_PER_PX} bytes a pixel), but {:.1} GiB are available; \
             use a smaller size",
            gib(needed),
            gib(available)
        ),
    })
}

fn gib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 30) as f64
}

/// What a run holds per component of its frames once it is tracked (its row, sub-pixel record
/// and track ID, the labeler's runs and statistics, the frames in flight, one track each).
/// Measured: a 2000×2000 checkerboard, 4-connected (2 million components a frame, the same
/// every frame, so no track ends): 2.36 GB after one frame, 2.57 GB over 30, about 1,250
/// bytes a component beside the frame path.
pub const RUN_BYTES_PER_COMPONENT: u64 = 1_250;

/// What a run holds per track its frames start, a frame: a track the next frame does not
/// follow is kept (with its trajectory tail once confirmed) for up to the tracker's
/// `max_missed` frames, so a scene whose components are new every frame holds many tracks per
/// component. Measured: `synthetic:random` at 2000×2000 to 4000×4000 (21,000 to 84,000
/// components a frame, 88 % of them starting a track), 9,300 to 9,900 bytes a component over
/// 30 frames beside the frame path, so (9,600 − 1,250) / 0.88 ≈ 9,500 bytes a new track.
pub const RUN_BYTES_PER_NEW_TRACK: u64 = 9_500;

/// The frames a run analyses, as far as its memory goes: their size, components and the tracks
/// each starts.
#[derive(Clone, Copy, Debug)]
pub struct RunDensity {
    pub width: u32,
    pub height: u32,
    pub components: u64,
    pub new_tracks: u64,
}

impl RunDensity {
    /// The memory the run takes once its tracker holds what these frames make it hold.
    pub fn bytes(&self) -> u64 {
        (self.width as u64 * self.height as u64)
            .saturating_mul(FRAME_PATH_BYTES_PER_PX)
            .saturating_add(self.components.saturating_mul(RUN_BYTES_PER_COMPONENT))
            .saturating_add(self.new_tracks.saturating_mul(RUN_BYTES_PER_NEW_TRACK))
    }
}

/// Refuses a run whose frames, as dense as `density`, need more memory than the process holds
/// now and can still be given, with the figures, instead of a process killed half way.
pub fn check_run_memory(density: RunDensity) -> Result<()> {
    let available = available_memory();
    run_fits(density, resident_memory().unwrap_or(0), available)
}

fn run_fits(density: RunDensity, held: u64, available: Option<u64>) -> Result<()> {
    let needed = density.bytes();
    let Some(available) = available else {
        return Ok(());
    };
    if needed <= held.saturating_add(available) {
        return Ok(());
    }
    let RunDensity {
        width,
        height,
        components,
        new_tracks,
    } = density;
    Err(Error::Invalid(format!(
        "frames of {width}x{height} with {components} components, {new_tracks} of them new \
         tracks, need about {:.1} GiB of memory once tracked ({FRAME_PATH_BYTES_PER_PX} bytes a \
         pixel, {RUN_BYTES_PER_COMPONENT} a component, {RUN_BYTES_PER_NEW_TRACK} a new track a \
         frame), but {:.1} GiB are available ({:.1} GiB held, {:.1} GiB free); use a higher \
         threshold, a mask, or a machine with more memory",
        gib(needed),
        gib(held.saturating_add(available)),
        gib(held),
        gib(available)
    )))
}

/// What one more frame's components cost once they are labeled (the check of each frame; the
/// run's whole bound is `RunDensity`), per component: the result's row
/// (64 bytes), sub-pixel record (48) and track ID (8), and the tracker's record of a new track
/// (144) with its per-frame copy and index of the detection (about 110). Measured: a 2000×2000
/// checkerboard (2 million components) peaks at 0.9 GB, about 450 bytes a component with the
/// labeler's own 64 and the pixels.
pub const BYTES_PER_COMPONENT: u64 = 380;

/// Components below this many are never checked (under 64 MB: reading the memory figure would
/// cost more than it tells).
const COMPONENTS_CHECKED_FROM: u64 = (64 << 20) / BYTES_PER_COMPONENT;

/// Refuses a frame whose `components` cannot be tracked and handed on in the memory available
/// now, with what they need, instead of a process killed for memory in the tracker.
pub fn check_component_memory(components: u64) -> Result<()> {
    if components < COMPONENTS_CHECKED_FROM {
        return Ok(());
    }
    components_fit(components, available_memory())
}

fn components_fit(components: u64, available: Option<u64>) -> Result<()> {
    let needed = components.saturating_mul(BYTES_PER_COMPONENT);
    match available {
        Some(available) if needed > available => Err(Error::Invalid(format!(
            "{components} components need about {:.1} GiB of memory to track and hand on \
                 ({BYTES_PER_COMPONENT} bytes each), but {:.1} GiB are available; use a \
                 higher threshold or a machine with more memory",
            gib(needed),
            gib(available)
        ))),
        _ => Ok(()),
    }
}

/// 8-bit grey image, row-major, no padding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrayImage {
    pub width: u32,
    pub height: u32,
    /// `data` page-locked for the GPU's DMA (`lock`), or not. Declared before `data`, so that
    /// it is dropped (unregistered) before `data` is freed; while it is held, `data` is
    /// resized only through `set_size`, which ends it first.
    pub lock: PageLock,
    pub data: Vec<u8>,
}

impl GrayImage {
    pub fn new(width: u32, height: u32, data: Vec<u8>) -> Result<Self> {
        check_size(width, height)?;
        check_len(width, height, data.len())?;
        Ok(Self {
            width,
            height,
            lock: PageLock::default(),
            data,
        })
    }

    pub fn filled(width: u32, height: u32, value: u8) -> Result<Self> {
        check_size(width, height)?;
        Ok(Self {
            width,
            height,
            lock: PageLock::default(),
            data: vec![value; width as usize * height as usize],
        })
    }

    /// An empty image, to draw into (`set_size`).
    pub fn empty() -> Self {
        Self {
            width: 0,
            height: 0,
            lock: PageLock::default(),
            data: Vec::new(),
        }
    }

    /// Makes this a `width × height` image, keeping the pixels' memory when the length is the
    /// same (a page-locked buffer stays locked); otherwise the lock ends before the resize.
    pub fn set_size(&mut self, width: u32, height: u32) {
        self.lock
            .resize(&mut self.data, width as usize * height as usize);
        self.width = width;
        self.height = height;
    }

    /// Page-locks the pixels' memory with `locker` unless it is already (a buffer that is
    /// drawn into again keeps its registration).
    pub fn lock(&mut self, locker: &dyn PageLocker) {
        // SAFETY: `data` is freed only after `lock` is dropped (field order), and it is
        // resized only through `set_size`, which drops the lock first.
        unsafe { self.lock.cover(locker, &self.data) };
    }

    /// Whether the pixels are in page-locked memory, for a DMA straight from them.
    pub fn page_locked(&self) -> bool {
        self.lock.covers(&self.data)
    }

    pub fn len(&self) -> usize {
        self.data.len()
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Loads any format the `image` crate reads; colour converts with the BT.601 luma weights.
    /// A JPEG that is cut short or whose data is damaged is refused (see `decode_jpeg`).
    pub fn load(path: &Path) -> Result<Self> {
        // The size is checked from the header (`check_size`: up to 2³² − 2 pixels), so the
        // `image` crate's own allocation limit (512 MiB) is lifted: it would refuse images this
        // program labels.
        let (w, h) = image::image_dimensions(path)
            .map_err(|e| Error::image(path, format!("not a readable image: {e}")))?;
        check_size(w, h).map_err(|e| Error::image(path, e.to_string()))?;
        let mut reader = image::ImageReader::open(path)
            .map_err(|e| Error::image(path, format!("cannot open: {e}")))?
            .with_guessed_format()
            .map_err(|e| Error::image(path, format!("cannot read: {e}")))?;
        reader.no_limits();
        let decoded = if reader.format() == Some(image::ImageFormat::Jpeg) {
            let bytes =
                std::fs::read(path).map_err(|e| Error::image(path, format!("cannot read: {e}")))?;
            decode_jpeg(&bytes).map_err(|why| Error::image(path, why))?
        } else {
            reader
                .decode()
                .map_err(|e| Error::image(path, format!("cannot decode: {e}")))?
        };
        Self::from_dynamic(&decoded).map_err(|e| Error::image(path, e.to_string()))
    }

    /// Converts a decoded image to grey. Colour uses OpenCV's fixed-point BT.601 weights
    /// (Y = (4899 R + 9617 G + 1868 B + 8192) >> 14) so results match `cv2.cvtColor(..., COLOR_RGB2GRAY)`.
    pub fn from_dynamic(img: &image::DynamicImage) -> Result<Self> {
        use image::DynamicImage as D;
        let (width, height) = (img.width(), img.height());
        check_size(width, height)?;
        let data = match img {
            D::ImageLuma8(g) => g.as_raw().clone(),
            D::ImageLumaA8(_) | D::ImageLuma16(_) | D::ImageLumaA16(_) => img.to_luma8().into_raw(),
            _ => {
                let rgb = img.to_rgb8();
                rgb.as_raw()
                    .chunks_exact(3)
                    .map(|p| bt601_luma(p[0], p[1], p[2]))
                    .collect()
            }
        };
        Self::new(width, height, data)
    }
}

/// Decodes a JPEG as the `image` crate does (zune-jpeg, the same output colour space), but
/// strictly: the `image` crate lets zune-jpeg fill a truncated image with grey and decode past
/// bad entropy-coded data, so a damaged photo would be analysed as if it were whole. Here the
/// file is checked first (`super::jpeg::check`: its end marker, every block's codes) and
/// decoded in zune-jpeg's strict mode; any problem is an error.
pub fn decode_jpeg(bytes: &[u8]) -> std::result::Result<image::DynamicImage, String> {
    use zune_core::colorspace::ColorSpace;
    let damaged = |e: &dyn std::fmt::Display| format!("damaged JPEG: {e}");
    super::jpeg::check(bytes).map_err(|e| damaged(&e))?;
    let options = zune_core::options::DecoderOptions::default()
        .set_strict_mode(true)
        .set_max_width(usize::MAX)
        .set_max_height(usize::MAX);
    let mut decoder = zune_jpeg::JpegDecoder::new_with_options(
        zune_core::bytestream::ZCursor::new(bytes),
        options,
    );
    decoder.decode_headers().map_err(|e| damaged(&e))?;
    let (Some((w, h)), Some(input)) = (decoder.dimensions(), decoder.input_colorspace()) else {
        return Err(damaged(&"no image size"));
    };
    let out = match input {
        ColorSpace::RGB | ColorSpace::RGBA | ColorSpace::Luma | ColorSpace::LumaA => input,
        _ => ColorSpace::RGB,
    };
    decoder.set_options(decoder.options().jpeg_set_out_colorspace(out));
    let pixels = decoder.decode().map_err(|e| damaged(&e))?;
    let (w, h) = (w as u32, h as u32);
    let wrong_size = || damaged(&"the decoded data does not match the image size");
    Ok(match out {
        ColorSpace::Luma => image::DynamicImage::ImageLuma8(
            image::GrayImage::from_raw(w, h, pixels).ok_or_else(wrong_size)?,
        ),
        ColorSpace::LumaA => image::DynamicImage::ImageLumaA8(
            image::GrayAlphaImage::from_raw(w, h, pixels).ok_or_else(wrong_size)?,
        ),
        ColorSpace::RGBA => image::DynamicImage::ImageRgba8(
            image::RgbaImage::from_raw(w, h, pixels).ok_or_else(wrong_size)?,
        ),
        _ => image::DynamicImage::ImageRgb8(
            image::RgbImage::from_raw(w, h, pixels).ok_or_else(wrong_size)?,
        ),
    })
}

/// BT.601 luma in OpenCV's 14-bit fixed point (round to nearest).
pub fn bt601_luma(r: u8, g: u8, b: u8) -> u8 {
    ((4899 * r as u32 + 9617 * g as u32 + 1868 * b as u32 + 8192) >> 14) as u8
}

/// Binary mask, one byte per pixel, 0 = background, 1 = foreground.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BinaryImage {
    pub width: u32,
    pub height: u32,
    pub data: Vec<u8>,
}

impl BinaryImage {
    /// Builds a mask; any non-zero byte is foreground and is stored as 1.
    pub fn new(width: u32, height: u32, mut data: Vec<u8>) -> Result<Self> {
        check_size(width, height)?;
        check_len(width, height, data.len())?;
        for v in &mut data {
            *v = (*v != 0) as u8;
        }
        Ok(Self {
            width,
            height,
            data,
        })
    }

    pub fn zeros(width: u32, height: u32) -> Result<Self> {
        check_size(width, height)?;
        Ok(Self {
            width,
            height,
            data: vec![0; width as usize * height as usize],
        })
    }

    /// Builds a mask from a predicate over (x, y); handy for test shapes.
    pub fn from_fn(width: u32, height: u32, f: impl Fn(u32, u32) -> bool) -> Result<Self> {
        check_size(width, height)?;
        let mut data = Vec::with_capacity(width as usize * height as usize);
        for y in 0..height {
            for x in 0..width {
                data.push(f(x, y) as u8);
            }
        }
        Ok(Self {
            width,
            height,
            data,
        })
    }

    pub fn get(&self, x: u32, y: u32) -> bool {
        self.data[y as usize * self.width as usize + x as usize] != 0
    }

    pub fn row(&self, y: u32) -> &[u8] {
        let w = self.width as usize;
        &self.data[y as usize * w..(y as usize + 1) * w]
    }

    pub fn pixels(&self) -> u64 {
        self.width as u64 * self.height as u64
    }

    pub fn foreground_count(&self) -> u64 {
        self.data.iter().map(|&v| v as u64).sum()
    }

    pub fn pack(&self) -> PackedBinary {
        PackedBinary::from_binary(self)
    }
}

/// Bit-packed mask: bit `x % 32` (LSB first) of word `y * words_per_row + x / 32`.
/// Rows are padded to a multiple of 64 pixels (an even number of words) so that
/// 64-bit loads stay aligned; padding bits are 0. This is the upload format for
/// video frames: 8× less PCIe traffic than bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackedBinary {
    pub width: u32,
    pub height: u32,
    pub words_per_row: usize,
    /// `words` page-locked for the GPU's DMA, or not (as `GrayImage::lock`: dropped first,
    /// and ended before `words` is resized).
    pub lock: PageLock,
    pub words: Vec<u32>,
}

impl PackedBinary {
    pub fn words_per_row_for(width: u32) -> usize {
        (width as usize).div_ceil(64) * 2
    }

    /// Makes `words` `len` long, keeping its memory when the length is the same (a locked
    /// buffer stays locked); otherwise the lock ends before the resize.
    pub fn resize_words(&mut self, len: usize) {
        self.lock.resize(&mut self.words, len);
    }

    /// Page-locks the words' memory with `locker` unless it is already.
    pub fn lock(&mut self, locker: &dyn PageLocker) {
        // SAFETY: as `GrayImage::lock` (`words` dropped after `lock`, resized through
        // `resize_words`).
        unsafe { self.lock.cover(locker, bytes_of(&self.words)) };
    }

    /// Whether the words are in page-locked memory, for a DMA straight from them.
    pub fn page_locked(&self) -> bool {
        self.lock.covers(bytes_of(&self.words))
    }

    pub fn from_binary(img: &BinaryImage) -> Self {
        let wpr = Self::words_per_row_for(img.width);
        let mut words = vec![0u32; wpr * img.height as usize];
        for (y, out) in words.chunks_exact_mut(wpr).enumerate() {
            let row = img.row(y as u32);
            for (chunk, word) in row.chunks(32).zip(out.iter_mut()) {
                *word = match <&[u8; 32]>::try_from(chunk) {
                    Ok(full) => pack_word(full),
                    Err(_) => chunk
                        .iter()
                        .enumerate()
                        .fold(0, |bits, (i, &v)| bits | (v as u32 & 1) << i),
                };
            }
        }
        Self {
            width: img.width,
            height: img.height,
            words_per_row: wpr,
            lock: PageLock::default(),
            words,
        }
    }

    /// The mask as bytes 0/1, rows in parallel, eight pixels a table lookup.
    pub fn unpack(&self) -> BinaryImage {
        use rayon::prelude::*;
        let (w, wpr) = (self.width as usize, self.words_per_row);
        let mut data = vec![0u8; w * self.height as usize];
        if w > 0 {
            data.par_chunks_mut(w).enumerate().for_each(|(y, row)| {
                let words = &self.words[y * wpr..(y + 1) * wpr];
                for (pixels, word) in row.chunks_mut(32).zip(words) {
                    let mut bytes = [0u8; 32];
                    for (k, eight) in bytes.chunks_exact_mut(8).enumerate() {
                        let byte = (word >> (8 * k)) as u8;
                        eight.copy_from_slice(&BYTE_PIXELS[byte as usize].to_le_bytes());
                    }
                    pixels.copy_from_slice(&bytes[..pixels.len()]);
                }
            });
        }
        BinaryImage {
            width: self.width,
            height: self.height,
            data,
        }
    }
}

/// The eight pixels (bytes 0/1, least significant first) of each mask byte.
const BYTE_PIXELS: [u64; 256] = {
    let mut table = [0u64; 256];
    let mut byte = 0;
    while byte < 256 {
        let mut bit = 0;
        while bit < 8 {
            table[byte] |= ((byte as u64 >> bit) & 1) << (8 * bit);
            bit += 1;
        }
        byte += 1;
    }
    table
};

/// Label image, 0 = background, components numbered from 1.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabelImage {
    pub width: u32,
    pub height: u32,
    pub data: Vec<u32>,
}

impl LabelImage {
    pub fn zeros(width: u32, height: u32) -> Self {
        Self {
            width,
            height,
            data: vec![0; width as usize * height as usize],
        }
    }

    pub fn get(&self, x: u32, y: u32) -> u32 {
        self.data[y as usize * self.width as usize + x as usize]
    }
}

/// Bit 0 of 32 mask bytes, LSB first: eight bytes at a time as one u64, whose bit 0s (at bits
/// 0, 8, …, 56) are folded down into its low byte by three shifts. A 1080p frame packs in
/// 0.20 ms instead of the 0.98 ms of a loop over single bytes (release build, the 2-core CI
/// machine), which made the packing of a frame for upload as slow as its thresholding.
fn pack_word(bytes: &[u8; 32]) -> u32 {
    let mut word = 0u32;
    for (k, eight) in bytes.chunks_exact(8).enumerate() {
        let mut t = u64::from_le_bytes(eight.try_into().expect("8 bytes")) & 0x0101_0101_0101_0101;
        t |= t >> 7; // byte k: bits 0-1 = bytes k, k + 1
        t |= t >> 14; // bits 0-3 = bytes k .. k + 3
        t |= t >> 28; // bits 0-7 = bytes k .. k + 7
        word |= ((t & 0xff) as u32) << (8 * k);
    }
    word
}

fn check_len(width: u32, height: u32, len: usize) -> Result<()> {
    let expected = width as usize * height as usize;
    if len != expected {
        return Err(Error::InvalidSize {
            width,
            height,
            why: format!("buffer holds {len} pixels, expected {expected}"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_roundtrip_odd_widths() {
        for w in [1u32, 7, 8, 9, 31, 32, 33, 63, 64, 65, 100, 129] {
            let img = BinaryImage::from_fn(w, 3, |x, y| (x * 7 + y * 3) % 5 < 2).unwrap();
            let packed = img.pack();
            assert_eq!(packed.words_per_row % 2, 0);
            assert_eq!(packed.unpack(), img, "width {w}");
        }
    }

    /// The eight-bytes-at-a-time packing keeps bit 0 of every byte, as a loop over bytes does,
    /// whatever the other bits hold.
    #[test]
    fn pack_word_matches_a_loop_over_bytes() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2000 {
            let mut bytes = [0u8; 32];
            for b in &mut bytes {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                *b = state as u8;
            }
            let expected = bytes
                .iter()
                .enumerate()
                .fold(0u32, |bits, (i, &v)| bits | (v as u32 & 1) << i);
            assert_eq!(pack_word(&bytes), expected, "{bytes:?}");
        }
    }

    #[test]
    fn size_limits() {
        assert!(check_size(0, 5).is_err());
        assert!(check_size(5, 0).is_err());
        assert!(check_size(65536, 65536).is_err());
        assert!(check_size(65535, 65535).is_ok());
    }

    #[test]
    fn luma_matches_opencv_fixed_point() {
        assert_eq!(bt601_luma(255, 255, 255), 255);
        assert_eq!(bt601_luma(0, 0, 0), 0);
        // cv2.cvtColor(np.uint8([[[255, 0, 0]]]), cv2.COLOR_RGB2GRAY) == 76
        assert_eq!(bt601_luma(255, 0, 0), 76);
        assert_eq!(bt601_luma(0, 255, 0), 150);
        assert_eq!(bt601_luma(0, 0, 255), 29);
    }

    /// Images over the `image` crate's default 512 MiB allocation limit load (the pixel
    /// limit is this program's, checked from the header).
    #[test]
    fn images_over_512_mib_load() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("large.png");
        let (w, h) = (32_768u32, 16_385u32); // 536,903,680 pixels: just over 512 MiB of grey
        let mut img = image::GrayImage::new(w, h);
        img.put_pixel(w - 1, h - 1, image::Luma([200]));
        img.save(&path).unwrap();
        drop(img);
        let loaded = GrayImage::load(&path).unwrap();
        assert_eq!((loaded.width, loaded.height), (w, h));
        assert_eq!(loaded.data[loaded.data.len() - 1], 200);
    }

    #[test]
    fn components_beyond_the_memory_are_refused() {
        components_fit(1_000, Some(1_000 * BYTES_PER_COMPONENT)).unwrap();
        components_fit(1_000, None).unwrap();
        let err = components_fit(3_000_000, Some(1 << 30))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("3000000 components") && err.contains("1.0 GiB are available"),
            "{err}"
        );
        check_component_memory(10).unwrap();
    }

    #[test]
    fn memory_sizes_parse_with_binary_units() {
        assert_eq!(parse_memory_size("4096"), Some(4096));
        assert_eq!(parse_memory_size("512M"), Some(512 << 20));
        assert_eq!(parse_memory_size(" 2GiB "), Some(2 << 30));
        assert_eq!(parse_memory_size("1.5g"), Some(3 << 29));
        assert_eq!(parse_memory_size("64kb"), Some(64 << 10));
        for bad in ["", "M", "-1G", "0", "2X", "1e3", "G2", "inf"] {
            assert_eq!(parse_memory_size(bad), None, "{bad:?}");
        }
    }

    /// A dense run is refused with its figures where a sparse one of the same size fits; what
    /// the process already holds counts as its own.
    #[test]
    fn runs_whose_tracks_outgrow_the_memory_are_refused() {
        let sparse = RunDensity {
            width: 3000,
            height: 3000,
            components: 15,
            new_tracks: 1,
        };
        let dense = RunDensity {
            components: 47_000,
            new_tracks: 41_000,
            ..sparse
        };
        let available = Some(200 << 20);
        run_fits(sparse, 50 << 20, available).unwrap();
        let err = run_fits(dense, 50 << 20, available)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("3000x3000 with 47000 components, 41000 of them new tracks")
                && err.contains("0.2 GiB are available"),
            "{err}"
        );
        run_fits(dense, 400 << 20, available).unwrap();
        run_fits(dense, 0, None).unwrap();
        assert_eq!(
            dense.bytes(),
            9_000_000 * FRAME_PATH_BYTES_PER_PX
                + 47_000 * RUN_BYTES_PER_COMPONENT
                + 41_000 * RUN_BYTES_PER_NEW_TRACK
        );
    }

    /// A frame size the machine cannot hold is refused with how much it needs; one it can hold
    /// passes.
    #[test]
    fn frame_sizes_beyond_the_memory_are_refused() {
        check_frame_memory(1920, 1080).unwrap();
        let Some(available) = available_memory() else {
            return;
        };
        // The largest frame there is needs 16 × (2³² − 2) bytes, 64 GiB.
        if available >= MAX_PIXELS * FRAME_PATH_BYTES_PER_PX {
            return;
        }
        let err = check_frame_memory(65_536, 65_535).unwrap_err().to_string();
        assert!(
            err.contains("65536x65535") && err.contains("GiB are available"),
            "{err}"
        );
    }
}
