// DLP-GPU (L. Cabaret, L. Lacassagne, D. Etiemble, "Distanceless Label Propagation: an Efficient
// Direct Connected Component Labeling Algorithm for GPUs", IPTA 2017), alg. 5:
//
//   step 1  dlp_tile4/8     one block per tile, in shared memory: DLP-I, DLP-SR (2x2 mask),
//                           DLP-R, DLP-RUF (atomicRUF), DLP-R, label translation to global labels
//   step 2a dlp_south4/8    DLP-RUF on the 2x2 windows straddling each tile row's south border
//   step 2b dlp_east4/8     DLP-RUF on the 2x2 windows straddling each tile column's east border
//   step 3  dlp_relabel     DLP-R on the whole image (every label becomes its root); counts roots
//
// Labels follow pixel_labels.cuh (DLP's own convention: e = i * w + j + 1, E[e - 1] is the parent
// of e). The 2x2 mask of pixel (x, y) is a = (x, y), b = (x + 1, y), c = (x, y + 1),
// d = (x + 1, y + 1). Every pair of 8-adjacent pixels of a tile lies in the mask of a pixel that
// is not on the tile's south or east border (tiles are at least 2x2), and every pair crossing a
// border lies in one of the windows of step 2.
//
// 4-connectivity (the paper is 8-connected): a window's foreground is 4-connected unless it is
// exactly one diagonal pair, and such a window joins nothing; every other window is handled as in
// the paper.
//
// Shared-memory discipline (racecheck): each phase of step 1 either only reads the tile, or
// only writes its own cell, or only uses atomicMin (px_union); phases are separated by barriers,
// and no thread returns early, so every thread reaches every barrier.
//
// Launch geometry (the paper's tuning on a GTX 980 Ti; set in src/ccl/cuda/dlp.rs, tunable):
// step 1 blocks of 84 x 8 threads (one per pixel of an 84 x 8 tile), step 2a 112 x 1, step 2b
// 96 x 1, step 3 64 x 2. Tiles are numbered along a 1-D grid (so tall images fit the grid).

// Whether the foreground of a 2x2 window is connected (then all its labels are joined).
template <bool EIGHT>
__device__ __forceinline__ bool window_joins(u32 a, u32 b, u32 c, u32 d) {
    if (EIGHT) return true;
    bool diagonal_only = (a && d && !b && !c) || (b && c && !a && !d);
    return !diagonal_only;
}

// min+ of the window's labels (0 when all are background).
__device__ __forceinline__ u32 min_plus(u32 a, u32 b, u32 c, u32 d) {
    u32 m = 0xffffffffu;
    if (a) m = min(m, a);
    if (b) m = min(m, b);
    if (c) m = min(m, c);
    if (d) m = min(m, d);
    return m == 0xffffffffu ? 0 : m;
}

// DLP-RUF on one window: atomicRUF(E, a_p, eps) for every label a_p != eps of the window.
__device__ __forceinline__ void window_ruf(u32* E, u32 a, u32 b, u32 c, u32 d, u32 eps) {
    if (a && a != eps) px_union(E, a, eps);
    if (b && b != eps) px_union(E, b, eps);
    if (c && c != eps) px_union(E, c, eps);
    if (d && d != eps) px_union(E, d, eps);
}

// Step 1: tile labeling. blockDim = tile size; dynamic shared memory = tile pixels * 4 bytes.
// Also resets the component count.
template <bool EIGHT>
__device__ void tile(const unsigned char* img, u32* L, int width, int height, int tiles_x, u32* total) {
    extern __shared__ u32 S[];
    const u32 TW = blockDim.x, TH = blockDim.y;
    const u32 lx = threadIdx.x, ly = threadIdx.y, t = ly * TW + lx;
    const u32 x0 = (blockIdx.x % (u32)tiles_x) * TW, y0 = (blockIdx.x / (u32)tiles_x) * TH;
    const u32 x = x0 + lx, y = y0 + ly, w = (u32)width;
    const bool inside = x < w && y < (u32)height;
    if (blockIdx.x == 0 && t == 0) *total = 0;

    // DLP-I: unique local labels.
    const bool fg = inside && img[y * w + x] != 0;
    S[t] = fg ? t + 1 : 0;
    __syncthreads();

    // DLP-SR with the 2x2 mask (not on the tile's south and east borders): gather ...
    const bool origin = lx + 1 < TW && ly + 1 < TH;
    u32 a = 0, b = 0, c = 0, d = 0;
    if (origin) {
        a = S[t];
        b = S[t + 1];
        c = S[t + TW];
        d = S[t + TW + 1];
    }
    const bool joins = origin && window_joins<EIGHT>(a, b, c, d);
    __syncthreads();
    // ... then scatter eps to the root cell of every label of the mask (SetRoot = atomicMin).
    if (joins) {
        u32 eps = min_plus(a, b, c, d);
        if (a && a != eps) atomicMin(&S[a - 1], eps);
        if (b && b != eps) atomicMin(&S[b - 1], eps);
        if (c && c != eps) atomicMin(&S[c - 1], eps);
        if (d && d != eps) atomicMin(&S[d - 1], eps);
    }
    __syncthreads();

    // DLP-R: every label becomes its root (find with reads only, then write after a barrier).
    u32 r = S[t] ? px_find(S, S[t]) : 0;
    __syncthreads();
    S[t] = r;
    __syncthreads();

    // DLP-RUF on the same masks: gather the current labels ...
    if (origin) {
        a = S[t];
        b = S[t + 1];
        c = S[t + TW];
        d = S[t + TW + 1];
    }
    __syncthreads();
    // ... then join them with atomicRUF (atomics only).
    if (joins) window_ruf(S, a, b, c, d, min_plus(a, b, c, d));
    __syncthreads();

    // DLP-R (reads only from here on) and label translation: local label -> global label.
    r = S[t] ? px_find(S, S[t]) : 0;
    if (inside) {
        u32 out = 0;
        if (r) {
            u32 l0 = r - 1;
            out = (y0 + l0 / TW) * w + (x0 + l0 % TW) + 1;
        }
        L[y * w + x] = out;
    }
}

