// Shape descriptors: per component, the exact integer sums the host turns into moments,
// ellipse, inertia ratio, perimeter and circularity (`ccl::descriptors`):
//   Σ x², Σ y², Σ x·y, and the pairs of its pixels that are 4-neighbours and that are diagonal
//   neighbours (the Crofton perimeter's counts),
// the same sums as the CPU's `descriptors::shape_sums_of`, so the two compare bit for bit.
//
// Input: a label image numbered 1..N in raster order (what every labeler leaves on the device
// for `Want::Both`). Output: sums[SHAPE_SUMS (l − 1) + {0: Σx², 1: Σy², 2: Σxy, 3: 4-adjacent
// pairs, 4: diagonal pairs}].
//
// One warp per row, as sp_accumulate in subpixel.cu: lane i handles x = 32c + i of chunk c; a
// run of equal labels in a chunk is summed in registers (segmented reduction), a run reaching
// the chunk's end carried into the next chunk, and its first lane adds the whole run to the
// block's table in shared memory (a hash on the label); the block then adds each label's sums
// once to global memory. Without the table every run of a large component
// would add to the same five global words, one after another. Each pixel counts its pairs with
// the pixels left of it, above it, above-left and above-right (so each pair once); the row above
// is read once per chunk and shared between lanes by shuffles.
//
// Ranges: x, y < 65536 (the host checks), so x² < 2^32 and a component's Σ x² < 2^64; a
// chunk's Σ lane² ≤ 10416 and its pair counts ≤ 64 fit u32; a row's run, carried from chunk to
// chunk, sums in u64.

__device__ __forceinline__ u32 label_at(const u32* labels, int x, int y, u32 width) {
    if (x < 0 || y < 0 || x >= (int)width) return 0u;
    return labels[(size_t)y * width + (size_t)x];
}

// The block's table: SD_TABLE entries of a label (0: free) and its sums; a label that finds no
// free entry within SD_PROBES adds to global memory directly.
#define SD_TABLE 1024
#define SD_PROBES 32
struct SdTable {
    u32 label[SD_TABLE];
    u64 sums[SD_TABLE][SHAPE_SUMS];
};

// The sums row of label l: its entry in the block's table (taken if free), or its global row.
__device__ __forceinline__ u64* sd_row(SdTable& t, u64* sums, u32 l) {
    u32 h = (l * 2654435761u) >> 22;  // 10 bits: SD_TABLE
    for (u32 probe = 0; probe < SD_PROBES; probe++, h = (h + 1u) & (SD_TABLE - 1u)) {
        const u32 k = atomicCAS(&t.label[h], 0u, l);
        if (k == 0u || k == l) return t.sums[h];
    }
    return sums + SHAPE_SUMS * (size_t)(l - 1);
}

// The sums of one run of a label in a row (x absolute), before they are added.
struct SdRun {
    u32 label;  // 0: none
    u64 n, sum_x, sum_xx, pairs_4, pairs_diagonal;
};

// Adds run r of row y to its label's sums (zero terms skipped).
__device__ __forceinline__ void sd_add(SdTable& t, u64* sums, const SdRun& r, u32 y) {
    u64* s = sd_row(t, sums, r.label);
    const u64 yy = y;
    if (r.sum_xx) atomicAdd(&s[0], r.sum_xx);
    if (y != 0) {
        atomicAdd(&s[1], r.n * yy * yy);
        atomicAdd(&s[2], yy * r.sum_x);
    }
    if (r.pairs_4) atomicAdd(&s[3], r.pairs_4);
    if (r.pairs_diagonal) atomicAdd(&s[4], r.pairs_diagonal);
}

__device__ __forceinline__ SdRun shfl_run(const SdRun& r, int src) {
    SdRun o;
    o.label = __shfl_sync(FULL, r.label, src);
    o.n = __shfl_sync(FULL, r.n, src);
    o.sum_x = __shfl_sync(FULL, r.sum_x, src);
    o.sum_xx = __shfl_sync(FULL, r.sum_xx, src);
    o.pairs_4 = __shfl_sync(FULL, r.pairs_4, src);
    o.pairs_diagonal = __shfl_sync(FULL, r.pairs_diagonal, src);
    return o;
}

