//! Rust wrapper of `kernels/playne.cu`: Playne & Hawick's block equivalence (2018; CV-CUDA's
//! label algorithm), 4-connectivity: shared-memory tiles, label reduction on the horizontal and
//! vertical tile borders, resolve.

use super::pixel::{
    launch_err, linear_launch, load, rect_launch, Frame, PixelAlgorithm, Steps, PIXEL_THREADS,
};
use super::{Gpu, KernelFile};
use crate::ccl::Connectivity;
use crate::error::Result;
use cudarc::driver::{CudaFunction, PushKernelArg};

/// The article's block (BLOCK_X × BLOCK_Y = 32 × 4): tile size of the first kernel.
pub const TILE: (u32, u32) = (32, 4);
/// Threads per block of the border kernels (the article's 32 × 4 blocks, as a 1-D count).
const BORDER_THREADS: u32 = 128;

pub struct Playne {
    block: CudaFunction,
    y_reduce: CudaFunction,
    x_reduce: CudaFunction,
    resolve: CudaFunction,
}

impl Playne {
    pub fn new(gpu: &Gpu) -> Result<Playne> {
        let f = KernelFile::Playne;
        Ok(Playne {
            block: load(gpu, f, "playne_block")?,
            y_reduce: load(gpu, f, "playne_y_reduce")?,
            x_reduce: load(gpu, f, "playne_x_reduce")?,
            resolve: load(gpu, f, "playne_resolve")?,
        })
    }
}

impl PixelAlgorithm for Playne {
    fn name(&self) -> &'static str {
        "playne"
    }

    fn kernel_file(&self) -> KernelFile {
        KernelFile::Playne
    }

    fn connectivities(&self) -> &'static [Connectivity] {
        &[Connectivity::Four]
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
        let (w, h) = (width as i32, height as i32);
        let (tw, th) = TILE;
        let (tw_i, th_i) = (tw as i32, th as i32);
        let (cfg, tiles_x) = rect_launch(width, height, tw, th, tw * th * 4);
        let tiles_x = tiles_x as i32;
        // SAFETY (all launches): argument types and order match playne.cu; every buffer holds
        // width × height pixels (Frame).
        unsafe {
            s.launch_builder(&self.block)
                .arg(&frame.image)
                .arg(&mut frame.labels)
                .arg(&w)
                .arg(&h)
                .arg(&tiles_x)
                .arg(&mut frame.total)
                .launch(cfg)
                .map_err(|e| launch_err("playne_block", e))?;
        }
        steps.mark("block label")?;

        let y_borders = height.div_ceil(th) - 1;
        if y_borders > 0 {
            let cfg = linear_launch(y_borders as u64 * width as u64, BORDER_THREADS);
            unsafe {
                s.launch_builder(&self.y_reduce)
                    .arg(&frame.image)
                    .arg(&mut frame.labels)
                    .arg(&w)
                    .arg(&h)
                    .arg(&tw_i)
                    .arg(&th_i)
                    .arg(&y_borders)
                    .launch(cfg)
                    .map_err(|e| launch_err("playne_y_reduce", e))?;
            }
            steps.mark("y border reduction")?;
        }
        let x_borders = width.div_ceil(tw) - 1;
        if x_borders > 0 {
            let cfg = linear_launch(x_borders as u64 * height as u64, BORDER_THREADS);
            unsafe {
                s.launch_builder(&self.x_reduce)
                    .arg(&frame.image)
                    .arg(&mut frame.labels)
                    .arg(&w)
                    .arg(&h)
                    .arg(&tw_i)
                    .arg(&th_i)
                    .arg(&x_borders)
                    .launch(cfg)
                    .map_err(|e| launch_err("playne_x_reduce", e))?;
            }
            steps.mark("x border reduction")?;
        }
        let cfg = linear_launch(frame.pixels(), PIXEL_THREADS);
        unsafe {
            s.launch_builder(&self.resolve)
                .arg(&mut frame.labels)
                .arg(&w)
                .arg(&h)
                .arg(&mut frame.total)
                .launch(cfg)
                .map_err(|e| launch_err("playne_resolve", e))?;
        }
        steps.mark("resolve + count")
    }
}
