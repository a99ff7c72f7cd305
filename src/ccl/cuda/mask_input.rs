//! A frame's mask on the device, where it is when the labeling kernels start (FLSL and the HA
//! family), and its page-locked staging for the upload.

use crate::ccl::Mask;
use crate::error::{Error, Result};
use crate::frame::image::{BinaryImage, PackedBinary};
use crate::gpu::buffers::alloc_err;
use crate::gpu::staging::{upload_pinned, HostStaging};
use crate::gpu::{cuda_err, Gpu};
use cudarc::driver::{CudaSlice, CudaStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A `width × height` frame's mask on the device (FLSL and the HA family): the bytes as
/// uploaded and the bit-packed words the labeling kernels read. Kept between frames of one size.
pub struct DeviceMask {
    pub width: u32,
    pub height: u32,
    pub words_per_row: usize,
    /// Byte mask as uploaded (0 / 1 per pixel).
    pub bytes: CudaSlice<u8>,
    /// Bit-packed mask (see PackedBinary).
    pub packed: CudaSlice<u32>,
}

impl DeviceMask {
    /// The two buffers of a `width × height` mask, uninitialised.
    pub fn alloc(stream: &Arc<CudaStream>, width: u32, height: u32) -> Result<DeviceMask> {
        let words_per_row = PackedBinary::words_per_row_for(width);
        let pixels = width as usize * height as usize;
        // SAFETY: the kernels read the mask only after the upload, the packing or the device
        // threshold wrote it (`MaskInput` says which).
        let (bytes, packed) = unsafe {
            (
                stream.alloc::<u8>(pixels).map_err(alloc_err)?,
                stream
                    .alloc::<u32>(words_per_row * height as usize)
                    .map_err(alloc_err)?,
            )
        };
        Ok(DeviceMask {
            width,
            height,
            words_per_row,
            bytes,
            packed,
        })
    }

    /// Whether it holds a `width × height` frame.
    pub fn fits(&self, width: u32, height: u32) -> bool {
        self.width == width && self.height == height
    }

    pub fn pixels(&self) -> usize {
        self.width as usize * self.height as usize
    }

    /// Copies a byte mask of this size into `bytes` (resident benchmarks: uploaded once).
    pub fn upload_bytes(&mut self, gpu: &Gpu, image: &BinaryImage) -> Result<()> {
        gpu.stream
            .memcpy_htod(&image.data, &mut self.bytes)
            .map_err(|e| cuda_err("uploading the mask", e))
    }
}

/// Where the frame's mask is when the kernels start (FLSL and the HA family).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum MaskInput {
    /// Bit-packed, in `DeviceMask::packed` (uploaded packed).
    Packed,
    /// Bytes in `DeviceMask::bytes`, rows 16-byte aligned: the strip kernel packs them into
    /// `DeviceMask::packed` itself, which saves the separate packing pass and its launch.
    Bytes,
    /// Bytes in `DeviceMask::bytes` that `pack_bytes` packs first, as its own step ("pack bits").
    PackFirst,
}

/// Frames of at least this many pixels are packed by `pack_bytes16` before the strip kernel
/// rather than inside it. Measured on an H100 (`bench/device_call.rs`, 1920×1080 to 8192², the
/// papers' images): the strip kernel that packs the bytes itself was 2–5 % faster at every size,
/// so by default no frame is packed first (only widths the strip kernel's vector loads cannot
/// read); `set_pack_first_min_pixels` lets a benchmark compare the two forms on another GPU.
pub const PACK_FIRST_MIN_PIXELS: u64 = u64::MAX;

/// The threshold `MaskInput::for_bytes` uses: PACK_FIRST_MIN_PIXELS unless a benchmark set it.
static PACK_FIRST_FROM: AtomicU64 = AtomicU64::new(PACK_FIRST_MIN_PIXELS);

impl MaskInput {
    /// Bytes are packed inside the strip kernel when its vector loads allow (width % 16 == 0)
    /// and the frame is smaller than the pack-first threshold (PACK_FIRST_MIN_PIXELS, or what
    /// `set_pack_first_min_pixels` set).
    pub fn for_bytes(width: u32, height: u32) -> MaskInput {
        Self::for_size(width, height, Self::pack_first_min_pixels())
    }

    /// The form for a `width × height` byte mask when frames of `pack_first_from` pixels or
    /// more are packed first.
    pub fn for_size(width: u32, height: u32, pack_first_from: u64) -> MaskInput {
        let pixels = u64::from(width) * u64::from(height);
        if width % 16 == 0 && pixels < pack_first_from {
            MaskInput::Bytes
        } else {
            MaskInput::PackFirst
        }
    }

