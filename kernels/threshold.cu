// A global threshold on the device: the grey frame goes up once (the sub-pixel centroids read it
// too), its histogram comes back (256 counts) so the host picks the level with the very code the
// CPU path uses (`threshold::level_from_histogram`: bit-exact by construction), and the packed
// mask is made here, where the labeling reads it. Nothing but the histogram crosses PCIe.
//
// Foreground = grey > level, flipped with `invert` (as `frame::binarize::global`).

#define HIST_COPIES 8  // one shared table per group of warps: fewer collisions on a flat background

// Adds the frame's histogram to `hist` (256 u64, cleared by the caller). Each block counts its
// share into HIST_COPIES shared tables of u32 (a block sees at most pixels / gridDim.x pixels,
// far below 2^32), then adds them to the global table: 256 atomics per block. Loads are 16
// bytes (the device buffer is 256-byte aligned); the last n % 16 bytes are counted one by one.
extern "C" __global__ void grey_histogram(const unsigned char* grey, u64 n, u64* hist) {
    __shared__ u32 bins[HIST_COPIES][256];
    for (u32 i = threadIdx.x; i < HIST_COPIES * 256; i += blockDim.x) (&bins[0][0])[i] = 0;
    __syncthreads();
    u32* mine = bins[(threadIdx.x / WARP) % HIST_COPIES];
    const u64 stride = (u64)gridDim.x * blockDim.x;
    const u64 first = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    const uint4* grey16 = (const uint4*)grey;
    const u64 n16 = n / 16;
    for (u64 i = first; i < n16; i += stride) {
        uint4 v = grey16[i];
        u32 words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int w = 0; w < 4; w++) {
#pragma unroll
            for (int b = 0; b < 4; b++) atomicAdd(&mine[(words[w] >> (8 * b)) & 0xffu], 1u);
        }
    }
    for (u64 i = n16 * 16 + first; i < n; i += stride) atomicAdd(&mine[grey[i]], 1u);
    __syncthreads();
    for (u32 v = threadIdx.x; v < 256; v += blockDim.x) {
        u32 sum = 0;
#pragma unroll
        for (int c = 0; c < HIST_COPIES; c++) sum += bins[c][v];
        if (sum) atomicAdd(&hist[v], (u64)sum);
    }
}

// Thresholds and packs the frame into the bit-packed mask (conventions in common.cuh). One warp
// per 32 words of a row: at step k lane i reads pixel 32 (32 c + k) + i, so the warp's loads are
// one coalesced 32-byte segment, and the warp's ballot of "foreground" is word 32 c + k itself,
// which lane k keeps and writes. Pixels past the width (the row padding) are background.
// `keep` (null: none) is a packed mask of the same layout whose zero bits are masked out (a
// region of interest, static reflections: `frame::mask`).
extern "C" __global__ void threshold_pack(const unsigned char* grey, u32* mask, u32 width, u32 height,
                                          u32 words_per_row, int level, int invert, const u32* keep) {
    const u32 lane = threadIdx.x & (WARP - 1);
    const u64 warp = ((u64)blockIdx.x * blockDim.x + threadIdx.x) / WARP;
    const u32 warps_per_row = (words_per_row + WARP - 1) / WARP;
    const u64 y = warp / warps_per_row;
    if (y >= height) return;  // the whole warp: y is the same for its lanes
    const u32 c = (u32)(warp % warps_per_row);
    const unsigned char* row = grey + y * width;
    u32 kept = 0;
    for (u32 k = 0; k < WARP; k++) {
        const u32 word = WARP * c + k;
        if (word >= words_per_row) break;  // warp-uniform
        const u32 x = WARP * word + lane;
        const bool fg = x < width && (((int)row[x] > level) != (invert != 0));
        const u32 bits = __ballot_sync(FULL, fg);
        if (lane == k) kept = bits;
    }
    const u32 word = WARP * c + lane;
    if (word < words_per_row) {
        if (keep) kept &= keep[y * words_per_row + word];
        mask[y * words_per_row + word] = kept;
    }
}
