//! The runner shared by the pixel-label baselines (DLP-GPU, Komura, Shibata, Playne, BKE): each
//! algorithm only queues its labeling kernels (`PixelAlgorithm`); this module owns the frame
//! buffers, the upload (bytes, or bit-packed words unpacked on the device), the per-step CUDA
//! events, the shared analysis stage for statistics, and the downloads.
//!
//! Contract of `PixelAlgorithm::launch`: afterwards every foreground pixel of `frame.labels`
//! holds a label in 1..=pixels, the same for a whole component and distinct between components
//! (0 = background), and `frame.total` holds the number of components. With `Want::Labels` that
//! is the result; with statistics the analysis stage numbers the components 1..N in raster order
//! (and renumbers the labels for `Want::Both`).

use super::analysis::Analysis;
use super::downloads::{download_labels, StatsDownload};
use super::launches::check_connectivity;
use super::timing::{StepTimings, Steps};
use crate::ccl::{Connectivity, LabelRequest, Labeler, Labeling, Mask, ResidentTiming, Want};
use crate::error::{Error, Result};
use crate::frame::image::{BinaryImage, PackedBinary};
use crate::gpu::buffers::{alloc_err, check_free_memory, reuse_or_alloc};
use crate::gpu::events::StepEvents;
use crate::gpu::kernels::KernelFile;
use crate::gpu::launch::{launch, linear_launch, load, rect_launch};
use crate::gpu::{cuda_err, Gpu};
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, PushKernelArg};
use std::borrow::Cow;
use std::sync::Arc;

/// Threads per block of the one-thread-per-pixel kernels (a multiple of 32: they count roots
/// with warp votes).
pub const PIXEL_THREADS: u32 = 256;

/// Device buffers of one frame size.
pub struct Frame {
    pub width: u32,
    pub height: u32,
    /// The mask, one byte per pixel (0 / 1).
    pub image: CudaSlice<u8>,
    /// The label image (the algorithms' equivalence table as well).
    pub labels: CudaSlice<u32>,
    /// Component count, written by the algorithm.
    pub total: CudaSlice<u32>,
    /// Bit-packed upload buffer (allocated on the first packed frame).
    packed: Option<CudaSlice<u32>>,
}

impl Frame {
    /// The buffers of a `width × height` frame.
    fn alloc(gpu: &Gpu, width: u32, height: u32) -> Result<Frame> {
        let pixels = width as usize * height as usize;
        check_free_memory(gpu, pixels * 5, width, height)?;
        let s = &gpu.stream;
        // SAFETY: the image is written by the upload (or unpack) before any kernel reads it,
        // the labels by the algorithm's first kernel, the count by the algorithm.
        let frame = unsafe {
            Frame {
                width,
                height,
                image: s.alloc::<u8>(pixels).map_err(alloc_err)?,
                labels: s.alloc::<u32>(pixels).map_err(alloc_err)?,
                total: s.alloc_zeros::<u32>(1).map_err(alloc_err)?,
                packed: None,
            }
        };
        Ok(frame)
    }

    pub fn pixels(&self) -> u64 {
        self.width as u64 * self.height as u64
    }

    /// Width and height as the kernels take them.
    pub fn size(&self) -> [i32; 2] {
        [self.width as i32, self.height as i32]
    }

    /// The launch of the one-thread-per-pixel kernels.
    pub fn pixel_launch(&self) -> cudarc::driver::LaunchConfig {
        linear_launch(self.pixels(), PIXEL_THREADS)
    }
}

/// What a baseline is: its name, kernel file and connectivities.
pub struct Baseline {
    pub name: &'static str,
    pub kernels: KernelFile,
    pub connectivities: &'static [Connectivity],
}

/// One run of a baseline's kernels: the frame, the connectivity asked for, and the steps (the
/// runner's before them; event i + 1 ends step i, event 0 recorded by the runner).
pub struct PixelRun<'a> {
    pub frame: &'a mut Frame,
    pub connectivity: Connectivity,
    pub steps: Steps<'a, Cow<'static, str>>,
}

