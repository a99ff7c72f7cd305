//! Rust wrapper of `kernels/komura.cu`: Komura's label reduction on the square lattice
//! (initialisation, analysis, label reduction, analysis), 4- and 8-connectivity.

use super::pixel::{launch_err, linear_launch, load, Frame, PixelAlgorithm, Steps, PIXEL_THREADS};
use super::{Gpu, KernelFile};
use crate::ccl::Connectivity;
use crate::error::Result;
use cudarc::driver::{CudaFunction, PushKernelArg};

pub struct Komura {
    init4: CudaFunction,
    init8: CudaFunction,
    reduce4: CudaFunction,
    reduce8: CudaFunction,
    analysis: CudaFunction,
    analysis_count: CudaFunction,
}

impl Komura {
    pub fn new(gpu: &Gpu) -> Result<Komura> {
        let f = KernelFile::Komura;
        Ok(Komura {
            init4: load(gpu, f, "komura_init4")?,
            init8: load(gpu, f, "komura_init8")?,
            reduce4: load(gpu, f, "komura_reduce4")?,
            reduce8: load(gpu, f, "komura_reduce8")?,
            analysis: load(gpu, f, "komura_analysis")?,
            analysis_count: load(gpu, f, "komura_analysis_count")?,
        })
    }
}

impl PixelAlgorithm for Komura {
    fn name(&self) -> &'static str {
        "komura"
    }

    fn kernel_file(&self) -> KernelFile {
        KernelFile::Komura
    }

    fn connectivities(&self) -> &'static [Connectivity] {
        &[Connectivity::Four, Connectivity::Eight]
    }

    fn launch(
        &mut self,
        gpu: &Gpu,
        frame: &mut Frame,
        connectivity: Connectivity,
        steps: &mut Steps,
    ) -> Result<()> {
        let s = &gpu.stream;
        let (w, h) = (frame.width as i32, frame.height as i32);
        let cfg = linear_launch(frame.pixels(), PIXEL_THREADS);
        let eight = connectivity == Connectivity::Eight;
        // SAFETY (all launches): argument types and order match komura.cu; every buffer holds
        // width × height pixels (Frame).
        unsafe {
            s.launch_builder(if eight { &self.init8 } else { &self.init4 })
                .arg(&frame.image)
                .arg(&mut frame.labels)
                .arg(&w)
                .arg(&h)
                .arg(&mut frame.total)
                .launch(cfg)
                .map_err(|e| launch_err("komura_init", e))?;
        }
        steps.mark("initialisation")?;
        unsafe {
            s.launch_builder(&self.analysis)
                .arg(&mut frame.labels)
                .arg(&w)
                .arg(&h)
                .launch(cfg)
                .map_err(|e| launch_err("komura_analysis", e))?;
        }
        steps.mark("analysis")?;
        unsafe {
            s.launch_builder(if eight { &self.reduce8 } else { &self.reduce4 })
                .arg(&frame.image)
                .arg(&mut frame.labels)
                .arg(&w)
                .arg(&h)
                .launch(cfg)
                .map_err(|e| launch_err("komura_reduce", e))?;
        }
        steps.mark("label reduction")?;
        unsafe {
            s.launch_builder(&self.analysis_count)
                .arg(&mut frame.labels)
                .arg(&w)
                .arg(&h)
                .arg(&mut frame.total)
                .launch(cfg)
                .map_err(|e| launch_err("komura_analysis_count", e))?;
        }
        steps.mark("analysis + count")
    }
}
