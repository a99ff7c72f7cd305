//! The measurements: copy bandwidth, resident throughput, host-to-host frame latency.

use super::plan::{BenchPlan, LatencyPlan};
use super::progress::Progress;
use super::report::{
    mean_steps, BandwidthResult, DensityResult, LatencyResult, StepMs, ThroughputResult,
};
use super::spec::{LatencyFrames, Mode, Size};
use crate::ccl::{
    AlgorithmInfo, Backend, Backends, Connectivity, LabelRequest, Labeler, Mask, Want,
};
use crate::error::{Error, Result};
use crate::frame::image::BinaryImage;
use crate::frame::random_image::{generate, image_seed, RandomImageSpec};
use crate::source::synthetic::{MarkerScene, DEFAULT_SEED};
use crate::threshold;
use crate::threshold::spec::ThresholdSpec;
use rayon::prelude::*;
use std::collections::HashMap;
use std::time::Instant;

/// Bytes copied by the bandwidth measurements (larger than any last-level cache).
pub const COPY_BYTES: usize = 256 << 20;

/// A parallel memcpy over every rayon thread (the CPU labelers use them all), best of `repeat`,
/// in GB/s counting bytes read + bytes written.
pub fn measure_cpu_copy_bandwidth(bytes: usize, repeat: u32) -> f64 {
    let bytes = bytes.max(1 << 20);
    let src = vec![1u8; bytes];
    let mut dst = vec![0u8; bytes];
    let chunk = (bytes / (rayon::current_num_threads() * 4)).max(1 << 16);
    let copy = |dst: &mut [u8]| {
        dst.par_chunks_mut(chunk)
            .zip(src.par_chunks(chunk))
            .for_each(|(d, s)| d.copy_from_slice(s));
        std::hint::black_box(&dst[..]);
    };
    copy(&mut dst); // faults the pages in
    let mut best = f64::INFINITY;
    for _ in 0..repeat.max(1) {
        let t = Instant::now();
        copy(&mut dst);
        best = best.min(t.elapsed().as_secs_f64());
    }
    2.0 * bytes as f64 / best / 1e9
}

/// The ceilings of the backends in use: a CPU memcpy always (OpenCV and the CPU labelers), a
/// device-to-device copy when a CUDA algorithm runs or CuPy may.
pub fn measure_bandwidths(plan: &BenchPlan, backends: &Backends) -> Result<Vec<BandwidthResult>> {
    let repeat = plan.repeat.max(3);
    #[allow(unused_mut)]
    let mut out = vec![BandwidthResult {
        backend: "cpu".into(),
        method: format!("parallel memcpy, {} threads", rayon::current_num_threads()),
        bytes: COPY_BYTES as u64,
        repeat,
        gb_s: measure_cpu_copy_bandwidth(COPY_BYTES, repeat),
    }];
    let cuda_used = plan.algorithms.iter().any(|a| a.backend == Backend::Cuda)
        || plan
            .peers
            .as_ref()
            .is_some_and(|p| p.backends.contains(&"cuda"));
    #[cfg(feature = "cuda")]
    if cuda_used {
        if let Ok(gpu) = backends.gpu() {
            let gb_s = crate::gpu::measure_copy_bandwidth(gpu, COPY_BYTES, repeat)
                .map_err(|e| Error::context("measuring the device-to-device copy bandwidth", e))?;
            out.push(BandwidthResult {
                backend: "cuda".into(),
                method: "device-to-device copy, CUDA events".into(),
                bytes: COPY_BYTES as u64,
                repeat,
                gb_s,
            });
        }
    }
    #[cfg(not(feature = "cuda"))]
    let _ = (cuda_used, backends);
    Ok(out)
}

fn make_image(
    plan_seed: u32,
    size: Size,
    density: f64,
    granularity: u32,
) -> Result<(BinaryImage, u32)> {
    let seed = image_seed(plan_seed, density, granularity);
    let img = generate(&RandomImageSpec {
        width: size.width,
        height: size.height,
        density,
        granularity,
        seed,
    })?;
    Ok((img, seed))
}

/// How long the GPU is kept busy before the first timing on a new image.
const GPU_WARM_UP: std::time::Duration = std::time::Duration::from_millis(50);

