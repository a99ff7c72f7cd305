//! One type per kernel launch of `kernels/flsl.cu`: each holds its kernel and the frame's
//! buffers, pushes the kernel's arguments in the order of its signature and knows its grid and
//! step. `Flsl::launch_kernels` queues them in sequence.

use super::kernels::{Kernels, SHAPE_TABLE_BYTES};
use super::{Buffers, STRIP_ROWS};
use crate::ccl::cuda::buffers::Lookback;
use crate::ccl::cuda::launches::{
    border_launch, rows_launch, table_fits, table_launch, warp_rows_launch,
};
use crate::error::Result;
use crate::gpu::launch::{launch, KernelLaunch};
use cudarc::driver::{CudaFunction, CudaStream, LaunchArgs, PushKernelArg};

/// The sizes the strip, border and relabel kernels take after the mask: words per row, width,
/// height, runs per row.
struct Sizes([u32; 4]);

impl Sizes {
    fn of(b: &Buffers) -> Sizes {
        Sizes([
            b.mask.words_per_row as u32,
            b.mask.width,
            b.mask.height,
            b.runs_per_row,
        ])
    }

    fn push<'a>(&'a self, args: &mut LaunchArgs<'a>) {
        let [wpr, w, h, rpr] = &self.0;
        args.arg(wpr).arg(w).arg(h).arg(rpr);
    }
}

/// `flsl_strip*`: finds the runs of each row and labels them within strips of STRIP_ROWS rows
/// (one warp per row); from the byte mask it packs the mask as well.
pub(super) struct StripRuns<'a> {
    pub kernel: &'a CudaFunction,
    pub buffers: &'a mut Buffers,
    pub bytes: bool,
}

impl KernelLaunch for StripRuns<'_> {
    fn step(&self) -> &'static str {
        if self.bytes {
            "pack + runs + strip label"
        } else {
            "runs + strip label"
        }
    }

    fn queue(self, stream: &CudaStream) -> Result<()> {
        let b = self.buffers;
        let sizes = Sizes::of(b);
        let config = warp_rows_launch(b.mask.height, STRIP_ROWS);
        let mut args = stream.launch_builder(self.kernel);
        if self.bytes {
            args.arg(&b.mask.bytes).arg(&mut b.mask.packed);
        } else {
            args.arg(&b.mask.packed);
        }
        sizes.push(&mut args);
        args.arg(&mut b.start).arg(&mut b.end).arg(&mut b.nruns);
        args.arg(&mut b.wrank).arg(&mut b.eq);
        if let Some(f) = b.features.as_ref() {
            f.push_args(&mut args);
        }
        // SAFETY: flsl_strip*'s parameters in flsl.cu, in order; ensure_buffers sized every
        // buffer for this frame.
        unsafe { launch(&mut args, config, "flsl_strip") }
    }
}

/// `flsl_border*`: merges the runs across the `borders` rows between strips.
pub(super) struct BorderMerge<'a> {
    pub kernel: &'a CudaFunction,
    pub buffers: &'a mut Buffers,
    pub borders: u32,
}

impl KernelLaunch for BorderMerge<'_> {
    fn step(&self) -> &'static str {
        "border merge"
    }

    fn queue(self, stream: &CudaStream) -> Result<()> {
        let b = self.buffers;
        let sizes = Sizes::of(b);
        let mut args = stream.launch_builder(self.kernel);
        args.arg(&b.mask.packed);
        sizes.push(&mut args);
        args.arg(&b.start).arg(&b.end).arg(&b.nruns).arg(&b.wrank);
        args.arg(&mut b.eq).arg(&STRIP_ROWS);
        if let Some(f) = b.features.as_ref() {
            f.push_args(&mut args);
        }
        let config = border_launch(self.borders, b.mask.width);
        // SAFETY: flsl_border*'s parameters in flsl.cu, in order; buffers sized by
        // ensure_buffers.
        unsafe { launch(&mut args, config, "flsl_border") }
    }
}

/// `flsl_number*`: flattens the equivalences, counts the roots and numbers them in raster order
/// (one pass with the look-back of `epoch`); with `stats`, gives each its statistics slot (and
/// with OTF copies its features there); with `shapes`, clears the shape sum rows.
pub(super) struct NumberRoots<'a> {
    pub kernel: &'a CudaFunction,
    pub buffers: &'a mut Buffers,
    pub epoch: u32,
    pub stats: bool,
    pub shapes: bool,
}

