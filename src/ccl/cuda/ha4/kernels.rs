//! The kernels of `kernels/ha4.cu` a variant loads, and the ones a run picks from them.

use super::Variant;
use crate::ccl::cuda::mask_input::MaskInput;
use crate::ccl::Connectivity;
use crate::error::Result;
use crate::gpu::kernels::KernelFile;
use crate::gpu::launch::load;
use crate::gpu::Gpu;
use cudarc::driver::CudaFunction;

pub(super) struct Kernels {
    strip: CudaFunction,
    border: CudaFunction,
    /// 8-connectivity strip labeling and border merge (word-per-lane variants only).
    strip8: Option<CudaFunction>,
    border8: Option<CudaFunction>,
    /// Strip labeling from the byte mask, 4- and 8-connectivity (word-per-lane variants only):
    /// the kernel packs the mask itself.
    strip_bytes: Option<[CudaFunction; 2]>,
    /// The border kernels split each border row between warps (word-per-lane family; see
    /// `border_launch`); the paper's kernels take one warp per row.
    pub border_split: bool,
    pub relabel_find: CudaFunction,
    pub relabel_slot: CudaFunction,
    /// Flatten, count, scan and slots in one kernel (`number_slots*`).
    number: CudaFunction,
    pub accumulate: CudaFunction,
    /// Some when `accumulate` is `accumulatew`, which has a block table (it takes row_offset and
    /// runs TABLE_ROWS rows per block): `accumulate_cdw`, for frames too wide for the table
    /// (`table_fits`).
    pub accumulate_wide: Option<CudaFunction>,
    /// HA+OTF kernels (Variant::Otf only).
    otf: Option<OtfKernels>,
}

/// Strip labeling and border merge with on-the-fly features, and slots from the root features.
struct OtfKernels {
    strip4: CudaFunction,
    strip8: CudaFunction,
    /// strip4 and strip8 from the byte mask.
    strip_bytes: [CudaFunction; 2],
    border4: CudaFunction,
    border8: CudaFunction,
    number: CudaFunction,
}

/// The labeling kernels of one run: its connectivity, with on-the-fly features or not.
pub(super) struct RunKernels<'a> {
    pub strip: &'a CudaFunction,
    pub border: &'a CudaFunction,
    pub number: &'a CudaFunction,
    /// The features travel with the merges (HA+OTF): no feature pass.
    pub otf: bool,
}

impl Kernels {
    pub fn load(gpu: &Gpu, variant: Variant) -> Result<Kernels> {
        let suffix = match variant {
            Variant::Ha4 => "32",
            Variant::Ha4x64 => "64",
            Variant::Words | Variant::Words8 | Variant::Naive | Variant::Cd | Variant::Otf => "w",
        };
        let words = suffix == "w";
        let load = |name: &str| load(gpu, KernelFile::Ha4, name);
        let load_if = |on: bool, name: &str| on.then(|| load(name)).transpose();
        let accumulate = match variant {
            Variant::Cd => "accumulate_cdw".to_string(),
            _ => format!("accumulate{suffix}"),
        };
        let strip_bytes = match words {
            true => Some([load("strip_labelw_bytes")?, load("strip_label8w_bytes")?]),
            false => None,
        };
        Ok(Kernels {
            strip: load(&format!("strip_label{suffix}"))?,
            border: load(&format!("border_merge{suffix}"))?,
            strip8: load_if(words, "strip_label8w")?,
            border8: load_if(words, "border_merge8w")?,
            strip_bytes,
            border_split: words,
            relabel_find: load(&format!("relabel_find{suffix}"))?,
            relabel_slot: load(&format!("relabel_slot{suffix}"))?,
            number: load(&format!("number_slots{suffix}"))?,
            accumulate: load(&accumulate)?,
            accumulate_wide: load_if(words && variant != Variant::Cd, "accumulate_cdw")?,
            otf: match variant {
                Variant::Otf => Some(OtfKernels {
                    strip4: load("strip_label_otfw")?,
                    strip8: load("strip_label8_otfw")?,
                    strip_bytes: [
                        load("strip_label_otfw_bytes")?,
                        load("strip_label8_otfw_bytes")?,
                    ],
                    border4: load("border_merge_otfw")?,
                    border8: load("border_merge8_otfw")?,
                    number: load("number_slots_otfw")?,
                }),
                _ => None,
            },
        })
    }

    /// Whether the strip kernels can take the byte mask (and pack it themselves).
    pub fn take_bytes(&self) -> bool {
        self.strip_bytes.is_some()
    }

    /// The kernels of a run on the mask where `input` is: the on-the-fly ones when the variant
    /// has them and `features` (statistics without the analysis stage; labels alone take the
    /// plain kernels). `name` is the algorithm's, for the error of a connectivity it lacks.
    pub fn for_run(
        &self,
        name: &str,
        connectivity: Connectivity,
        input: MaskInput,
        features: bool,
    ) -> Result<RunKernels<'_>> {
        let c8 = usize::from(connectivity == Connectivity::Eight);
        let (strip, border) = match (connectivity, &self.strip8, &self.border8) {
            (Connectivity::Four, _, _) => (&self.strip, &self.border),
            (Connectivity::Eight, Some(s8), Some(b8)) => (s8, b8),
            (Connectivity::Eight, _, _) => {
                return Err(crate::ccl::unsupported_connectivity(name, connectivity))
            }
        };
        let otf = self.otf.as_ref().filter(|_| features);
        let bytes = input == MaskInput::Bytes;
        let strip = match (otf, &self.strip_bytes) {
            (Some(o), _) if bytes => &o.strip_bytes[c8],
            (None, Some(plain)) if bytes => &plain[c8],
            (None, None) if bytes => {
                unreachable!("byte input is only chosen when byte strip kernels exist")
            }
            (Some(o), _) => [&o.strip4, &o.strip8][c8],
            (None, _) => strip,
        };
        Ok(match otf {
            Some(o) => RunKernels {
                strip,
                border: [&o.border4, &o.border8][c8],
                number: &o.number,
                otf: true,
            },
            None => RunKernels {
                strip,
                border,
                number: &self.number,
                otf: false,
            },
        })
    }
}
