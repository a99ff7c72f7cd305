//! The CUDA device, below every stage that runs on it: one context, one stream (the context's
//! default stream; each of several sources' pipelines has one of its own,
//! `Backends::on_own_stream`), kernels compiled once per process by NVRTC (`kernels`, cached
//! by `kernel_cache`), page-locked staging for uploads (`staging`), step events (`events`),
//! launch geometry (`launch`) and buffers (`buffers`). The thresholding and the labeling build their device sides on it.
//!
//! cudarc opens libcuda and libnvrtc at run time and panics if they are missing, so `Gpu::open`
//! checks for both first and returns an error the caller turns into `"CPU backend: <reason>"`.

pub mod buffers;
pub mod device_plane;
pub mod events;
pub mod kernel_cache;
pub mod kernels;
pub mod launch;
pub mod staging;

use crate::error::{Error, Result};
use crate::tuning::GpuTuning;
use cudarc::driver::{CudaContext, CudaEvent, CudaModule, CudaStream};
use cudarc::nvrtc::Ptx;
use kernel_cache::KernelCache;
use kernels::KernelFile;
use std::sync::Arc;

/// An opened device with its stream and the compiled kernel modules.
pub struct Gpu {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    pub name: String,
    pub compute_capability: (i32, i32),
    pub total_memory: usize,
    modules: Vec<(KernelFile, Arc<CudaModule>)>,
    /// Where the kernels came from (cache or NVRTC) and how long that took.
    pub kernels: String,
    /// How the labelers on this device run (frames in flight, CUDA graphs).
    pub tuning: GpuTuning,
}

impl Gpu {
    /// Opens device `ordinal` and compiles every kernel file for it (or reads them from
    /// `tuning`'s kernel cache).
    pub fn open(ordinal: usize, tuning: &GpuTuning) -> Result<Gpu> {
        // SAFETY: these only try to dlopen the libraries.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(Error::CudaUnavailable(
                "the NVIDIA driver library (libcuda.so.1) was not found; install the NVIDIA driver to use the GPU".into(),
            ));
        }
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err(Error::CudaUnavailable(
                "the NVRTC library (libnvrtc.so) was not found; install the CUDA runtime compiler \
                 (e.g. `pip install nvidia-cuda-nvrtc-cu12` and add its lib/ folder to LD_LIBRARY_PATH)"
                    .into(),
            ));
        }
        let count =
            CudaContext::device_count().map_err(|e| cuda_unavailable("counting devices", e))?;
        if count <= ordinal as i32 {
            return Err(Error::CudaUnavailable(format!(
                "no CUDA device {ordinal} ({count} device(s) found)"
            )));
        }
        let ctx =
            CudaContext::new(ordinal).map_err(|e| cuda_unavailable("creating the context", e))?;
        let name = ctx.name().unwrap_or_else(|_| "unknown NVIDIA GPU".into());
        let compute_capability = ctx
            .compute_capability()
            .map_err(|e| cuda_unavailable("reading the compute capability", e))?;
        let total_memory = ctx.total_mem().unwrap_or(0);
        // One stream only: cudarc's cross-stream event tracking would add an event record to
        // every launch and allocation for nothing.
        // SAFETY: all work of this context goes to the one stream below.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.default_stream();
        let arch = kernels::arch_for(compute_capability);
        let sm_arch = kernels::sass_arch(compute_capability);
        let nvrtc = kernels::nvrtc_version()?;
        let cache = tuning.kernel_cache.as_ref().map(KernelCache::at);
        let start = std::time::Instant::now();
        let mut modules = Vec::new();
        let mut from_cache = 0;
        let mut as_ptx = 0;
        for file in KernelFile::ALL {
            let (module, cached, ptx) =
                load_kernel_file(&ctx, *file, (&sm_arch, arch), nvrtc, cache.as_ref())?;
            from_cache += usize::from(cached);
            as_ptx += usize::from(ptx);
            modules.push((*file, module));
        }
        let code = match as_ptx {
            0 => format!("CUBIN for {sm_arch}"),
            n => format!(
                "{n} as PTX for {arch} (NVRTC has no CUBIN for {sm_arch}; the driver compiles it)"
            ),
        };
        let kernels = format!(
            "{} kernel files, {code}, in {:.2} s: {from_cache} from the cache, {} compiled by NVRTC {}.{}; cache {}",
            modules.len(),
            start.elapsed().as_secs_f64(),
            modules.len() - from_cache,
            nvrtc.0,
            nvrtc.1,
            match &cache {
                Some(c) => c.dir().display().to_string(),
                None => "off".into(),
            }
        );
        Ok(Gpu {
            ctx,
            stream,
            name,
            compute_capability,
            total_memory,
            modules,
            kernels,
            tuning: tuning.clone(),
        })
    }

    /// The same device and kernels with a (non-blocking) stream of their own: for capturing
    /// CUDA graphs (the context's legacy default stream, `stream`, which orders itself with the
    /// device's other blocking streams, cannot be captured; the graphs are launched on
    /// `stream`), and for work that should run beside the engine's (frames in flight, the
    /// marker lanes).
    pub fn with_own_stream(&self) -> Result<Gpu> {
        let stream = self
            .ctx
            .new_stream()
            .map_err(|e| cuda_err("creating a stream", e))?;
        Ok(Gpu {
            ctx: self.ctx.clone(),
            stream,
            name: self.name.clone(),
            compute_capability: self.compute_capability,
            total_memory: self.total_memory,
            modules: self.modules.clone(),
            kernels: self.kernels.clone(),
            tuning: self.tuning.clone(),
        })
    }

    pub fn description(&self) -> String {
        format!(
            "{} (sm_{}{}, {:.0} GiB)",
            self.name,
            self.compute_capability.0,
            self.compute_capability.1,
            self.total_memory as f64 / (1u64 << 30) as f64
        )
    }

    pub fn module(&self, file: KernelFile) -> &Arc<CudaModule> {
        &self
            .modules
            .iter()
            .find(|(f, _)| *f == file)
            .expect("every kernel file is compiled in Gpu::open")
            .1
    }

    /// A timing event (CU_EVENT_DEFAULT: `new_event(None)` would disable timing).
    pub fn timing_event(&self) -> Result<CudaEvent> {
        self.ctx
            .new_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(|e| cuda_err("creating an event", e))
    }
}

