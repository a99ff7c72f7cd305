// Shibata fastCCL (N. Shibata, "Connected Component Labeling Algorithm for GPGPU"; Shibata &
// Yamamoto, JIP 22(1), 2014): an iterative algorithm. After a preparation kernel, the same
// loop-free kernel is applied to every pixel again and again until a pass changes no label:
//
//   shibata_prepare      every foreground pixel gets its own label (pixel index + 1)
//   shibata_pass4/8      g = min label over the pixel and its connected neighbours (4 or 8),
//                        g = fb[fb[fb[fb[g]]]] (pointer chasing), then two atomic mins:
//                        fb[h] = min(fb[h], g) with h the pixel's old label, fb[p] = min(fb[p], g)
//   shibata_count        (labels only) counts the components once the labels are final
//
// The article's equality rule joins neighbours of equal value; for a binary mask that is
// foreground connectivity. Labels follow pixel_labels.cuh (pixel index + 1, 0 = background), so
// fb[v] of the article is L[v - 1] here.
//
// Convergence is detected on the GPU: a pass sets flags[pass & 1] when one of its atomic mins
// lowered a label; the host reads that flag after every pass. Pass k also clears the other flag
// (read by the host after pass k - 1, before pass k was launched), so no memset is needed.
// A pass that changes nothing proves the labeling final: then every pixel's label equals the
// smallest label around it and fb[label] == label, i.e. the component's smallest index + 1.
//
// Launch: 1-D, one thread per pixel, SHIBATA_THREADS (a multiple of 32) threads per block.

extern "C" __global__ void shibata_prepare(const unsigned char* img, u32* L, int width, int height, u32* flags,
                                           u32* total) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        flags[0] = 0;
        flags[1] = 0;
        *total = 0;
    }
    const u32 n = (u32)width * (u32)height;
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    L[i] = img[i] ? i + 1 : 0;
}

// Smallest non-zero label among v and the candidate c (0 = background, ignored).
__device__ __forceinline__ u32 min_label(u32 v, u32 c) { return (c != 0 && c < v) ? c : v; }

template <bool EIGHT>
__device__ void pass(u32* L, int width, int height, u32* flags, int pass_index) {
    if (blockIdx.x == 0 && threadIdx.x == 0) flags[(pass_index + 1) & 1] = 0;
    const u32 w = (u32)width, h = (u32)height, n = w * h;
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const u32 lab = L[i];
    if (lab == 0) return;  // background
    const u32 x = i % w, y = i / w;
    const bool up = y > 0, down = y + 1 < h, left = x > 0, right = x + 1 < w;
    // CCLSub: the smallest label stored in the connected neighbourhood (the pixel included).
    u32 g = lab;
    if (up) g = min_label(g, L[i - w]);
    if (down) g = min_label(g, L[i + w]);
    if (left) g = min_label(g, L[i - 1]);
    if (right) g = min_label(g, L[i + 1]);
    if (EIGHT) {
        if (up && left) g = min_label(g, L[i - w - 1]);
        if (up && right) g = min_label(g, L[i - w + 1]);
        if (down && left) g = min_label(g, L[i + w - 1]);
        if (down && right) g = min_label(g, L[i + w + 1]);
    }
    // g = fb[fb[fb[fb[g]]]]: labels only ever point to smaller labels of the same component.
    g = L[g - 1];
    g = L[g - 1];
    g = L[g - 1];
    g = L[g - 1];
    u32 old_h = atomicMin(&L[lab - 1], g);
    u32 old_p = atomicMin(&L[i], g);
    if (old_h > g || old_p > g) flags[pass_index & 1] = 1;
}

extern "C" __global__ void shibata_pass4(u32* L, int width, int height, u32* flags, int pass_index) {
    pass<false>(L, width, height, flags, pass_index);
}
extern "C" __global__ void shibata_pass8(u32* L, int width, int height, u32* flags, int pass_index) {
    pass<true>(L, width, height, flags, pass_index);
}

// Counts the components of a converged labeling: one root (label == own index + 1) each.
extern "C" __global__ void shibata_count(const u32* L, int width, int height, u32* total) {
    const u32 n = (u32)width * (u32)height;
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    count_roots_warp(i < n && L[i] == i + 1, total);
}
