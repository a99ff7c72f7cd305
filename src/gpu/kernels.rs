//! The CUDA C sources in `kernels/`, embedded in the binary and compiled by NVRTC at run time.
//! One file per algorithm family; the sources are data, the wrappers live beside this module.

use super::kernel_cache::CacheKey;
use crate::error::{Error, Result};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions, Ptx};

/// `kernels/common.cuh` followed by `kernels/<file>` (NVRTC gets one text per file, no includes).
macro_rules! with_common {
    ($file:literal) => {
        concat!(
            include_str!("../../kernels/common.cuh"),
            "\n#line 1 \"",
            $file,
            "\"\n",
            include_str!(concat!("../../kernels/", $file))
        )
    };
}

/// `common.cuh`, then `pixel_labels.cuh` (union-find on pixel label images), then the file: the
/// baseline algorithms that label pixels rather than segments.
macro_rules! with_pixel_labels {
    ($file:literal) => {
        concat!(
            include_str!("../../kernels/common.cuh"),
            "\n#line 1 \"pixel_labels.cuh\"\n",
            include_str!("../../kernels/pixel_labels.cuh"),
            "\n#line 1 \"",
            $file,
            "\"\n",
            include_str!(concat!("../../kernels/", $file))
        )
    };
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelFile {
    /// HA4 / HA4_64 strip labeling, border merge, relabel and analysis; shared utilities.
    Ha4,
    /// Generic analysis of a label image (first pixels, raster-order slots, per-pixel features).
    Analysis,
    /// FLSL, FLSL+OTF and FLSL+CD: full runs, one thread per run.
    Flsl,
    /// DLP-GPU (Cabaret et al. 2017): shared-memory tiles, border merging, relabel.
    Dlp,
    /// Komura label reduction (2015), square lattice.
    Komura,
    /// Shibata fastCCL: the iterative kernel.
    Shibata,
    /// Playne & Hawick 2018 block equivalence (CV-CUDA's algorithm).
    Playne,
    /// Allegretti et al. 2020 BKE, 2x2 blocks (OpenCV CUDA's algorithm).
    Bke,
    /// Grey-weighted (sub-pixel) centroids of a numbered label image.
    Subpixel,
    /// Shape descriptor sums (moments, pixel pairs) of a numbered label image.
    Descriptors,
    /// A global threshold on the device: the grey histogram and the packed mask.
    Threshold,
    /// OpenCV's statistics layout in caller memory, background row included (`device.rs`).
    OpencvLayout,
    /// Square fiducials: local threshold, candidate quads, corners and codes (`fiducial::gpu`).
    Fiducial,
    /// Frame-to-frame association of components into tracks (`track::gpu`).
    Track,
}

impl KernelFile {
    pub const ALL: &'static [KernelFile] = &[
        KernelFile::Ha4,
        KernelFile::Analysis,
        KernelFile::Flsl,
        KernelFile::Dlp,
        KernelFile::Komura,
        KernelFile::Shibata,
        KernelFile::Playne,
        KernelFile::Bke,
        KernelFile::Subpixel,
        KernelFile::Descriptors,
        KernelFile::Threshold,
        KernelFile::OpencvLayout,
        KernelFile::Fiducial,
        KernelFile::Track,
    ];

    pub fn file_name(self) -> &'static str {
        match self {
            KernelFile::Ha4 => "ha4.cu",
            KernelFile::Analysis => "analysis.cu",
            KernelFile::Flsl => "flsl.cu",
            KernelFile::Dlp => "dlp.cu",
            KernelFile::Komura => "komura.cu",
            KernelFile::Shibata => "shibata.cu",
            KernelFile::Playne => "playne.cu",
            KernelFile::Bke => "bke.cu",
            KernelFile::Subpixel => "subpixel.cu",
            KernelFile::Descriptors => "descriptors.cu",
            KernelFile::Threshold => "threshold.cu",
            KernelFile::OpencvLayout => "opencv_layout.cu",
            KernelFile::Fiducial => "fiducial.cu",
            KernelFile::Track => "track.cu",
        }
    }

    /// The file's source with `kernels/common.cuh` in front of it.
    pub fn source(self) -> &'static str {
        match self {
            KernelFile::Ha4 => with_common!("ha4.cu"),
            KernelFile::Analysis => with_common!("analysis.cu"),
            KernelFile::Flsl => with_common!("flsl.cu"),
            KernelFile::Dlp => with_pixel_labels!("dlp.cu"),
            KernelFile::Komura => with_pixel_labels!("komura.cu"),
            KernelFile::Shibata => with_pixel_labels!("shibata.cu"),
            KernelFile::Playne => with_pixel_labels!("playne.cu"),
            KernelFile::Bke => with_pixel_labels!("bke.cu"),
            KernelFile::Subpixel => with_common!("subpixel.cu"),
            KernelFile::Descriptors => with_common!("descriptors.cu"),
            KernelFile::Threshold => with_common!("threshold.cu"),
            KernelFile::OpencvLayout => with_common!("opencv_layout.cu"),
            KernelFile::Fiducial => with_common!("fiducial.cu"),
            KernelFile::Track => with_common!("track.cu"),
        }
    }
}

