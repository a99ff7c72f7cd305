// OpenCV's connectedComponentsWithStats layout written into a caller's device memory (the
// Python package's path for CuPy / PyTorch input): one row per component from the GpuStats
// table, and the background's row 0 from the same pass, with no pass over the mask.
//
// The background is what the components leave: its area and coordinate sums are the image's
// totals minus the components' (every foreground pixel is in exactly one component), and its box
// comes from FLSL's runs (run j of row y is [start[y R + j], end[y R + j]), nruns[y] of them):
// a row holds background unless its one run is [0, width); its first background column is 0
// unless a run starts at 0, then the end of that run; its last is width - 1 unless the last run
// reaches width, then the start of that run minus one.

// Block partial sums, gathered across blocks; all-zero bits before the first launch, and left
// so by the last block of every launch. The minima are kept complemented (max of ~x) so that
// zero means none.
struct BackgroundSums {
    u64 fg_area;
    u64 fg_sum_x;
    u64 fg_sum_y;
    u32 inv_min_x;
    u32 inv_min_y;
    u32 max_x;
    u32 max_y;
    u32 blocks_done;
    u32 pad;
};

#define ROWS_THREADS 256

__device__ __forceinline__ u64 warp_sum(u64 v) {
    for (int off = WARP / 2; off > 0; off >>= 1) v += __shfl_down_sync(FULL, v, off);
    return v;
}

__device__ __forceinline__ u32 warp_max(u32 v) {
    for (int off = WARP / 2; off > 0; off >>= 1) v = max(v, __shfl_down_sync(FULL, v, off));
    return v;
}

// Writes one row of `stats` (int32, LEFT TOP WIDTH HEIGHT AREA), `centroids` (float64, x y) and,
// when not null, `sums` (int64, sum_x sum_y).
__device__ __forceinline__ void write_row(size_t i, int left, int top, int width, int height, u64 area, u64 sum_x,
                                          u64 sum_y, int* out_stats, double* out_centroids, long long* out_sums) {
    int* r = out_stats + 5 * i;
    r[0] = left;
    r[1] = top;
    r[2] = width;
    r[3] = height;
    r[4] = (int)area;
    const double nan = __longlong_as_double(0x7ff8000000000000ll);
    out_centroids[2 * i] = area ? (double)sum_x / (double)area : nan;
    out_centroids[2 * i + 1] = area ? (double)sum_y / (double)area : nan;
    if (out_sums) {
        out_sums[2 * i] = (long long)sum_x;
        out_sums[2 * i + 1] = (long long)sum_y;
    }
}