// blockDim = (32, ROWS_PER_BLOCK): rows_launch.
extern "C" __global__ void sd_accumulate(const u32* labels, u64* sums, u32 count, u32 width, u32 height) {
    __shared__ SdTable table;
    const u32 tid = threadIdx.y * blockDim.x + threadIdx.x, nthreads = blockDim.x * blockDim.y;
    for (u32 e = tid; e < SD_TABLE; e += nthreads) {
        table.label[e] = 0u;
        for (int k = 0; k < SHAPE_SUMS; k++) table.sums[e][k] = 0ull;
    }
    __syncthreads();
    const u32 y = blockIdx.x * blockDim.y + threadIdx.y;
    const u32 lane = threadIdx.x & 31;
    const size_t row0 = (size_t)y * width;
    // Rows past the image (whole warps) skip the loop but reach the barrier.
    const u32 nchunks = y < height ? width / 32u + ((width % 32u) != 0u) : 0u;
    // The run reaching the end of the last chunk, which may go on in the next (the same in
    // every lane): a long run is added once, not once per chunk.
    SdRun open = {0u, 0, 0, 0, 0, 0};
    for (u32 c = 0; c < nchunks; c++) {  // every lane runs every chunk: the shuffles need them all
        const u32 x = c * 32u + lane;
        u32 l = 0;
        if (x < width) {
            l = labels[row0 + x];
            if (l > count) l = 0;
        }
        if (__ballot_sync(FULL, l != 0) == 0u) {  // uniform
            if (lane == 0 && open.label != 0u) sd_add(table, sums, open, y);
            open.label = 0u;
            continue;
        }
        // The neighbours: left from the lane before (lane 0 reads it), the row above loaded
        // once, its left and right ends from the neighbouring lanes.
        u32 left = __shfl_up_sync(FULL, l, 1);
        if (lane == 0) left = label_at(labels, (int)x - 1, (int)y, width);
        const u32 up = y > 0 ? label_at(labels, (int)x, (int)y - 1, width) : 0u;
        u32 up_left = __shfl_up_sync(FULL, up, 1), up_right = __shfl_down_sync(FULL, up, 1);
        if (y > 0 && lane == 0) up_left = label_at(labels, (int)x - 1, (int)y - 1, width);
        if (y > 0 && lane == 31) up_right = label_at(labels, (int)x + 1, (int)y - 1, width);
        u32 n = 0, sl = 0, sl2 = 0, p4 = 0, pd = 0;
        if (l != 0) {
            n = 1u;
            sl = lane;
            sl2 = lane * lane;
            p4 = (left == l) + (up == l);
            pd = (up_left == l) + (up_right == l);
        }
        // A run starts where the label differs from the left neighbour's.
        const bool head = lane == 0 || left != l;
        const u32 heads = __ballot_sync(FULL, head);
        const u32 later = heads & ~((2u << lane) - 1u);  // heads after my lane (lane 31: none)
        const u32 end = later ? (u32)(__ffs(later) - 2) : 31u;
        // Segmented suffix sums: after the loop each lane holds the sums of lane..end.
        for (u32 off = 1; off < 32; off <<= 1) {
            const u32 a0 = __shfl_down_sync(FULL, n, off);
            const u32 a1 = __shfl_down_sync(FULL, sl, off);
            const u32 a2 = __shfl_down_sync(FULL, sl2, off);
            const u32 a3 = __shfl_down_sync(FULL, p4, off);
            const u32 a4 = __shfl_down_sync(FULL, pd, off);
            if (lane + off <= end) {
                n += a0;
                sl += a1;
                sl2 += a2;
                p4 += a3;
                pd += a4;
            }
        }
        // Each head's run in absolute x: Σ (x0 + i) = n x0 + Σi, Σ (x0 + i)² = n x0² + 2 x0 Σi + Σi².
        const u64 x0 = (u64)c * 32u;
        SdRun run = {head ? l : 0u, n, (u64)n * x0 + sl, (u64)n * x0 * x0 + 2u * x0 * sl + sl2, p4, pd};
        // The open run goes on in lane 0's run, or it has ended.
        if (lane == 0 && open.label != 0u) {
            if (open.label == l) {
                run.n += open.n;
                run.sum_x += open.sum_x;
                run.sum_xx += open.sum_xx;
                run.pairs_4 += open.pairs_4;
                run.pairs_diagonal += open.pairs_diagonal;
            } else {
                sd_add(table, sums, open, y);
            }
        }
        // The run reaching lane 31 stays open; the others are complete.
        const u32 last_head = 31u - __clz(heads);
        if (head && l != 0 && lane != last_head) sd_add(table, sums, run, y);
        open = shfl_run(run, (int)last_head);
    }
    if (lane == 0 && open.label != 0u) sd_add(table, sums, open, y);
    __syncthreads();
    for (u32 e = tid; e < SD_TABLE; e += nthreads) {
        const u32 l = table.label[e];
        if (l == 0u) continue;
        u64* s = sums + SHAPE_SUMS * (size_t)(l - 1);
        for (int k = 0; k < SHAPE_SUMS; k++)
            if (table.sums[e][k]) atomicAdd(&s[k], table.sums[e][k]);
    }
}
