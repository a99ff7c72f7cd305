//! Launch geometry and launches the CUDA labelers share: the row, border, table and scan
//! kernels' blocks, the byte-mask packing, and the connectivity check before a launch.

use super::mask_input::DeviceMask;
use crate::ccl::Connectivity;
use crate::error::Result;
use crate::gpu::kernels::KernelFile;
use crate::gpu::launch::{launch, load, KernelLaunch};
use crate::gpu::Gpu;
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};

/// The error for an algorithm that only supports `supported`, asked for `connectivity`.
pub fn check_connectivity(
    name: &str,
    connectivity: Connectivity,
    supported: &[Connectivity],
) -> Result<()> {
    if !supported.contains(&connectivity) {
        return Err(crate::ccl::unsupported_connectivity(name, connectivity));
    }
    Ok(())
}

/// Rows per block of the row kernels (one warp per row); BLOCK_ROWS in ha4.cu, which sizes the
/// shared memory of HA's relabel.
pub const ROWS_PER_BLOCK: u32 = 8;

/// Launch geometry of a kernel with one warp per image row: blockDim = (32, rows_per_block).
pub(super) fn warp_rows_launch(height: u32, rows_per_block: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (height.div_ceil(rows_per_block), 1, 1),
        block_dim: (32, rows_per_block, 1),
        shared_mem_bytes: 0,
    }
}

/// Launch geometry of a row kernel: blockDim = (32, ROWS_PER_BLOCK), one warp per image row.
pub fn rows_launch(height: u32) -> LaunchConfig {
    warp_rows_launch(height, ROWS_PER_BLOCK)
}

/// Most warps that share one border row in the border-merge kernels.
const BORDER_PARTS_MAX: u32 = 16;

/// Launch geometry of a border-merge kernel: one warp per border row and part of it, the parts
/// (gridDim.y) being about 1024 pixels each. There are few border rows (one per strip), and a
/// warp per row alone leaves most of the GPU idle while each warp walks its row.
pub fn border_launch(borders: u32, width: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (
            borders.div_ceil(ROWS_PER_BLOCK),
            width.div_ceil(1024).clamp(1, BORDER_PARTS_MAX),
            1,
        ),
        block_dim: (32, ROWS_PER_BLOCK, 1),
        shared_mem_bytes: 0,
    }
}

/// Rows per block of the kernels that sum features in a shared-memory table (`TABLE_ROWS` in
/// common.cuh).
pub const TABLE_ROWS: u32 = 16;

/// Whether a frame `width` pixels wide fits the block table: an entry keeps Σ area · dy (dy the
/// row within the block) in 32 bits, at most (0 + 1 + … + TABLE_ROWS − 1) · width (`TableOf` in
/// common.cuh). Wider frames (over 35.7 million pixels) take the kernels without a table.
pub fn table_fits(width: u32) -> bool {
    let dy_sum = (TABLE_ROWS as u64) * (TABLE_ROWS as u64 - 1) / 2;
    dy_sum * width as u64 <= u32::MAX as u64
}

/// Launch geometry of a row kernel with a block table: blockDim = (32, TABLE_ROWS).
pub fn table_launch(height: u32) -> LaunchConfig {
    warp_rows_launch(height, TABLE_ROWS)
}

/// Launch geometry of the single-block row-count scan (`scan_rows`, SCAN_THREADS in common.cuh).
pub fn scan_launch() -> LaunchConfig {
    LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (1024, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// The byte-mask packing kernels every kernel file has: `pack_bytes`, and the vectorised
/// `pack_bytes16` for rows that start 16-byte aligned (width % 16 == 0).
pub struct PackKernels {
    pack: CudaFunction,
    pack16: CudaFunction,
}

impl PackKernels {
    pub fn load(gpu: &Gpu, file: KernelFile) -> Result<PackKernels> {
        Ok(PackKernels {
            pack: load(gpu, file, "pack_bytes")?,
            pack16: load(gpu, file, "pack_bytes16")?,
        })
    }

    /// The packing of the device mask's bytes (0 / non-zero per pixel) into its bit-packed
    /// words.
    pub fn of<'a>(&'a self, device: &'a mut DeviceMask) -> PackBits<'a> {
        let (width, height, words_per_row) = (device.width, device.height, device.words_per_row);
        let (bytes, mask) = (&device.bytes, &mut device.packed);
        let kernel = if width % 16 == 0 {
            &self.pack16
        } else {
            &self.pack
        };
        PackBits {
            kernel,
            bytes,
            mask,
            sizes: [width as i32, height as i32, words_per_row as i32],
        }
    }
}

/// `pack_bytes[16]`: a byte mask into the bit-packed mask, one warp per row.
pub struct PackBits<'a> {
    kernel: &'a CudaFunction,
    bytes: &'a CudaSlice<u8>,
    mask: &'a mut CudaSlice<u32>,
    /// Width, height, words per row.
    sizes: [i32; 3],
}

impl KernelLaunch for PackBits<'_> {
    fn step(&self) -> &'static str {
        "pack bits"
    }

    fn queue(self, stream: &CudaStream) -> Result<()> {
        let [w, h, wpr] = self.sizes;
        let mut args = stream.launch_builder(self.kernel);
        args.arg(self.bytes)
            .arg(self.mask)
            .arg(&w)
            .arg(&h)
            .arg(&wpr);
        // SAFETY: matches `pack_bytes[16](const uchar*, u32*, int, int, int)`; the caller sizes
        // `bytes` to width × height and `mask` to words_per_row × height.
        unsafe { launch(&mut args, rows_launch(h as u32), "pack_bytes") }
    }
}

/// The value of `#define name value` in a kernel source (tests: constants the host shares with
/// the kernels).
#[cfg(test)]
pub(super) fn define(source: &str, name: &str) -> u32 {
    source
        .lines()
        .find_map(|line| {
            let mut words = line.split_whitespace();
            match (words.next(), words.next(), words.next()) {
                (Some("#define"), Some(n), Some(v)) if n == name => v.parse().ok(),
                _ => None,
            }
        })
        .unwrap_or_else(|| panic!("no #define {name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The block shapes launched here are the ones the kernels size their shared memory for: a
    /// mismatch would index past it (the look-back's row table, the block feature table).
    #[test]
    fn block_shapes_match_the_kernels() {
        let common = include_str!("../../../kernels/common.cuh");
        assert_eq!(define(common, "TABLE_ROWS"), TABLE_ROWS);
        assert_eq!(define(common, "SCAN_THREADS"), scan_launch().block_dim.0);
        let ha4 = include_str!("../../../kernels/ha4.cu");
        assert_eq!(define(ha4, "BLOCK_ROWS"), ROWS_PER_BLOCK);
    }

    #[test]
    fn the_block_table_takes_frames_up_to_its_32_bit_row_sums() {
        assert!(table_fits(1) && table_fits(65536) && table_fits(35_791_394));
        assert!(!table_fits(35_791_395) && !table_fits(u32::MAX));
    }
}
