//! One type per kernel launch of `kernels/ha4.cu`: each holds its kernel and the frame's
//! buffers, pushes the kernel's arguments in the order of its signature and knows its grid and
//! step. `Ha4::launch_kernels` queues them in sequence.

use super::kernels::Kernels;
use super::Buffers;
use crate::ccl::cuda::buffers::{Lookback, OtfFeatures};
use crate::ccl::cuda::launches::{
    border_launch, rows_launch, table_fits, table_launch, warp_rows_launch,
};
use crate::ccl::cuda::mask_input::MaskInput;
use crate::error::Result;
use crate::gpu::launch::{launch, KernelLaunch};
use cudarc::driver::{CudaFunction, CudaStream, LaunchArgs, PushKernelArg};

/// The sizes every ha4.cu kernel takes after the packed mask: words per row, width, height.
struct Sizes([i32; 3]);

impl Sizes {
    fn of(b: &Buffers) -> Sizes {
        Sizes([
            b.mask.words_per_row as i32,
            b.mask.width as i32,
            b.mask.height as i32,
        ])
    }

    fn push<'a>(&'a self, args: &mut LaunchArgs<'a>) {
        let [wpr, w, h] = &self.0;
        args.arg(wpr).arg(w).arg(h);
    }
}

/// The OTF features, pushed after a kernel's other arguments when the run carries them.
fn push_features<'a>(args: &mut LaunchArgs<'a>, features: Option<&'a OtfFeatures>, otf: bool) {
    if otf {
        features
            .expect("OTF features allocated with the buffers")
            .push_args(args);
    }
}

/// `strip_label*`: labels each strip of `rows` rows, one warp per row, and counts the segments;
/// from the byte mask (`MaskInput::Bytes`) it packs the mask as well.
pub(super) struct StripLabel<'a> {
    pub kernel: &'a CudaFunction,
    pub buffers: &'a mut Buffers,
    pub input: MaskInput,
    pub otf: bool,
    pub rows: u32,
}

impl KernelLaunch for StripLabel<'_> {
    fn step(&self) -> &'static str {
        match self.input {
            MaskInput::Bytes => "pack + strip label",
            MaskInput::Packed | MaskInput::PackFirst => "strip label",
        }
    }

    fn queue(self, stream: &CudaStream) -> Result<()> {
        let b = self.buffers;
        let sizes = Sizes::of(b);
        let config = warp_rows_launch(b.mask.height, self.rows);
        let mut args = stream.launch_builder(self.kernel);
        args.arg(&mut b.eq);
        match self.input {
            MaskInput::Bytes => args.arg(&b.mask.bytes).arg(&mut b.mask.packed),
            MaskInput::Packed | MaskInput::PackFirst => args.arg(&b.mask.packed),
        };
        sizes.push(&mut args);
        args.arg(&mut b.total);
        push_features(&mut args, b.feat.as_ref(), self.otf);
        // SAFETY: strip_label*'s parameters in ha4.cu, in order; ensure_buffers sized every
        // buffer for this frame.
        unsafe { launch(&mut args, config, "strip_label") }
    }
}

/// `border_merge*`: merges the segments across the `borders` rows between strips of
/// `strip_rows` rows; `split`: several warps share a border row (`border_launch`).
pub(super) struct BorderMerge<'a> {
    pub kernel: &'a CudaFunction,
    pub buffers: &'a mut Buffers,
    pub otf: bool,
    pub borders: u32,
    pub strip_rows: u32,
    pub split: bool,
}

impl KernelLaunch for BorderMerge<'_> {
    fn step(&self) -> &'static str {
        "border merge"
    }

    fn queue(self, stream: &CudaStream) -> Result<()> {
        let b = self.buffers;
        let sizes = Sizes::of(b);
        let strip_rows = self.strip_rows as i32;
        // A width of 1 gives one part (one warp per border row).
        let split_width = if self.split { b.mask.width } else { 1 };
        let mut args = stream.launch_builder(self.kernel);
        args.arg(&mut b.eq).arg(&b.mask.packed);
        sizes.push(&mut args);
        args.arg(&strip_rows);
        push_features(&mut args, b.feat.as_ref(), self.otf);
        let config = border_launch(self.borders, split_width);
        // SAFETY: border_merge*'s parameters in ha4.cu, in order; buffers sized by
        // ensure_buffers.
        unsafe { launch(&mut args, config, "border_merge") }
    }
}