/// NVRTC wants a `&'static str` architecture; map the compute capability to one we know.
/// Unknown newer devices get the newest virtual architecture NVRTC 12 and 13 both know,
/// which the driver JIT-compiles forward.
pub fn arch_for(cc: (i32, i32)) -> &'static str {
    match cc {
        (7, 0) => "compute_70",
        (7, 5) => "compute_75",
        (8, 0) => "compute_80",
        (8, 6) => "compute_86",
        (8, 7) => "compute_87",
        (8, 9) => "compute_89",
        (9, 0) => "compute_90",
        (major, _) if major >= 9 => "compute_90",
        _ => "compute_75",
    }
}

/// The NVRTC options `file` is compiled with (besides the architecture). The fiducial
/// kernels port the CPU detector's double arithmetic and must round as it does: no fused
/// multiply-adds there.
fn nvrtc_options(file: KernelFile) -> Vec<String> {
    let mut options = vec!["--std=c++17".into(), "-lineinfo".into()];
    if matches!(file, KernelFile::Fiducial | KernelFile::Track) {
        options.push("--fmad=false".into());
    }
    options
}

/// The version of the NVRTC library loaded (a kernel cache entry is only valid for it).
pub fn nvrtc_version() -> Result<(i32, i32)> {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: writes two ints; the caller has checked that libnvrtc can be loaded.
    let status = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    if status != cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(Error::CudaUnavailable(format!(
            "asking NVRTC for its version failed ({status:?})"
        )));
    }
    Ok((major, minor))
}

/// The key of `file`'s compiled code for `arch` in the kernel cache: PTX for a virtual
/// architecture (`compute_XY`), CUBIN for a real one (`sm_XY`).
pub fn cache_key(file: KernelFile, arch: &str, nvrtc: (i32, i32)) -> CacheKey {
    CacheKey::new(
        file.file_name(),
        arch,
        file.source(),
        &nvrtc_options(file),
        nvrtc,
    )
}

/// The real (SASS) architecture of a device, `sm_XY`: NVRTC compiles CUBIN for it, which the
/// driver loads without compiling anything (PTX is JIT-compiled by the driver at every load:
/// seconds for all kernel files).
pub fn sass_arch(cc: (i32, i32)) -> String {
    format!("sm_{}{}", cc.0, cc.1)
}

