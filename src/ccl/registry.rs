//! The backends this process can use and the constructors of the algorithms (`algorithms`
//! lists them).

use super::algorithms::{
    algorithm_info, algorithms, unsupported_connectivity, AlgorithmInfo, Backend,
};
#[cfg(feature = "cuda")]
use super::cuda;
use super::{cpu, Connectivity, Labeler};
use crate::error::{Error, Result};
use crate::frame::image::GrayImage;
use crate::tuning::Tuning;

/// What a frame asks of the labeler, which decides the default algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Job {
    /// Statistics only (`Want::Stats`).
    Stats,
    /// The label image too (`Want::Labels` or `Want::Both`).
    Labels,
    /// Statistics and grey-weighted (sub-pixel) centroids.
    WeightedStats,
}

/// The backend a user asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendChoice {
    /// CUDA when a usable GPU is found, else the CPU.
    #[default]
    Auto,
    Cpu,
    Cuda,
}

/// Which backends this process can use, found once at start-up, and the tuning they run with.
pub struct Backends {
    tuning: Tuning,
    #[cfg(feature = "cuda")]
    gpu: std::result::Result<std::sync::Arc<crate::gpu::Gpu>, String>,
    /// Page-locked buffers for grey frames going to the GPU (`stage_grey`).
    #[cfg(feature = "cuda")]
    grey_pool: Option<crate::gpu::staging::GreyStagingPool>,
}

impl Backends {
    /// `detect_tuned` with the default tuning.
    pub fn detect() -> Self {
        Self::detect_tuned(&Tuning::default())
    }

    /// Looks for a usable CUDA device (driver, NVRTC, a device, kernels that compile), opened
    /// with `tuning`'s GPU part. Never panics: a missing driver is recorded as the reason the
    /// CPU backend is used.
    pub fn detect_tuned(tuning: &Tuning) -> Self {
        #[cfg(feature = "cuda")]
        {
            let gpu = crate::gpu::Gpu::open(0, &tuning.gpu)
                .map(std::sync::Arc::new)
                // The reason alone: the messages around it say "CUDA backend unavailable".
                .map_err(|e| match e {
                    crate::error::Error::CudaUnavailable(why) => why,
                    other => other.to_string(),
                });
            let grey_pool = gpu
                .as_ref()
                .ok()
                .map(|g| crate::gpu::staging::GreyStagingPool::new(g.clone()));
            Self {
                tuning: tuning.clone(),
                gpu,
                grey_pool,
            }
        }
        #[cfg(not(feature = "cuda"))]
        Self {
            tuning: tuning.clone(),
        }
    }

    /// CPU only, without touching the GPU (tests, `--backend cpu`).
    pub fn cpu_only() -> Self {
        Self::cpu_only_tuned(&Tuning::default())
    }

    /// `cpu_only`, carrying `tuning` for the stages that read it (the pipeline's notices).
    pub fn cpu_only_tuned(tuning: &Tuning) -> Self {
        Self {
            tuning: tuning.clone(),
            #[cfg(feature = "cuda")]
            gpu: Err("not requested (--backend cpu)".into()),
            #[cfg(feature = "cuda")]
            grey_pool: None,
        }
    }

    /// The same backends with the GPU's work on a stream of their own (`Gpu::with_own_stream`),
    /// for one of several pipelines in a process: on the context's one default stream, each
    /// pipeline's uploads, kernels and downloads queued behind the others' and each of its waits
    /// waited for all of theirs. Without a GPU, the CPU's as they are.
    pub fn on_own_stream(&self) -> Result<Backends> {
        #[cfg(feature = "cuda")]
        {
            let gpu = match &self.gpu {
                Ok(gpu) => std::sync::Arc::new(gpu.with_own_stream()?),
                Err(why) => {
                    return Ok(Backends {
                        tuning: self.tuning.clone(),
                        gpu: Err(why.clone()),
                        grey_pool: None,
                    })
                }
            };
            Ok(Backends {
                tuning: self.tuning.clone(),
                grey_pool: Some(crate::gpu::staging::GreyStagingPool::new(gpu.clone())),
                gpu: Ok(gpu),
            })
        }
        #[cfg(not(feature = "cuda"))]
        {
            Ok(Backends {
                tuning: self.tuning.clone(),
            })
        }
    }