/// `number_slots*`: flattens the equivalences, counts and numbers the roots in raster order
/// (one pass with the look-back of `epoch`) and gives each its statistics slot; with OTF it
/// copies the roots' features into their rows too.
pub(super) struct NumberSlots<'a> {
    pub kernel: &'a CudaFunction,
    pub buffers: &'a mut Buffers,
    pub otf: bool,
    pub epoch: u32,
}

impl KernelLaunch for NumberSlots<'_> {
    fn step(&self) -> &'static str {
        if self.otf {
            "flatten + number roots + copy features"
        } else {
            "flatten + number roots"
        }
    }

    fn queue(self, stream: &CudaStream) -> Result<()> {
        let b = self.buffers;
        let sizes = Sizes::of(b);
        let mut args = stream.launch_builder(self.kernel);
        args.arg(&mut b.eq).arg(&mut b.slot).arg(&mut b.row_offset);
        args.arg(&mut b.stats).arg(&b.mask.packed);
        sizes.push(&mut args);
        args.arg(&mut b.lookback.status)
            .arg(&self.epoch)
            .arg(&mut b.total);
        push_features(&mut args, b.feat.as_ref(), self.otf);
        // SAFETY: number_slots*'s parameters in ha4.cu, in order; buffers sized by
        // ensure_buffers, the look-back for this height.
        unsafe { launch(&mut args, Lookback::launch(b.mask.height), "number_slots") }
    }
}

/// `accumulate*`: sums each component's features into its statistics row. `accumulatew` sums
/// per block in shared memory (TABLE_ROWS rows a block, with the row offsets); frames too wide
/// for its table take `accumulate_cdw`.
pub(super) struct Accumulate<'a> {
    kernel: &'a CudaFunction,
    buffers: &'a mut Buffers,
    block_table: bool,
}

impl<'a> Accumulate<'a> {
    pub fn new(kernels: &'a Kernels, buffers: &'a mut Buffers) -> Accumulate<'a> {
        let wide = !table_fits(buffers.mask.width);
        let (kernel, block_table) = match &kernels.accumulate_wide {
            Some(cd) if wide => (cd, false),
            Some(_) => (&kernels.accumulate, true),
            None => (&kernels.accumulate, false),
        };
        Accumulate {
            kernel,
            buffers,
            block_table,
        }
    }
}

impl KernelLaunch for Accumulate<'_> {
    fn step(&self) -> &'static str {
        "accumulate features"
    }

    fn queue(self, stream: &CudaStream) -> Result<()> {
        let b = self.buffers;
        let sizes = Sizes::of(b);
        let mut args = stream.launch_builder(self.kernel);
        args.arg(&b.eq)
            .arg(&b.slot)
            .arg(&mut b.stats)
            .arg(&b.mask.packed);
        sizes.push(&mut args);
        let config = if self.block_table {
            args.arg(&b.row_offset);
            table_launch(b.mask.height)
        } else {
            rows_launch(b.mask.height)
        };
        // SAFETY: accumulate*'s parameters in ha4.cu, in order (row offsets for the block
        // table's kernel); buffers sized by ensure_buffers.
        unsafe { launch(&mut args, config, "accumulate") }
    }
}

/// `relabel_find*` (`slots` false): the label image from the equivalences (each pixel its
/// root's label), and the component count; `relabel_slot*` (`slots` true): the label image
/// numbered by the components' slots (1..=count in raster order).
pub(super) struct Relabel<'a> {
    pub kernel: &'a CudaFunction,
    pub buffers: &'a mut Buffers,
    pub slots: bool,
}

impl KernelLaunch for Relabel<'_> {
    fn step(&self) -> &'static str {
        "relabel"
    }

    fn queue(self, stream: &CudaStream) -> Result<()> {
        let b = self.buffers;
        let sizes = Sizes::of(b);
        let out = b.out.as_mut().expect("out allocated for labels");
        let mut args = stream.launch_builder(self.kernel);
        args.arg(out).arg(&b.eq);
        if self.slots {
            args.arg(&b.slot);
        }
        args.arg(&b.mask.packed);
        sizes.push(&mut args);
        if !self.slots {
            args.arg(&mut b.total);
        }
        let name = if self.slots {
            "relabel_slot"
        } else {
            "relabel_find"
        };
        // SAFETY: relabel_find*'s / relabel_slot*'s parameters in ha4.cu, in order; buffers
        // sized by ensure_buffers, the label image by ensure_out.
        unsafe { launch(&mut args, rows_launch(b.mask.height), name) }
    }
}