impl<'a> PixelRun<'a> {
    /// The stream the run's kernels go on.
    pub fn stream(&self) -> &'a Arc<CudaStream> {
        &self.steps.gpu().stream
    }

    /// Queues `kernel` (named `name`) on one block per `tile` of the frame, with the tile's
    /// pixels × 4 bytes of shared memory and the arguments `(image, labels, width, height, tile
    /// columns, total)`, then ends the step `step`: the first step of DLP-GPU and Playne.
    pub fn label_tiles(
        &mut self,
        kernel: &CudaFunction,
        name: &str,
        (tw, th): (u32, u32),
        step: &'static str,
    ) -> Result<()> {
        let stream = self.stream();
        let f = &mut *self.frame;
        let [w, h] = f.size();
        let (cfg, tiles_x) = rect_launch(f.width, f.height, tw, th, tw * th * 4);
        let tiles_x = tiles_x as i32;
        let mut args = stream.launch_builder(kernel);
        args.arg(&f.image).arg(&mut f.labels).arg(&w).arg(&h);
        args.arg(&tiles_x).arg(&mut f.total);
        // SAFETY: the tile kernels' parameters (dlp.cu, playne.cu), in order; every buffer
        // holds width × height pixels (Frame); the caller's tile has at most 1024 pixels.
        unsafe { launch(&mut args, cfg, name)? };
        self.steps.mark(step)
    }
}

/// One pixel-label labeling algorithm: its kernels and launch geometry.
pub trait PixelAlgorithm: Send {
    /// Queues the labeling of `frame.image` into `frame.labels` and the component count into
    /// `frame.total` (see the module docs), marking a step after each kernel.
    fn launch(&mut self, run: &mut PixelRun) -> Result<()>;
}

/// A `Labeler` made of a `PixelAlgorithm` and the shared parts.
pub struct PixelLabeler {
    gpu: Arc<Gpu>,
    baseline: &'static Baseline,
    algorithm: Box<dyn PixelAlgorithm>,
    unpack: CudaFunction,
    frame: Option<Frame>,
    analysis: Analysis,
    download: StatsDownload,
    events: StepEvents,
}

impl PixelLabeler {
    pub fn new(
        gpu: Arc<Gpu>,
        baseline: &'static Baseline,
        algorithm: Box<dyn PixelAlgorithm>,
    ) -> Result<PixelLabeler> {
        let unpack = load(&gpu, baseline.kernels, "unpack_bits")?;
        let analysis = Analysis::new(gpu.clone())?;
        let download = StatsDownload::new(&gpu)?;
        Ok(PixelLabeler {
            gpu,
            baseline,
            algorithm,
            unpack,
            frame: None,
            analysis,
            download,
            events: StepEvents::default(),
        })
    }

    /// Registry constructor.
    pub fn create(
        gpu: &Arc<Gpu>,
        baseline: &'static Baseline,
        algorithm: Box<dyn PixelAlgorithm>,
    ) -> Result<Box<dyn Labeler>> {
        Ok(Box::new(PixelLabeler::new(
            gpu.clone(),
            baseline,
            algorithm,
        )?))
    }

    /// Makes sure the buffers fit a `width × height` frame; reallocates only on a size change.
    fn ensure_frame(&mut self, width: u32, height: u32) -> Result<()> {
        crate::frame::image::check_size(width, height)?;
        let gpu = &self.gpu;
        reuse_or_alloc(
            &mut self.frame,
            |f| f.width == width && f.height == height,
            || Frame::alloc(gpu, width, height),
        )
    }