impl KernelLaunch for NumberRoots<'_> {
    fn step(&self) -> &'static str {
        match (self.stats, self.buffers.features.is_some()) {
            (false, _) => "flatten + count roots",
            (true, false) => "flatten + number roots",
            (true, true) => "flatten + number roots + copy features",
        }
    }

    fn queue(self, stream: &CudaStream) -> Result<()> {
        let b = self.buffers;
        let capacity = b.stats.len() as u32;
        let assign = u32::from(self.stats);
        let mut args = stream.launch_builder(self.kernel);
        args.arg(&mut b.eq).arg(&b.nruns).arg(&mut b.row_offset);
        args.arg(&mut b.slot).arg(&mut b.stats).arg(&capacity);
        args.arg(&b.runs_per_row).arg(&b.mask.height);
        args.arg(&mut b.lookback.status).arg(&self.epoch);
        args.arg(&mut b.total).arg(&assign);
        if let Some(f) = b.features.as_ref() {
            f.push_args(&mut args);
        }
        if self.shapes {
            let sums = b.shapes.as_mut();
            args.arg(sums.expect("ensure_shapes before a run with shapes"));
        }
        // SAFETY: flsl_number*'s parameters in flsl.cu, in order; buffers sized by
        // ensure_buffers, the look-back for this height, the shape rows by ensure_shapes.
        unsafe { launch(&mut args, Lookback::launch(b.mask.height), "flsl_number") }
    }
}

/// `flsl_accumulate*`: sums each component's features (and with `shapes` its shape sums) into
/// its statistics row, a run at a time. `flsl_accumulate_cdb` sums per block in shared memory
/// first (TABLE_ROWS rows a block, with the row offsets); frames too wide for its table take
/// `flsl_accumulate_cd`.
pub(super) struct Accumulate<'a> {
    kernel: &'a CudaFunction,
    buffers: &'a mut Buffers,
    block_table: bool,
    shapes: bool,
}

impl<'a> Accumulate<'a> {
    /// None for the variant with no accumulation pass (OTF).
    pub fn new(
        kernels: &'a Kernels,
        buffers: &'a mut Buffers,
        shapes: bool,
        c8: usize,
    ) -> Option<Accumulate<'a>> {
        let accumulate = kernels.accumulate.as_ref()?;
        // Shape sums take frames at most 65536 wide, which the table always fits.
        let wide = !shapes && !table_fits(buffers.mask.width);
        let block_table = kernels.accumulate_wide.is_some() && !wide;
        let kernel = match (&kernels.shapes, &kernels.accumulate_wide) {
            (Some(sk), _) if shapes => &sk.accumulate[c8],
            (_, Some(cd)) if wide => cd,
            _ => accumulate,
        };
        Some(Accumulate {
            kernel,
            buffers,
            block_table,
            shapes,
        })
    }
}

impl KernelLaunch for Accumulate<'_> {
    fn step(&self) -> &'static str {
        if self.shapes {
            "accumulate features + shape sums"
        } else {
            "accumulate features"
        }
    }

    fn queue(self, stream: &CudaStream) -> Result<()> {
        let b = self.buffers;
        let capacity = b.stats.len() as u32;
        let wpr = b.mask.words_per_row as u32;
        let mut args = stream.launch_builder(self.kernel);
        args.arg(&b.eq).arg(&b.slot).arg(&b.start).arg(&b.end);
        args.arg(&b.nruns).arg(&mut b.stats).arg(&capacity);
        args.arg(&b.runs_per_row).arg(&b.mask.height);
        let mut config = rows_launch(b.mask.height);
        if self.block_table {
            args.arg(&b.row_offset);
            config = table_launch(b.mask.height);
        }
        if self.shapes {
            let sums = b.shapes.as_mut();
            let sums = sums.expect("ensure_shapes before a run with shapes");
            args.arg(&b.mask.packed)
                .arg(&b.wrank)
                .arg(&wpr)
                .arg(&b.mask.width)
                .arg(sums);
            if self.block_table {
                config.shared_mem_bytes = SHAPE_TABLE_BYTES;
            }
        }
        // SAFETY: flsl_accumulate*'s parameters in flsl.cu, in order (the row offsets for the
        // block table's kernels, the mask, ranks and shape rows for the shape kernels); buffers
        // sized by ensure_buffers and ensure_shapes, shared memory as the kernel asked.
        unsafe { launch(&mut args, config, "flsl_accumulate") }
    }
}

/// `flsl_relabel`: the label image, numbered by the statistics slots (`use_slot`) or by the
/// roots' raster order.
pub(super) struct Relabel<'a> {
    pub kernel: &'a CudaFunction,
    pub buffers: &'a mut Buffers,
    pub use_slot: bool,
}

impl KernelLaunch for Relabel<'_> {
    fn step(&self) -> &'static str {
        "relabel"
    }

    fn queue(self, stream: &CudaStream) -> Result<()> {
        let b = self.buffers;
        let sizes = Sizes::of(b);
        let use_slot = u32::from(self.use_slot);
        let out = b.out.as_mut().expect("out allocated for labels");
        let mut args = stream.launch_builder(self.kernel);
        args.arg(out).arg(&b.eq).arg(&b.slot).arg(&use_slot);
        args.arg(&b.mask.packed).arg(&b.wrank);
        sizes.push(&mut args);
        // SAFETY: flsl_relabel's parameters in flsl.cu, in order; buffers sized by
        // ensure_buffers, the label image by ensure_out.
        unsafe { launch(&mut args, rows_launch(b.mask.height), "flsl_relabel") }
    }
}
