//! Rust wrapper of `kernels/bke.cu`: Allegretti, Bolelli & Grana's Block-based Komura
//! Equivalence (2020; OpenCV's CUDA connected components), 8-connectivity on 2×2 blocks.

use super::pixel::{Baseline, PixelAlgorithm, PixelRun};
use crate::ccl::Connectivity;
use crate::error::Result;
use crate::gpu::kernels::KernelFile;
use crate::gpu::launch::{launch, load, rect_launch};
use crate::gpu::{cuda_err, Gpu};
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

/// The runner's description of Bke.
pub const BASELINE: Baseline = Baseline {
    name: "bke",
    kernels: KernelFile::Bke,
    connectivities: &[Connectivity::Eight],
};

impl PixelAlgorithm for Bke {
    fn launch(&mut self, run: &mut PixelRun) -> Result<()> {
        let s = run.stream();
        let f = &mut *run.frame;
        let (bw, bh) = (f.width.div_ceil(2), f.height.div_ceil(2));
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
        let [w, h] = f.size();
        let (cfg, rects_x) = rect_launch(bw, bh, BLOCK.0, BLOCK.1, 0);
        let rects_x = rects_x as i32;
        // SAFETY (all launches): argument types and order match bke.cu; labels hold width ×
        // height pixels (Frame), info one byte per 2×2 block.
        let mut args = s.launch_builder(&self.init);
        args.arg(&f.image).arg(&mut f.labels).arg(&mut *info);
        args.arg(&w).arg(&h).arg(&rects_x).arg(&mut f.total);
        unsafe { launch(&mut args, cfg, "bke_init")? };
        run.steps.mark("initialisation")?;
        for (kernel, name, step) in [
            (&self.compress, "bke_compress", "compression"),
            (&self.reduce, "bke_reduce", "reduction"),
            (&self.compress, "bke_compress", "compression"),
        ] {
            let mut args = s.launch_builder(kernel);
            args.arg(&mut f.labels)
                .arg(&*info)
                .arg(&w)
                .arg(&h)
                .arg(&rects_x);
            unsafe { launch(&mut args, cfg, name)? };
            run.steps.mark(step)?;
        }
        let mut args = s.launch_builder(&self.final_labeling);
        args.arg(&mut f.labels).arg(&*info).arg(&w).arg(&h);
        args.arg(&rects_x).arg(&mut f.total);
        unsafe { launch(&mut args, cfg, "bke_final")? };
        run.steps.mark("final labeling + count")
    }
}

#[cfg(test)]
mod tests {
    use super::super::pixel::model::{check, images, oracle_count, px_find, px_union_komura};
    use crate::ccl::Connectivity;
    use crate::frame::image::BinaryImage;

    const TOPLEFT: u32 = 1;
    const TOP: u32 = 2;
    const TOPRIGHT: u32 = 4;
    const LEFT: u32 = 8;

    /// bke_init's rules for the block with pixel a at (x, y): (info bits, initial label).
    fn init(img: &BinaryImage, x: u32, y: u32) -> (u32, u32) {
        let (w, h) = (img.width as i64, img.height as i64);
        let px = |dx: i64, dy: i64| {
            let (xx, yy) = (x as i64 + dx, y as i64 + dy);
            xx >= 0 && yy >= 0 && xx < w && yy < h && img.data[(yy * w + xx) as usize] != 0
        };
        let (a, b, c, d) = (px(0, 0), px(1, 0), px(0, 1), px(1, 1));
        let mut bits = (a as u32) << 4 | (b as u32) << 5 | (c as u32) << 6 | (d as u32) << 7;
        if bits == 0 {
            return (0, 0);
        }
        if a && px(-1, -1) {
            bits |= TOPLEFT;
        }
        if (a || b) && (px(0, -1) || px(1, -1)) {
            bits |= TOP;
        }
        if b && px(2, -1) {
            bits |= TOPRIGHT;
        }
        if (a || c) && (px(-1, 0) || px(-1, 1)) {
            bits |= LEFT;
        }
        let w = img.width;
        let ia = y * w + x;
        let label = if bits & TOPLEFT != 0 {
            ia - 2 * w - 2 + 1
        } else if bits & TOP != 0 {
            ia - 2 * w + 1
        } else if bits & TOPRIGHT != 0 {
            ia - 2 * w + 2 + 1
        } else if bits & LEFT != 0 {
            ia - 2 + 1
        } else {
            ia + 1
        };
        (bits, label)
    }

    /// The five kernels of bke.cu; returns the label image and the root-block count.
    fn bke(img: &BinaryImage) -> (Vec<u32>, usize) {
        let (w, h) = (img.width, img.height);
        let mut l = vec![0u32; img.data.len()];
        let blocks: Vec<(u32, u32)> = (0..h.div_ceil(2))
            .flat_map(|by| (0..w.div_ceil(2)).map(move |bx| (2 * bx, 2 * by)))
            .collect();
        let mut info = vec![0u32; blocks.len()];
        for (k, &(x, y)) in blocks.iter().enumerate() {
            let (bits, label) = init(img, x, y);
            info[k] = bits;
            l[(y * w + x) as usize] = label;
        }
        let compress = |l: &mut Vec<u32>| {
            for (k, &(x, y)) in blocks.iter().enumerate() {
                if info[k] != 0 {
                    let ia = (y * w + x) as usize;
                    l[ia] = px_find(l, l[ia]);
                }
            }
        };
        compress(&mut l);
        for (k, &(x, y)) in blocks.iter().enumerate() {
            let mut conn = info[k] & 15;
            conn &= conn.wrapping_sub(1);
            let ia = y * w + x;
            if conn & TOP != 0 {
                px_union_komura(&mut l, ia + 1, ia - 2 * w + 1);
            }
            if conn & TOPRIGHT != 0 {
                px_union_komura(&mut l, ia + 1, ia - 2 * w + 3);
            }
            if conn & LEFT != 0 {
                px_union_komura(&mut l, ia + 1, ia - 1);
            }
        }
        compress(&mut l);
        let mut roots = 0;
        for (k, &(x, y)) in blocks.iter().enumerate() {
            let bits = info[k];
            let ia = (y * w + x) as usize;
            let r = if bits != 0 { l[ia] } else { 0 };
            roots += (bits != 0 && r == ia as u32 + 1) as usize;
            let (right, below) = (x + 1 < w, y + 1 < h);
            let wu = w as usize;
            l[ia] = if bits & 16 != 0 { r } else { 0 };
            if right {
                l[ia + 1] = if bits & 32 != 0 { r } else { 0 };
            }
            if below {
                l[ia + wu] = if bits & 64 != 0 { r } else { 0 };
            }
            if right && below {
                l[ia + wu + 1] = if bits & 128 != 0 { r } else { 0 };
            }
        }
        (l, roots)
    }

    #[test]
    fn model_matches_oracle() {
        for shape in images() {
            let (l, roots) = bke(&shape.image);
            assert_eq!(
                roots,
                oracle_count(&shape.image, Connectivity::Eight),
                "{}",
                shape.name
            );
            assert!(l.iter().all(|&v| v as usize <= l.len()));
            check(&shape, Connectivity::Eight, l, "bke");
        }
    }
}
