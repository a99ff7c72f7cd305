//! Rust wrapper of `kernels/dlp.cu`: DLP-GPU (Cabaret, Lacassagne & Etiemble 2017), 4- and
//! 8-connectivity. Step 1 labels tiles in shared memory, step 2 merges the south (2a) and east
//! (2b) tile borders, step 3 relabels the image.

use super::pixel::{Baseline, PixelAlgorithm, PixelRun};
use crate::ccl::Connectivity;
use crate::error::{Error, Result};
use crate::gpu::kernels::KernelFile;
use crate::gpu::launch::{launch, linear_launch, load, rect_launch};
use crate::gpu::Gpu;
use cudarc::driver::{CudaFunction, PushKernelArg};

/// Block sizes per step, as the paper tuned them on a GTX 980 Ti (section IV): step 1 (84 × 8),
/// step 2a (112 × 1), step 2b (96 × 1), step 3 (64 × 2). Tunable with `Dlp::set_geometry`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Step 1 tile = block (one thread per pixel); both at least 2, at most 1024 threads.
    pub tile: (u32, u32),
    /// Threads per block of step 2a.
    pub south_threads: u32,
    /// Threads per block of step 2b.
    pub east_threads: u32,
    /// Step 3 block; its thread count must be a multiple of 32 (roots are counted per warp).
    pub relabel: (u32, u32),
}

pub const PAPER_GEOMETRY: Geometry = Geometry {
    tile: (84, 8),
    south_threads: 112,
    east_threads: 96,
    relabel: (64, 2),
};

impl Geometry {
    pub fn check(&self) -> Result<()> {
        let (tw, th) = self.tile;
        let (rw, rh) = self.relabel;
        let ok = tw >= 2
            && th >= 2
            && tw * th <= 1024
            && (1..=1024).contains(&self.south_threads)
            && (1..=1024).contains(&self.east_threads)
            && rw * rh <= 1024
            && rw * rh > 0
            && (rw * rh) % 32 == 0;
        if !ok {
            return Err(Error::Invalid(format!(
                "DLP geometry {self:?}: tiles need at least 2 x 2 and at most 1024 pixels, blocks \
                 1..=1024 threads, the relabel block a multiple of 32 threads"
            )));
        }
        Ok(())
    }
}

pub struct Dlp {
    tile: [CudaFunction; 2],
    south: [CudaFunction; 2],
    east: [CudaFunction; 2],
    relabel: CudaFunction,
    geometry: Geometry,
}

impl Dlp {
    pub fn new(gpu: &Gpu) -> Result<Dlp> {
        let f = KernelFile::Dlp;
        Ok(Dlp {
            tile: [load(gpu, f, "dlp_tile4")?, load(gpu, f, "dlp_tile8")?],
            south: [load(gpu, f, "dlp_south4")?, load(gpu, f, "dlp_south8")?],
            east: [load(gpu, f, "dlp_east4")?, load(gpu, f, "dlp_east8")?],
            relabel: load(gpu, f, "dlp_relabel")?,
            geometry: PAPER_GEOMETRY,
        })
    }

    /// Changes the block sizes (tuning).
    pub fn set_geometry(&mut self, geometry: Geometry) -> Result<()> {
        geometry.check()?;
        self.geometry = geometry;
        Ok(())
    }
}

/// The runner's description of Dlp.
pub const BASELINE: Baseline = Baseline {
    name: "dlp",
    kernels: KernelFile::Dlp,
    connectivities: &[Connectivity::Four, Connectivity::Eight],
};

