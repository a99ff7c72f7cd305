//! The algorithm registry: every algorithm by name, what it supports, and how to make one.

use super::{cpu, Connectivity, Labeler};
use crate::error::{Error, Result};
use crate::frame::image::GrayImage;
use crate::tuning::Tuning;
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Backend {
    Cpu,
    Cuda,
}

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

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Backend::Cpu => "cpu",
            Backend::Cuda => "cuda",
        })
    }
}

const BOTH: &[Connectivity] = &[Connectivity::Four, Connectivity::Eight];
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
const FOUR: &[Connectivity] = &[Connectivity::Four];
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
const EIGHT: &[Connectivity] = &[Connectivity::Eight];

pub struct AlgorithmInfo {
    pub name: &'static str,
    pub backend: Backend,
    pub connectivities: &'static [Connectivity],
    pub summary: &'static str,
    /// The reference everything is checked against (not checked against itself).
    pub is_oracle: bool,
    /// Its labeler thresholds a grey frame where it runs (`Labeler::label_grey`), so the
    /// pipeline hands it the grey frame instead of a mask.
    pub thresholds_grey: bool,
    /// Its labeler computes sub-pixel centroids on the device (`label_weighted`, and
    /// `label_grey` with centroids asked for); the others compute them on the host.
    pub subpixel_on_device: bool,
    /// Where its `label_shapes` sums the shape descriptors.
    pub shape_sums: ShapeSumsOn,
    make: fn(&Backends) -> Result<Box<dyn Labeler>>,
}

/// Where an algorithm's `Labeler::label_shapes` sums the shape descriptors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum ShapeSumsOn {
    /// Over the label image on the host (`label_shapes_on_host`).
    Host,
    /// Over the label image on the device, a pass after the labeling.
    DeviceLabels,
    /// In the labeling's own feature pass, from the runs and the mask (no label image); sub-pixel
    /// weights and frames with a side above 65536 go through the host.
    Fused,
}

impl AlgorithmInfo {
    pub fn supports(&self, c: Connectivity) -> bool {
        self.connectivities.contains(&c)
    }

    /// Its labeler can label a mask already in device memory (a CuPy array, a PyTorch CUDA
    /// tensor; `cuda::device`).
    pub fn labels_device_memory(&self) -> bool {
        #[cfg(feature = "cuda")]
        return super::cuda::device::device_variant(self.name).is_some();
        #[cfg(not(feature = "cuda"))]
        return false;
    }
}

