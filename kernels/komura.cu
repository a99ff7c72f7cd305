// Komura label reduction (Y. Komura, "GPU-based cluster-labeling algorithm without the use of
// conventional iteration", CPC 194, 2015; generalized in CPC 2016): direct labeling of the
// square lattice, 4- or 8-connectivity, four kernels over all pixels (one thread per pixel):
//
//   komura_init4/8     (i)   label = the lowest-numbered connected neighbour (or the pixel itself)
//   komura_analysis    (ii)  pointer jumping: every label becomes its root
//   komura_reduce4/8   (iii) label reduction (alg. 1, atomicMin) with the other lower connected
//                            neighbours (the "residual list"; 4-conn: at most the left one)
//   komura_analysis_count (iv) pointer jumping again; counts the components (roots) into *total
//
// Labels follow pixel_labels.cuh: pixel i starts as i + 1, 0 is background.
// Launch: 1-D, KOMURA_THREADS (a multiple of 32) threads per block, one thread per pixel.

// The lower-numbered neighbours of pixel (x, y), in increasing index order: up-left, up,
// up-right, left (8-connectivity) or up, left (4-connectivity). Bit k set = neighbour k is
// foreground; `label_of(k)` is its own label.
template <bool EIGHT>
__device__ __forceinline__ u32 lower_neighbours(const unsigned char* img, u32 i, u32 x, u32 y, u32 w, u32 nb[4]) {
    u32 bits = 0;
    if (EIGHT) {
        if (y > 0 && x > 0 && img[i - w - 1]) bits |= 1u;
        if (y > 0 && img[i - w]) bits |= 2u;
        if (y > 0 && x + 1 < w && img[i - w + 1]) bits |= 4u;
        if (x > 0 && img[i - 1]) bits |= 8u;
        nb[0] = i - w;      // (i - w - 1) + 1
        nb[1] = i - w + 1;
        nb[2] = i - w + 2;
        nb[3] = i;          // (i - 1) + 1
    } else {
        if (y > 0 && img[i - w]) bits |= 1u;
        if (x > 0 && img[i - 1]) bits |= 2u;
        nb[0] = i - w + 1;
        nb[1] = i;
        nb[2] = 0;
        nb[3] = 0;
    }
    return bits;
}

// (i) Initialisation. Also resets the component count.
template <bool EIGHT>
__device__ void init(const unsigned char* img, u32* L, int width, int height, u32* total) {
    if (blockIdx.x == 0 && threadIdx.x == 0) *total = 0;
    const u32 w = (u32)width, n = w * (u32)height;
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (!img[i]) {
        L[i] = 0;
        return;
    }
    u32 nb[4];
    u32 bits = lower_neighbours<EIGHT>(img, i, i % w, i / w, w, nb);
    L[i] = bits ? nb[__ffs(bits) - 1] : i + 1;
}

extern "C" __global__ void komura_init4(const unsigned char* img, u32* L, int width, int height, u32* total) {
    init<false>(img, L, width, height, total);
}
extern "C" __global__ void komura_init8(const unsigned char* img, u32* L, int width, int height, u32* total) {
    init<true>(img, L, width, height, total);
}

// (ii) and (iv) Analysis: every foreground pixel's label becomes its root. Roots do not move
// during analysis, so concurrent shortcuts by other threads only shorten the walk. COUNT: also
// counts the roots (pixels whose label is their own) into *total.
template <bool COUNT>
__device__ void analysis(u32* L, int width, int height, u32* total) {
    const u32 n = (u32)width * (u32)height;
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    bool is_root = false;
    if (i < n) {
        u32 l = L[i];
        if (l != 0) {
            u32 r = px_find(L, l);
            if (r != l) L[i] = r;
            is_root = r == i + 1;
        }
    }
    if (COUNT) count_roots_warp(is_root, total);  // the whole warp takes part
}

extern "C" __global__ void komura_analysis(u32* L, int width, int height) {
    analysis<false>(L, width, height, nullptr);
}
extern "C" __global__ void komura_analysis_count(u32* L, int width, int height, u32* total) {
    analysis<true>(L, width, height, total);
}

// (iii) Label reduction with the residual list: every connected lower neighbour but the one the
// label was initialised to.
template <bool EIGHT>
__device__ void reduce(const unsigned char* img, u32* L, int width, int height) {
    const u32 w = (u32)width, n = w * (u32)height;
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || !img[i]) return;
    u32 nb[4];
    u32 bits = lower_neighbours<EIGHT>(img, i, i % w, i / w, w, nb);
    bits &= bits - 1;  // drop the lowest: initialisation used it
    for (; bits; bits &= bits - 1) px_union_komura(L, i + 1, nb[__ffs(bits) - 1]);
}

extern "C" __global__ void komura_reduce4(const unsigned char* img, u32* L, int width, int height) {
    reduce<false>(img, L, width, height);
}
extern "C" __global__ void komura_reduce8(const unsigned char* img, u32* L, int width, int height) {
    reduce<true>(img, L, width, height);
}
