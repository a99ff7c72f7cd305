// Union-find on a pixel label image, shared by the baseline algorithms (dlp, komura, shibata,
// playne, bke). NVRTC compiles each of those files with common.cuh and then this text in front.
//
// Conventions (those of DLP: labels 1-based so that 0 stays background)
// - L[i] is the label of pixel i (linear index y * width + x): 0 = background, else a label
//   e >= 1 that names pixel e - 1 ("node" e). The cell L[e - 1] is then the parent of label e,
//   and e is a root when L[e - 1] == e. A pixel starts as its own root (L[i] = i + 1).
// - Every write keeps L[e - 1] <= e and stays inside the component, so the root of a component
//   is its smallest label: after a final flattening, every foreground pixel holds
//   (index of the component's first pixel in raster order) + 1.
// - The same helpers work on a tile in shared memory with tile-local labels.

// Root of label e (plain reads). Only call it while no other thread moves roots, or where any
// ancestor is an acceptable answer.
__device__ __forceinline__ u32 px_find(const u32* L, u32 e) {
    u32 p = L[e - 1];
    while (p != e) {
        e = p;
        p = L[e - 1];
    }
    return e;
}

// Union of the trees holding labels a and b, the smaller root wins. Touches L only through
// atomicMin and its return value (no plain reads), so it can run concurrently with itself on
// shared memory: DLP's atomicRUF (Cabaret et al. 2017, alg. 4) written as a loop.
__device__ __forceinline__ void px_union(u32* L, u32 a, u32 b) {
    while (a != b) {
        if (a < b) {
            u32 t = a;
            a = b;
            b = t;
        }
        // a > b: link a under b. If a was a root we are done; otherwise a's old parent must join b.
        u32 old = atomicMin(&L[a - 1], b);
        a = (old == a) ? b : old;
    }
}

// Komura's label reduction (Komura 2015, alg. 1): find both roots with plain reads, then link
// the larger under the smaller with atomicMin until the link holds. For global memory, where
// concurrent plain reads are fine.
__device__ __forceinline__ void px_union_komura(u32* L, u32 a, u32 b) {
    u32 l1 = px_find(L, a);
    u32 l2 = px_find(L, b);
    if (l1 == l2) return;
    if (l1 < l2) {
        u32 t = l1;
        l1 = l2;
        l2 = t;
    }
    // Invariant: l1 > l2, and l1's tree must join l2's.
    while (true) {
        u32 l3 = atomicMin(&L[l1 - 1], l2);
        if (l3 == l2 || l3 == l1) return;  // already linked, or l1 was a root and now points to l2
        if (l3 > l2) {
            l1 = l3;  // l1 now points to l2; its old parent l3 must follow
        } else {
            l1 = l2;  // l1 keeps its smaller parent l3; l2 must join l3
            l2 = l3;
        }
    }
}

// Adds the number of lanes with `is_root` to *total: one atomic per warp. Every lane of the
// warp must call it (no early return before it).
__device__ __forceinline__ void count_roots_warp(bool is_root, u32* total) {
    unsigned roots = __ballot_sync(FULL, is_root);
    if ((threadIdx.x + threadIdx.y * blockDim.x) % WARP == 0 && roots != 0) atomicAdd(total, (u32)__popc(roots));
}

// Bit-packed mask (see common.cuh) to one byte per pixel, for label_packed: one thread per pixel.
extern "C" __global__ void unpack_bits(const u32* words, unsigned char* out, int width, int height,
                                       int words_per_row) {
    u32 n = (u32)width * (u32)height;
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32 x = i % (u32)width, y = i / (u32)width;
    out[i] = (words[(size_t)y * words_per_row + x / 32] >> (x % 32)) & 1u;
}
