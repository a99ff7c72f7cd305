// Shared by every kernel file: NVRTC compiles each file with this text in front of it
// (see src/ccl/cuda/kernels.rs), so the types and helpers here exist once in the sources.
//
// Conventions
// - Bit-packed masks: pixel x of row y is bit (x % 32) of word y * words_per_row + x / 32 (LSB
//   first); rows are padded to a multiple of 64 pixels with zero bits.
// - Equivalence trees: L[k] is the parent of label k, a root has L[k] == k, and merges keep the
//   smaller label as root, so a component's root is its first pixel in raster order.

#define WARP 32
#define FULL 0xffffffffu

typedef unsigned int u32;
typedef unsigned long long u64;

// Statistics of one component, accumulated on the GPU. `top` is the root's row (a root is the
// component's first pixel in raster order), so no atomic is needed for it.
struct GpuStats {
    u64 sum_x;
    u64 sum_y;
    u32 area;
    u32 min_x;
    u32 max_x;
    u32 max_y;
    u32 top;
    u32 pad;
};

// Statistics of a component before any segment is added; `top` is its root's row.
__device__ __forceinline__ GpuStats empty_stats(u32 top) {
    GpuStats e;
    e.sum_x = 0;
    e.sum_y = 0;
    e.area = 0;
    e.min_x = 0xffffffffu;
    e.max_x = 0;
    e.max_y = 0;
    e.top = top;
    e.pad = 0;
    return e;
}

// ---------------------------------------------------------------------------------------------
// Union-find on the label image.

__device__ __forceinline__ u32 find_root(const u32* L, u32 e) {
    u32 p = L[e];
    while (p != e) {
        e = p;
        p = L[e];
    }
    return e;
}

// Root of e, then every label on the path is pointed straight at the root, so later finds over
// the same chain are short. Only used once merging is over (a root never changes then), so the
// writes are safe: any reader sees either the old ancestor or the root.
__device__ __forceinline__ u32 find_compress(u32* L, u32 e) {
    u32 r = find_root(L, e);
    while (e != r) {
        u32 p = L[e];
        if (p != r) L[e] = r;
        e = p;
    }
    return r;
}

// Merge of the equivalence trees of a and b; the smaller root wins (recursive atomicMin).
__device__ void merge(u32* L, u32 a, u32 b) {
    while (a != b && a != L[a]) a = L[a];
    while (a != b && b != L[b]) b = L[b];
    while (a != b) {
        if (a < b) {
            u32 t = a;
            a = b;
            b = t;
        }
        u32 old = atomicMin(&L[a], b);
        a = (old == a) ? b : old;
    }
}

// ---------------------------------------------------------------------------------------------
// Bytes to bits.

// Bytes (0 / non-zero) to bits: one warp per row, one pixel per lane, __ballot_sync per 32 pixels.
extern "C" __global__ void pack_bytes(const unsigned char* in, u32* out, int width, int height,
                                      int words_per_row) {
    int y = blockIdx.x * blockDim.y + threadIdx.y;
    if (y >= height) return;
    const unsigned char* row = in + (size_t)y * width;
    u32* orow = out + (size_t)y * words_per_row;
    for (int w0 = 0; w0 < words_per_row; w0++) {
        int x = w0 * 32 + (int)threadIdx.x;
        bool v = x < width && row[x] != 0;
        u32 word = __ballot_sync(FULL, v);
        if (threadIdx.x == 0) orow[w0] = word;
    }
}