    /// Benchmarks only: frames of `pixels` or more are packed first from now on, in every
    /// labeler of the process (0: always; u64::MAX: only when the width needs it).
    pub fn set_pack_first_min_pixels(pixels: u64) {
        PACK_FIRST_FROM.store(pixels, Ordering::Relaxed);
    }

    /// The threshold in use (PACK_FIRST_MIN_PIXELS unless a benchmark set another).
    pub fn pack_first_min_pixels() -> u64 {
        PACK_FIRST_FROM.load(Ordering::Relaxed)
    }
}

/// The page-locked copies of a frame's mask, as bytes or bit-packed (one buffer each, kept),
/// or where a packed mask already page-locked by its maker is (`PackedBinary::lock`).
#[derive(Default)]
pub struct MaskStaging {
    bytes: HostStaging<u8>,
    words: HostStaging<u32>,
    /// The address and length (words) of the last packed mask, when it was page-locked: it
    /// goes up from there, uncopied.
    in_place: Option<(usize, usize)>,
}

impl MaskStaging {
    /// Checks the mask's size and copies it into its page-locked buffer (unless it is
    /// page-locked itself: `in_place`); returns whether that buffer was reallocated (which
    /// invalidates a graph that reads it).
    ///
    /// A page-locked mask is read by the upload queued later: its holder keeps it, unwritten,
    /// until the stream has passed that copy.
    pub fn fill(&mut self, gpu: &Gpu, mask: Mask<'_>) -> Result<bool> {
        self.in_place = None;
        match mask {
            Mask::Bytes(image) => {
                if image.data.len() != image.width as usize * image.height as usize {
                    return Err(Error::Invalid(format!(
                        "a {}x{} mask with {} bytes",
                        image.width,
                        image.height,
                        image.data.len()
                    )));
                }
                self.bytes.fill(gpu, &image.data)
            }
            Mask::Packed(packed) => {
                if packed.words_per_row != PackedBinary::words_per_row_for(packed.width)
                    || packed.words.len() != packed.words_per_row * packed.height as usize
                {
                    return Err(Error::Invalid(format!(
                        "a {}x{} packed mask with an unexpected row pitch or length",
                        packed.width, packed.height
                    )));
                }
                if packed.page_locked() {
                    self.in_place = Some((packed.words.as_ptr() as usize, packed.words.len()));
                    return Ok(false);
                }
                self.words.fill(gpu, &packed.words)
            }
        }
    }

    /// Whether the last mask goes up from where its maker put it (page-locked), not from the
    /// staging buffer: its upload cannot be part of a graph, whose copy reads a fixed address.
    pub fn in_place(&self) -> bool {
        self.in_place.is_some()
    }

    /// Queues the upload of the mask staged for `input` into `device`: the packed one for
    /// `MaskInput::Packed`, else the bytes.
    pub fn upload(
        &mut self,
        stream: &CudaStream,
        input: MaskInput,
        device: &mut DeviceMask,
    ) -> Result<()> {
        let (bytes, mask) = (&mut device.bytes, &mut device.packed);
        match (input, self.in_place) {
            (MaskInput::Packed, Some((address, len))) => {
                // SAFETY: the packed mask `fill` saw, page-locked, which its holder keeps
                // unwritten until the stream has passed this copy (see `fill`).
                unsafe {
                    let words = std::slice::from_raw_parts(address as *const u32, len);
                    upload_pinned(stream, words, mask)
                }
            }
            (MaskInput::Packed, None) => self.words.upload(stream, mask),
            (MaskInput::Bytes | MaskInput::PackFirst, _) => self.bytes.upload(stream, bytes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Widths the vector loads cannot take are always packed first; the others are packed
    /// inside the strip kernel below the threshold and first from it on.
    #[test]
    fn byte_masks_are_packed_first_from_the_threshold() {
        let from = 1u64 << 22;
        assert!(MaskInput::for_size(1920, 1080, from) == MaskInput::Bytes);
        assert!(MaskInput::for_size(2048, 2047, from) == MaskInput::Bytes);
        assert!(MaskInput::for_size(2048, 2048, from) == MaskInput::PackFirst);
        assert!(MaskInput::for_size(8192, 8192, from) == MaskInput::PackFirst);
        assert!(MaskInput::for_size(1918, 1080, from) == MaskInput::PackFirst);
        assert!(MaskInput::for_size(8192, 8192, u64::MAX) == MaskInput::Bytes);
        assert!(MaskInput::for_size(16, 1, 0) == MaskInput::PackFirst);
        // 2^32 × 2^32 does not overflow.
        assert!(MaskInput::for_size(u32::MAX - 15, u32::MAX, u64::MAX) == MaskInput::Bytes);
    }
}
