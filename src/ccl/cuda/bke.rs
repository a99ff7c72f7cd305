//! Rust wrapper of `kernels/bke.cu`: Allegretti, Bolelli & Grana's Block-based Komura
//! Equivalence (2020; OpenCV's CUDA connected components), 8-connectivity on 2×2 blocks.

use super::pixel::{launch_err, load, rect_launch, Frame, PixelAlgorithm, Steps};
use super::{cuda_err, Gpu, KernelFile};
use crate::ccl::Connectivity;
use crate::error::Result;
use cudarc::driver::{CudaFunction, CudaSlice, PushKernelArg};

/// Threads per CUDA block, one per 2×2 pixel block (OpenCV's 16 × 16).
const BLOCK: (u32, u32) = (16, 16);

pub struct Bke {
    init: CudaFunction,
    compress: CudaFunction,
    reduce: CudaFunction,
    final_labeling: CudaFunction,
    /// Connection and pixel bits of every 2×2 block (sized for the last frame).
    info: Option<CudaSlice<u8>>,
}

impl Bke {
    pub fn new(gpu: &Gpu) -> Result<Bke> {
        let f = KernelFile::Bke;
        Ok(Bke {
            init: load(gpu, f, "bke_init")?,
            compress: load(gpu, f, "bke_compress")?,
            reduce: load(gpu, f, "bke_reduce")?,
            final_labeling: load(gpu, f, "bke_final")?,
            info: None,
        })
    }
}

impl PixelAlgorithm for Bke {
    fn name(&self) -> &'static str {
        "bke"
    }

    fn kernel_file(&self) -> KernelFile {
        KernelFile::Bke
    }

    fn connectivities(&self) -> &'static [Connectivity] {
        &[Connectivity::Eight]
    }

    fn launch(
        &mut self,
        gpu: &Gpu,
        frame: &mut Frame,
        _connectivity: Connectivity,
        steps: &mut Steps,
    ) -> Result<()> {
        let s = &gpu.stream;
        let (width, height) = (frame.width, frame.height);
        let (bw, bh) = (width.div_ceil(2), height.div_ceil(2));
        let blocks = bw as usize * bh as usize;
        if self.info.as_ref().is_none_or(|i| i.len() != blocks) {
            self.info = None;
            // SAFETY: bke_init writes the byte of every block before any other kernel reads it.
            self.info = Some(
                unsafe { s.alloc::<u8>(blocks) }
                    .map_err(|e| cuda_err("allocating the block table", e))?,
            );
        }
        let info = self.info.as_mut().expect("allocated above");
        let (w, h) = (width as i32, height as i32);
        let (cfg, rects_x) = rect_launch(bw, bh, BLOCK.0, BLOCK.1, 0);
        let rects_x = rects_x as i32;
        // SAFETY (all launches): argument types and order match bke.cu; labels hold width ×
        // height pixels (Frame), info one byte per 2×2 block.
        unsafe {
            s.launch_builder(&self.init)
                .arg(&frame.image)
                .arg(&mut frame.labels)
                .arg(&mut *info)
                .arg(&w)
                .arg(&h)
                .arg(&rects_x)
                .arg(&mut frame.total)
                .launch(cfg)
                .map_err(|e| launch_err("bke_init", e))?;
        }
        steps.mark("initialisation")?;
        for (kernel, name, step) in [
            (&self.compress, "bke_compress", "compression"),
            (&self.reduce, "bke_reduce", "reduction"),
            (&self.compress, "bke_compress", "compression"),
        ] {
            unsafe {
                s.launch_builder(kernel)
                    .arg(&mut frame.labels)
                    .arg(&*info)
                    .arg(&w)
                    .arg(&h)
                    .arg(&rects_x)
                    .launch(cfg)
                    .map_err(|e| launch_err(name, e))?;
            }
            steps.mark(step)?;
        }
        unsafe {
            s.launch_builder(&self.final_labeling)
                .arg(&mut frame.labels)
                .arg(&*info)
                .arg(&w)
                .arg(&h)
                .arg(&rects_x)
                .arg(&mut frame.total)
                .launch(cfg)
                .map_err(|e| launch_err("bke_final", e))?;
        }
        steps.mark("final labeling + count")
    }
}
