//! Loading a kernel and the launch geometry and errors shared by every kernel wrapper.

use super::kernels::KernelFile;
use super::{cuda_err, Gpu};
use crate::error::{Error, Result};
use cudarc::driver::{CudaFunction, CudaStream, LaunchArgs, LaunchConfig};

/// A 1-D launch of `threads` per block covering `items` threads (`items` <= 2^32, so the grid
/// always fits).
pub fn linear_launch(items: u64, threads: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (items.div_ceil(threads as u64).max(1) as u32, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// A launch of `bw × bh` blocks covering a `w × h` grid of items, blocks numbered along a 1-D
/// grid (row-major; the kernel gets the number of block columns) so that tall images fit.
/// Returns the config and the number of block columns.
pub fn rect_launch(w: u32, h: u32, bw: u32, bh: u32, shared_mem_bytes: u32) -> (LaunchConfig, u32) {
    let cols = w.div_ceil(bw);
    let rows = h.div_ceil(bh);
    let cfg = LaunchConfig {
        grid_dim: ((cols as u64 * rows as u64) as u32, 1, 1),
        block_dim: (bw, bh, 1),
        shared_mem_bytes,
    };
    (cfg, cols)
}

/// Loads kernel `name` from a module.
pub fn load(gpu: &Gpu, file: KernelFile, name: &str) -> Result<CudaFunction> {
    gpu.module(file)
        .load_function(name)
        .map_err(|e| cuda_err(&format!("loading kernel {name}"), e))
}

/// The error of a failed launch of kernel `name`.
pub fn launch_err(name: &str, e: impl std::fmt::Display) -> Error {
    cuda_err(&format!("launching {name}"), e)
}

/// One kernel launch as a type of its own: it holds the kernel and its arguments, knows its grid
/// and names the step it ends in a run's timings.
pub trait KernelLaunch {
    /// The step this launch ends.
    fn step(&self) -> &'static str;

    /// Queues the kernel on `stream`.
    fn queue(self, stream: &CudaStream) -> Result<()>;
}

/// Launches the kernel whose arguments `args` holds on `config`'s grid; `name` is the kernel's
/// name in the error.
///
/// # Safety
/// As `LaunchArgs::launch`: the arguments match the kernel's parameters in type and order, and
/// every buffer is large enough for the threads of `config`.
pub unsafe fn launch(args: &mut LaunchArgs<'_>, config: LaunchConfig, name: &str) -> Result<()> {
    args.launch(config)
        .map(drop)
        .map_err(|e| launch_err(name, e))
}
