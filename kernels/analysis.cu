// Generic analysis stage: statistics of the components of any label image, numbered 1..N in
// raster order of each component's first pixel. Used after pixel-label algorithms, and as the
// papers' "naive" CCA (one set of feature atomics per foreground pixel).
//
// Input: a label image, u32 per pixel, 0 = background; any other value l (1 <= l <= pixels) is
// the same for every pixel of a component and distinct between components (e.g. root + 1).
// Values above the pixel count are ignored (never used as an index).
//
// Kernels, in order (all row kernels: blockDim = (32, rows per block), one warp per row, lane i
// handles x = 32c + i of chunk c, so loads are coalesced):
//   (memset)     first_inv = 0
//   an_first     first_inv[l - 1] = max of ~index over the pixels of label l: the complement of
//                the smallest (first in raster order) pixel index, so a zero-filled array is
//                "no pixel yet" and the update is an atomicMax
//   an_count     pixels that are their label's first pixel, counted per row
//   scan_rows    (common.cuh) row offsets and the component count
//   an_assign    slot[l - 1] = the component's index (row offset + rank in the row); stats init
//   an_accumulate one set of feature atomics per foreground pixel (naive CCA)
//   an_renumber  (labels and stats) label image rewritten in place to slot + 1
//
// Sizes: width * height <= 2^32 - 2, so every pixel index and every label fits a u32; a chunk's
// x = 32c + lane stays <= 2^32 - 1 for every chunk c of a row, so it cannot wrap.

// Chunks of 32 pixels in a row of `width` pixels (no overflow for width near 2^32).
__device__ __forceinline__ u32 row_chunks(u32 width) { return width / 32u + ((width % 32u) != 0u); }

// Whether pixel x of `row` (label l != 0) may be its component's first pixel: a pixel with the
// same label among its neighbours that come earlier in raster order (left, and the three above)
// is not. Filters the atomics of an_first down to a few per component; correct for any labels.
__device__ __forceinline__ bool may_be_first(const u32* row, const u32* up, u32 x, u32 width, u32 l) {
    if (x > 0 && row[x - 1] == l) return false;
    if (up) {
        if (up[x] == l) return false;
        if (x > 0 && up[x - 1] == l) return false;
        if (x + 1 < width && up[x + 1] == l) return false;
    }
    return true;
}

extern "C" __global__ void an_first(const u32* labels, u32* first_inv, u32 width, u32 height) {
    u32 y = blockIdx.x * blockDim.y + threadIdx.y;
    if (y >= height) return;
    const u32 lane = threadIdx.x & 31, n = width * height, row0 = y * width;
    const u32* row = labels + (size_t)y * width;
    const u32* up = y > 0 ? row - width : nullptr;
    const u32 nchunks = row_chunks(width);
    for (u32 c = 0; c < nchunks; c++) {
        u32 x = c * 32u + lane;
        if (x >= width) break;
        u32 l = row[x];
        if (l == 0 || l > n || !may_be_first(row, up, x, width, l)) continue;
        u32 inv = ~(row0 + x);
        u32* f = &first_inv[l - 1];
        // Values only grow: a stale read can only cause an unneeded atomic.
        if (inv > *(volatile u32*)f) atomicMax(f, inv);
    }
}

// Whether pixel x (label l) is its label's first pixel (after an_first).
__device__ __forceinline__ bool is_first(const u32* row, const u32* first_inv, u32 x, u32 index, u32 l, u32 n) {
    if (l == 0 || l > n) return false;
    if (x > 0 && row[x - 1] == l) return false;  // cheap filter before the gather
    return first_inv[l - 1] == ~index;
}

extern "C" __global__ void an_count(const u32* labels, const u32* first_inv, u32* row_count, u32 width,
                                    u32 height) {
    u32 y = blockIdx.x * blockDim.y + threadIdx.y;
    if (y >= height) return;
    const u32 lane = threadIdx.x & 31, n = width * height, row0 = y * width;
    const u32* row = labels + (size_t)y * width;
    const u32 nchunks = row_chunks(width);
    u32 count = 0;
    for (u32 c = 0; c < nchunks; c++) {
        u32 x = c * 32u + lane;
        if (x >= width) break;
        if (is_first(row, first_inv, x, row0 + x, row[x], n)) count++;
    }
    for (int off = 16; off; off >>= 1) count += __shfl_xor_sync(FULL, count, off);
    if (lane == 0) row_count[y] = count;
}

// Slots in raster order: the row's offset plus the rank among the row's first pixels. Rows past
// `capacity` statistics rows are not written (the count then exceeds the buffer, which the host
// reports as an error instead of reading past it).
extern "C" __global__ void an_assign(const u32* labels, const u32* first_inv, const u32* row_offset, u32* slot,
                                     GpuStats* stats, u32 capacity, u32 width, u32 height) {
    u32 y = blockIdx.x * blockDim.y + threadIdx.y;
    if (y >= height) return;
    const u32 lane = threadIdx.x & 31, n = width * height, row0 = y * width;
    const u32* row = labels + (size_t)y * width;
    const u32 nchunks = row_chunks(width);
    u32 next = row_offset[y];
    for (u32 c = 0; c < nchunks; c++) {  // every lane runs every chunk: the ballot needs them all
        u32 x = c * 32u + lane;
        u32 l = x < width ? row[x] : 0u;
        bool first = x < width && is_first(row, first_inv, x, row0 + x, l, n);
        u32 ballot = __ballot_sync(FULL, first);
        if (first) {
            u32 s = next + __popc(ballot & ((1u << lane) - 1u));
            slot[l - 1] = s;
            if (s < capacity) stats[s] = empty_stats(y);
        }
        next += __popc(ballot);
    }
}

// Naive CCA: every foreground pixel adds itself to its component with atomics.
extern "C" __global__ void an_accumulate(const u32* labels, const u32* slot, GpuStats* stats, u32 capacity,
                                         u32 width, u32 height) {
    u32 y = blockIdx.x * blockDim.y + threadIdx.y;
    if (y >= height) return;
    const u32 lane = threadIdx.x & 31, n = width * height;
    const u32* row = labels + (size_t)y * width;
    const u32 nchunks = row_chunks(width);
    for (u32 c = 0; c < nchunks; c++) {
        u32 x = c * 32u + lane;
        if (x >= width) break;
        u32 l = row[x];
        if (l == 0 || l > n) continue;
        u32 s = slot[l - 1];
        if (s >= capacity) continue;
        GpuStats* st = &stats[s];
        atomicAdd(&st->area, 1u);
        atomicAdd(&st->sum_x, (u64)x);
        atomicAdd(&st->sum_y, (u64)y);
        atomicMin(&st->min_x, x);
        atomicMax(&st->max_x, x);
        atomicMax(&st->max_y, y);
    }
}

// Label image rewritten in place to the raster-order numbering (slot + 1).
extern "C" __global__ void an_renumber(u32* labels, const u32* slot, u32 width, u32 height) {
    u32 y = blockIdx.x * blockDim.y + threadIdx.y;
    if (y >= height) return;
    const u32 lane = threadIdx.x & 31, n = width * height;
    u32* row = labels + (size_t)y * width;
    const u32 nchunks = row_chunks(width);
    for (u32 c = 0; c < nchunks; c++) {
        u32 x = c * 32u + lane;
        if (x >= width) break;
        u32 l = row[x];
        if (l != 0 && l <= n) row[x] = slot[l - 1] + 1u;
    }
}
