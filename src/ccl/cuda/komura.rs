//! Rust wrapper of `kernels/komura.cu`: Komura's label reduction on the square lattice
//! (initialisation, analysis, label reduction, analysis), 4- and 8-connectivity.

use super::pixel::{Baseline, PixelAlgorithm, PixelRun};
use crate::ccl::Connectivity;
use crate::error::Result;
use crate::gpu::kernels::KernelFile;
use crate::gpu::launch::{launch, load};
use crate::gpu::Gpu;
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

/// The runner's description of Komura.
pub const BASELINE: Baseline = Baseline {
    name: "komura",
    kernels: KernelFile::Komura,
    connectivities: &[Connectivity::Four, Connectivity::Eight],
};

impl PixelAlgorithm for Komura {
    fn launch(&mut self, run: &mut PixelRun) -> Result<()> {
        let s = run.stream();
        let eight = run.connectivity == Connectivity::Eight;
        let f = &mut *run.frame;
        let [w, h] = f.size();
        let cfg = f.pixel_launch();
        // SAFETY (all launches): argument types and order match komura.cu; every buffer holds
        // width × height pixels (Frame).
        let mut args = s.launch_builder(if eight { &self.init8 } else { &self.init4 });
        args.arg(&f.image).arg(&mut f.labels).arg(&w).arg(&h);
        args.arg(&mut f.total);
        unsafe { launch(&mut args, cfg, "komura_init")? };
        run.steps.mark("initialisation")?;

        let mut args = s.launch_builder(&self.analysis);
        args.arg(&mut f.labels).arg(&w).arg(&h);
        unsafe { launch(&mut args, cfg, "komura_analysis")? };
        run.steps.mark("analysis")?;

        let reduce = if eight { &self.reduce8 } else { &self.reduce4 };
        let mut args = s.launch_builder(reduce);
        args.arg(&f.image).arg(&mut f.labels).arg(&w).arg(&h);
        unsafe { launch(&mut args, cfg, "komura_reduce")? };
        run.steps.mark("label reduction")?;

        let mut args = s.launch_builder(&self.analysis_count);
        args.arg(&mut f.labels).arg(&w).arg(&h).arg(&mut f.total);
        unsafe { launch(&mut args, cfg, "komura_analysis_count")? };
        run.steps.mark("analysis + count")
    }
}

#[cfg(test)]
mod tests {
    use super::super::pixel::model::{
        check, images, oracle_count, px_find, px_union_komura, roots,
    };
    use crate::ccl::Connectivity;
    use crate::frame::image::BinaryImage;

    /// `lower_neighbours` of komura.cu: (bits, neighbour labels).
    fn lower_neighbours(img: &BinaryImage, i: u32, eight: bool) -> (u32, [u32; 4]) {
        let w = img.width;
        let (x, y) = (i % w, i / w);
        let fg = |j: u32| img.data[j as usize] != 0;
        let mut bits = 0;
        if eight {
            if y > 0 && x > 0 && fg(i - w - 1) {
                bits |= 1;
            }
            if y > 0 && fg(i - w) {
                bits |= 2;
            }
            if y > 0 && x + 1 < w && fg(i - w + 1) {
                bits |= 4;
            }
            if x > 0 && fg(i - 1) {
                bits |= 8;
            }
            (
                bits,
                [
                    i.wrapping_sub(w),
                    (i + 1).wrapping_sub(w),
                    (i + 2).wrapping_sub(w),
                    i,
                ],
            )
        } else {
            if y > 0 && fg(i - w) {
                bits |= 1;
            }
            if x > 0 && fg(i - 1) {
                bits |= 2;
            }
            ((bits), [(i + 1).wrapping_sub(w), i, 0, 0])
        }
    }

    /// The four kernels of komura.cu, one thread after the other.
    fn komura(img: &BinaryImage, eight: bool) -> Vec<u32> {
        let n = img.data.len() as u32;
        let mut l = vec![0u32; n as usize];
        for i in 0..n {
            if img.data[i as usize] != 0 {
                let (bits, nb) = lower_neighbours(img, i, eight);
                l[i as usize] = if bits != 0 {
                    nb[bits.trailing_zeros() as usize]
                } else {
                    i + 1
                };
            }
        }
        let analysis = |l: &mut Vec<u32>| {
            for i in 0..n as usize {
                if l[i] != 0 {
                    l[i] = px_find(l, l[i]);
                }
            }
        };
        analysis(&mut l);
        for i in 0..n {
            if img.data[i as usize] != 0 {
                let (mut bits, nb) = lower_neighbours(img, i, eight);
                bits &= bits.wrapping_sub(1);
                while bits != 0 {
                    px_union_komura(&mut l, i + 1, nb[bits.trailing_zeros() as usize]);
                    bits &= bits - 1;
                }
            }
        }
        analysis(&mut l);
        l
    }

    #[test]
    fn model_matches_oracle() {
        for shape in images() {
            for (c, eight) in [(Connectivity::Four, false), (Connectivity::Eight, true)] {
                let l = komura(&shape.image, eight);
                assert_eq!(roots(&l), oracle_count(&shape.image, c), "{}", shape.name);
                check(&shape, c, l, "komura");
            }
        }
    }
}
