//! Memory a run needs against what this machine has: checked before any image is made.

use super::{ParsedArgs, PipelineScene};
use crate::ccl::{AlgorithmInfo, Backend, Backends};
use crate::error::{Error, Result};

/// Memory the run may use; `None` = unknown (not checked).
#[derive(Clone, Copy, Debug, Default)]
pub struct Limits {
    pub host_memory: Option<u64>,
    pub device_memory: Option<u64>,
}

impl Limits {
    /// MemAvailable of /proc/meminfo, and the GPU's total memory when one is open.
    pub fn of_this_machine(backends: &Backends) -> Limits {
        #[cfg(feature = "cuda")]
        let device_memory = backends
            .gpu()
            .ok()
            .map(|g| g.total_memory as u64)
            .filter(|&m| m > 0);
        #[cfg(not(feature = "cuda"))]
        let device_memory = {
            let _ = backends;
            None
        };
        Limits {
            host_memory: crate::frame::image::available_memory(),
            device_memory,
        }
    }
}

/// Host bytes per pixel of one CPU labeler at work (input 1 + labels 4 + scratch ≈ 4).
pub const CPU_BYTES_PER_PX: u64 = 9;
/// Device bytes per pixel of one GPU labeler (input, labels, segment/scratch buffers).
pub const CUDA_BYTES_PER_PX: u64 = 12;

/// Host bytes per pixel the pipeline holds besides the prepared frames: masks and levels in
/// the frame queue, one CPU labeler at work, a frame being thresholded.
pub const PIPELINE_BYTES_PER_PX: u64 = 16;

/// Memory per size. Throughput: one image, and one labeler per (connectivity, algorithm)
/// alive. Latency: every image of the size, one labeler at a time.
pub(super) fn check_memory(
    p: &ParsedArgs,
    selected: &[&AlgorithmInfo],
    limits: &Limits,
) -> Result<()> {
    let count = |backend: Backend| -> u64 {
        let algs = selected.iter().filter(|a| a.backend == backend);
        match p.latency {
            Some(_) => algs.count().min(1) as u64,
            None => algs
                .map(|a| p.connectivities.iter().filter(|c| a.supports(**c)).count() as u64)
                .sum(),
        }
    };
    let (n_cpu, n_cuda) = (count(Backend::Cpu), count(Backend::Cuda));
    let images_alive = match p.latency {
        Some(l) => l.source.distinct(p.densities.len(), p.granularities.len()),
        None => 1,
    };
    for size in &p.sizes {
        let px = size.pixels();
        let host = px * (images_alive + n_cpu * (CPU_BYTES_PER_PX - 1));
        if let Some(avail) = limits.host_memory.filter(|&a| host > a) {
            return Err(Error::Invalid(format!(
                "--sizes: {size} needs about {} of host memory (the image, and ~{} bytes/px × {n_cpu} CPU labeler(s){}) \
                 but {} is available; choose a smaller size",
                gib(host),
                CPU_BYTES_PER_PX - 1,
                if images_alive > 1 {
                    format!(", plus {images_alive} frames held for the latency run")
                } else {
                    String::new()
                },
                gib(avail)
            )));
        }
        let dev = px * CUDA_BYTES_PER_PX * n_cuda;
        if let Some(total) = limits.device_memory.filter(|&t| n_cuda > 0 && dev > t) {
            return Err(Error::Invalid(format!(
                "--sizes: {size} needs about {} of GPU memory ({} bytes/px × {n_cuda} CUDA \
                 labeler(s)) but the GPU has {}; choose a smaller size, fewer algorithms or \
                 one connectivity",
                gib(dev),
                CUDA_BYTES_PER_PX,
                gib(total)
            )));
        }
    }
    Ok(())
}

/// One `--pipeline` scene: its prepared frames and the pipeline on the host, and a GPU
/// labeler's buffers when a run uses CUDA (`cuda`).
pub(super) fn check_scene_memory(s: &PipelineScene, cuda: bool, limits: &Limits) -> Result<()> {
    let px = s.size.pixels();
    let host = px * (s.prepared as u64 + PIPELINE_BYTES_PER_PX);
    if let Some(avail) = limits.host_memory.filter(|&a| host > a) {
        return Err(Error::Invalid(format!(
            "--pipeline: {} at {} needs about {} of host memory ({} frames made before timing, \
             and ~{PIPELINE_BYTES_PER_PX} bytes/px for the pipeline) but {} is available; \
             choose smaller --sizes or fewer --frames",
            s.scene.name(),
            s.size,
            gib(host),
            s.prepared,
            gib(avail)
        )));
    }
    let dev = px * CUDA_BYTES_PER_PX;
    if let Some(total) = limits.device_memory.filter(|&t| cuda && dev > t) {
        return Err(Error::Invalid(format!(
            "--pipeline: {} at {} needs about {} of GPU memory but the GPU has {}; choose \
             smaller --sizes",
            s.scene.name(),
            s.size,
            gib(dev),
            gib(total)
        )));
    }
    Ok(())
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}
