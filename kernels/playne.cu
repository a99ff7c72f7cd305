// Playne equivalence, block variant (D. P. Playne and K. Hawick, "A New Algorithm for Parallel
// Connected-Component Labelling on GPUs", IEEE TPDS 29(6), 2018; the algorithm inside CV-CUDA's
// label operator), 4-connectivity:
//
//   playne_block    one block per 32 x 4 tile, in shared memory: initialise every pixel to its
//                   up neighbour if connected, else its left neighbour, else itself; resolve
//                   (find root); reduce the "critical" pixels (up and left connected, up-left
//                   not: the only case where the two are not yet joined); resolve; write the
//                   global label of the root
//   playne_y_reduce on each horizontal tile border, join a pixel with its up neighbour, unless
//                   the left and up-left pixels make that join redundant (never at a tile's
//                   first column, where those joins belong to another kernel)
//   playne_x_reduce on each vertical tile border, join a pixel with its left neighbour, unless
//                   the up and up-left pixels make it redundant (never on a tile's first row)
//   playne_resolve  every label becomes its root; counts roots
//
// Labels follow pixel_labels.cuh (pixel index + 1, 0 = background); the article's equivalence of
// equal pixel values is foreground connectivity for a binary mask. The article reads the left
// neighbours with warp shuffles; here each thread reads them from the mask (cached), which keeps
// every warp intrinsic out of divergent code.
//
// Shared-memory discipline (racecheck): phases either only read the tile, only write their own
// cell, or only use atomicMin (px_union), separated by barriers; no thread returns early.
//
// Launch: blocks of 32 x 4 threads (the article's); tiles and borders along 1-D grids.

__device__ __forceinline__ bool fg_at(const unsigned char* img, u32 x, u32 y, u32 w) { return img[y * w + x] != 0; }

extern "C" __global__ void playne_block(const unsigned char* img, u32* L, int width, int height, int tiles_x,
                                        u32* total) {
    extern __shared__ u32 S[];
    const u32 TW = blockDim.x, TH = blockDim.y;
    const u32 lx = threadIdx.x, ly = threadIdx.y, t = ly * TW + lx;
    const u32 x0 = (blockIdx.x % (u32)tiles_x) * TW, y0 = (blockIdx.x / (u32)tiles_x) * TH;
    const u32 x = x0 + lx, y = y0 + ly, w = (u32)width;
    const bool inside = x < w && y < (u32)height;
    if (blockIdx.x == 0 && t == 0) *total = 0;

    // Connections inside the tile (lx > 0 / ly > 0 keep the neighbours inside the tile and image).
    const bool p = inside && fg_at(img, x, y, w);
    const bool n_up = p && ly > 0 && fg_at(img, x, y - 1, w);
    const bool n_left = p && lx > 0 && fg_at(img, x - 1, y, w);
    const bool n_up_left = p && lx > 0 && ly > 0 && fg_at(img, x - 1, y - 1, w);

    // Initialisation (local labels t + 1).
    u32 label = !p ? 0 : n_up ? t - TW + 1 : n_left ? t : t + 1;
    S[t] = label;
    __syncthreads();

    // Analysis: resolve to the root (reads only, then the write after a barrier).
    u32 r = label ? px_find(S, label) : 0;
    __syncthreads();
    S[t] = r;
    __syncthreads();

    // Reduction of the critical pixels: read the left label, then join (atomics only).
    const bool critical = n_up && n_left && !n_up_left;
    u32 left_label = critical ? S[t - 1] : 0;
    __syncthreads();
    if (critical) px_union(S, r, left_label);
    __syncthreads();

    // Analysis (reads only from here on), then the root's global label.
    r = p ? px_find(S, r) : 0;
    if (inside) {
        u32 out = 0;
        if (r) {
            u32 l0 = r - 1;
            out = (y0 + l0 / TW) * w + (x0 + l0 % TW) + 1;
        }
        L[y * w + x] = out;
    }
}

// Horizontal borders: rows y = k * tile_h (k >= 1), one thread per (border, x), x fastest.
extern "C" __global__ void playne_y_reduce(const unsigned char* img, u32* L, int width, int height, int tile_w,
                                           int tile_h, u32 borders) {
    const u32 w = (u32)width;
    u32 k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= borders * w) return;
    const u32 x = k % w, y = (k / w + 1) * (u32)tile_h;
    if (!fg_at(img, x, y, w) || !fg_at(img, x, y - 1, w)) return;
    // Redundant when (x-1, y) and (x-1, y-1) join the two through joins made elsewhere: (x-1, y)
    // - (x, y) and (x-1, y-1) - (x, y-1) inside their tiles, (x-1, y) - (x-1, y-1) by this kernel.
    bool redundant = x % (u32)tile_w != 0 && fg_at(img, x - 1, y, w) && fg_at(img, x - 1, y - 1, w);
    if (!redundant) {
        u32 i = y * w + x;
        px_union_komura(L, L[i], L[i - w]);
    }
}

// Vertical borders: columns x = k * tile_w (k >= 1), one thread per (border, y).
extern "C" __global__ void playne_x_reduce(const unsigned char* img, u32* L, int width, int height, int tile_w,
                                           int tile_h, u32 borders) {
    const u32 w = (u32)width, h = (u32)height;
    u32 k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= borders * h) return;
    const u32 y = k % h, x = (k / h + 1) * (u32)tile_w;
    if (!fg_at(img, x, y, w) || !fg_at(img, x - 1, y, w)) return;
    // Redundant when (x, y-1) and (x-1, y-1) join the two: vertical joins inside the tiles, and
    // (x-1, y-1) - (x, y-1) by this kernel.
    bool redundant = y % (u32)tile_h != 0 && fg_at(img, x, y - 1, w) && fg_at(img, x - 1, y - 1, w);
    if (!redundant) {
        u32 i = y * w + x;
        px_union_komura(L, L[i], L[i - 1]);
    }
}

// Every label becomes its root; counts the roots. 1-D, a multiple of 32 threads per block.
extern "C" __global__ void playne_resolve(u32* L, int width, int height, u32* total) {
    const u32 n = (u32)width * (u32)height;
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    bool is_root = false;
    if (i < n) {
        u32 l = L[i];
        if (l) {
            u32 r = px_find(L, l);
            if (r != l) L[i] = r;
            is_root = r == i + 1;
        }
    }
    count_roots_warp(is_root, total);
}
