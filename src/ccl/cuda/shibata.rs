//! Rust wrapper of `kernels/shibata.cu`: Shibata's fastCCL, the iterative baseline. The pass
//! kernel is repeated until a pass changes no label; the GPU raises a flag when a pass changes
//! something and the host reads it back after every pass. Each pass is its own step ("pass 1",
//! "pass 2", …), so the pass count of a frame is visible in its timings.

use super::pixel::{Baseline, PixelAlgorithm, PixelRun};
use crate::ccl::Connectivity;
use crate::error::{Error, Result};
use crate::gpu::kernels::KernelFile;
use crate::gpu::launch::{launch, load};
use crate::gpu::{cuda_err, Gpu};
use cudarc::driver::{CudaFunction, CudaSlice, PinnedHostSlice, PushKernelArg};

pub struct Shibata {
    prepare: CudaFunction,
    pass4: CudaFunction,
    pass8: CudaFunction,
    count: CudaFunction,
    /// Two "a label changed" flags, used alternately by consecutive passes (see shibata.cu).
    flags: CudaSlice<u32>,
    host_flag: PinnedHostSlice<u32>,
}

impl Shibata {
    pub fn new(gpu: &Gpu) -> Result<Shibata> {
        let f = KernelFile::Shibata;
        let flags = gpu
            .stream
            .alloc_zeros::<u32>(2)
            .map_err(|e| cuda_err("allocating the convergence flags", e))?;
        // SAFETY: read only after a copy from the device has written it.
        let host_flag = unsafe { gpu.ctx.alloc_pinned_with_flags::<u32>(1, 0) }
            .map_err(|e| cuda_err("allocating pinned memory", e))?;
        Ok(Shibata {
            prepare: load(gpu, f, "shibata_prepare")?,
            pass4: load(gpu, f, "shibata_pass4")?,
            pass8: load(gpu, f, "shibata_pass8")?,
            count: load(gpu, f, "shibata_count")?,
            flags,
            host_flag,
        })
    }
}

/// The most passes a correct run can take: labels fall at least as fast as with the naive
/// one-pixel-per-pass propagation, which settles within (longest geodesic distance + 1) <=
/// pixels passes, plus the pass that sees no change. More means a bug, not a hard image.
pub fn pass_limit(pixels: u64) -> u64 {
    pixels + 2
}

/// The runner's description of Shibata.
pub const BASELINE: Baseline = Baseline {
    name: "shibata",
    kernels: KernelFile::Shibata,
    connectivities: &[Connectivity::Four, Connectivity::Eight],
};

impl PixelAlgorithm for Shibata {
    fn launch(&mut self, run: &mut PixelRun) -> Result<()> {
        let s = run.stream();
        let pass = if run.connectivity == Connectivity::Eight {
            &self.pass8
        } else {
            &self.pass4
        };
        let f = &mut *run.frame;
        let [w, h] = f.size();
        let cfg = f.pixel_launch();
        // SAFETY (all launches): argument types and order match shibata.cu; every buffer holds
        // width × height pixels (Frame), `flags` two words.
        let mut args = s.launch_builder(&self.prepare);
        args.arg(&f.image).arg(&mut f.labels).arg(&w).arg(&h);
        args.arg(&mut self.flags).arg(&mut f.total);
        unsafe { launch(&mut args, cfg, "shibata_prepare")? };
        run.steps.mark("preparation")?;
        let limit = pass_limit(f.pixels());
        let mut k: u64 = 1;
        loop {
            if k > limit {
                return Err(Error::Cuda {
                    step: "shibata".into(),
                    why: format!(
                        "no convergence after {limit} passes on a {}x{} image; that cannot happen \
                         with correct kernels, please report it",
                        f.width, f.height
                    ),
                });
            }
            let parity = (k & 1) as i32;
            let mut args = s.launch_builder(pass);
            args.arg(&mut f.labels).arg(&w).arg(&h);
            args.arg(&mut self.flags).arg(&parity);
            unsafe { launch(&mut args, cfg, "shibata_pass")? };
            run.steps.mark(format!("pass {k}"))?;
            let dl = |e| cuda_err("reading the convergence flag", e);
            let flag = self.flags.slice(parity as usize..parity as usize + 1);
            s.memcpy_dtoh(&flag, &mut self.host_flag).map_err(dl)?;
            // Copies into pinned memory are asynchronous: wait for the stream before reading.
            s.synchronize().map_err(dl)?;
            if self.host_flag.as_slice().map_err(dl)?[0] == 0 {
                break;
            }
            k += 1;
        }
        let mut args = s.launch_builder(&self.count);
        args.arg(&f.labels).arg(&w).arg(&h).arg(&mut f.total);
        unsafe { launch(&mut args, cfg, "shibata_count")? };
        run.steps.mark("count")
    }
}