// Bytes to bits, vectorised: each lane reads 16 bytes (one uint4) and two lanes make a word.
// Rows must start 16-byte aligned (width % 16 == 0); other widths use pack_bytes.
extern "C" __global__ void pack_bytes16(const unsigned char* in, u32* out, int width, int height, int words_per_row) {
    int y = blockIdx.x * blockDim.y + threadIdx.y;
    if (y >= height) return;
    const int lane = threadIdx.x & 31;
    const uint4* row = (const uint4*)(in + (size_t)y * width);
    u32* orow = out + (size_t)y * words_per_row;
    const int nvec = width / 16;
    for (int v0 = 0; v0 < 2 * words_per_row; v0 += WARP) {
        int vi = v0 + lane;
        u32 bits = 0;
        if (vi < nvec) {
            uint4 q = row[vi];
            u32 parts[4] = {q.x, q.y, q.z, q.w};
            for (int i = 0; i < 4; i++)
                for (int k = 0; k < 4; k++) bits |= (u32)(((parts[i] >> (8 * k)) & 0xffu) != 0) << (4 * i + k);
        }
        u32 word = (bits << (16 * (lane & 1))) | (__shfl_xor_sync(FULL, bits, 1) << (16 * ((lane & 1) ^ 1)));
        if ((lane & 1) == 0 && vi / 2 < words_per_row) orow[vi / 2] = word;
    }
}

// ---------------------------------------------------------------------------------------------
// Row-count scan (component numbering in raster order).

// Exclusive scan of the per-row root counts, one block of SCAN_THREADS threads; each thread scans
// a contiguous run of rows. Writes row_offset[y] and the component count to *total.
#define SCAN_THREADS 1024
extern "C" __global__ void scan_rows(const u32* row_count, u32* row_offset, u32* total, int height) {
    __shared__ u32 partial[SCAN_THREADS];
    int t = threadIdx.x;
    int per = (height + SCAN_THREADS - 1) / SCAN_THREADS;
    int begin = min(t * per, height), end = min(begin + per, height);
    u32 sum = 0;
    for (int y = begin; y < end; y++) sum += row_count[y];
    partial[t] = sum;
    __syncthreads();
    // Hillis-Steele inclusive scan over the partial sums.
    for (int off = 1; off < SCAN_THREADS; off <<= 1) {
        u32 v = t >= off ? partial[t - off] : 0;
        __syncthreads();
        partial[t] += v;
        __syncthreads();
    }
    u32 run = partial[t] - sum;
    for (int y = begin; y < end; y++) {
        row_offset[y] = run;
        run += row_count[y];
    }
    if (t == SCAN_THREADS - 1) *total = partial[t];
}


// ---------------------------------------------------------------------------------------------
// Conflict detection for feature updates (Lemaitre et al. 2021, Algorithm 3), shared by FLSL+CD
// and HA+CD.

// Features of one or more runs of one component, in one row.
struct Part {
    u32 area, min_x, max_x;
    u64 sum_x;
};

// Algorithm 3 (conflict detection): the lanes holding the same key elect a leader (the lowest)
// and reduce their parts into it, all groups at once: at step i a lane whose rank in its group
// is a multiple of 2^i adds the part of the next such lane of its group. Returns whether this
// lane is its group's leader. Every lane of the warp must call it (full masks).
__device__ __forceinline__ bool cd_reduce(u32 key, Part& p) {
    const u32 lane = threadIdx.x & 31;
    u32 peers = __match_any_sync(FULL, key);
    u32 rank = __popc(peers & ((1u << lane) - 1u));
    bool leader = rank == 0;
    peers &= ~((2u << lane) - 1u);  // peers above this lane (2u << 31 == 0: none for lane 31)
    while (__any_sync(FULL, peers)) {
        u32 next = __ffs(peers);  // 1 + lane of the next peer, 0 if none
        int src = (int)((next - 1u) & 31u);
        u32 area = __shfl_sync(FULL, p.area, src);
        u32 mn = __shfl_sync(FULL, p.min_x, src);
        u32 mx = __shfl_sync(FULL, p.max_x, src);
        u64 sx = __shfl_sync(FULL, p.sum_x, src);
        if (next) {
            p.area += area;
            p.min_x = min(p.min_x, mn);
            p.max_x = max(p.max_x, mx);
            p.sum_x += sx;
        }
        peers &= __ballot_sync(FULL, (rank & 1u) == 0);
        rank >>= 1;
    }
    return leader;
}