// Rows 0..=count of OpenCV's `stats`, `centroids` and (when not null) `sums`. Thread i writes the
// row of component i + 1 (i < count) and measures the background of image row i (i < height);
// blockDim = ROWS_THREADS, gridDim covers max(count, height). The last block to finish writes
// row 0, the background; with no background pixel it is what OpenCV writes then: (-1, INT_MAX,
// 0, 0, 0) and NaN centroids.
extern "C" __global__ void opencv_rows(const GpuStats* stats, u32 count, const u32* start, const u32* end,
                                       const u32* nruns, u32 runs_per_row, u32 width, u32 height,
                                       BackgroundSums* acc, int* out_stats, double* out_centroids,
                                       long long* out_sums) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    u64 area = 0, sum_x = 0, sum_y = 0;
    if (i < count) {
        const GpuStats s = stats[i];
        area = s.area;
        sum_x = s.sum_x;
        sum_y = s.sum_y;
        write_row((size_t)i + 1, (int)s.min_x, (int)s.top, (int)(s.max_x - s.min_x + 1), (int)(s.max_y - s.top + 1),
                  area, sum_x, sum_y, out_stats, out_centroids, out_sums);
    }
    // This row's first and last background columns, complemented / plus one (0: none).
    u32 inv_lo = 0, hi1 = 0, inv_y = 0, y1 = 0;
    if (i < height) {
        const size_t row = (size_t)i * runs_per_row;
        const u32 n = nruns[i];
        u32 lo = 0, hi = width - 1;
        bool any = true;
        if (n > 0) {
            const u32 s0 = start[row], e0 = end[row];
            const u32 sl = start[row + n - 1], el = end[row + n - 1];
            if (s0 == 0) {
                lo = e0;
                any = e0 < width;
            }
            if (el == width) hi = sl - 1;  // sl > 0 when `any`: the row is not one run [0, width)
        }
        if (any) {
            inv_lo = ~lo;
            hi1 = hi + 1;
            inv_y = ~i;
            y1 = i + 1;
        }
    }
    area = warp_sum(area);
    sum_x = warp_sum(sum_x);
    sum_y = warp_sum(sum_y);
    inv_lo = warp_max(inv_lo);
    hi1 = warp_max(hi1);
    inv_y = warp_max(inv_y);
    y1 = warp_max(y1);
    __shared__ u64 part_sums[3][ROWS_THREADS / WARP];
    __shared__ u32 part_box[4][ROWS_THREADS / WARP];
    __shared__ bool last;
    const u32 lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    if (lane == 0) {
        part_sums[0][warp] = area;
        part_sums[1][warp] = sum_x;
        part_sums[2][warp] = sum_y;
        part_box[0][warp] = inv_lo;
        part_box[1][warp] = hi1;
        part_box[2][warp] = inv_y;
        part_box[3][warp] = y1;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (u32 w = 1; w < blockDim.x / WARP; w++) {
            area += part_sums[0][w];
            sum_x += part_sums[1][w];
            sum_y += part_sums[2][w];
            inv_lo = max(inv_lo, part_box[0][w]);
            hi1 = max(hi1, part_box[1][w]);
            inv_y = max(inv_y, part_box[2][w]);
            y1 = max(y1, part_box[3][w]);
        }
        if (area) {
            atomicAdd(&acc->fg_area, area);
            atomicAdd(&acc->fg_sum_x, sum_x);
            atomicAdd(&acc->fg_sum_y, sum_y);
        }
        if (y1) {
            atomicMax(&acc->inv_min_x, inv_lo);
            atomicMax(&acc->max_x, hi1);
            atomicMax(&acc->inv_min_y, inv_y);
            atomicMax(&acc->max_y, y1);
        }
        __threadfence();
        last = atomicAdd(&acc->blocks_done, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last || threadIdx.x != 0) return;
    __threadfence();
    volatile BackgroundSums* v = acc;
    const u64 w = width, h = height;
    const u64 bg_area = w * h - v->fg_area;
    const u64 bg_sum_x = h * (w * (w - 1) / 2) - v->fg_sum_x;
    const u64 bg_sum_y = w * (h * (h - 1) / 2) - v->fg_sum_y;
    if (bg_area == 0) {
        write_row(0, -1, 0x7fffffff, 0, 0, 0, 0, 0, out_stats, out_centroids, out_sums);
    } else {
        const u32 min_x = ~v->inv_min_x, min_y = ~v->inv_min_y;
        const u32 max_x = v->max_x - 1, max_y = v->max_y - 1;
        write_row(0, (int)min_x, (int)min_y, (int)(max_x - min_x + 1), (int)(max_y - min_y + 1), bg_area, bg_sum_x,
                  bg_sum_y, out_stats, out_centroids, out_sums);
    }
    v->fg_area = 0;
    v->fg_sum_x = 0;
    v->fg_sum_y = 0;
    v->inv_min_x = 0;
    v->inv_min_y = 0;
    v->max_x = 0;
    v->max_y = 0;
    v->blocks_done = 0;
}

// Rows 0..=count of the sub-pixel centroids (float64, x y) from sp_accumulate's sums (subpixel.cu:
// Σw, Σw·x, Σw·y of component l at 3 (l − 1)), as the CPU's SubpixelCentroid::from_sums divides
// them; one thread per row. Row 0, the background, is NaN, and so is a component without a
// weighted pixel (a grey image that does not match the mask).
extern "C" __global__ void subpixel_rows(const u64* sums, u32 count, double* out) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i > count) return;
    double x = __longlong_as_double(0x7ff8000000000000ll), y = x;
    if (i > 0) {
        const u64* s = sums + 3 * (size_t)(i - 1);
        if (s[0] > 0) {
            x = (double)s[1] / (double)s[0];
            y = (double)s[2] / (double)s[0];
        }
    }
    out[2 * (size_t)i] = x;
    out[2 * (size_t)i + 1] = y;
}
