//! The kernels of `kernels/flsl.cu` a variant loads.

use super::Variant;
use crate::error::Result;
use crate::gpu::kernels::KernelFile;
use crate::gpu::launch::load;
use crate::gpu::{cuda_err, Gpu};
use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::CudaFunction;

/// Dynamic shared memory of `flsl_accumulate_cdb_shapes{4,8}` (its block table and shape
/// columns; `SHAPE_TABLE_BYTES` in flsl.cu).
pub(super) const SHAPE_TABLE_BYTES: u32 = 57344;

pub(super) struct Kernels {
    /// 4- and 8-connectivity (as every pair here).
    strip: [CudaFunction; 2],
    /// The strip kernels that pack the byte mask themselves (`flsl_strip*_bytes`).
    strip_bytes: [CudaFunction; 2],
    pub border: [CudaFunction; 2],
    /// Flatten, count, scan and slots in one kernel (`flsl_number[_otf]`).
    number: CudaFunction,
    pub accumulate: Option<CudaFunction>,
    /// `flsl_accumulate_cd` beside `flsl_accumulate_cdb`, for frames too wide for the block
    /// table (`table_fits`).
    pub accumulate_wide: Option<CudaFunction>,
    /// With the shape sums (not OTF): numbering that clears their rows (with the block table:
    /// only those the accumulation adds to), and the accumulation that sums the moments and pixel
    /// pairs too, per connectivity (`flsl_number_shapes` or `flsl_number_blocks`,
    /// `flsl_accumulate[_cd[b]]_shapes{4,8}`).
    pub shapes: Option<ShapeKernels>,
    pub relabel: CudaFunction,
}

pub(super) struct ShapeKernels {
    /// The strip kernels that also write the foreground ranks the pair counts read, in the
    /// high half of the edge ranks (`flsl_strip_ranks{4,8}[_bytes]`).
    strip: [CudaFunction; 2],
    strip_bytes: [CudaFunction; 2],
    number: CudaFunction,
    pub accumulate: [CudaFunction; 2],
}

impl Kernels {
    pub fn load(gpu: &Gpu, variant: Variant) -> Result<Kernels> {
        let load = |name: &str| load(gpu, KernelFile::Flsl, name);
        let pair = |name: &str| -> Result<[CudaFunction; 2]> {
            Ok([load(&format!("{name}4"))?, load(&format!("{name}8"))?])
        };
        let otf = variant == Variant::Otf;
        let (strip, border, number) = match otf {
            true => ("flsl_strip_otf", "flsl_border_otf", "flsl_number_otf"),
            false => ("flsl_strip", "flsl_border", "flsl_number"),
        };
        let accumulate = match variant {
            Variant::Flsl => Some("flsl_accumulate"),
            Variant::Cd => Some("flsl_accumulate_cd"),
            Variant::CdBlock => Some("flsl_accumulate_cdb"),
            Variant::Otf => None,
        };
        Ok(Kernels {
            strip: pair(strip)?,
            strip_bytes: [
                load(&format!("{strip}4_bytes"))?,
                load(&format!("{strip}8_bytes"))?,
            ],
            border: pair(border)?,
            number: load(number)?,
            accumulate: accumulate.map(load).transpose()?,
            accumulate_wide: match variant {
                Variant::CdBlock => Some(load("flsl_accumulate_cd")?),
                _ => None,
            },
            shapes: match accumulate {
                Some(accumulate) if !otf => Some(ShapeKernels::load(gpu, variant, accumulate)?),
                _ => None,
            },
            relabel: load("flsl_relabel")?,
        })
    }

    /// The strip kernel of a run: with the foreground ranks for the shape sums, from the byte
    /// mask (`bytes`), for 8-connectivity (`c8`).
    pub fn strip(&self, shapes: bool, bytes: bool, c8: usize) -> &CudaFunction {
        let (strip, strip_bytes) = match (&self.shapes, shapes) {
            (Some(sk), true) => (&sk.strip, &sk.strip_bytes),
            _ => (&self.strip, &self.strip_bytes),
        };
        if bytes {
            &strip_bytes[c8]
        } else {
            &strip[c8]
        }
    }

    /// The numbering kernel of a run (with the shape sums or not).
    pub fn number(&self, shapes: bool) -> &CudaFunction {
        match (&self.shapes, shapes) {
            (Some(sk), true) => &sk.number,
            _ => &self.number,
        }
    }
}

impl ShapeKernels {
    /// The shape kernels beside the accumulation `accumulate` (its name).
    fn load(gpu: &Gpu, variant: Variant, accumulate: &str) -> Result<ShapeKernels> {
        let load = |name: &str| load(gpu, KernelFile::Flsl, name);
        // The block table's shape kernels take SHAPE_TABLE_BYTES of dynamic shared memory, more
        // than a kernel may without asking.
        let load_accumulate_shapes = |name: &str| -> Result<CudaFunction> {
            let f = load(name)?;
            if variant == Variant::CdBlock {
                f.set_attribute(
                    CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    SHAPE_TABLE_BYTES as i32,
                )
                .map_err(|e| cuda_err(&format!("giving {name} its shared memory"), e))?;
            }
            Ok(f)
        };
        let number = match variant {
            Variant::CdBlock => "flsl_number_blocks",
            _ => "flsl_number_shapes",
        };
        Ok(ShapeKernels {
            strip: [load("flsl_strip_ranks4")?, load("flsl_strip_ranks8")?],
            strip_bytes: [
                load("flsl_strip_ranks4_bytes")?,
                load("flsl_strip_ranks8_bytes")?,
            ],
            number: load(number)?,
            accumulate: [
                load_accumulate_shapes(&format!("{accumulate}_shapes4"))?,
                load_accumulate_shapes(&format!("{accumulate}_shapes8"))?,
            ],
        })
    }
}

#[cfg(test)]
mod tests {
    /// The block table's shape kernels are launched with the dynamic shared memory they lay
    /// their table out in.
    #[test]
    fn shape_table_bytes_match_the_kernels() {
        let flsl = include_str!("../../../../kernels/flsl.cu");
        assert_eq!(
            crate::ccl::cuda::launches::define(flsl, "SHAPE_TABLE_BYTES"),
            super::SHAPE_TABLE_BYTES
        );
    }
}