// Adds the part of row y to statistics row s with atomics (bbox ones only when they can change).
__device__ __forceinline__ void add_part(GpuStats* stats, u32 s, const Part& p, u32 y) {
    GpuStats* st = &stats[s];
    atomicAdd(&st->area, p.area);
    atomicAdd(&st->sum_x, p.sum_x);
    atomicAdd(&st->sum_y, (u64)p.area * y);
    if (p.min_x < *(volatile u32*)&st->min_x) atomicMin(&st->min_x, p.min_x);
    if (p.max_x > *(volatile u32*)&st->max_x) atomicMax(&st->max_x, p.max_x);
    if (y > *(volatile u32*)&st->max_y) atomicMax(&st->max_y, y);
}

// ---------------------------------------------------------------------------------------------
// On-the-fly feature merge (Lemaitre et al. 2021, Algorithm 2), shared by FLSL+OTF and HA+OTF.

// Per-label features for OTF (on-the-fly feature merge), one array per field, indexed by the
// provisional label (FLSL: run id; HA+OTF: segment head pixel).
struct Feat {
    u32* area;
    u32* min_x;
    u32* max_x;
    u32* max_y;
    u64* sum_x;
    u64* sum_y;
};

__device__ __forceinline__ Feat no_feat() {
    Feat f = {nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
    return f;
}

__device__ __forceinline__ u32 find_volatile(const u32* L, u32 e) {
    const volatile u32* V = L;
    u32 p = V[e];
    while (p != e) {
        e = p;
        p = V[e];
    }
    return e;
}

// Moves the features of `from` into `to`: each field is taken out with atomicExch (leaving its
// identity, so no value is taken twice) and merged into `to` with its atomic. Fields move
// independently: a concurrent mover may take some fields of `from` and this one the others.
__device__ __forceinline__ void move_features(const Feat& F, u32 from, u32 to) {
    u32 a = atomicExch(&F.area[from], 0u);
    u64 sx = atomicExch(&F.sum_x[from], 0ull);
    u64 sy = atomicExch(&F.sum_y[from], 0ull);
    u32 mn = atomicExch(&F.min_x[from], 0xffffffffu);
    u32 mx = atomicExch(&F.max_x[from], 0u);
    u32 my = atomicExch(&F.max_y[from], 0u);
    if (a) atomicAdd(&F.area[to], a);
    if (sx) atomicAdd(&F.sum_x[to], sx);
    if (sy) atomicAdd(&F.sum_y[to], sy);
    if (mn != 0xffffffffu) atomicMin(&F.min_x[to], mn);
    if (mx) atomicMax(&F.max_x[to], mx);
    if (my) atomicMax(&F.max_y[to], my);
}

// Merges the trees of l1 and l2 (smaller root wins, as `merge`), moving features along with
// every link; then makes sure what was added to l1 reached an actual root: whoever links a root
// under another takes its features out after the link, so features added to a root after that
// are moved on here (the add is fenced before the find that sees the root changed).
__device__ void otf_merge(u32* L, const Feat& F, u32 l1, u32 l2) {
    l1 = find_volatile(L, l1);
    l2 = find_volatile(L, l2);
    // Already one tree (the common case: a segment touching several of its component's
    // segments): nothing moves, and nothing this thread added needs chasing to a root.
    if (l1 == l2) return;
    __threadfence();
    while (l1 != l2) {
        if (l2 < l1) {
            u32 t = l1;
            l1 = l2;
            l2 = t;
        }
        u32 l = atomicMin(&L[l2], l1);  // label merge
        __threadfence();
        move_features(F, l2, l1);       // feature extraction and merge into the current root
        __threadfence();
        if (l == l2) break;             // l2 was a root: linked
        l2 = l;                         // l2 had been linked to l meanwhile: merge l and l1
    }
    u32 a = find_volatile(L, l1);
    __threadfence();
    while (a != l1) {
        move_features(F, l1, a);
        __threadfence();
        l1 = a;
        a = find_volatile(L, l1);
        __threadfence();
    }
}
