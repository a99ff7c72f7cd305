// Sub-pixel (grey-weighted) centroids: per component, the exact integer sums
//   Σ w,  Σ w·x,  Σ w·y   over its pixels, with w = grey − level (or level + 1 − grey inverted),
// the same sums as the CPU's `subpixel::weighted_centroids`, so the two compare bit for bit.
//
// Input: a label image numbered 1..N in raster order (what every labeler leaves on the device
// for `Want::Both`), the grey frame (u8), and the threshold: one level for the whole frame, or
// one per pixel (adaptive threshold; `per_pixel` set). Output: sums[3 (l − 1) + {0, 1, 2}].
//
// One warp per row (blockDim = (32, rows per block)); lane i handles x = 32c + i of chunk c, so
// loads are coalesced. Equal labels next to each other in a chunk (a run of one component) are
// summed in registers by a segmented reduction, then the run's first lane adds the run with
// three 64-bit atomics: one set of atomics per run piece instead of per pixel.
//
// Ranges: w ≤ 255 + 1001 (adaptive C is clamped to ±1000 by the host), so a chunk's Σ w ≤ 2^16
// and its Σ w·(x − 32c) ≤ 2^16 · 31: both fit a u32. x and y fit a u32 (width, height < 2^32).

__device__ __forceinline__ u32 pixel_weight(unsigned char grey, int level, int invert) {
    int w = invert ? level + 1 - (int)grey : (int)grey - level;
    return w > 0 ? (u32)w : 0u;
}

// `count_at` and `level_at` (when not null): the count and the level where the frame's labeling
// and threshold left them on the device, for sums queued before the host has read either; the
// count is then bounded by `count` (the room of `sums`: labels past it are not summed, and the
// host sums the frame again when its count turns out larger).
// A frame set (`blockIdx.z` = frame, labeled as one image): frame z's labels start `label_stride`
// labels, its grey `grey_stride` bytes after frame z - 1's, its level is level_at[z], and y counts
// from its own first row, so its sums are those of the frame labeled alone; the labels, and so
// the sums, are the set's (`per_pixel` levels are not used with sets).
extern "C" __global__ void sp_accumulate(const u32* labels, const unsigned char* grey, const int* levels,
                                         int per_pixel, int level, const u32* level_at, int invert, u64* sums,
                                         u32 count, const u32* count_at, u32 width, u32 height, u64 label_stride,
                                         u64 grey_stride) {
    u32 y = blockIdx.x * blockDim.y + threadIdx.y;
    if (y >= height) return;  // whole warps leave together (one warp per row)
    labels += blockIdx.z * label_stride;
    grey += blockIdx.z * grey_stride;
    if (count_at) count = min(count, *count_at);
    if (level_at) level = (int)level_at[blockIdx.z];
    const u32 lane = threadIdx.x & 31;
    const size_t row0 = (size_t)y * width;
    const u32 nchunks = width / 32u + ((width % 32u) != 0u);
    for (u32 c = 0; c < nchunks; c++) {  // every lane runs every chunk: the shuffles need them all
        u32 x = c * 32u + lane;
        u32 l = 0, w = 0;
        if (x < width) {
            l = labels[row0 + x];
            if (l != 0 && l <= count) {
                int lv = per_pixel ? levels[row0 + x] : level;
                w = pixel_weight(grey[row0 + x], lv, invert);
            } else {
                l = 0;
            }
        }
        // A run starts where the label differs from the left neighbour's.
        u32 left = __shfl_up_sync(FULL, l, 1);
        bool head = lane == 0 || left != l;
        u32 heads = __ballot_sync(FULL, head);
        // Last lane of my run: one before the next head, or 31.
        u32 later = heads & ~((2u << lane) - 1u);  // heads after my lane (lane 31: none)
        u32 end = later ? (u32)(__ffs(later) - 2) : 31u;
        u32 sw = w, swdx = w * lane;
        // Segmented suffix sums: after the loop each lane holds the sums of lane..end.
        for (u32 off = 1; off < 32; off <<= 1) {
            u32 a = __shfl_down_sync(FULL, sw, off);
            u32 b = __shfl_down_sync(FULL, swdx, off);
            if (lane + off <= end) {
                sw += a;
                swdx += b;
            }
        }
        if (head && l != 0 && sw != 0) {
            u64* s = sums + 3 * (size_t)(l - 1);
            atomicAdd(&s[0], (u64)sw);
            atomicAdd(&s[1], (u64)(c * 32u) * sw + swdx);
            atomicAdd(&s[2], (u64)y * sw);
        }
    }
}

// The frame's detections for the GPU tracker, left in device memory: per statistics row
// (`first` then `rest`, n rows in all) x, y, area, left, top, right, bottom as doubles, x and y
// the grey-weighted centroid of the row's label. The same conversions and divisions as the host's
// (`GpuStats::to_stats`, `SubpixelCentroid::from_sums`, `Detection::from_subpixel`: u64 to double
// rounds to nearest, IEEE division is correctly rounded on both), so the rows equal the host's
// bit for bit. `filtered`: the rows were filtered on the device and carry their label in `pad`;
// else row i is label i + 1. A label without sums gets weight 1 and 0 sums (the host refuses the
// frame then).
extern "C" __global__ void sp_detections(const GpuStats* first, u32 n_first, const GpuStats* rest, u32 n,
                                         int filtered, const u64* sums, u32 count, double* out) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const GpuStats g = i < n_first ? first[i] : rest[i - n_first];
    const u32 label = filtered ? g.pad : i + 1;
    u64 w = 0, wx = 0, wy = 0;
    if (label >= 1 && label <= count) {
        const u64* s = sums + 3 * (size_t)(label - 1);
        w = s[0];
        wx = s[1];
        wy = s[2];
    }
    const double d = (double)(w > 0 ? w : 1);
    const double left = (double)g.min_x, top = (double)g.top;
    double* o = out + 7 * (size_t)i;
    o[0] = (double)wx / d;
    o[1] = (double)wy / d;
    o[2] = (double)g.area;
    o[3] = left;
    o[4] = top;
    o[5] = left + (double)(g.max_x - g.min_x + 1) - 1.0;
    o[6] = top + (double)(g.max_y - g.top + 1) - 1.0;
}
