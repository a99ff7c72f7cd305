// A global threshold on the device: the grey frame goes up once (the sub-pixel centroids read it
// too), its histogram is counted here, `grey_level` picks the level from it with the steps of the
// CPU path (`threshold::level_from_histogram`: the same f64 operations in the same order, each
// rounded alone — no fused multiply-add — so the level is the host's, bit for bit), and the
// packed mask is made here, where the labeling reads it. Nothing crosses PCIe but the frame and
// the level's one word, which comes back with the results: the host never waits mid-frame.
//
// Foreground = grey > level, flipped with `invert` (as `threshold::binarize::global`).

#define HIST_COPIES 8  // one shared table per group of warps: fewer collisions on a flat background

// Adds the frame's histogram to `hist` (256 u64, cleared by the caller). Each block counts its
// share into HIST_COPIES shared tables of u32 (a block sees at most pixels / gridDim.x pixels,
// far below 2^32), then adds them to the global table: 256 atomics per block. Loads are 16
// bytes (the device buffer is 256-byte aligned); the last n % 16 bytes are counted one by one.
// A frame set (`blockIdx.z` = frame): frame z starts `frame_stride` bytes after frame z - 1 (a
// multiple of 256, so its loads stay aligned) and has its own 256 counts at hist + 256 z.
extern "C" __global__ void grey_histogram(const unsigned char* grey, u64 n, u64* hist, u64 frame_stride) {
    grey += blockIdx.z * frame_stride;
    hist += 256 * (u64)blockIdx.z;
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

// Levels grey_level picks (GreyLevelKind in src/threshold/gpu.rs).
#define LEVEL_OTSU 1u
#define LEVEL_TRIANGLE 2u
#define LEVEL_BACKGROUND 3u

// Rust's `v as u8` for an integral f64: saturating, NaN to 0.
__device__ u32 saturate_u8(double v) { return v != v || v <= 0.0 ? 0u : v >= 255.0 ? 255u : (u32)v; }

// threshold::levels::otsu_from_histogram (OpenCV's getThreshVal_Otsu).
__device__ u32 otsu_level(const u64* h) {
    u64 total = 0;
    for (int i = 0; i < 256; i++) total += h[i];
    if (total == 0) return 0;
    const double scale = __ddiv_rn(1.0, (double)total);
    double mu = 0.0;
    for (int i = 0; i < 256; i++) mu = __dadd_rn(mu, __dmul_rn((double)i, (double)h[i]));
    mu = __dmul_rn(mu, scale);
    const double eps = 1.1920928955078125e-7;  // f32::EPSILON
    const double one_less_eps = __dsub_rn(1.0, eps);
    double mu1 = 0.0, q1 = 0.0, max_sigma = 0.0;
    u32 max_val = 0;
    for (int i = 0; i < 256; i++) {
        const double p_i = __dmul_rn((double)h[i], scale);
        mu1 = __dmul_rn(mu1, q1);
        q1 = __dadd_rn(q1, p_i);
        const double q2 = __dsub_rn(1.0, q1);
        if (fmin(q1, q2) < eps || fmax(q1, q2) > one_less_eps) continue;
        mu1 = __ddiv_rn(__dadd_rn(mu1, __dmul_rn((double)i, p_i)), q1);
        const double mu2 = __ddiv_rn(__dsub_rn(mu, __dmul_rn(q1, mu1)), q2);
        const double d = __dsub_rn(mu1, mu2);
        const double sigma = __dmul_rn(__dmul_rn(__dmul_rn(q1, q2), d), d);
        if (sigma > max_sigma) {
            max_sigma = sigma;
            max_val = (u32)i;
        }
    }
    return max_val;
}

// threshold::levels::triangle_from_histogram (scikit-image's threshold_triangle).
__device__ u32 triangle_level(const u64* h) {
    int low = -1, high = -1, peak = 0;
    for (int i = 0; i < 256; i++) {
        if (h[i] > 0) {
            if (low < 0) low = i;
            high = i;
        }
        if (h[i] > h[peak]) peak = i;
    }
    if (low < 0) return 0;
    if (low == high) return (u32)low;
    const u64 peak_height = h[peak];
    const bool flip = peak - low < high - peak;
    if (flip) {
        low = 255 - high;
        peak = 255 - peak;
    }
    const u64 width = (u64)(peak - low);
    // Exact in u64: a frame has at most 2^32 pixels, and one of 2^32 has a single level.
    const double norm = __dsqrt_rn((double)(peak_height * peak_height + width * width));
    const double ph = __ddiv_rn((double)peak_height, norm), w = __ddiv_rn((double)width, norm);
    double best = __longlong_as_double((long long)0xfff0000000000000ull);  // -inf
    int best_x = 0;
    for (int x = 0; x < (int)width; x++) {
        const u64 at = flip ? h[255 - (x + low)] : h[x + low];
        const double length = __dsub_rn(__dmul_rn(ph, (double)x), __dmul_rn(w, (double)at));
        if (length > best) {
            best = length;
            best_x = x;
        }
    }
    const int level = best_x + low;
    return (u32)(flip ? 255 - level : level);
}

// threshold::levels::background_from_histogram (background:K).
__device__ u32 background_level(const u64* h, double k, bool invert) {
    u64 total = 0;
    for (int i = 0; i < 256; i++) total += h[i];
    if (total == 0) return 0;
    u64 below = 0;
    int median = 255;
    for (int v = 0; v < 256; v++) {
        below += h[invert ? 255 - v : v];
        if (2 * below >= total) {
            median = v;
            break;
        }
    }
    u64 within = 0;
    int d = 0;
    for (;;) {
        within += h[invert ? 255 - (median - d) : median - d];
        if (2 * within >= below) break;
        d++;
    }
    const double sigma = __dmul_rn(1.4826, (double)d);
    const double level = fmin(floor(__dadd_rn((double)median, __dmul_rn(k, sigma))), 255.0);
    return invert ? saturate_u8(fmax(__dsub_rn(254.0, level), 0.0)) : saturate_u8(level);
}

// The global level of the histogram `hist` for `kind` (k: background:K's), into `level`. One
// thread: 256 bins. A frame set: block z picks frame z's level from hist + 256 z into level[z].
extern "C" __global__ void grey_level(const u64* hist, u32 kind, double k, int invert, u32* level) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    hist += 256 * (u64)blockIdx.z;
    level += blockIdx.z;
    u32 v = 0;
    if (kind == LEVEL_OTSU) v = otsu_level(hist);
    if (kind == LEVEL_TRIANGLE) v = triangle_level(hist);
    if (kind == LEVEL_BACKGROUND) v = background_level(hist, k, invert != 0);
    *level = v;
}

// Thresholds and packs the frame into the bit-packed mask (conventions in common.cuh). One warp
// per 32 words of a row: at step k lane i reads pixel 32 (32 c + k) + i, so the warp's loads are
// one coalesced 32-byte segment, and the warp's ballot of "foreground" is word 32 c + k itself,
// which lane k keeps and writes. Pixels past the width (the row padding) are background.
// `keep` (null: none) is a packed mask of the same layout whose zero bits are masked out (a
// region of interest, static reflections: `frame::mask`). `level_at` (null: none) holds the
// level when grey_level picked it, else `level` is it. A frame set (`blockIdx.z` = frame): frame
// z's grey starts `grey_stride` bytes, its mask `mask_stride` words after frame z - 1's, and its
// level is level_at[z]; `keep` is the same for every frame.
extern "C" __global__ void threshold_pack(const unsigned char* grey, u32* mask, u32 width, u32 height,
                                          u32 words_per_row, int level, int invert, const u32* keep,
                                          const u32* level_at, u64 grey_stride, u64 mask_stride) {
    grey += blockIdx.z * grey_stride;
    mask += blockIdx.z * mask_stride;
    if (level_at) level = (int)level_at[blockIdx.z];
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