static ALGORITHMS: &[AlgorithmInfo] = &[
    AlgorithmInfo {
        name: "bfs",
        backend: Backend::Cpu,
        connectivities: BOTH,
        summary: "breadth-first flood fill; the slow, obviously correct oracle",
        is_oracle: true,
        thresholds_grey: false,
        subpixel_on_device: false,
        shape_sums: ShapeSumsOn::Host,
        make: |_| Ok(Box::new(cpu::oracle::Oracle)),
    },
    AlgorithmInfo {
        name: "lsl",
        backend: Backend::Cpu,
        connectivities: BOTH,
        summary: "run-based (Light Speed Labeling family), multithreaded over strips; the CPU backend",
        is_oracle: false,
        thresholds_grey: false,
        subpixel_on_device: false,
        shape_sums: ShapeSumsOn::Host,
        make: |_| Ok(Box::new(cpu::lsl::Lsl::new())),
    },
    #[cfg(feature = "cuda")]
    AlgorithmInfo {
        name: "ha4",
        backend: Backend::Cuda,
        connectivities: FOUR,
        summary: "Hennequin HA4: warp-per-row strip labeling of segments, border merge, segment-based analysis",
        is_oracle: false,
        thresholds_grey: true,
        subpixel_on_device: true,
        shape_sums: ShapeSumsOn::DeviceLabels,
        make: |b| super::cuda::ha4::Ha4::create(b.gpu()?, super::cuda::ha4::Variant::Ha4),
    },
    #[cfg(feature = "cuda")]
    AlgorithmInfo {
        name: "ha4_64",
        backend: Backend::Cuda,
        connectivities: FOUR,
        summary: "HA4 with two pixels per thread and 64-bit segment masks",
        is_oracle: false,
        thresholds_grey: true,
        subpixel_on_device: true,
        shape_sums: ShapeSumsOn::DeviceLabels,
        make: |b| super::cuda::ha4::Ha4::create(b.gpu()?, super::cuda::ha4::Variant::Ha4x64),
    },
    #[cfg(feature = "cuda")]
    AlgorithmInfo {
        name: "ha4w",
        backend: Backend::Cuda,
        connectivities: FOUR,
        summary: "HA4 with one 32-bit mask word (32 pixels) per lane and aggregated feature atomics",
        is_oracle: false,
        thresholds_grey: true,
        subpixel_on_device: true,
        shape_sums: ShapeSumsOn::DeviceLabels,
        make: |b| super::cuda::ha4::Ha4::create(b.gpu()?, super::cuda::ha4::Variant::Words),
    },
    #[cfg(feature = "cuda")]
    AlgorithmInfo {
        name: "ha8",
        backend: Backend::Cuda,
        connectivities: EIGHT,
        summary: "HA for 8-connectivity: ha4w's word-per-lane segments, rows merged where segments overlap or touch diagonally",
        is_oracle: false,
        thresholds_grey: true,
        subpixel_on_device: true,
        shape_sums: ShapeSumsOn::DeviceLabels,
        make: |b| super::cuda::ha4::Ha4::create(b.gpu()?, super::cuda::ha4::Variant::Words8),
    },
    #[cfg(feature = "cuda")]
    AlgorithmInfo {
        name: "naive",
        backend: Backend::Cuda,
        connectivities: BOTH,
        summary: "naive CCA baseline: ha4w/ha8 labels, then one set of feature atomics per foreground pixel",
        is_oracle: false,
        thresholds_grey: true,
        subpixel_on_device: true,
        shape_sums: ShapeSumsOn::DeviceLabels,
        make: |b| super::cuda::ha4::Ha4::create(b.gpu()?, super::cuda::ha4::Variant::Naive),
    },
    #[cfg(feature = "cuda")]
    AlgorithmInfo {
        name: "ha_cd",
        backend: Backend::Cuda,
        connectivities: BOTH,
        summary: "HA+CD: ha4w/ha8 labeling, segment features through conflict detection (one atomic per component per warp step)",
        is_oracle: false,
        thresholds_grey: true,
        subpixel_on_device: true,
        shape_sums: ShapeSumsOn::DeviceLabels,
        make: |b| super::cuda::ha4::Ha4::create(b.gpu()?, super::cuda::ha4::Variant::Cd),
    },
    #[cfg(feature = "cuda")]
    AlgorithmInfo {
        name: "ha_otf",
        backend: Backend::Cuda,
        connectivities: BOTH,
        summary: "HA+OTF: ha4w/ha8 labeling where each segment's features move to the new root with every label merge; no feature pass",
        is_oracle: false,
        thresholds_grey: true,
        subpixel_on_device: true,
        shape_sums: ShapeSumsOn::DeviceLabels,
        make: |b| super::cuda::ha4::Ha4::create(b.gpu()?, super::cuda::ha4::Variant::Otf),
    },
    #[cfg(feature = "cuda")]
    AlgorithmInfo {
        name: "flsl",
        backend: Backend::Cuda,
        connectivities: BOTH,
        summary: "FLSL: full runs found by compress-store, one thread per run for labeling and features",
        is_oracle: false,
        thresholds_grey: true,
        subpixel_on_device: false,
        shape_sums: ShapeSumsOn::Fused,
        make: |b| super::cuda::flsl::Flsl::create(b.gpu()?, super::cuda::flsl::Variant::Flsl),
    },
    #[cfg(feature = "cuda")]
    AlgorithmInfo {
        name: "flsl_otf",
        backend: Backend::Cuda,
        connectivities: BOTH,
        summary: "FLSL+OTF: FLSL with features merged on the fly as labels merge (no accumulation pass)",
        is_oracle: false,
        thresholds_grey: true,
        subpixel_on_device: false,
        shape_sums: ShapeSumsOn::Host,
        make: |b| super::cuda::flsl::Flsl::create(b.gpu()?, super::cuda::flsl::Variant::Otf),
    },
    #[cfg(feature = "cuda")]
    AlgorithmInfo {
        name: "flsl_cd",
        backend: Backend::Cuda,
        connectivities: BOTH,
        summary: "FLSL+CD: FLSL with conflict detection (match_any, one atomic per component per warp)",
        is_oracle: false,
        thresholds_grey: true,
        subpixel_on_device: false,
        shape_sums: ShapeSumsOn::Fused,
        make: |b| super::cuda::flsl::Flsl::create(b.gpu()?, super::cuda::flsl::Variant::Cd),
    },
    #[cfg(feature = "cuda")]
    AlgorithmInfo {
        name: "flsl_cdb",
        backend: Backend::Cuda,
        connectivities: BOTH,
        summary: "FLSL+CD with a shared-memory table per block of rows: one atomic per component per block",
        is_oracle: false,
        thresholds_grey: true,
        subpixel_on_device: false,
        shape_sums: ShapeSumsOn::Fused,
        make: |b| super::cuda::flsl::Flsl::create(b.gpu()?, super::cuda::flsl::Variant::CdBlock),
    },
    #[cfg(feature = "cuda")]
    AlgorithmInfo {
        name: "dlp",
        backend: Backend::Cuda,
        connectivities: BOTH,
        summary: "Cabaret DLP-GPU: shared-memory tiles (DLP-SR, DLP-R, atomicRUF), south/east border merge, relabel",
        is_oracle: false,
        thresholds_grey: false,
        subpixel_on_device: false,
        shape_sums: ShapeSumsOn::Host,
        make: |b| {
            let gpu = b.gpu()?;
            super::cuda::pixel::PixelLabeler::create(gpu, Box::new(super::cuda::dlp::Dlp::new(gpu)?))
        },
    },
    #[cfg(feature = "cuda")]
    AlgorithmInfo {
        name: "komura",
        backend: Backend::Cuda,
        connectivities: BOTH,
        summary: "Komura label reduction: lowest-neighbour init, pointer jumping, atomicMin reduction",
        is_oracle: false,
        thresholds_grey: false,
        subpixel_on_device: false,
        shape_sums: ShapeSumsOn::Host,
        make: |b| {
            let gpu = b.gpu()?;
            super::cuda::pixel::PixelLabeler::create(gpu, Box::new(super::cuda::komura::Komura::new(gpu)?))
        },
    },
    #[cfg(feature = "cuda")]
    AlgorithmInfo {
        name: "shibata",
        backend: Backend::Cuda,
        connectivities: BOTH,
        summary: "Shibata fastCCL: iterative min + pointer-chasing passes until no label changes (one step per pass)",
        is_oracle: false,
        thresholds_grey: false,
        subpixel_on_device: false,
        shape_sums: ShapeSumsOn::Host,
        make: |b| {
            let gpu = b.gpu()?;
            super::cuda::pixel::PixelLabeler::create(gpu, Box::new(super::cuda::shibata::Shibata::new(gpu)?))
        },
    },
    #[cfg(feature = "cuda")]
    AlgorithmInfo {
        name: "playne",
        backend: Backend::Cuda,
        connectivities: FOUR,
        summary: "Playne & Hawick block equivalence (CV-CUDA's): shared-memory tiles, border label reduction, resolve",
        is_oracle: false,
        thresholds_grey: false,
        subpixel_on_device: false,
        shape_sums: ShapeSumsOn::Host,
        make: |b| {
            let gpu = b.gpu()?;
            super::cuda::pixel::PixelLabeler::create(gpu, Box::new(super::cuda::playne::Playne::new(gpu)?))
        },
    },
    #[cfg(feature = "cuda")]
    AlgorithmInfo {
        name: "bke",
        backend: Backend::Cuda,
        connectivities: EIGHT,
        summary: "Allegretti BKE (OpenCV CUDA's): Komura equivalence on 2x2 blocks",
        is_oracle: false,
        thresholds_grey: false,
        subpixel_on_device: false,
        shape_sums: ShapeSumsOn::Host,
        make: |b| {
            let gpu = b.gpu()?;
            super::cuda::pixel::PixelLabeler::create(gpu, Box::new(super::cuda::bke::Bke::new(gpu)?))
        },
    },
];

