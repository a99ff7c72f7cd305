//! Rust wrapper of `kernels/playne.cu`: Playne & Hawick's block equivalence (2018; CV-CUDA's
//! label algorithm), 4-connectivity: shared-memory tiles, label reduction on the horizontal and
//! vertical tile borders, resolve.

use super::pixel::{Baseline, PixelAlgorithm, PixelRun};
use crate::ccl::Connectivity;
use crate::error::Result;
use crate::gpu::kernels::KernelFile;
use crate::gpu::launch::{launch, linear_launch, load};
use crate::gpu::Gpu;
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

/// The runner's description of Playne.
pub const BASELINE: Baseline = Baseline {
    name: "playne",
    kernels: KernelFile::Playne,
    connectivities: &[Connectivity::Four],
};

impl PixelAlgorithm for Playne {
    fn launch(&mut self, run: &mut PixelRun) -> Result<()> {
        run.label_tiles(&self.block, "playne_block", TILE, "block label")?;
        let s = run.stream();
        let (tw, th) = TILE;
        let f = &mut *run.frame;
        let (width, height) = (f.width, f.height);
        let [w, h] = f.size();
        let tile = [tw as i32, th as i32];
        // The borders between tile rows (y), then between tile columns (x): a thread per pixel
        // of a border.
        let reductions = [
            (
                &self.y_reduce,
                height.div_ceil(th) - 1,
                width,
                "playne_y_reduce",
            ),
            (
                &self.x_reduce,
                width.div_ceil(tw) - 1,
                height,
                "playne_x_reduce",
            ),
        ];
        for ((kernel, borders, along, name), step) in reductions.into_iter().zip(REDUCTION_STEPS) {
            if borders == 0 {
                continue;
            }
            let cfg = linear_launch(borders as u64 * along as u64, BORDER_THREADS);
            let mut args = s.launch_builder(kernel);
            args.arg(&f.image).arg(&mut f.labels).arg(&w).arg(&h);
            args.arg(&tile[0]).arg(&tile[1]).arg(&borders);
            // SAFETY: playne_[yx]_reduce's parameters in playne.cu, in order; every buffer
            // holds width × height pixels (Frame).
            unsafe { launch(&mut args, cfg, name)? };
            run.steps.mark(step)?;
        }
        let cfg = f.pixel_launch();
        let mut args = s.launch_builder(&self.resolve);
        args.arg(&mut f.labels).arg(&w).arg(&h).arg(&mut f.total);
        // SAFETY: playne_resolve's parameters, in order; buffers as above.
        unsafe { launch(&mut args, cfg, "playne_resolve")? };
        run.steps.mark("resolve + count")
    }
}

/// The steps of the y and x border reductions.
const REDUCTION_STEPS: [&str; 2] = ["y border reduction", "x border reduction"];

#[cfg(test)]
mod tests {
    use super::super::pixel::model::{
        check, images, oracle_count, px_find, px_union, px_union_komura, roots,
    };
    use super::TILE;
    use crate::ccl::Connectivity;
    use crate::frame::image::BinaryImage;

    /// playne_block for one tile, phase by phase.
    fn block(img: &BinaryImage, l: &mut [u32], (tw, th): (u32, u32), x0: u32, y0: u32) {
        let (w, h) = (img.width, img.height);
        let n = tw * th;
        let fg = |x: u32, y: u32| img.data[(y * w + x) as usize] != 0;
        let inside = |t: u32| x0 + t % tw < w && y0 + t / tw < h;
        let mut label = vec![0u32; n as usize];
        let mut flags = vec![(false, false, false, false); n as usize];
        for t in 0..n {
            let (lx, ly) = (t % tw, t / tw);
            let (x, y) = (x0 + lx, y0 + ly);
            let p = inside(t) && fg(x, y);
            let up = p && ly > 0 && fg(x, y - 1);
            let left = p && lx > 0 && fg(x - 1, y);
            let up_left = p && lx > 0 && ly > 0 && fg(x - 1, y - 1);
            flags[t as usize] = (p, up, left, up_left);
            label[t as usize] = if !p {
                0
            } else if up {
                t - tw + 1
            } else if left {
                t
            } else {
                t + 1
            };
        }
        let mut s = label.clone();
        let r: Vec<u32> = label
            .iter()
            .map(|&v| if v != 0 { px_find(&s, v) } else { 0 })
            .collect();
        s.clone_from(&r);
        let critical: Vec<bool> = flags.iter().map(|&(_, u, le, ul)| u && le && !ul).collect();
        let left_label: Vec<u32> = (0..n as usize)
            .map(|t| if critical[t] { s[t - 1] } else { 0 })
            .collect();
        for t in 0..n as usize {
            if critical[t] {
                px_union(&mut s, r[t], left_label[t]);
            }
        }
        for t in 0..n {
            if !inside(t) {
                continue;
            }
            let rr = if flags[t as usize].0 {
                px_find(&s, r[t as usize])
            } else {
                0
            };
            l[((y0 + t / tw) * w + x0 + t % tw) as usize] = if rr != 0 {
                let l0 = rr - 1;
                (y0 + l0 / tw) * w + x0 + l0 % tw + 1
            } else {
                0
            };
        }
    }

    fn playne(img: &BinaryImage, (tw, th): (u32, u32)) -> Vec<u32> {
        let (w, h) = (img.width, img.height);
        let fg = |x: u32, y: u32| img.data[(y * w + x) as usize] != 0;
        let mut l = vec![0u32; img.data.len()];
        for ty in 0..h.div_ceil(th) {
            for tx in 0..w.div_ceil(tw) {
                block(img, &mut l, (tw, th), tx * tw, ty * th);
            }
        }
        for k in 1..h.div_ceil(th) {
            let y = k * th;
            for x in 0..w {
                if !fg(x, y) || !fg(x, y - 1) {
                    continue;
                }
                let redundant = x % tw != 0 && fg(x - 1, y) && fg(x - 1, y - 1);
                if !redundant {
                    let i = (y * w + x) as usize;
                    let (a, b) = (l[i], l[i - w as usize]);
                    px_union_komura(&mut l, a, b);
                }
            }
        }
        for k in 1..w.div_ceil(tw) {
            let x = k * tw;
            for y in 0..h {
                if !fg(x, y) || !fg(x - 1, y) {
                    continue;
                }
                let redundant = y % th != 0 && fg(x, y - 1) && fg(x - 1, y - 1);
                if !redundant {
                    let i = (y * w + x) as usize;
                    let (a, b) = (l[i], l[i - 1]);
                    px_union_komura(&mut l, a, b);
                }
            }
        }
        for i in 0..l.len() {
            if l[i] != 0 {
                l[i] = px_find(&l, l[i]);
            }
        }
        l
    }

    #[test]
    fn model_matches_oracle() {
        for shape in images() {
            for tile in [TILE, (3, 2)] {
                let l = playne(&shape.image, tile);
                assert_eq!(
                    roots(&l),
                    oracle_count(&shape.image, Connectivity::Four),
                    "{}",
                    shape.name
                );
                check(&shape, Connectivity::Four, l, "playne");
            }
        }
    }
}