/// Loads one kernel file's module: CUBIN for the device's own architecture from the cache or
/// from NVRTC (the driver loads it without compiling); where NVRTC cannot make CUBIN for the
/// device (a device newer than this NVRTC), PTX for `ptx_arch`, which the driver JIT-compiles.
/// Whatever is compiled is cached (best effort). Returns whether the cache had it and whether
/// it is PTX.
fn load_kernel_file(
    ctx: &Arc<CudaContext>,
    file: KernelFile,
    (sm_arch, ptx_arch): (&str, &'static str),
    nvrtc: (i32, i32),
    cache: Option<&KernelCache>,
) -> Result<(Arc<CudaModule>, bool, bool)> {
    let load = |code: Ptx| {
        ctx.load_module(code).map_err(|e| {
            Error::CudaUnavailable(format!("loading module {}: {e}", file.file_name()))
        })
    };
    // An entry the driver refuses is compiled again below and replaced.
    let cubin_key = kernels::cache_key(file, sm_arch, nvrtc);
    if let Some(cubin) = cache.and_then(|c| c.get(&cubin_key)) {
        if let Ok(module) = load(Ptx::from_binary(cubin)) {
            return Ok((module, true, false));
        }
    }
    let ptx_key = kernels::cache_key(file, ptx_arch, nvrtc);
    if let Some(ptx) = cache.and_then(|c| c.get(&ptx_key)) {
        if let Ok(module) = String::from_utf8(ptx)
            .map_err(|_| ())
            .and_then(|text| load(Ptx::from_src(text)).map_err(|_| ()))
        {
            return Ok((module, true, true));
        }
    }
    if let Ok(cubin) = kernels::compile_cubin(file, sm_arch) {
        if let Ok(module) = load(Ptx::from_binary(cubin.clone())) {
            // A cache that cannot be written only costs the next start this compilation.
            if let Some(cache) = cache {
                let _ = cache.put(&cubin_key, &cubin);
            }
            return Ok((module, false, false));
        }
    }
    let ptx = kernels::compile(file, Some(ptx_arch))?;
    if let (Some(cache), Some(text)) = (cache, ptx_text(&ptx)) {
        let _ = cache.put(&ptx_key, text.as_bytes());
    }
    Ok((load(ptx)?, false, true))
}

/// The text of PTX that NVRTC produced (its image ends with a NUL).
pub(crate) fn ptx_text(ptx: &Ptx) -> Option<String> {
    let bytes = ptx.as_bytes()?;
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8(bytes[..end].to_vec()).ok()
}

pub(crate) fn cuda_err(step: &str, e: impl std::fmt::Display) -> Error {
    Error::Cuda {
        step: step.to_string(),
        why: e.to_string(),
    }
}

fn cuda_unavailable(step: &str, e: impl std::fmt::Display) -> Error {
    Error::CudaUnavailable(format!("{step}: {e}"))
}

/// Device-to-device copy bandwidth in GB/s (bytes read + bytes written, per second): the
/// bandwidth ceiling the benchmark compares kernels against. Best of `repeat` copies of `bytes`.
pub fn measure_copy_bandwidth(gpu: &Gpu, bytes: usize, repeat: u32) -> Result<f64> {
    let s = &gpu.stream;
    let src = s
        .alloc_zeros::<u8>(bytes)
        .map_err(|e| cuda_err("allocating the copy buffers", e))?;
    let mut dst = s
        .alloc_zeros::<u8>(bytes)
        .map_err(|e| cuda_err("allocating the copy buffers", e))?;
    let (start, end) = (gpu.timing_event()?, gpu.timing_event()?);
    let mut best_ms = f32::INFINITY;
    for _ in 0..repeat.max(1) + 1 {
        start
            .record(s)
            .map_err(|e| cuda_err("recording an event", e))?;
        s.memcpy_dtod(&src, &mut dst)
            .map_err(|e| cuda_err("copying", e))?;
        end.record(s)
            .map_err(|e| cuda_err("recording an event", e))?;
        end.synchronize()
            .map_err(|e| cuda_err("waiting for the GPU", e))?;
        best_ms = best_ms.min(
            start
                .elapsed_ms(&end)
                .map_err(|e| cuda_err("reading event times", e))?,
        );
    }
    Ok(2.0 * bytes as f64 / (best_ms as f64 * 1e-3) / 1e9)
}