/// Every algorithm compiled into this build, available or not.
pub fn algorithms() -> &'static [AlgorithmInfo] {
    ALGORITHMS
}

pub fn algorithm_info(name: &str) -> Result<&'static AlgorithmInfo> {
    ALGORITHMS
        .iter()
        .find(|a| a.name.eq_ignore_ascii_case(name))
        .ok_or_else(|| Error::UnknownAlgorithm {
            name: name.to_string(),
            available: ALGORITHMS
                .iter()
                .map(|a| a.name)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// The error for `algorithm` asked to label with a connectivity it lacks; it names the
/// algorithms that do support it.
pub fn unsupported_connectivity(algorithm: &str, connectivity: Connectivity) -> Error {
    Error::UnsupportedConnectivity {
        algorithm: algorithm.to_string(),
        connectivity: connectivity.number(),
        supported: ALGORITHMS
            .iter()
            .filter(|a| a.supports(connectivity))
            .map(|a| a.name)
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// Which backends this process can use, found once at start-up, and the tuning they run with.
pub struct Backends {
    tuning: Tuning,
    #[cfg(feature = "cuda")]
    gpu: std::result::Result<std::sync::Arc<super::cuda::Gpu>, String>,
    /// Page-locked buffers for grey frames going to the GPU (`stage_grey`).
    #[cfg(feature = "cuda")]
    grey_pool: Option<super::cuda::staging::GreyStagingPool>,
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
            let gpu = super::cuda::Gpu::open(0, &tuning.gpu)
                .map(std::sync::Arc::new)
                // The reason alone: the messages around it say "CUDA backend unavailable".
                .map_err(|e| match e {
                    crate::error::Error::CudaUnavailable(why) => why,
                    other => other.to_string(),
                });
            let grey_pool = gpu
                .as_ref()
                .ok()
                .map(|g| super::cuda::staging::GreyStagingPool::new(g.clone()));
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

    /// The tuning these backends run with.
    pub fn tuning(&self) -> &Tuning {
        &self.tuning
    }

    /// A copy of `grey` in page-locked memory, for a GPU labeler to upload from without a
    /// copy of its own (`GreyInput::staged`); `None` without a GPU or when page-locked memory
    /// cannot be had (the labeler then stages the frame itself).
    pub fn stage_grey(&self, grey: &GrayImage) -> Option<super::StagedGrey> {
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
                super::cuda::staging::HostRegistrar::new(gpu),
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
    pub fn gpu(&self) -> Result<&std::sync::Arc<super::cuda::Gpu>> {
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
        ALGORITHMS.iter().filter(|a| self.is_available(a))
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
        (info.make)(self)
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

#[cfg(test)]
mod tests {
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