    /// Labeling, then the analysis stage when statistics are wanted. Event 0 must already be
    /// recorded; `names` are the steps before (upload), whose end events are recorded too.
    fn launch_all(
        &mut self,
        connectivity: Connectivity,
        want: Want,
        names: Vec<Cow<'static, str>>,
    ) -> Result<Vec<Cow<'static, str>>> {
        let frame = self.frame.as_mut().expect("frame allocated");
        let mut run = PixelRun {
            frame,
            connectivity,
            steps: Steps::new(&self.gpu, &mut self.events, 0, names),
        };
        self.algorithm.launch(&mut run)?;
        let PixelRun {
            frame, mut steps, ..
        } = run;
        if want.stats() {
            let (w, h) = (frame.width, frame.height);
            let labels = &mut frame.labels;
            self.analysis
                .launch(labels, w, h, connectivity, want, &mut steps)?;
        }
        Ok(steps.into_names())
    }

    /// Host to host: `upload` puts the mask into `frame.image` and returns its step names.
    fn run(
        &mut self,
        width: u32,
        height: u32,
        connectivity: Connectivity,
        want: Want,
        upload: impl FnOnce(&mut Self) -> Result<Vec<Cow<'static, str>>>,
    ) -> Result<Labeling> {
        self.check_connectivity(connectivity)?;
        self.ensure_frame(width, height)?;
        self.events.record(&self.gpu, 0)?;
        let names = upload(self)?;
        let mut names = self.launch_all(connectivity, want, names)?;
        let (count, stats) = if want.stats() {
            self.analysis.fetch(true)?
        } else {
            let frame = self.frame.as_ref().expect("frame allocated");
            (self.download.fetch_count(&self.gpu, &frame.total)?, None)
        };
        let labels = if want.labels() {
            let f = self.frame.as_ref().expect("frame allocated");
            Some(download_labels(&self.gpu, &f.labels, f.width, f.height)?)
        } else {
            None
        };
        names.push(Cow::Borrowed("download"));
        let last = names.len();
        self.events.record(&self.gpu, last)?;
        self.events.wait(last)?;
        Ok(Labeling {
            count,
            labels,
            stats,
            timings: self.events.step_times(&names)?,
            filtered: None,
            device_detections: None,
        })
    }

    fn check_connectivity(&self, connectivity: Connectivity) -> Result<()> {
        let baseline = self.baseline;
        check_connectivity(baseline.name, connectivity, baseline.connectivities)
    }

    /// Uploads the bit-packed words (8× less than bytes) and unpacks them on the device.
    fn label_packed(
        &mut self,
        packed: &PackedBinary,
        connectivity: Connectivity,
        want: Want,
    ) -> Result<Labeling> {
        if packed.words_per_row != PackedBinary::words_per_row_for(packed.width)
            || packed.words.len() != packed.words_per_row * packed.height as usize
        {
            return Err(Error::Invalid(
                "packed mask has an unexpected row pitch or length".into(),
            ));
        }
        self.run(packed.width, packed.height, connectivity, want, |me| {
            let gpu = me.gpu.clone();
            let f = me.frame.as_mut().expect("frame allocated");
            if f.packed
                .as_ref()
                .is_none_or(|p| p.len() != packed.words.len())
            {
                f.packed = Some(
                    gpu.stream
                        .clone_htod(&packed.words)
                        .map_err(|e| cuda_err("uploading the mask", e))?,
                );
            } else if let Some(p) = f.packed.as_mut() {
                gpu.stream
                    .memcpy_htod(&packed.words, p)
                    .map_err(|e| cuda_err("uploading the mask", e))?;
            }
            me.events.record(&gpu, 1)?;
            let ([w, h], wpr) = (f.size(), packed.words_per_row as i32);
            let words = f.packed.as_ref().expect("uploaded above");
            let cfg = f.pixel_launch();
            let mut args = gpu.stream.launch_builder(&me.unpack);
            args.arg(words).arg(&mut f.image).arg(&w).arg(&h).arg(&wpr);
            // SAFETY: matches `unpack_bits(const u32*, uchar*, int, int, int)`; `words` holds
            // words_per_row × height words (checked above), `image` width × height bytes.
            unsafe { launch(&mut args, cfg, "unpack_bits")? };
            me.events.record(&gpu, 2)?;
            Ok(vec![
                Cow::Borrowed("upload (packed)"),
                Cow::Borrowed("unpack bits"),
            ])
        })
    }

    fn upload_bytes(&mut self, image: &BinaryImage) -> Result<()> {
        let f = self.frame.as_mut().expect("frame allocated");
        self.gpu
            .stream
            .memcpy_htod(&image.data, &mut f.image)
            .map_err(|e| cuda_err("uploading the mask", e))
    }
}