impl PixelAlgorithm for Dlp {
    fn launch(&mut self, run: &mut PixelRun) -> Result<()> {
        let g = self.geometry;
        let c = (run.connectivity == Connectivity::Eight) as usize;
        // Step 1: one block per tile, tile pixels × 4 bytes of shared memory.
        run.label_tiles(&self.tile[c], "dlp_tile", g.tile, "step 1: tile labeling")?;
        let s = run.stream();
        let f = &mut *run.frame;
        let (width, height) = (f.width, f.height);
        let [w, h] = f.size();
        let (tw, th) = g.tile;
        // Step 2: the south borders (between tile rows), then the east borders (between tile
        // columns), a thread per pixel of a border.
        let merges = [
            (
                &self.south[c],
                th,
                height.div_ceil(th) - 1,
                width,
                g.south_threads,
            ),
            (
                &self.east[c],
                tw,
                width.div_ceil(tw) - 1,
                height,
                g.east_threads,
            ),
        ];
        for ((kernel, side, borders, along, threads), (name, step)) in merges.into_iter().zip([
            ("dlp_south", "step 2a: south borders"),
            ("dlp_east", "step 2b: east borders"),
        ]) {
            if borders == 0 {
                continue;
            }
            let side = side as i32;
            let cfg = linear_launch(borders as u64 * along as u64, threads);
            let mut args = s.launch_builder(kernel);
            args.arg(&mut f.labels)
                .arg(&w)
                .arg(&h)
                .arg(&side)
                .arg(&borders);
            // SAFETY: dlp_south*/dlp_east*'s parameters in dlp.cu, in order; every buffer
            // holds width × height pixels (Frame); thread counts satisfy Geometry::check.
            unsafe { launch(&mut args, cfg, name)? };
            run.steps.mark(step)?;
        }
        // Step 3: relabel and count.
        let (rw, rh) = g.relabel;
        let (cfg, rects_x) = rect_launch(width, height, rw, rh, 0);
        let rects_x = rects_x as i32;
        let mut args = s.launch_builder(&self.relabel);
        args.arg(&mut f.labels).arg(&w).arg(&h).arg(&rects_x);
        args.arg(&mut f.total);
        // SAFETY: dlp_relabel's parameters, in order; buffers as above.
        unsafe { launch(&mut args, cfg, "dlp_relabel")? };
        run.steps.mark("step 3: relabel")
    }
}

#[cfg(test)]
mod tests {
    use super::super::pixel::model::{
        atomic_min, check, images, oracle_count, px_find, px_union, roots,
    };
    use super::{Geometry, PAPER_GEOMETRY};
    use crate::ccl::Connectivity;
    use crate::frame::image::BinaryImage;

    fn window_joins(eight: bool, a: u32, b: u32, c: u32, d: u32) -> bool {
        let (a, b, c, d) = (a != 0, b != 0, c != 0, d != 0);
        eight || !((a && d && !b && !c) || (b && c && !a && !d))
    }

    fn min_plus(v: [u32; 4]) -> u32 {
        v.iter().copied().filter(|&x| x != 0).min().unwrap_or(0)
    }

