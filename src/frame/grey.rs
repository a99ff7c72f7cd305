//! A frame's grey image as sources deliver it: in host memory, or in GPU memory where a hardware
//! decoder left it (NVDEC's luma plane). A GPU labeler thresholds the plane where it is; the host
//! copy is made the first time anything reads the pixels (the window's view, a CPU labeler, a
//! recording), once, and kept with the frame.

use super::image::GrayImage;
use crate::error::Result;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// A grey frame: `width × height`, its pixels on the host or on the device.
///
/// Reading the pixels (`image`, or through `Deref`) of a frame on the device copies them to
/// the host first; `width`, `height`, `on_device` and `device_plane` do not.
#[derive(Clone)]
pub struct FrameGrey {
    pub width: u32,
    pub height: u32,
    inner: Arc<Inner>,
}

struct Inner {
    host: OnceLock<Arc<GrayImage>>,
    device: Option<Box<dyn DevicePlane>>,
}

/// A frame's grey plane in GPU memory (`source::video`'s NVDEC frames).
pub trait DevicePlane: Send + Sync {
    /// Copies the plane into `out`, `width` bytes a row, rows packed.
    fn download(&self, out: &mut [u8], width: u32, height: u32) -> std::result::Result<(), String>;
    /// Queues on `stream` (a `CUstream` of the plane's CUDA context, current on this thread)
    /// the copy of the plane's `width × height` pixels into the device memory at `dst` (`width`
    /// bytes a row), behind the decoder's copy; the plane is not written again before that copy
    /// is done (`gpu::device_plane::CudaPlane`).
    ///
    /// # Safety
    /// `dst` holds `width × height` bytes of that context's memory; `stream` is a live stream
    /// of it.
    unsafe fn queue_copy_to(
        &self,
        dst: u64,
        width: u32,
        height: u32,
        stream: *mut std::ffi::c_void,
    ) -> std::result::Result<(), String>;
}

/// Frames delivered on the device, and those of them whose pixels were copied to the host,
/// since the process started: a run that keeps its frames on the device copies none (the
/// closing lines of `analyze` say both).
static ON_DEVICE: AtomicU64 = AtomicU64::new(0);
static HOST_COPIES: AtomicU64 = AtomicU64::new(0);

/// Frames delivered on the device so far, and host copies made of them (`FrameGrey::image`).
pub fn device_frames() -> (u64, u64) {
    (
        ON_DEVICE.load(Ordering::Relaxed),
        HOST_COPIES.load(Ordering::Relaxed),
    )
}

impl FrameGrey {
    /// A frame in host memory.
    pub fn host(image: Arc<GrayImage>) -> FrameGrey {
        let (width, height) = (image.width, image.height);
        let host = OnceLock::new();
        let _ = host.set(image);
        FrameGrey {
            width,
            height,
            inner: Arc::new(Inner { host, device: None }),
        }
    }

    /// A `width × height` frame whose pixels are on the device.
    pub fn on_gpu(width: u32, height: u32, plane: Box<dyn DevicePlane>) -> FrameGrey {
        ON_DEVICE.fetch_add(1, Ordering::Relaxed);
        FrameGrey {
            width,
            height,
            inner: Arc::new(Inner {
                host: OnceLock::new(),
                device: Some(plane),
            }),
        }
    }

    /// Whether the pixels are on the device and not (yet) on the host.
    pub fn on_device(&self) -> bool {
        self.inner.device.is_some() && self.inner.host.get().is_none()
    }

    /// The plane on the device, where the frame has one.
    pub fn device_plane(&self) -> Option<&dyn DevicePlane> {
        self.inner.device.as_deref()
    }