#[cfg(test)]
mod tests {
    use super::super::pixel::model::{atomic_min, check, images, oracle_count, roots};
    use super::pass_limit;
    use crate::ccl::shapes::spiral;
    use crate::ccl::Connectivity;
    use crate::frame::image::BinaryImage;

    /// One pass of shibata_pass. `snapshot`: every thread reads before any writes (the other
    /// extreme is one thread after the other). Returns whether a label changed.
    fn pass(l: &mut [u32], w: u32, h: u32, eight: bool, snapshot: bool) -> bool {
        let before = l.to_vec();
        let mut changed = false;
        for i in 0..w * h {
            let read = |l: &[u32], j: u32| {
                if snapshot {
                    before[j as usize]
                } else {
                    l[j as usize]
                }
            };
            let lab = read(l, i);
            if lab == 0 {
                continue;
            }
            let (x, y) = (i % w, i / w);
            let (up, down, left, right) = (y > 0, y + 1 < h, x > 0, x + 1 < w);
            let mut g = lab;
            let mut take = |c: u32| {
                if c != 0 && c < g {
                    g = c;
                }
            };
            let mut cands = Vec::new();
            if up {
                cands.push(i - w);
            }
            if down {
                cands.push(i + w);
            }
            if left {
                cands.push(i - 1);
            }
            if right {
                cands.push(i + 1);
            }
            if eight {
                if up && left {
                    cands.push(i - w - 1);
                }
                if up && right {
                    cands.push(i - w + 1);
                }
                if down && left {
                    cands.push(i + w - 1);
                }
                if down && right {
                    cands.push(i + w + 1);
                }
            }
            for j in cands {
                take(read(l, j));
            }
            for _ in 0..4 {
                g = read(l, g - 1);
            }
            let old_h = atomic_min(l, lab as usize - 1, g);
            let old_p = atomic_min(l, i as usize, g);
            changed |= old_h > g || old_p > g;
        }
        changed
    }

    /// Runs passes until one changes nothing; returns the labels and the pass count.
    fn shibata(img: &BinaryImage, eight: bool, snapshot: bool) -> (Vec<u32>, u64) {
        let mut l: Vec<u32> = img
            .data
            .iter()
            .enumerate()
            .map(|(i, &v)| if v != 0 { i as u32 + 1 } else { 0 })
            .collect();
        let mut passes = 0;
        loop {
            passes += 1;
            assert!(passes <= pass_limit(img.pixels()), "no convergence");
            if !pass(&mut l, img.width, img.height, eight, snapshot) {
                return (l, passes);
            }
        }
    }

    #[test]
    fn model_converges_to_the_oracle_partition() {
        for shape in images() {
            for (c, eight) in [(Connectivity::Four, false), (Connectivity::Eight, true)] {
                for snapshot in [false, true] {
                    let (l, _) = shibata(&shape.image, eight, snapshot);
                    // Converged labels are the component's first pixel index + 1.
                    assert_eq!(roots(&l), oracle_count(&shape.image, c), "{}", shape.name);
                    check(&shape, c, l, "shibata");
                }
            }
        }
    }

    #[test]
    fn spiral_takes_few_passes_but_more_than_one() {
        let img = spiral(65);
        let (_, passes) = shibata(&img, false, true);
        assert!(passes > 2 && passes < 40, "{passes} passes");
    }
}