extern "C" __global__ void dlp_tile4(const unsigned char* img, u32* L, int width, int height, int tiles_x, u32* total) {
    tile<false>(img, L, width, height, tiles_x, total);
}
extern "C" __global__ void dlp_tile8(const unsigned char* img, u32* L, int width, int height, int tiles_x, u32* total) {
    tile<true>(img, L, width, height, tiles_x, total);
}

// DLP-RUF on the window with top-left pixel (x, y) in global memory (x + 1 or y + 1 may be
// outside the image: background).
template <bool EIGHT>
__device__ __forceinline__ void border_window(u32* L, u32 x, u32 y, u32 w, u32 h) {
    const u32 i = y * w + x;
    const bool r = x + 1 < w, s = y + 1 < h;
    u32 a = L[i];
    u32 b = r ? L[i + 1] : 0;
    u32 c = s ? L[i + w] : 0;
    u32 d = (r && s) ? L[i + w + 1] : 0;
    if (!window_joins<EIGHT>(a, b, c, d)) return;
    u32 eps = min_plus(a, b, c, d);
    if (eps) window_ruf(L, a, b, c, d, eps);
}

// Step 2a: windows on the last row of every tile row but the image's last. One thread per
// (border, x), x fastest: coalesced.
template <bool EIGHT>
__device__ void south(u32* L, int width, int height, int tile_h, u32 borders) {
    const u32 w = (u32)width, h = (u32)height;
    u32 k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= borders * w) return;
    u32 border = k / w, x = k % w;
    border_window<EIGHT>(L, x, (border + 1) * (u32)tile_h - 1, w, h);
}

extern "C" __global__ void dlp_south4(u32* L, int width, int height, int tile_h, u32 borders) {
    south<false>(L, width, height, tile_h, borders);
}
extern "C" __global__ void dlp_south8(u32* L, int width, int height, int tile_h, u32 borders) {
    south<true>(L, width, height, tile_h, borders);
}

// Step 2b: windows on the last column of every tile column but the image's last. One thread per
// (border, y): strided accesses, the reason the paper keeps this step apart.
template <bool EIGHT>
__device__ void east(u32* L, int width, int height, int tile_w, u32 borders) {
    const u32 w = (u32)width, h = (u32)height;
    u32 k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= borders * h) return;
    u32 border = k / h, y = k % h;
    border_window<EIGHT>(L, (border + 1) * (u32)tile_w - 1, y, w, h);
}

extern "C" __global__ void dlp_east4(u32* L, int width, int height, int tile_w, u32 borders) {
    east<false>(L, width, height, tile_w, borders);
}
extern "C" __global__ void dlp_east8(u32* L, int width, int height, int tile_w, u32 borders) {
    east<true>(L, width, height, tile_w, borders);
}

// Step 3: DLP-R over the image, and the component count (one root per component). blockDim =
// (64, 2) by default (any size with a multiple of 32 threads); blocks cover blockDim-sized
// rectangles numbered along a 1-D grid.
extern "C" __global__ void dlp_relabel(u32* L, int width, int height, int rects_x, u32* total) {
    const u32 w = (u32)width;
    const u32 x = (blockIdx.x % (u32)rects_x) * blockDim.x + threadIdx.x;
    const u32 y = (blockIdx.x / (u32)rects_x) * blockDim.y + threadIdx.y;
    bool is_root = false;
    if (x < w && y < (u32)height) {
        u32 i = y * w + x;
        u32 l = L[i];
        if (l) {
            u32 r = px_find(L, l);
            if (r != l) L[i] = r;
            is_root = r == i + 1;
        }
    }
    count_roots_warp(is_root, total);
}
