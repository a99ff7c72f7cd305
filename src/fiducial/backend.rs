//! The marker detector the rest of the product calls: the CPU's or the GPU's, which find the
//! same markers. `cuda` asks for the GPU's, `cpu` for the CPU's; `auto` takes the GPU's when
//! there is a usable GPU (the faster one: 2.9 against 5.7 ms a 1080p frame on an H200 with a
//! 16-core host, docs/performance.md), else the CPU's.

use super::detect::{Detections, Detector};
use super::dictionary::Dictionary;
use super::params::DetectorParams;
use crate::ccl::{Backend, BackendChoice, Backends};
use crate::error::{Error, Result};
use crate::frame::image::GrayImage;
#[cfg(feature = "cuda")]
use std::sync::Arc;

/// A marker detector on one backend; both find the same markers.
pub enum MarkerDetector {
    Cpu(Detector),
    #[cfg(feature = "cuda")]
    Gpu(super::gpu::GpuDetector),
}

impl MarkerDetector {
    /// The detector `choice` asks for among `backends`: the GPU's for `Cuda` (an error when
    /// there is no usable GPU, with the reason) and for `Auto` when there is one, else the
    /// CPU's.
    pub fn new(params: DetectorParams, choice: BackendChoice, backends: &Backends) -> Result<Self> {
        if Self::picks_gpu(choice, backends) {
            return Self::gpu(params, backends);
        }
        match (choice, backends.cuda_unavailable_reason()) {
            (BackendChoice::Cuda, Some(why)) => Err(Error::CudaUnavailable(format!(
                "markers on the GPU: the CUDA backend is unavailable: {why}"
            ))),
            _ => Ok(Self::Cpu(Detector::new(params)?)),
        }
    }

    /// As `new`, with a GPU detector on a CUDA stream of its own (not the engine's), so that
    /// its frames' kernels run beside the engine's and beside other such detectors'.
    pub fn on_own_stream(
        params: DetectorParams,
        choice: BackendChoice,
        backends: &Backends,
    ) -> Result<Self> {
        #[cfg(feature = "cuda")]
        if Self::picks_gpu(choice, backends) {
            let own = Arc::new(backends.gpu()?.with_own_stream()?);
            return Self::gpu_on(own, params);
        }
        Self::new(params, choice, backends)
    }

    /// Does `new` make the GPU's detector for `choice`? (`Cuda` or `Auto`, with a usable GPU.)
    pub fn picks_gpu(choice: BackendChoice, backends: &Backends) -> bool {
        cfg!(feature = "cuda")
            && choice != BackendChoice::Cpu
            && backends.cuda_unavailable_reason().is_none()
    }

    #[cfg(feature = "cuda")]
    fn gpu(params: DetectorParams, backends: &Backends) -> Result<Self> {
        Self::gpu_on(backends.gpu()?.clone(), params)
    }

    #[cfg(feature = "cuda")]
    fn gpu_on(gpu: Arc<crate::gpu::Gpu>, params: DetectorParams) -> Result<Self> {
        Ok(Self::Gpu(super::gpu::GpuDetector::new(gpu, params)?))
    }

    /// Without CUDA support there is never a GPU (`cuda_unavailable_reason` says why).
    #[cfg(not(feature = "cuda"))]
    fn gpu(params: DetectorParams, _: &Backends) -> Result<Self> {
        Ok(Self::Cpu(Detector::new(params)?))
    }

    /// The markers of `dictionaries` in a grey frame (`Detector::detect`).
    pub fn detect(&mut self, grey: &GrayImage, dictionaries: &[&Dictionary]) -> Result<Detections> {
        match self {
            Self::Cpu(d) => d.detect(grey, dictionaries),
            #[cfg(feature = "cuda")]
            Self::Gpu(d) => d.detect(grey, dictionaries),
        }
    }

    /// The backend it runs on.
    pub fn backend(&self) -> Backend {
        match self {
            Self::Cpu(_) => Backend::Cpu,
            #[cfg(feature = "cuda")]
            Self::Gpu(_) => Backend::Cuda,
        }
    }

    pub fn params(&self) -> &DetectorParams {
        match self {
            Self::Cpu(d) => d.params(),
            #[cfg(feature = "cuda")]
            Self::Gpu(d) => d.params(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fiducial::render::{render_scene, SceneSpec};

    /// Without a GPU, auto and cpu give the CPU detector (with its results); cuda is an error
    /// that says why, and bad settings are refused on every backend.
    #[test]
    fn picks_the_cpu_without_a_gpu_and_says_why_cuda_cannot_run() {
        let backends = Backends::cpu_only();
        let dict = Dictionary::predefined("DICT_4X4_50").unwrap();
        let spec = SceneSpec {
            width: 320,
            height: 240,
            markers: 2,
            min_side: 60.0,
            max_side: 80.0,
            clutter: 5,
            seed: 11,
            ..SceneSpec::default()
        };
        let scene = render_scene(&dict, &spec).unwrap();
        let expected = Detector::new(DetectorParams::default())
            .unwrap()
            .detect(&scene.image, &[&dict])
            .unwrap();
        assert!(!expected.markers.is_empty(), "{expected:?}");
        for choice in [BackendChoice::Auto, BackendChoice::Cpu] {
            let mut d = MarkerDetector::new(DetectorParams::default(), choice, &backends).unwrap();
            assert_eq!(d.backend(), Backend::Cpu);
            assert_eq!(d.detect(&scene.image, &[&dict]).unwrap(), expected);
        }
        let err = MarkerDetector::new(DetectorParams::default(), BackendChoice::Cuda, &backends)
            .err()
            .expect("no GPU here");
        assert!(matches!(err, Error::CudaUnavailable(_)), "{err}");
        let why = backends.cuda_unavailable_reason().unwrap();
        assert!(err.to_string().contains(&why), "{err}");
        let bad = DetectorParams {
            window_min: 4,
            ..DetectorParams::default()
        };
        for choice in [BackendChoice::Auto, BackendChoice::Cpu] {
            assert!(MarkerDetector::new(bad.clone(), choice, &backends).is_err());
        }
    }
}
