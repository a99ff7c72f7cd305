//! The algorithms: every one by name, what it supports and where it does which part of the
//! work. Their constructors are in `registry`.

use super::Connectivity;
use crate::error::{Error, Result};
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Backend {
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
    /// Its labeler labels the grey frames of a frame set as one image
    /// (`Labeler::label_grey_set`), so that a run of several sources hands it their frames
    /// together.
    pub frame_sets: bool,
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

    /// A CPU algorithm: both connectivities, the grey frame thresholded and the centroids and
    /// shape sums computed by the caller on the host.
    const fn cpu(name: &'static str, summary: &'static str) -> Self {
        AlgorithmInfo {
            name,
            backend: Backend::Cpu,
            connectivities: BOTH,
            summary,
            is_oracle: false,
            thresholds_grey: false,
            subpixel_on_device: false,
            shape_sums: ShapeSumsOn::Host,
            frame_sets: false,
        }
    }

    /// A CUDA algorithm that labels a mask, with the same defaults as `cpu`.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    const fn cuda(
        name: &'static str,
        connectivities: &'static [Connectivity],
        summary: &'static str,
    ) -> Self {
        AlgorithmInfo {
            backend: Backend::Cuda,
            connectivities,
            ..Self::cpu(name, summary)
        }
    }

    /// One of the HA family: thresholds the grey frame, computes the sub-pixel centroids and
    /// sums the shape descriptors over the label image on the device.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    const fn ha(
        name: &'static str,
        connectivities: &'static [Connectivity],
        summary: &'static str,
    ) -> Self {
        AlgorithmInfo {
            thresholds_grey: true,
            subpixel_on_device: true,
            shape_sums: ShapeSumsOn::DeviceLabels,
            frame_sets: true,
            ..Self::cuda(name, connectivities, summary)
        }
    }

    /// Labels each frame of a set alone (its own analysis stage reads one frame's pixels).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    const fn frames_alone(self) -> Self {
        AlgorithmInfo {
            frame_sets: false,
            ..self
        }
    }

    /// One of the FLSL family: both connectivities, thresholds the grey frame and sums the
    /// shape descriptors in its feature pass (`shape_sums_on` says otherwise).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    const fn flsl(name: &'static str, summary: &'static str) -> Self {
        AlgorithmInfo {
            thresholds_grey: true,
            shape_sums: ShapeSumsOn::Fused,
            ..Self::cuda(name, BOTH, summary)
        }
    }

    /// The reference everything else is checked against.
    const fn oracle(self) -> Self {
        AlgorithmInfo {
            is_oracle: true,
            ..self
        }
    }

    /// Its shape sums are made `on` another side than its family's.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    const fn shape_sums_on(self, on: ShapeSumsOn) -> Self {
        AlgorithmInfo {
            shape_sums: on,
            ..self
        }
    }
}

static ALGORITHMS: &[AlgorithmInfo] = &[
    AlgorithmInfo::cpu("bfs", "breadth-first flood fill; the slow, obviously correct oracle").oracle(),
    AlgorithmInfo::cpu("lsl", "run-based (Light Speed Labeling family), multithreaded over strips; the CPU backend"),
    #[cfg(feature = "cuda")]
    AlgorithmInfo::ha(
        "ha4",
        FOUR,
        "Hennequin HA4: warp-per-row strip labeling of segments, border merge, segment-based analysis",
    ),
    #[cfg(feature = "cuda")]
    AlgorithmInfo::ha(
        "ha4_64",
        FOUR,
        "HA4 with two pixels per thread and 64-bit segment masks",
    ),
    #[cfg(feature = "cuda")]
    AlgorithmInfo::ha(
        "ha4w",
        FOUR,
        "HA4 with one 32-bit mask word (32 pixels) per lane and aggregated feature atomics",
    ),
    #[cfg(feature = "cuda")]
    AlgorithmInfo::ha(
        "ha8",
        EIGHT,
        "HA for 8-connectivity: ha4w's word-per-lane segments, rows merged where segments overlap or touch diagonally",
    ),
    #[cfg(feature = "cuda")]
    AlgorithmInfo::ha(
        "naive",
        BOTH,
        "naive CCA baseline: ha4w/ha8 labels, then one set of feature atomics per foreground pixel",
    )
    .frames_alone(),
    #[cfg(feature = "cuda")]
    AlgorithmInfo::ha(
        "ha_cd",
        BOTH,
        "HA+CD: ha4w/ha8 labeling, segment features through conflict detection (one atomic per component per warp step)",
    ),
    #[cfg(feature = "cuda")]
    AlgorithmInfo::ha(
        "ha_otf",
        BOTH,
        "HA+OTF: ha4w/ha8 labeling where each segment's features move to the new root with every label merge; no feature pass",
    ),
    #[cfg(feature = "cuda")]
    AlgorithmInfo::flsl("flsl", "FLSL: full runs found by compress-store, one thread per run for labeling and features"),
    #[cfg(feature = "cuda")]
    AlgorithmInfo::flsl("flsl_otf", "FLSL+OTF: FLSL with features merged on the fly as labels merge (no accumulation pass)").shape_sums_on(ShapeSumsOn::Host),
    #[cfg(feature = "cuda")]
    AlgorithmInfo::flsl("flsl_cd", "FLSL+CD: FLSL with conflict detection (match_any, one atomic per component per warp)"),
    #[cfg(feature = "cuda")]
    AlgorithmInfo::flsl("flsl_cdb", "FLSL+CD with a shared-memory table per block of rows: one atomic per component per block"),
    #[cfg(feature = "cuda")]
    AlgorithmInfo::cuda(
        "dlp",
        BOTH,
        "Cabaret DLP-GPU: shared-memory tiles (DLP-SR, DLP-R, atomicRUF), south/east border merge, relabel",
    ),
    #[cfg(feature = "cuda")]
    AlgorithmInfo::cuda(
        "komura",
        BOTH,
        "Komura label reduction: lowest-neighbour init, pointer jumping, atomicMin reduction",
    ),
    #[cfg(feature = "cuda")]
    AlgorithmInfo::cuda(
        "shibata",
        BOTH,
        "Shibata fastCCL: iterative min + pointer-chasing passes until no label changes (one step per pass)",
    ),
    #[cfg(feature = "cuda")]
    AlgorithmInfo::cuda(
        "playne",
        FOUR,
        "Playne & Hawick block equivalence (CV-CUDA's): shared-memory tiles, border label reduction, resolve",
    ),
    #[cfg(feature = "cuda")]
    AlgorithmInfo::cuda(
        "bke",
        EIGHT,
        "Allegretti BKE (OpenCV CUDA's): Komura equivalence on 2x2 blocks",
    ),
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
