// OpenCV's connectedComponentsWithStats layout written into a caller's device memory (the
// Python package's path for CuPy / PyTorch input): the background row, from the bit-packed
// mask, then one row per component from the GpuStats table.

// What OpenCV's row 0 is made of: the background pixels' count, coordinate sums and box.
struct Background {
    u64 area;
    u64 sum_x;
    u64 sum_y;
    u32 min_x;
    u32 min_y;
    u32 max_x;
    u32 max_y;
};

// The sum of the positions of the set bits of m.
__device__ __forceinline__ u32 bit_position_sum(u32 m) {
    return __popc(m & 0xAAAAAAAAu) + 2u * __popc(m & 0xCCCCCCCCu) + 4u * __popc(m & 0xF0F0F0F0u) +
           8u * __popc(m & 0xFF00FF00u) + 16u * __popc(m & 0xFFFF0000u);
}

// One warp per row (blockDim = (32, rows per block)): the zero bits of the row below `width`.
// `bg` starts as {0, 0, 0, ~0, ~0, 0, 0}.
extern "C" __global__ void background_moments(const u32* mask, int words_per_row, int width, int height,
                                              Background* bg) {
    const int y = blockIdx.x * blockDim.y + threadIdx.y;
    if (y >= height) return;
    const u32* row = mask + (size_t)y * words_per_row;
    const int nwords = (width + 31) / 32;
    u64 area = 0, sum_x = 0;
    u32 lo = 0xffffffffu, hi = 0;
    for (int wi = threadIdx.x; wi < nwords; wi += WARP) {
        u32 bits = ~row[wi];
        const int rest = width - wi * 32;
        if (rest < 32) bits &= (1u << rest) - 1u;
        if (bits) {
            const u32 x0 = (u32)wi * 32u;
            const u32 c = __popc(bits);
            area += c;
            sum_x += (u64)c * x0 + bit_position_sum(bits);
            lo = min(lo, x0 + (u32)(__ffs(bits) - 1));
            hi = max(hi, x0 + 31u - (u32)__clz(bits));
        }
    }
    for (int off = WARP / 2; off > 0; off >>= 1) {
        area += __shfl_down_sync(FULL, area, off);
        sum_x += __shfl_down_sync(FULL, sum_x, off);
        lo = min(lo, __shfl_down_sync(FULL, lo, off));
        hi = max(hi, __shfl_down_sync(FULL, hi, off));
    }
    if (threadIdx.x == 0 && area > 0) {
        atomicAdd(&bg->area, area);
        atomicAdd(&bg->sum_x, sum_x);
        atomicAdd(&bg->sum_y, area * (u64)y);
        atomicMin(&bg->min_x, lo);
        atomicMax(&bg->max_x, hi);
        atomicMin(&bg->min_y, (u32)y);
        atomicMax(&bg->max_y, (u32)y);
    }
}

// Rows 0..=count of OpenCV's `stats` (int32, LEFT TOP WIDTH HEIGHT AREA) and `centroids`
// (float64, x y), and of `sums` (int64, sum_x sum_y) when it is not null; one thread per row.
// Row 0 is the background; with no background pixel it is what OpenCV writes then:
// (-1, INT_MAX, 0, 0, 0) and NaN centroids.
extern "C" __global__ void opencv_rows(const GpuStats* stats, u32 count, const Background* bg, int* out_stats,
                                       double* out_centroids, long long* out_sums) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i > count) return;
    int left, top, width, height;
    u64 area, sum_x, sum_y;
    if (i == 0) {
        const Background b = *bg;
        area = b.area;
        sum_x = b.sum_x;
        sum_y = b.sum_y;
        if (area == 0) {
            left = -1;
            top = 0x7fffffff;
            width = 0;
            height = 0;
        } else {
            left = (int)b.min_x;
            top = (int)b.min_y;
            width = (int)(b.max_x - b.min_x + 1);
            height = (int)(b.max_y - b.min_y + 1);
        }
    } else {
        const GpuStats s = stats[i - 1];
        area = s.area;
        sum_x = s.sum_x;
        sum_y = s.sum_y;
        left = (int)s.min_x;
        top = (int)s.top;
        width = (int)(s.max_x - s.min_x + 1);
        height = (int)(s.max_y - s.top + 1);
    }
    int* r = out_stats + 5 * (size_t)i;
    r[0] = left;
    r[1] = top;
    r[2] = width;
    r[3] = height;
    r[4] = (int)area;
    const double nan = __longlong_as_double(0x7ff8000000000000ll);
    out_centroids[2 * (size_t)i] = area ? (double)sum_x / (double)area : nan;
    out_centroids[2 * (size_t)i + 1] = area ? (double)sum_y / (double)area : nan;
    if (out_sums) {
        out_sums[2 * (size_t)i] = (long long)sum_x;
        out_sums[2 * (size_t)i + 1] = (long long)sum_y;
    }
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