    /// The tuning these backends run with.
    pub fn tuning(&self) -> &Tuning {
        &self.tuning
    }

    /// A copy of `grey` in page-locked memory, for a GPU labeler to upload from without a
    /// copy of its own (`GreyInput::staged`); `None` without a GPU or when page-locked memory
    /// cannot be had (the labeler then stages the frame itself).
    pub fn stage_grey(&self, grey: &GrayImage) -> Option<crate::threshold::StagedGrey> {
        #[cfg(feature = "cuda")]
        {
            self.grey_pool.as_ref()?.stage(grey).ok()
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = grey;
            None
        }
    }

    /// What page-locks frame buffers for the GPU's DMA (`frame::page_lock`), for sources that
    /// reuse their buffers; `None` without a GPU.
    pub fn page_locker(&self) -> Option<std::sync::Arc<dyn crate::frame::page_lock::PageLocker>> {
        #[cfg(feature = "cuda")]
        {
            let gpu = self.gpu.as_ref().ok()?;
            Some(std::sync::Arc::new(
                crate::gpu::staging::HostRegistrar::new(gpu),
            ))
        }
        #[cfg(not(feature = "cuda"))]
        {
            None
        }
    }

    /// The reason CUDA cannot be used, or None when it can.
    pub fn cuda_unavailable_reason(&self) -> Option<String> {
        #[cfg(feature = "cuda")]
        {
            self.gpu.as_ref().err().cloned()
        }
        #[cfg(not(feature = "cuda"))]
        {
            Some("this build has no CUDA support (built without the `cuda` feature)".into())
        }
    }

    #[cfg(feature = "cuda")]
    pub fn gpu(&self) -> Result<&std::sync::Arc<crate::gpu::Gpu>> {
        self.gpu
            .as_ref()
            .map_err(|e| Error::CudaUnavailable(e.clone()))
    }

    /// A human-readable name of the device in use, e.g. "NVIDIA H100 80GB HBM3 (sm_90)".
    pub fn gpu_name(&self) -> Option<String> {
        #[cfg(feature = "cuda")]
        {
            self.gpu.as_ref().ok().map(|g| g.description())
        }
        #[cfg(not(feature = "cuda"))]
        {
            None
        }
    }

    /// Where the GPU's kernels came from (the kernel cache or NVRTC) and how long that took.
    pub fn gpu_kernels(&self) -> Option<String> {
        #[cfg(feature = "cuda")]
        {
            self.gpu.as_ref().ok().map(|g| g.kernels.clone())
        }
        #[cfg(not(feature = "cuda"))]
        {
            None
        }
    }

    pub fn is_available(&self, info: &AlgorithmInfo) -> bool {
        match info.backend {
            Backend::Cpu => true,
            Backend::Cuda => self.cuda_unavailable_reason().is_none(),
        }
    }

    /// Algorithms that can run here.
    pub fn available(&self) -> impl Iterator<Item = &'static AlgorithmInfo> + '_ {
        algorithms().iter().filter(|a| self.is_available(a))
    }

    /// Makes an instance of the named algorithm, checking it supports `connectivity`.
    pub fn create(&self, name: &str, connectivity: Connectivity) -> Result<Box<dyn Labeler>> {
        let info = algorithm_info(name)?;
        if !info.supports(connectivity) {
            return Err(unsupported_connectivity(info.name, connectivity));
        }
        if let Some(reason) = (info.backend == Backend::Cuda)
            .then(|| self.cuda_unavailable_reason())
            .flatten()
        {
            return Err(Error::CudaUnavailable(format!(
                "algorithm '{}' needs CUDA: {reason}",
                info.name
            )));
        }
        make(info.name, self)
    }

