// Shape descriptors: per component, the exact integer sums the host turns into moments,
// ellipse, inertia ratio, perimeter and circularity (`ccl::descriptors`):
//   Σ x², Σ y², Σ x·y, and the counts of border pixels in scikit-image's three perimeter
//   classes (weight 1, √2, (1 + √2)/2),
// the same sums as the CPU's `descriptors::shape_sums_of`, so the two compare bit for bit.
//
// Input: a label image numbered 1..N in raster order (what every labeler leaves on the device
// for `Want::Both`). Output: sums[6 (l − 1) + {0: Σx², 1: Σy², 2: Σxy, 3, 4, 5: classes}].
//
// One warp per row, as sp_accumulate in subpixel.cu: lane i handles x = 32c + i of chunk c; a
// run of equal labels in a chunk is summed in registers (segmented reduction) and its first
// lane adds it with one 64-bit atomic per non-zero sum.
//
// Border pixels: in the component, with a 4-neighbour outside it (the image edge counts as
// outside). The class of a border pixel comes from code = 1 + 2 · (border 4-neighbours)
// + 10 · (border diagonal neighbours) of the same component, scikit-image's convolution.
//
// Ranges: x, y < 65536 (the host checks), so x² < 2^32 and a component's Σ x² < 2^64; a
// chunk's Σ lane² ≤ 10416 and its counts ≤ 32 fit u32.

__device__ __forceinline__ u32 label_at(const u32* labels, int x, int y, u32 width, u32 height) {
    if (x < 0 || y < 0 || x >= (int)width || y >= (int)height) return 0u;
    return labels[(size_t)y * width + (size_t)x];
}

// Pixel (x, y) belongs to l and has a 4-neighbour that does not.
__device__ __forceinline__ bool is_border(const u32* labels, int x, int y, u32 l, u32 width, u32 height) {
    if (label_at(labels, x, y, width, height) != l) return false;
    return label_at(labels, x - 1, y, width, height) != l || label_at(labels, x + 1, y, width, height) != l ||
           label_at(labels, x, y - 1, width, height) != l || label_at(labels, x, y + 1, width, height) != l;
}

// 0 straight (weight 1), 1 diagonal (√2), 2 corner ((1 + √2)/2), 3 none.
__device__ __forceinline__ u32 border_class(const u32* labels, int x, int y, u32 l, u32 width, u32 height) {
    u32 n4 = is_border(labels, x - 1, y, l, width, height) + is_border(labels, x + 1, y, l, width, height) +
             is_border(labels, x, y - 1, l, width, height) + is_border(labels, x, y + 1, l, width, height);
    u32 nd = is_border(labels, x - 1, y - 1, l, width, height) + is_border(labels, x + 1, y - 1, l, width, height) +
             is_border(labels, x - 1, y + 1, l, width, height) + is_border(labels, x + 1, y + 1, l, width, height);
    switch (1u + 2u * n4 + 10u * nd) {
        case 5: case 7: case 15: case 17: case 25: case 27: return 0u;
        case 21: case 33: return 1u;
        case 13: case 23: return 2u;
        default: return 3u;
    }
}

extern "C" __global__ void sd_accumulate(const u32* labels, u64* sums, u32 count, u32 width, u32 height) {
    u32 y = blockIdx.x * blockDim.y + threadIdx.y;
    if (y >= height) return;  // whole warps leave together (one warp per row)
    const u32 lane = threadIdx.x & 31;
    const size_t row0 = (size_t)y * width;
    const u32 nchunks = width / 32u + ((width % 32u) != 0u);
    for (u32 c = 0; c < nchunks; c++) {  // every lane runs every chunk: the shuffles need them all
        u32 x = c * 32u + lane;
        u32 l = 0;
        if (x < width) {
            l = labels[row0 + x];
            if (l > count) l = 0;
        }
        u32 n = l != 0, sl = l != 0 ? lane : 0u, sl2 = sl * sl;
        u32 b0 = 0, b1 = 0, b2 = 0;
        if (l != 0 && is_border(labels, (int)x, (int)y, l, width, height)) {
            u32 k = border_class(labels, (int)x, (int)y, l, width, height);
            b0 = k == 0u;
            b1 = k == 1u;
            b2 = k == 2u;
        }
        // A run starts where the label differs from the left neighbour's.
        u32 left = __shfl_up_sync(FULL, l, 1);
        bool head = lane == 0 || left != l;
        u32 heads = __ballot_sync(FULL, head);
        u32 later = heads & ~((2u << lane) - 1u);  // heads after my lane (lane 31: none)
        u32 end = later ? (u32)(__ffs(later) - 2) : 31u;
        // Segmented suffix sums: after the loop each lane holds the sums of lane..end.
        for (u32 off = 1; off < 32; off <<= 1) {
            u32 a0 = __shfl_down_sync(FULL, n, off);
            u32 a1 = __shfl_down_sync(FULL, sl, off);
            u32 a2 = __shfl_down_sync(FULL, sl2, off);
            u32 a3 = __shfl_down_sync(FULL, b0, off);
            u32 a4 = __shfl_down_sync(FULL, b1, off);
            u32 a5 = __shfl_down_sync(FULL, b2, off);
            if (lane + off <= end) {
                n += a0;
                sl += a1;
                sl2 += a2;
                b0 += a3;
                b1 += a4;
                b2 += a5;
            }
        }
        if (head && l != 0) {
            u64* s = sums + 6 * (size_t)(l - 1);
            const u64 x0 = (u64)c * 32u, yy = (u64)y;
            // Σ (x0 + i)² = n x0² + 2 x0 Σi + Σi²; Σ x y = y (n x0 + Σi).
            atomicAdd(&s[0], (u64)n * x0 * x0 + 2u * x0 * sl + sl2);
            if (y != 0) {
                atomicAdd(&s[1], (u64)n * yy * yy);
                atomicAdd(&s[2], yy * ((u64)n * x0 + sl));
            }
            if (b0) atomicAdd(&s[3], (u64)b0);
            if (b1) atomicAdd(&s[4], (u64)b1);
            if (b2) atomicAdd(&s[5], (u64)b2);
        }
    }
}
