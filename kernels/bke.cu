// Block-based Komura Equivalence, BKE (S. Allegretti, F. Bolelli, C. Grana, "Optimized
// Block-Based Algorithms to Label Connected Components on GPUs", IEEE TPDS 31(2), 2020; the
// algorithm of OpenCV's cv::cuda::connectedComponents), 8-connectivity:
//
// The image is cut into 2x2 blocks   a b   (pixel a = (x, y) with x, y even). The foreground of a
//                                    c d   block is always 8-connected, so a block is one node.
// Labels follow pixel_labels.cuh with the block's node = its pixel a: label ia + 1, parent in
// L[ia] (whatever pixel a's own value). Block connections (bke_rules; CPU model in bke.rs):
//   left   (x-2, y):    (a|c) & (px(x-1, y) | px(x-1, y+1))
//   top    (x, y-2):    (a|b) & (px(x, y-1) | px(x+1, y-1))
//   topleft(x-2, y-2):  a & px(x-1, y-1)
//   topright(x+2, y-2): b & px(x+2, y-1)
// These four lower neighbours are ordered topleft < top < topright < left by label.
//
//   bke_init      per block: the connection bits and the pixel bits into info[block]; the label
//                 of the lowest connected neighbour block (Komura's initialisation), or its own
//   bke_compress  per block: label becomes its root
//   bke_reduce    per block: Komura's label reduction with every other connected neighbour block
//   bke_compress  again
//   bke_final     per block: the root label into each of its foreground pixels, 0 elsewhere;
//                 counts the root blocks
//
// The article keeps the connection bits inside the label image (in pixel b's cell); here they
// live in a byte per block, which needs no special case for one-pixel-wide blocks.
// Launch: 2-D blocks of 16 x 16 threads (OpenCV's), one thread per 2x2 block, covering 32 x 32
// pixels each, numbered along a 1-D grid.

#define BKE_TOPLEFT 1u
#define BKE_TOP 2u
#define BKE_TOPRIGHT 4u
#define BKE_LEFT 8u
#define BKE_A 16u
#define BKE_B 32u
#define BKE_C 64u
#define BKE_D 128u

struct BlockPos {
    u32 bx, by;   // block coordinates
    u32 x, y;     // pixel a
    bool valid;   // inside the image
};

__device__ __forceinline__ BlockPos block_pos(int width, int height, int rects_x) {
    BlockPos p;
    p.bx = (blockIdx.x % (u32)rects_x) * blockDim.x + threadIdx.x;
    p.by = (blockIdx.x / (u32)rects_x) * blockDim.y + threadIdx.y;
    p.x = 2 * p.bx;
    p.y = 2 * p.by;
    p.valid = p.x < (u32)width && p.y < (u32)height;
    return p;
}

__device__ __forceinline__ u32 block_index(BlockPos p, int width) { return p.by * (((u32)width + 1) / 2) + p.bx; }

// Resets the component count.
extern "C" __global__ void bke_init(const unsigned char* img, u32* L, unsigned char* info, int width, int height,
                                    int rects_x, u32* total) {
    if (blockIdx.x == 0 && threadIdx.x == 0 && threadIdx.y == 0) *total = 0;
    BlockPos p = block_pos(width, height, rects_x);
    if (!p.valid) return;
    const u32 w = (u32)width, h = (u32)height, x = p.x, y = p.y, ia = y * w + x;
    // Pixel (x + dx, y + dy), background outside the image.
    auto px = [&](int dx, int dy) -> bool {
        long long xx = (long long)x + dx, yy = (long long)y + dy;
        if (xx < 0 || yy < 0 || xx >= (long long)w || yy >= (long long)h) return false;
        return img[(u32)yy * w + (u32)xx] != 0;
    };
    const bool a = px(0, 0), b = px(1, 0), c = px(0, 1), d = px(1, 1);
    u32 bits = (a ? BKE_A : 0) | (b ? BKE_B : 0) | (c ? BKE_C : 0) | (d ? BKE_D : 0);
    u32 label = 0;
    if (bits) {
        if (a && px(-1, -1)) bits |= BKE_TOPLEFT;
        if ((a || b) && (px(0, -1) || px(1, -1))) bits |= BKE_TOP;
        if (b && px(2, -1)) bits |= BKE_TOPRIGHT;
        if ((a || c) && (px(-1, 0) || px(-1, 1))) bits |= BKE_LEFT;
        // Lowest connected neighbour block, in label order topleft < top < topright < left.
        if (bits & BKE_TOPLEFT) label = ia - 2 * w - 2 + 1;
        else if (bits & BKE_TOP) label = ia - 2 * w + 1;
        else if (bits & BKE_TOPRIGHT) label = ia - 2 * w + 2 + 1;
        else if (bits & BKE_LEFT) label = ia - 2 + 1;
        else label = ia + 1;
    }
    L[ia] = label;
    info[block_index(p, width)] = (unsigned char)bits;
}

extern "C" __global__ void bke_compress(u32* L, const unsigned char* info, int width, int height, int rects_x) {
    BlockPos p = block_pos(width, height, rects_x);
    if (!p.valid || info[block_index(p, width)] == 0) return;
    const u32 ia = p.y * (u32)width + p.x;
    u32 l = L[ia];
    u32 r = px_find(L, l);
    if (r != l) L[ia] = r;
}

extern "C" __global__ void bke_reduce(u32* L, const unsigned char* info, int width, int height, int rects_x) {
    BlockPos p = block_pos(width, height, rects_x);
    if (!p.valid) return;
    u32 conn = info[block_index(p, width)] & 15u;
    conn &= conn - 1;  // drop the lowest: the initialisation used it
    if (!conn) return;
    const u32 w = (u32)width, ia = p.y * w + p.x;
    if (conn & BKE_TOP) px_union_komura(L, ia + 1, ia - 2 * w + 1);
    if (conn & BKE_TOPRIGHT) px_union_komura(L, ia + 1, ia - 2 * w + 2 + 1);
    if (conn & BKE_LEFT) px_union_komura(L, ia + 1, ia - 2 + 1);
}

// Writes the block's root label into its foreground pixels (0 into the others) and counts the
// root blocks. Each thread reads only its own block's cell, so overwriting it is safe.
extern "C" __global__ void bke_final(u32* L, const unsigned char* info, int width, int height, int rects_x,
                                     u32* total) {
    BlockPos p = block_pos(width, height, rects_x);
    bool is_root = false;
    if (p.valid) {
        const u32 w = (u32)width, h = (u32)height, ia = p.y * w + p.x;
        u32 bits = info[block_index(p, width)];
        u32 r = bits ? L[ia] : 0;
        is_root = bits && r == ia + 1;
        const bool right = p.x + 1 < w, below = p.y + 1 < h;
        L[ia] = (bits & BKE_A) ? r : 0;
        if (right) L[ia + 1] = (bits & BKE_B) ? r : 0;
        if (below) L[ia + w] = (bits & BKE_C) ? r : 0;
        if (right && below) L[ia + w + 1] = (bits & BKE_D) ? r : 0;
    }
    count_roots_warp(is_root, total);
}