    /// The algorithm used when the user names none: the fastest one available for the job and
    /// the connectivity, as measured on the GPU (H100, 8192² and 1080p, docs/performance.md):
    /// statistics alone run fastest with `flsl_cdb` at both connectivities; label images and
    /// grey-weighted centroids with the HA family (`ha4w` at 4, `ha8` at 8), the only one that
    /// computes those centroids on the GPU.
    pub fn default_algorithm(
        &self,
        backend: Backend,
        connectivity: Connectivity,
        job: Job,
    ) -> &'static str {
        let preferred: &[&str] = match (backend, job) {
            (Backend::Cuda, Job::Stats) => &["flsl_cdb", "ha4w", "ha8", "ha4_64", "ha4"],
            (Backend::Cuda, Job::Labels | Job::WeightedStats) => &["ha4w", "ha8", "ha4_64", "ha4"],
            (Backend::Cpu, _) => &["lsl"],
        };
        preferred
            .iter()
            .filter_map(|n| algorithm_info(n).ok())
            .find(|a| a.supports(connectivity) && self.is_available(a))
            .map(|a| a.name)
            .unwrap_or("lsl")
    }
}

/// A new instance of the algorithm `name` (a name of `algorithms`).
#[cfg_attr(not(feature = "cuda"), allow(unused_variables))]
fn make(name: &str, b: &Backends) -> Result<Box<dyn Labeler>> {
    match name {
        "bfs" => Ok(Box::new(cpu::oracle::Oracle)),
        "lsl" => Ok(Box::new(cpu::lsl::Lsl::new())),
        #[cfg(feature = "cuda")]
        "ha4" => cuda::ha4::Ha4::create(b.gpu()?, cuda::ha4::Variant::Ha4),
        #[cfg(feature = "cuda")]
        "ha4_64" => cuda::ha4::Ha4::create(b.gpu()?, cuda::ha4::Variant::Ha4x64),
        #[cfg(feature = "cuda")]
        "ha4w" => cuda::ha4::Ha4::create(b.gpu()?, cuda::ha4::Variant::Words),
        #[cfg(feature = "cuda")]
        "ha8" => cuda::ha4::Ha4::create(b.gpu()?, cuda::ha4::Variant::Words8),
        #[cfg(feature = "cuda")]
        "naive" => cuda::ha4::Ha4::create(b.gpu()?, cuda::ha4::Variant::Naive),
        #[cfg(feature = "cuda")]
        "ha_cd" => cuda::ha4::Ha4::create(b.gpu()?, cuda::ha4::Variant::Cd),
        #[cfg(feature = "cuda")]
        "ha_otf" => cuda::ha4::Ha4::create(b.gpu()?, cuda::ha4::Variant::Otf),
        #[cfg(feature = "cuda")]
        "flsl" => cuda::flsl::Flsl::create(b.gpu()?, cuda::flsl::Variant::Flsl),
        #[cfg(feature = "cuda")]
        "flsl_otf" => cuda::flsl::Flsl::create(b.gpu()?, cuda::flsl::Variant::Otf),
        #[cfg(feature = "cuda")]
        "flsl_cd" => cuda::flsl::Flsl::create(b.gpu()?, cuda::flsl::Variant::Cd),
        #[cfg(feature = "cuda")]
        "flsl_cdb" => cuda::flsl::Flsl::create(b.gpu()?, cuda::flsl::Variant::CdBlock),
        #[cfg(feature = "cuda")]
        "dlp" => pixel_labeler(b, &cuda::dlp::BASELINE, |gpu| {
            Ok(Box::new(cuda::dlp::Dlp::new(gpu)?))
        }),
        #[cfg(feature = "cuda")]
        "komura" => pixel_labeler(b, &cuda::komura::BASELINE, |gpu| {
            Ok(Box::new(cuda::komura::Komura::new(gpu)?))
        }),
        #[cfg(feature = "cuda")]
        "shibata" => pixel_labeler(b, &cuda::shibata::BASELINE, |gpu| {
            Ok(Box::new(cuda::shibata::Shibata::new(gpu)?))
        }),
        #[cfg(feature = "cuda")]
        "playne" => pixel_labeler(b, &cuda::playne::BASELINE, |gpu| {
            Ok(Box::new(cuda::playne::Playne::new(gpu)?))
        }),
        #[cfg(feature = "cuda")]
        "bke" => pixel_labeler(b, &cuda::bke::BASELINE, |gpu| {
            Ok(Box::new(cuda::bke::Bke::new(gpu)?))
        }),
        _ => Err(Error::Invalid(format!(
            "algorithm '{name}' has no constructor"
        ))),
    }
}