/// The GPU idles while the CPU makes the next image (about a second at 8192²) and its clocks drop;
/// without this, the first algorithm timed on each image ran up to 2× slower (seen on an H100 on
/// the empty image). Runs the first GPU labeler untimed on the image for GPU_WARM_UP.
fn warm_up_gpu(
    labelers: &mut [(Connectivity, &'static AlgorithmInfo, Box<dyn Labeler>)],
    image: &BinaryImage,
    want: Want,
) -> Result<()> {
    let Some((conn, info, labeler)) = labelers
        .iter_mut()
        .find(|(_, info, _)| info.backend == Backend::Cuda)
    else {
        return Ok(());
    };
    let start = Instant::now();
    while start.elapsed() < GPU_WARM_UP {
        labeler
            .time_resident(LabelRequest::new(image, *conn, want), 20)
            .map_err(|e| Error::context(format!("warming up the GPU with {}", info.name), e))?;
    }
    Ok(())
}

/// The papers' protocol: every (size, g, d) image made once, every connectivity, algorithm and
/// mode on it, best of `repeat` resident runs each. Labelers live for one size.
pub fn run_throughput(
    plan: &BenchPlan,
    backends: &Backends,
    progress: &mut Progress,
) -> Result<Vec<ThroughputResult>> {
    let mut rows: Vec<ThroughputResult> = Vec::new();
    let mut index: HashMap<(&'static str, u8, Mode, Size, u32), usize> = HashMap::new();
    for &size in &plan.sizes {
        // One instance per (connectivity, algorithm), kept for every image of this size.
        let mut labelers: Vec<(Connectivity, &'static AlgorithmInfo, Box<dyn Labeler>)> =
            Vec::new();
        for &conn in &plan.connectivities {
            for info in plan.algorithms_for(conn) {
                labelers.push((conn, info, backends.create(info.name, conn)?));
            }
        }
        for &g in &plan.granularities {
            for &d in &plan.densities {
                let (image, seed) = make_image(plan.seed, size, d, g)?;
                warm_up_gpu(&mut labelers, &image, plan.modes[0].want())?;
                for (conn, info, labeler) in labelers.iter_mut() {
                    let (conn, info) = (*conn, *info);
                    for &mode in &plan.modes {
                        let what = format!(
                            "{} {} {size} {conn}-conn g={g} d={d}",
                            info.name,
                            mode.as_str()
                        );
                        progress.message(&what);
                        let t = labeler
                            .time_resident(
                                LabelRequest::new(&image, conn, mode.want()),
                                plan.repeat,
                            )
                            .map_err(|e| Error::context(format!("benchmarking {what}"), e))?;
                        let key = (info.name, conn.number(), mode, size, g);
                        let i = *index.entry(key).or_insert_with(|| {
                            rows.push(ThroughputResult {
                                algorithm: info.name.to_string(),
                                backend: info.backend.to_string(),
                                source: "markerscope".into(),
                                connectivity: conn.number(),
                                mode,
                                width: size.width,
                                height: size.height,
                                granularity: g,
                                repeat: plan.repeat,
                                per_density: Vec::new(),
                                mean_gpx_s: 0.0,
                                mean_ms: 0.0,
                                bytes_per_px: 0.0,
                                percent_of_ceiling: None,
                                steps: Vec::new(),
                            });
                            rows.len() - 1
                        });
                        rows[i].per_density.push(DensityResult {
                            density: d,
                            seed,
                            best_ms: t.total_ms,
                            gpx_s: 0.0,
                            count: t.count as u64,
                            steps: t.steps.iter().map(StepMs::from).collect(),
                        });
                        progress.inc(1);
                    }
                }
            }
        }
    }
    Ok(rows)
}

/// The frames a latency run of `size` cycles over: the random images in (g, d) order, or the
/// first frames of the demo scene thresholded as the window does (the default threshold).
pub fn latency_frames(
    plan: &BenchPlan,
    size: Size,
    source: LatencyFrames,
) -> Result<Vec<BinaryImage>> {
    match source {
        LatencyFrames::Random => {
            let mut images = Vec::new();
            for &g in &plan.granularities {
                for &d in &plan.densities {
                    images.push(make_image(plan.seed, size, d, g)?.0);
                }
            }
            Ok(images)
        }
        LatencyFrames::Demo => {
            let scene = MarkerScene::new(size.width, size.height, DEFAULT_SEED)?;
            (0..LatencyFrames::DEMO_FRAMES as u64)
                .into_par_iter()
                .map(|f| threshold::apply(&scene.render(f), &ThresholdSpec::default(), false))
                .collect()
        }
    }
}

/// Where a latency run's mask comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LatencyUpload {
    /// Bytes in pageable memory.
    Bytes,
    /// Bit-packed, in pageable memory.
    Packed,
    /// Bit-packed, in page-locked memory (as the capture thread packs it).
    PackedPageLocked,
}

impl LatencyUpload {
    /// The uploads an algorithm is timed with. GPU algorithms: bytes, the bit-packed mask (8×
    /// less PCIe traffic) in pageable memory, as a library caller gives it, and in page-locked
    /// memory, as the capture thread gives it (`frame::page_lock`: no copy before the DMA).
    fn of(backend: Backend) -> &'static [LatencyUpload] {
        match backend {
            Backend::Cuda => &[
                LatencyUpload::Bytes,
                LatencyUpload::Packed,
                LatencyUpload::PackedPageLocked,
            ],
            Backend::Cpu => &[LatencyUpload::Bytes],
        }
    }

    /// In the progress line and error context.
    fn suffix(self) -> &'static str {
        match self {
            LatencyUpload::Bytes => "",
            LatencyUpload::Packed => " packed",
            LatencyUpload::PackedPageLocked => " packed page-locked",
        }
    }

    /// What one frame does, for the report (`how`: the launch mode).
    fn frame_work(self, backend: Backend, how: &str) -> String {
        match (backend, self) {
            (Backend::Cuda, LatencyUpload::Bytes) => {
                format!("upload bytes + label + analyze + download stats{how}")
            }
            (Backend::Cuda, LatencyUpload::Packed) => {
                format!("upload packed bits + label + analyze + download stats{how}")
            }
            (Backend::Cuda, LatencyUpload::PackedPageLocked) => {
                format!("upload packed bits (page-locked) + label + analyze + download stats{how}")
            }
            (Backend::Cpu, _) => "label + analyze (host memory)".into(),
        }
    }
}

/// Host-to-host latency: `label(frame, conn, Want::Stats)` wall time per frame (upload, label +
/// analyze, download of the statistics for GPU algorithms), frames cycling over
/// `latency_frames`, after `warmup` untimed frames.
pub fn run_latency(
    plan: &BenchPlan,
    backends: &Backends,
    progress: &mut Progress,
) -> Result<Vec<LatencyResult>> {
    let Some(lat) = plan.latency else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for &size in &plan.sizes {
        let images = latency_frames(plan, size, lat.source)?;
        for &conn in &plan.connectivities {
            for info in plan.algorithms_for(conn) {
                // Each upload with plain launches, and with one CUDA graph per frame where the
                // algorithm has graphs.
                let modes = LatencyUpload::of(info.backend)
                    .iter()
                    .flat_map(|&upload| [(upload, false), (upload, true)]);
                for (upload, graphs) in modes {
                    let run = LatencyRun {
                        info,
                        size,
                        conn,
                        upload,
                        graphs,
                        lat,
                    };
                    if let Some(result) = run.time(&images, backends, progress)? {
                        out.push(result);
                    }
                }
            }
        }
    }
    Ok(out)
}

/// One algorithm, connectivity, upload and launch mode of the latency run.
struct LatencyRun {
    info: &'static AlgorithmInfo,
    size: Size,
    conn: Connectivity,
    upload: LatencyUpload,
    graphs: bool,
    lat: LatencyPlan,
}

impl LatencyRun {
    /// Times the frames; None when this machine or algorithm has no such mode (no page-locker,
    /// no CUDA graphs).
    fn time(
        &self,
        images: &[BinaryImage],
        backends: &Backends,
        progress: &mut Progress,
    ) -> Result<Option<LatencyResult>> {
        let (info, size, conn, upload, lat) =
            (self.info, self.size, self.conn, self.upload, self.lat);
        let locker = match upload {
            LatencyUpload::PackedPageLocked => match backends.page_locker() {
                Some(locker) => Some(locker),
                None => return Ok(None),
            },
            _ => None,
        };
        let mut labeler = backends.create(info.name, conn)?;
        let has_graphs = labeler.set_cuda_graphs(self.graphs).is_some();
        if self.graphs && !has_graphs {
            return Ok(None);
        }
        let how = match (has_graphs, self.graphs) {
            (false, _) => "",
            (true, false) => ", plain launches",
            (true, true) => ", one CUDA graph",
        };
        let what = format!(
            "{} latency {size} {conn}-conn{}{how}",
            info.name,
            upload.suffix()
        );
        progress.message(&what);
        let n = images.len();
        let packed = upload != LatencyUpload::Bytes;
        let packed_images: Vec<_> = if packed {
            images
                .iter()
                .map(|i| {
                    let mut p = i.pack();
                    if let Some(locker) = &locker {
                        p.lock(locker.as_ref());
                    }
                    p
                })
                .collect()
        } else {
            Vec::new()
        };
        let frame = |i: usize| -> Result<(f64, Vec<StepMs>, u32)> {
            let t = Instant::now();
            let mask = if packed {
                Mask::Packed(&packed_images[i % n])
            } else {
                Mask::Bytes(&images[i % n])
            };
            let out = labeler.label_mask(LabelRequest::new(mask, conn, Want::Stats));
            let ms = t.elapsed().as_secs_f64() * 1e3;
            let out = out.map_err(|e| Error::context(format!("{what}, frame {i}"), e))?;
            let steps = out.timings.iter().map(StepMs::from).collect();
            Ok((ms, steps, out.count))
        };
        let TimedFrames {
            ms: frame_ms,
            steps: mut frame_steps,
            components,
        } = time_frames(lat, progress, frame)?;
        let steps = mean_steps(frame_steps.iter().map(Vec::as_slice), frame_ms.len());
        let median_frame = median_frame(&frame_ms);
        let median_frame_ms = median_frame.map(|i| frame_ms[i]);
        let median_frame_steps = median_frame
            .map(|i| std::mem::take(&mut frame_steps[i]))
            .unwrap_or_default();
        Ok(Some(LatencyResult {
            algorithm: info.name.to_string(),
            backend: info.backend.to_string(),
            source: "markerscope".into(),
            connectivity: conn.number(),
            width: size.width,
            height: size.height,
            what: upload.frame_work(info.backend, how),
            warmup: lat.warmup,
            images: n as u32,
            frame_ms,
            steps,
            median_frame_ms,
            median_frame_steps,
            mean_components: Some(components as f64 / lat.frames as f64),
            // Filled in by `summarize`.
            ..LatencyResult::default()
        }))
    }
}

/// Each timed frame's wall time (ms) and steps, and the components of them all.
struct TimedFrames {
    ms: Vec<f64>,
    steps: Vec<Vec<StepMs>>,
    components: u64,
}

/// `frame(i)` for the warm-up frames, then for the timed ones.
fn time_frames(
    lat: LatencyPlan,
    progress: &mut Progress,
    mut frame: impl FnMut(usize) -> Result<(f64, Vec<StepMs>, u32)>,
) -> Result<TimedFrames> {
    for i in 0..lat.warmup as usize {
        frame(i)?;
        progress.inc(1);
    }
    let mut timed = TimedFrames {
        ms: Vec::with_capacity(lat.frames as usize),
        steps: Vec::with_capacity(lat.frames as usize),
        components: 0,
    };
    for i in 0..lat.frames as usize {
        let (ms, steps, count) = frame(i)?;
        timed.ms.push(ms);
        timed.steps.push(steps);
        timed.components += count as u64;
        progress.inc(1);
    }
    Ok(timed)
}

/// The index of a median frame: the lower middle one in order of wall time (None without
/// frames). Its step times add up to its wall time with the rest, which the means of a few very
/// dense frames do not describe.
fn median_frame(frame_ms: &[f64]) -> Option<usize> {
    let mut order: Vec<usize> = (0..frame_ms.len()).collect();
    order.sort_by(|&a, &b| frame_ms[a].total_cmp(&frame_ms[b]));
    order.get(frame_ms.len().saturating_sub(1) / 2).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_frame_is_the_lower_middle_by_time() {
        assert_eq!(median_frame(&[]), None);
        assert_eq!(median_frame(&[5.0]), Some(0));
        assert_eq!(median_frame(&[3.0, 1.0, 2.0]), Some(2));
        assert_eq!(median_frame(&[4.0, 1.0, 3.0, 2.0]), Some(3));
    }
}