    /// dlp_tile for one tile, phase by phase (each phase: every thread, one after the other).
    fn tile(img: &BinaryImage, l: &mut [u32], eight: bool, (tw, th): (u32, u32), x0: u32, y0: u32) {
        let (w, h) = (img.width, img.height);
        let n = (tw * th) as usize;
        let inside = |t: u32| x0 + t % tw < w && y0 + t / tw < h;
        let gi = |t: u32| ((y0 + t / tw) * w + x0 + t % tw) as usize;
        let fg: Vec<bool> = (0..n as u32)
            .map(|t| inside(t) && img.data[gi(t)] != 0)
            .collect();
        let mut s: Vec<u32> = (0..n)
            .map(|t| if fg[t] { t as u32 + 1 } else { 0 })
            .collect();
        let origin = |t: u32| t % tw + 1 < tw && t / tw + 1 < th;
        let gather = |s: &[u32], t: u32| {
            let t = t as usize;
            let tw = tw as usize;
            [s[t], s[t + 1], s[t + tw], s[t + tw + 1]]
        };
        // The merges of a scatter phase: every other label of a joining window, with the
        // window's smallest, from the windows gathered before the phase writes.
        let merges = |s: &[u32], joins: &[bool]| -> Vec<(u32, u32)> {
            let mut merges = Vec::new();
            for t in (0..n as u32).filter(|&t| joins[t as usize]) {
                let win = gather(s, t);
                let eps = min_plus(win);
                merges.extend(
                    win.into_iter()
                        .filter(|&v| v != 0 && v != eps)
                        .map(|v| (v, eps)),
                );
            }
            merges
        };
        // DLP-SR: gather, then scatter.
        let joins: Vec<bool> = (0..n as u32)
            .map(|t| {
                origin(t) && {
                    let [a, b, c, d] = gather(&s, t);
                    window_joins(eight, a, b, c, d)
                }
            })
            .collect();
        for (v, eps) in merges(&s, &joins) {
            atomic_min(&mut s, v as usize - 1, eps);
        }
        // DLP-R.
        let r: Vec<u32> = s
            .iter()
            .map(|&v| if v != 0 { px_find(&s, v) } else { 0 })
            .collect();
        s = r;
        // DLP-RUF.
        for (v, eps) in merges(&s, &joins) {
            px_union(&mut s, v, eps);
        }
        // DLP-R and label translation.
        for t in 0..n as u32 {
            if !inside(t) {
                continue;
            }
            let v = s[t as usize];
            let r = if v != 0 { px_find(&s, v) } else { 0 };
            l[gi(t)] = if r != 0 {
                let l0 = r - 1;
                (y0 + l0 / tw) * w + x0 + l0 % tw + 1
            } else {
                0
            };
        }
    }

    fn border_window(l: &mut [u32], eight: bool, x: u32, y: u32, w: u32, h: u32) {
        let i = (y * w + x) as usize;
        let (r, s) = (x + 1 < w, y + 1 < h);
        let w_ = w as usize;
        let win = [
            l[i],
            if r { l[i + 1] } else { 0 },
            if s { l[i + w_] } else { 0 },
            if r && s { l[i + w_ + 1] } else { 0 },
        ];
        if !window_joins(eight, win[0], win[1], win[2], win[3]) {
            return;
        }
        let eps = min_plus(win);
        if eps == 0 {
            return;
        }
        for v in win {
            if v != 0 && v != eps {
                px_union(l, v, eps);
            }
        }
    }

    fn dlp(img: &BinaryImage, eight: bool, g: Geometry) -> Vec<u32> {
        let (w, h) = (img.width, img.height);
        let (tw, th) = g.tile;
        let mut l = vec![0u32; img.data.len()];
        for ty in 0..h.div_ceil(th) {
            for tx in 0..w.div_ceil(tw) {
                tile(img, &mut l, eight, g.tile, tx * tw, ty * th);
            }
        }
        for border in 0..h.div_ceil(th) - 1 {
            for x in 0..w {
                border_window(&mut l, eight, x, (border + 1) * th - 1, w, h);
            }
        }
        for border in 0..w.div_ceil(tw) - 1 {
            for y in 0..h {
                border_window(&mut l, eight, (border + 1) * tw - 1, y, w, h);
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
        let small = Geometry {
            tile: (2, 3),
            ..PAPER_GEOMETRY
        };
        for shape in images() {
            for (c, eight) in [(Connectivity::Four, false), (Connectivity::Eight, true)] {
                for g in [PAPER_GEOMETRY, small] {
                    let l = dlp(&shape.image, eight, g);
                    assert_eq!(roots(&l), oracle_count(&shape.image, c), "{}", shape.name);
                    check(&shape, c, l, "dlp");
                }
            }
        }
    }

    #[test]
    fn geometry_is_checked() {
        assert!(PAPER_GEOMETRY.check().is_ok());
        let bad = Geometry {
            tile: (1, 8),
            ..PAPER_GEOMETRY
        };
        assert!(bad.check().is_err());
        let bad = Geometry {
            relabel: (48, 1),
            ..PAPER_GEOMETRY
        };
        assert!(bad.check().is_err());
    }
}