/// Compiles one kernel file to CUBIN for the device architecture `sm_arch` (`sass_arch`).
/// Fails when this NVRTC does not know the architecture; the caller then falls back to PTX.
pub fn compile_cubin(file: KernelFile, sm_arch: &str) -> Result<Vec<u8>> {
    use cudarc::nvrtc::{result, sys};
    let fail = |why: String| {
        Error::CudaUnavailable(format!(
            "NVRTC failed to compile kernels/{} for {sm_arch}: {why}",
            file.file_name()
        ))
    };
    let source = std::ffi::CString::new(file.source()).map_err(|e| fail(e.to_string()))?;
    let name = std::ffi::CString::new(file.file_name()).map_err(|e| fail(e.to_string()))?;
    let prog = result::create_program(&source, Some(&name)).map_err(|e| fail(e.to_string()))?;
    let mut options = nvrtc_options(file);
    options.push(format!("--gpu-architecture={sm_arch}"));
    // SAFETY: `prog` was created above and is destroyed once, at the end; the buffers handed to
    // NVRTC are as large as it says.
    let cubin = unsafe {
        let compiled = result::compile_program(prog, &options).map_err(|e| {
            let log = result::get_program_log(prog)
                .map(|log| {
                    std::ffi::CStr::from_ptr(log.as_ptr())
                        .to_string_lossy()
                        .into_owned()
                })
                .unwrap_or_default();
            fail(format!("{e}: {log}"))
        });
        let cubin = compiled.and_then(|()| {
            let mut size = 0usize;
            let status = sys::nvrtcGetCUBINSize(prog, &mut size);
            if status != sys::nvrtcResult::NVRTC_SUCCESS || size == 0 {
                return Err(fail(format!("no CUBIN ({status:?})")));
            }
            let mut bytes = vec![0u8; size];
            let status = sys::nvrtcGetCUBIN(prog, bytes.as_mut_ptr().cast());
            if status != sys::nvrtcResult::NVRTC_SUCCESS {
                return Err(fail(format!("reading the CUBIN failed ({status:?})")));
            }
            Ok(bytes)
        });
        let _ = result::destroy_program(prog);
        cubin
    }?;
    Ok(cubin)
}

/// Compiles one kernel file to PTX. `arch = None` uses NVRTC's default (used by the CI test,
/// which has NVRTC but no GPU).
pub fn compile(file: KernelFile, arch: Option<&'static str>) -> Result<Ptx> {
    let opts = CompileOptions {
        arch,
        name: Some(file.file_name().to_string()),
        options: nvrtc_options(file),
        ..Default::default()
    };
    compile_ptx_with_opts(file.source(), opts).map_err(|e| {
        let why = match &e {
            cudarc::nvrtc::CompileError::CompileError { log, .. } => {
                log.to_string_lossy().into_owned()
            }
            other => other.to_string(),
        };
        Error::CudaUnavailable(format!(
            "NVRTC failed to compile kernels/{}: {why}",
            file.file_name()
        ))
    })
}