/// A pixel-label baseline on the shared runner (`cuda::pixel`).
#[cfg(feature = "cuda")]
fn pixel_labeler(
    b: &Backends,
    baseline: &'static cuda::pixel::Baseline,
    algorithm: impl FnOnce(
        &std::sync::Arc<crate::gpu::Gpu>,
    ) -> Result<Box<dyn cuda::pixel::PixelAlgorithm>>,
) -> Result<Box<dyn Labeler>> {
    let gpu = b.gpu()?;
    cuda::pixel::PixelLabeler::create(gpu, baseline, algorithm(gpu)?)
}

impl AlgorithmInfo {
    /// Its labeler can label a mask already in device memory (a CuPy array, a PyTorch CUDA
    /// tensor; `cuda::device`).
    pub fn labels_device_memory(&self) -> bool {
        #[cfg(feature = "cuda")]
        return cuda::device::device_variant(self.name).is_some();
        #[cfg(not(feature = "cuda"))]
        return false;
    }
}

#[cfg(test)]
mod tests {
    use super::super::algorithms::ShapeSumsOn;
    use super::*;

    #[test]
    fn device_memory_labelers_are_the_flsl_family() {
        let names: Vec<_> = algorithms()
            .iter()
            .filter(|a| a.labels_device_memory())
            .map(|a| a.name)
            .collect();
        #[cfg(feature = "cuda")]
        {
            assert_eq!(names, ["flsl", "flsl_otf", "flsl_cd", "flsl_cdb"]);
            for name in super::super::cuda::device::device_algorithms() {
                let info = algorithm_info(name).unwrap();
                assert_eq!(info.backend, Backend::Cuda, "{name}");
                assert!(info.supports(Connectivity::Four) && info.supports(Connectivity::Eight));
            }
            let default = super::super::cuda::device::DEFAULT_DEVICE_ALGORITHM;
            assert!(algorithm_info(default).unwrap().labels_device_memory());
        }
        #[cfg(not(feature = "cuda"))]
        assert!(names.is_empty());
    }

    #[test]
    fn fused_shape_sums_are_the_flsl_family_but_otf() {
        let fused: Vec<_> = algorithms()
            .iter()
            .filter(|a| a.shape_sums == ShapeSumsOn::Fused)
            .map(|a| a.name)
            .collect();
        #[cfg(feature = "cuda")]
        assert_eq!(fused, ["flsl", "flsl_cd", "flsl_cdb"]);
        #[cfg(not(feature = "cuda"))]
        assert!(fused.is_empty());
        for a in algorithms().iter().filter(|a| a.backend == Backend::Cpu) {
            assert_eq!(a.shape_sums, ShapeSumsOn::Host, "{}", a.name);
        }
    }

    #[test]
    fn names_are_unique_and_lookup_is_case_insensitive() {
        let mut names: Vec<_> = algorithms().iter().map(|a| a.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), algorithms().len());
        assert_eq!(algorithm_info("BFS").unwrap().name, "bfs");
        let err = algorithm_info("nope").err().unwrap().to_string();
        assert!(err.contains("bfs"), "{err}");
    }

    #[test]
    fn cpu_only_has_no_cuda() {
        let b = Backends::cpu_only();
        assert!(b.cuda_unavailable_reason().is_some());
        assert!(b.available().all(|a| a.backend == Backend::Cpu));
    }
}