    /// The pixels on the host: copied from the device the first time (errors when that copy
    /// fails).
    pub fn image(&self) -> Result<&Arc<GrayImage>> {
        if let Some(image) = self.inner.host.get() {
            return Ok(image);
        }
        let plane =
            (self.inner.device.as_deref()).expect("a frame without host pixels has a device plane");
        let mut image = GrayImage::new(
            self.width,
            self.height,
            vec![0; self.width as usize * self.height as usize],
        )?;
        plane
            .download(&mut image.data, self.width, self.height)
            .map_err(|why| crate::error::Error::Invalid(format!("a frame on the GPU: {why}")))?;
        HOST_COPIES.fetch_add(1, Ordering::Relaxed);
        // Two threads may copy at once; both copies hold the same pixels.
        Ok(self.inner.host.get_or_init(|| Arc::new(image)))
    }

    /// Whether two frames share their pixels (the same frame).
    pub fn same_frame(&self, other: &FrameGrey) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl std::ops::Deref for FrameGrey {
    type Target = GrayImage;

    /// The pixels on the host (`image`). A failed copy from the device (the GPU failed after
    /// decoding the frame) reads as a black frame, said once.
    fn deref(&self) -> &GrayImage {
        match self.image() {
            Ok(image) => image,
            Err(e) => {
                static SAID: std::sync::Once = std::sync::Once::new();
                SAID.call_once(|| eprintln!("warning: {e}; its pixels read as black"));
                let black = Arc::new(
                    GrayImage::new(
                        self.width,
                        self.height,
                        vec![0; self.width as usize * self.height as usize],
                    )
                    .unwrap_or_else(|_| GrayImage::empty()),
                );
                self.inner.host.get_or_init(|| black)
            }
        }
    }
}

impl From<Arc<GrayImage>> for FrameGrey {
    fn from(image: Arc<GrayImage>) -> FrameGrey {
        FrameGrey::host(image)
    }
}

impl From<GrayImage> for FrameGrey {
    fn from(image: GrayImage) -> FrameGrey {
        FrameGrey::host(Arc::new(image))
    }
}

impl std::fmt::Debug for FrameGrey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "FrameGrey({}×{}{})",
            self.width,
            self.height,
            if self.on_device() { ", on the GPU" } else { "" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plane in "device" memory that is host memory here, counting its downloads.
    struct FakePlane(Vec<u8>, Arc<std::sync::atomic::AtomicUsize>);

    impl DevicePlane for FakePlane {
        fn download(&self, out: &mut [u8], _w: u32, _h: u32) -> std::result::Result<(), String> {
            self.1.fetch_add(1, Ordering::Relaxed);
            out.copy_from_slice(&self.0);
            Ok(())
        }
        unsafe fn queue_copy_to(
            &self,
            _: u64,
            _: u32,
            _: u32,
            _: *mut std::ffi::c_void,
        ) -> std::result::Result<(), String> {
            Err("not on a GPU".into())
        }
    }

    #[test]
    fn a_device_frame_is_copied_to_the_host_once_when_its_pixels_are_read() {
        let pixels: Vec<u8> = (0..12).collect();
        let downloads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let plane = FakePlane(pixels.clone(), Arc::clone(&downloads));
        let frame = FrameGrey::on_gpu(4, 3, Box::new(plane));
        let copy = frame.clone();
        assert!(frame.on_device() && frame.device_plane().is_some());
        assert_eq!((frame.width, frame.height), (4, 3));
        assert_eq!(downloads.load(Ordering::Relaxed), 0);
        assert_eq!(frame.data, pixels);
        assert_eq!(copy.data, pixels);
        assert_eq!(downloads.load(Ordering::Relaxed), 1);
        assert!(!frame.on_device() && copy.same_frame(&frame));
    }

    #[test]
    fn a_host_frame_is_its_image() {
        let image = Arc::new(GrayImage::new(2, 2, vec![1, 2, 3, 4]).unwrap());
        let frame = FrameGrey::from(Arc::clone(&image));
        assert!(!frame.on_device() && frame.device_plane().is_none());
        assert!(Arc::ptr_eq(frame.image().unwrap(), &image));
        assert_eq!(frame.width, 2);
    }
}