/// The fields of `struct name` in a kernel file's `source`, as "type name" lines (one per
/// name where a line declares several): what a test compares a Rust mirror with.
#[cfg(test)]
pub fn struct_fields(source: &str, name: &str) -> Vec<String> {
    let start = source
        .find(&format!("struct {name} {{"))
        .unwrap_or_else(|| panic!("struct {name}"));
    let body = &source[start..start + source[start..].find("};").expect("end")];
    body.lines()
        .skip(1)
        .map(|l| l.split("//").next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .flat_map(|l| {
            let l = l.trim_end_matches(';');
            let (ty, names) = l.split_once(' ').expect("type and names");
            names
                .split(',')
                .map(|n| format!("{ty} {}", n.trim()))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Compiles every kernel with NVRTC (no GPU needed). CI installs NVRTC from PyPI; a machine
    /// without it fails here on purpose, so a CUDA syntax error can never land unnoticed.
    #[test]
    fn every_kernel_compiles_with_nvrtc() {
        // SAFETY: only tries to dlopen the library.
        assert!(
            unsafe { cudarc::nvrtc::sys::is_culib_present() },
            "libnvrtc not found: `pip install nvidia-cuda-nvrtc-cu12` and put its lib/ on LD_LIBRARY_PATH (see .ci/run)"
        );
        for file in KernelFile::ALL {
            for arch in ["compute_75", "compute_90"] {
                if let Err(e) = compile(*file, Some(arch)) {
                    panic!("{arch}: {e}");
                }
            }
        }
    }

    /// NVRTC compiles CUBIN for the real architectures of the GPUs markerscope is run on (no
    /// GPU needed): an ELF image the driver loads as it is.
    #[test]
    fn every_kernel_compiles_to_cubin() {
        for file in KernelFile::ALL {
            for cc in [(7, 5), (9, 0)] {
                let cubin = compile_cubin(*file, &sass_arch(cc)).unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(&cubin[..4], b"\x7fELF", "{}", file.file_name());
            }
        }
        // An architecture NVRTC does not know is an error (the caller falls back to PTX).
        assert!(compile_cubin(KernelFile::Subpixel, "sm_1").is_err());
    }

    /// The fiducial kernels are compiled without FMA contraction (their doubles round as the
    /// CPU's do): only the math library's own fused multiply-adds (sin, atan2, ...) are left in
    /// their PTX, a fraction of what contraction makes of the same source.
    #[test]
    fn fiducial_kernels_are_compiled_without_fma_contraction() {
        let fmas = |options: Vec<String>| {
            let ptx = compile_ptx_with_opts(
                KernelFile::Fiducial.source(),
                CompileOptions {
                    arch: Some("compute_90"),
                    options,
                    ..Default::default()
                },
            )
            .unwrap();
            let text = super::super::ptx_text(&ptx).expect("PTX is text");
            assert!(text.contains(".entry fid_decode"), "{text}");
            text.matches("fma.rn.f64").count()
        };
        let ours = fmas(nvrtc_options(KernelFile::Fiducial));
        let contracted = fmas(vec!["--std=c++17".into()]);
        assert!(
            2 * ours < contracted,
            "{ours} fused, {contracted} with contraction"
        );
        assert!(!nvrtc_options(KernelFile::Ha4).contains(&"--fmad=false".to_string()));
    }

    /// The tracking kernels use no math library call that fuses: none at all is left in their
    /// PTX, so every double rounds as the CPU tracker's.
    #[test]
    fn tracking_kernels_have_no_fused_multiply_add() {
        let ptx = compile_ptx_with_opts(
            KernelFile::Track.source(),
            CompileOptions {
                arch: Some("compute_90"),
                options: nvrtc_options(KernelFile::Track),
                ..Default::default()
            },
        )
        .unwrap();
        let text = super::super::ptx_text(&ptx).expect("PTX is text");
        assert!(text.contains(".entry trk_gather"), "{text}");
        assert_eq!(text.matches("fma.rn.f64").count(), 0);
    }

    /// What NVRTC compiles goes through the kernel cache unchanged (the GPU machine loads it).
    #[test]
    fn compiled_ptx_round_trips_through_the_kernel_cache() {
        let nvrtc = nvrtc_version().expect("NVRTC version");
        assert!(nvrtc.0 >= 11, "{nvrtc:?}");
        let ptx = compile(KernelFile::Subpixel, Some("compute_90")).unwrap();
        let text = super::super::ptx_text(&ptx).expect("PTX is text");
        assert!(text.contains(".entry"), "{text}");
        let dir = tempfile::tempdir().unwrap();
        let cache = super::super::kernel_cache::KernelCache::at(dir.path());
        let key = cache_key(KernelFile::Subpixel, "compute_90", nvrtc);
        assert_ne!(key, cache_key(KernelFile::Ha4, "compute_90", nvrtc));
        cache.put(&key, text.as_bytes()).unwrap();
        assert_eq!(cache.get(&key).as_deref(), Some(text.as_bytes()));
        let cubin = compile_cubin(KernelFile::Subpixel, "sm_90").unwrap();
        let key = cache_key(KernelFile::Subpixel, "sm_90", nvrtc);
        cache.put(&key, &cubin).unwrap();
        assert_eq!(cache.get(&key), Some(cubin));
    }
}