impl Labeler for PixelLabeler {
    fn name(&self) -> &'static str {
        self.baseline.name
    }

    /// Packed masks go up as their bit-packed words (8× less than bytes) and are unpacked on
    /// the device.
    fn label_mask(&mut self, request: LabelRequest<Mask<'_>>) -> Result<Labeling> {
        let (connectivity, want) = (request.connectivity, request.want);
        match request.input {
            Mask::Bytes(image) => self.run(image.width, image.height, connectivity, want, |me| {
                me.upload_bytes(image)?;
                me.events.record(&me.gpu, 1)?;
                Ok(vec![Cow::Borrowed("upload")])
            }),
            Mask::Packed(packed) => self.label_packed(packed, connectivity, want),
        }
    }

    /// Uploads the byte mask once, then times `repeat` runs of the kernels with CUDA events
    /// (no transfers) and returns the fastest run.
    fn time_resident(
        &mut self,
        request: LabelRequest<&BinaryImage>,
        repeat: u32,
    ) -> Result<ResidentTiming> {
        let image = request.input;
        self.check_connectivity(request.connectivity)?;
        self.ensure_frame(image.width, image.height)?;
        self.upload_bytes(image)?;
        let mut best = ResidentTiming::fastest(repeat, || {
            self.events.record(&self.gpu, 0)?;
            let names = self.launch_all(request.connectivity, request.want, Vec::new())?;
            self.events.resident_timing(&names)
        })?;
        best.count = if request.want.stats() {
            self.analysis.fetch_count()?
        } else {
            let f = self.frame.as_ref().expect("frame allocated");
            self.download.fetch_count(&self.gpu, &f.total)?
        };
        Ok(best)
    }
}

/// CPU models of the kernels' index logic (run sequentially: each thread's work at once is one
/// of the interleavings the GPU may produce), checked against the BFS oracle in CI, where there
/// is no GPU. The helpers mirror `kernels/pixel_labels.cuh`.
#[cfg(test)]
pub(crate) mod model {
    use crate::ccl::cpu::graph::join_roots;
    use crate::ccl::cpu::oracle::flood_fill;
    use crate::ccl::partition::same_partition;
    use crate::ccl::shapes::{hard_shapes, random_images, Shape};
    use crate::ccl::Connectivity;
    use crate::frame::image::{BinaryImage, LabelImage};

    pub fn px_find(l: &[u32], mut e: u32) -> u32 {
        let mut p = l[e as usize - 1];
        while p != e {
            e = p;
            p = l[e as usize - 1];
        }
        e
    }

    /// atomicMin on a slice element; returns the old value.
    pub fn atomic_min(l: &mut [u32], i: usize, v: u32) -> u32 {
        let old = l[i];
        l[i] = old.min(v);
        old
    }

    pub fn px_union(l: &mut [u32], mut a: u32, mut b: u32) {
        while a != b {
            if a < b {
                std::mem::swap(&mut a, &mut b);
            }
            let old = atomic_min(l, a as usize - 1, b);
            a = if old == a { b } else { old };
        }
    }

    /// Labels are 1-based here: label `l`'s parent is at index l - 1.
    pub fn px_union_komura(l: &mut [u32], a: u32, b: u32) {
        let (l1, l2) = (px_find(l, a), px_find(l, b));
        join_roots(l1, l2, |r, v| atomic_min(l, r as usize - 1, v));
    }

    /// Hard shapes at sizes around the tile sizes (84 × 8, 32 × 4, 2 × 2 blocks) and random
    /// images at the three granularities.
    pub fn images() -> Vec<Shape> {
        let mut v = Vec::new();
        for (w, h) in [
            (1, 1),
            (1, 37),
            (37, 1),
            (2, 2),
            (3, 3),
            (31, 9),
            (33, 17),
            (85, 9),
            (84, 16),
            (65, 65),
            (170, 21),
        ] {
            v.extend(hard_shapes(w, h));
        }
        v.extend(random_images(97, 61, &[1, 4, 16], 0.125, 3));
        v.extend(random_images(173, 35, &[1, 4], 0.25, 9));
        v
    }

    /// Panics unless `labels` (0 = background) partitions `image` as the oracle does.
    pub fn check(shape: &Shape, connectivity: Connectivity, labels: Vec<u32>, what: &str) {
        let (oracle, _) = flood_fill(&shape.image, connectivity);
        let got = LabelImage {
            width: shape.image.width,
            height: shape.image.height,
            data: labels,
        };
        if let Err(e) = same_partition(&oracle, &got) {
            panic!("{what} {connectivity}-conn on {}: {e}", shape.name);
        }
    }

    /// Component count the way the kernels count it: pixels whose label is their own index + 1.
    pub fn roots(labels: &[u32]) -> usize {
        labels
            .iter()
            .enumerate()
            .filter(|(i, &l)| l == *i as u32 + 1)
            .count()
    }

    pub fn oracle_count(image: &BinaryImage, connectivity: Connectivity) -> usize {
        flood_fill(image, connectivity).1.len()
    }
}
