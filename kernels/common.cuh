// Shared by every kernel file: NVRTC compiles each file with this text in front of it
// (see src/gpu/kernels.rs), so the types and helpers here exist once in the sources.
//
// Conventions
// - Bit-packed masks: pixel x of row y is bit (x % 32) of word y * words_per_row + x / 32 (LSB
//   first); rows are padded to a multiple of 64 pixels with zero bits.
// - Equivalence trees: L[k] is the parent of label k, a root has L[k] == k, and merges keep the
//   smaller label as root, so a component's root is its first pixel in raster order.

#define WARP 32
#define FULL 0xffffffffu
#define NONE 0xffffffffu  // no label, no slot

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

// Links the trees of a and b, found at or near their roots: the smaller root wins (recursive
// atomicMin; when a is no longer a root, the loop goes on with what replaced it).
__device__ __forceinline__ void link(u32* L, u32 a, u32 b) {
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

// Merge of the equivalence trees of a and b; the smaller root wins.
__device__ void merge(u32* L, u32 a, u32 b) {
    while (a != b && a != L[a]) a = L[a];
    while (a != b && b != L[b]) b = L[b];
    link(L, a, b);
}

// Root of e with path halving: each label on the way is pointed at its grandparent. Safe while
// labels merge: a label only ever points to a smaller label of its own set, and the store writes
// one of those; an atomicMin it overwrites is not lost, because the thread that made it goes on
// merging the value it replaced.
__device__ __forceinline__ u32 find_halving(u32* L, u32 e) {
    for (;;) {
        u32 p = L[e];
        if (p == e) return e;
        u32 g = L[p];
        if (g == p) return p;
        L[e] = g;
        e = g;
    }
}

// merge with path halving on the way to the roots (ha4w, ha8: ours; the papers' kernels use merge).
__device__ void merge_halving(u32* L, u32 a, u32 b) {
    link(L, find_halving(L, a), find_halving(L, b));
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

// The non-zero bytes of a uint4, as 16 bits (byte i -> bit i).
__device__ __forceinline__ u32 nonzero_bytes16(uint4 q) {
    const u32 parts[4] = {q.x, q.y, q.z, q.w};
    u32 bits = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        u32 x = parts[i];
        u32 high = (((x & 0x7f7f7f7fu) + 0x7f7f7f7fu) | x) & 0x80808080u;  // bit 7 of each byte: byte != 0
        bits |= (((high >> 7) * 0x10204080u) >> 28) << (4 * i);              // gather bits 0, 8, 16, 24
    }
    return bits;
}

// Bytes to bits, vectorised: each lane reads 32 bytes (two uint4) and writes one word; a lane
// issues the loads of PACK_UNROLL words before it uses any, so each warp keeps several in flight.
// Rows must start 16-byte aligned (width % 16 == 0); other widths use pack_bytes.
#define PACK_UNROLL 4
// One row, by a whole warp (the padding words up to words_per_row are written as zero).
__device__ __forceinline__ void pack_row16(const unsigned char* in_row, u32* orow, int width, int words_per_row) {
    const int lane = threadIdx.x & 31;
    const uint4* row = (const uint4*)in_row;
    const int nvec = width / 16;
    const uint4 zero = make_uint4(0, 0, 0, 0);
    for (int w0 = 0; w0 < words_per_row; w0 += WARP * PACK_UNROLL) {
        uint4 q[2 * PACK_UNROLL];
#pragma unroll
        for (int i = 0; i < PACK_UNROLL; i++) {
            int v = 2 * (w0 + i * WARP + lane);
            q[2 * i] = v < nvec ? row[v] : zero;
            q[2 * i + 1] = v + 1 < nvec ? row[v + 1] : zero;
        }
#pragma unroll
        for (int i = 0; i < PACK_UNROLL; i++) {
            int wi = w0 + i * WARP + lane;
            if (wi < words_per_row) orow[wi] = nonzero_bytes16(q[2 * i]) | (nonzero_bytes16(q[2 * i + 1]) << 16);
        }
    }
}

extern "C" __global__ void pack_bytes16(const unsigned char* in, u32* out, int width, int height, int words_per_row) {
    int y = blockIdx.x * blockDim.y + threadIdx.y;
    if (y >= height) return;
    pack_row16(in + (size_t)y * width, out + (size_t)y * words_per_row, width, words_per_row);
}

// ---------------------------------------------------------------------------------------------
// Row-count scan (component numbering in raster order).

// Exclusive scan of the per-row root counts, one block of SCAN_THREADS threads, SCAN_THREADS rows
// at a time (coalesced loads, the next chunk's loaded before this one is scanned): warp scans with
// shuffles, then one warp scans the warp totals. Writes row_offset[y] and the component count to
// *total.
#define SCAN_THREADS 1024
__device__ __forceinline__ u32 warp_inclusive_scan(u32 x) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int off = 1; off < WARP; off <<= 1) {
        u32 n = __shfl_up_sync(FULL, x, off);
        if (lane >= off) x += n;
    }
    return x;
}
extern "C" __global__ void scan_rows(const u32* row_count, u32* row_offset, u32* total, int height) {
    __shared__ u32 warp_total[SCAN_THREADS / WARP];
    const int t = threadIdx.x, lane = t & 31, w = t >> 5;
    u32 carry = 0;
    u32 next = t < height ? row_count[t] : 0u;
    for (int base = 0; base < height; base += SCAN_THREADS) {
        const int y = base + t;
        const u32 v = next;
        next = y + SCAN_THREADS < height ? row_count[y + SCAN_THREADS] : 0u;
        const u32 x = warp_inclusive_scan(v);
        if (lane == WARP - 1) warp_total[w] = x;
        __syncthreads();
        if (w == 0) warp_total[lane] = warp_inclusive_scan(warp_total[lane]);
        __syncthreads();
        if (y < height) row_offset[y] = carry + (w ? warp_total[w - 1] : 0u) + x - v;
        carry += warp_total[SCAN_THREADS / WARP - 1];
        __syncthreads();  // warp_total is rewritten by the next chunk
    }
    if (t == 0) *total = carry;
}

// ---------------------------------------------------------------------------------------------
// Numbering the roots in one pass: the row counts, their scan and the slots of the roots in one
// kernel, with the scan across blocks by decoupled look-back (Merrill & Garland, "Single-pass
// Parallel Prefix Scan with Decoupled Look-back", 2016). A count, a scan and a slot kernel cost
// three launches and two trips through global memory for a few microseconds of work each; this
// is the fixed cost of every frame, and most of the time of a small one.
//
// Each block of NUMBER_ROWS rows publishes its root count in status[block] (the aggregate), then
// its warp 0 reads the status words of up to 32 earlier blocks at once, waiting until all are
// published, and sums back to the nearest one that already holds an inclusive prefix; the block
// then publishes its own inclusive prefix. A block only waits for blocks of smaller index, which
// the GPU starts first (as CUB's scans rely on). Status word: high half = epoch << 1 | inclusive
// flag, low half = the sum. The host gives every launch a new epoch (1 .. 2^31 - 1), so words left
// by earlier frames read as unpublished and the array is never cleared between frames.
#define NUMBER_ROWS 16

__device__ __forceinline__ u64 lookback_word(u32 epoch, bool inclusive, u32 sum) {
    return ((u64)((epoch << 1) | (u32)inclusive) << 32) | sum;
}

// Every thread of the block calls it, with the root count of its warp's row (0 for rows past the
// image); blockDim = (32, NUMBER_ROWS). Returns the roots of all rows before the warp's row. The
// last block stores the total.
__device__ u32 number_rows_offset(u32 row_roots, u64* status, u32 epoch, u32* total) {
    __shared__ u32 row_excl[NUMBER_ROWS];
    __shared__ u32 block_excl;
    const u32 lane = threadIdx.x & 31, b = blockIdx.x;
    if (lane == 0) row_excl[threadIdx.y] = row_roots;
    __syncthreads();
    if (threadIdx.y == 0) {
        const u32 v = lane < NUMBER_ROWS ? row_excl[lane] : 0u;
        const u32 inc = warp_inclusive_scan(v);
        const u32 agg = __shfl_sync(FULL, inc, WARP - 1);
        if (lane < NUMBER_ROWS) row_excl[lane] = inc - v;
        volatile u64* st = status;
        if (lane == 0) st[b] = lookback_word(epoch, b == 0, agg);
        u32 excl = 0;
        for (int p = (int)b - 1; p >= 0; p -= WARP) {  // warp-uniform
            const int q = p - (int)lane;               // lane 0 reads the nearest block
            u64 w;
            do {
                w = q >= 0 ? st[q] : lookback_word(epoch, true, 0u);  // before block 0: prefix 0
            } while (!__all_sync(FULL, (u32)(w >> 33) == epoch));
            const u32 inclusive = __ballot_sync(FULL, (u32)(w >> 32) & 1u);
            const u32 upto = inclusive ? (u32)__ffs(inclusive) - 1u : WARP - 1u;
            u32 sum = lane <= upto ? (u32)w : 0u;
            for (int off = 16; off; off >>= 1) sum += __shfl_xor_sync(FULL, sum, off);
            excl += sum;
            if (inclusive) break;
        }
        if (lane == 0) {
            if (b > 0) st[b] = lookback_word(epoch, true, excl + agg);
            block_excl = excl;
            if (b == gridDim.x - 1) *total = excl + agg;
        }
    }
    __syncthreads();
    return block_excl + row_excl[threadIdx.y];
}

// ---------------------------------------------------------------------------------------------
// Conflict detection for feature updates (Lemaitre et al. 2021, Algorithm 3), shared by FLSL+CD
// and HA+CD.

// The sum of v over the warp, exact (mod 2^64) whatever the values: three pieces of at most 24
// bits, each summed by one redux (sm_80 on) without overflowing 32 bits.
__device__ __forceinline__ u64 warp_sum_u64(u64 v) {
#if __CUDA_ARCH__ >= 800
    const u32 lo = __reduce_add_sync(FULL, (u32)v & 0xffffffu);
    const u32 mid = __reduce_add_sync(FULL, (u32)(v >> 24) & 0xffffffu);
    const u32 hi = __reduce_add_sync(FULL, (u32)(v >> 48));
    return lo + ((u64)mid << 24) + ((u64)hi << 48);
#else
    for (int off = 16; off; off >>= 1) v += __shfl_xor_sync(FULL, v, off);
    return v;
#endif
}

// Features of one or more runs of one component, in one row.
struct Part {
    u32 area, min_x, max_x;
    u64 sum_x;

    // Adds the part of lane src when `take` (every lane of the warp calls it: the shuffles).
    __device__ __forceinline__ void add_lane(int src, bool take) {
        u32 a = __shfl_sync(FULL, area, src);
        u32 mn = __shfl_sync(FULL, min_x, src);
        u32 mx = __shfl_sync(FULL, max_x, src);
        u64 sx = __shfl_sync(FULL, sum_x, src);
        if (take) {
            area += a;
            min_x = min(min_x, mn);
            max_x = max(max_x, mx);
            sum_x += sx;
        }
    }

    // Sums the parts of the whole warp, all of one component, into every lane.
    __device__ __forceinline__ void add_warp() {
#if __CUDA_ARCH__ >= 800
        area = __reduce_add_sync(FULL, area);
        min_x = __reduce_min_sync(FULL, min_x);
        max_x = __reduce_max_sync(FULL, max_x);
#else
        for (int off = 16; off; off >>= 1) {
            area += __shfl_xor_sync(FULL, area, off);
            min_x = min(min_x, __shfl_xor_sync(FULL, min_x, off));
            max_x = max(max_x, __shfl_xor_sync(FULL, max_x, off));
        }
#endif
        sum_x = warp_sum_u64(sum_x);
    }
};

// Algorithm 3 (conflict detection): the lanes holding the same key elect a leader (the lowest)
// and reduce their parts into it, all groups at once: at step i a lane whose rank in its group
// is a multiple of 2^i adds the part of the next such lane of its group. Returns whether this
// lane is its group's leader. Every lane of the warp must call it (full masks). P: Part, or a
// part with more fields (FLSL's shape sums) with the same add_lane and add_warp. A warp of one
// key (in dense frames, most warps: a component across the frame) reduces in one step per field
// (add_warp).
template <class P>
__device__ __forceinline__ bool cd_reduce(u32 key, P& p) {
    const u32 lane = threadIdx.x & 31;
    u32 peers = __match_any_sync(FULL, key);
    if (peers == FULL) {  // the same in every lane
        p.add_warp();
        return lane == 0;
    }
    u32 rank = __popc(peers & ((1u << lane) - 1u));
    bool leader = rank == 0;
    peers &= ~((2u << lane) - 1u);  // peers above this lane (2u << 31 == 0: none for lane 31)
    while (__any_sync(FULL, peers)) {
        u32 next = __ffs(peers);  // 1 + lane of the next peer, 0 if none
        p.add_lane((int)((next - 1u) & 31u), next != 0u);
        peers &= __ballot_sync(FULL, (rank & 1u) == 0);
        rank >>= 1;
    }
    return leader;
}

// Adds features to statistics row s with atomics (bbox ones only when they can change: a plain
// read can only be stale in the direction that causes an unneeded atomic). The three bounds are
// read before any atomic, so the reads go out together instead of one after another.
__device__ __forceinline__ void add_totals(GpuStats* stats, u32 s, u32 area, u32 min_x, u32 max_x, u32 max_y,
                                           u64 sum_x, u64 sum_y) {
    GpuStats* st = &stats[s];
    const u32 cur_min_x = *(volatile u32*)&st->min_x, cur_max_x = *(volatile u32*)&st->max_x;
    const u32 cur_max_y = *(volatile u32*)&st->max_y;
    atomicAdd(&st->area, area);
    atomicAdd(&st->sum_x, sum_x);
    atomicAdd(&st->sum_y, sum_y);
    if (min_x < cur_min_x) atomicMin(&st->min_x, min_x);
    if (max_x > cur_max_x) atomicMax(&st->max_x, max_x);
    if (max_y > cur_max_y) atomicMax(&st->max_y, max_y);
}

// Adds the part of row y to statistics row s.
__device__ __forceinline__ void add_part(GpuStats* stats, u32 s, const Part& p, u32 y) {
    add_totals(stats, s, p.area, p.min_x, p.max_x, y, p.sum_x, (u64)p.area * y);
}

// ---------------------------------------------------------------------------------------------
// Block-level aggregation of feature updates (ours, on top of the per-lane or per-warp one): the
// TABLE_ROWS rows of a block sum their parts in shared memory, and the block then sends one set
// of global atomics per component. A component of a few rows (any blob taller than one row) costs
// one set instead of one per row, and a component that spans the image (above the percolation
// threshold) one per block instead of one per warp, all on the same addresses.
//
// Entries: slots are numbered in raster order of the roots, so the components rooted in the
// block's rows have the consecutive slots [first, first + roots) (row_offset): they take the
// direct entries [0, roots). The entries after them go to components rooted above the block (a
// component enters the block through its first row), found by hashing the slot with linear
// probing. Both kinds share one pool, so a block of many small components and a block crossed by
// many components from above both fit. Parts with no entry (more roots than entries, a probe
// sequence full) go straight to global memory.
#define TABLE_ROWS 16
#define TABLE_ENTRIES 1088
// The entries kept for components rooted above when the block's own roots would fill the table,
// and how many entries a lookup probes before it gives up.
#define TABLE_ABOVE_MIN 64
#define TABLE_PROBES 16

// SIZE entries. Σy is kept as Σ area · dy, dy the row less the block's first, and rebuilt at the
// flush: at most (0 + 1 + … + 15) · width, 32 bits for frames up to 35,791,394 pixels wide (wider
// ones take the kernels without a table: the host's table_fits).
template <u32 SIZE_>
struct TableOf {
    static const u32 SIZE = SIZE_;
    u64 sum_x[SIZE];
    u32 area_dy[SIZE], area[SIZE], min_x[SIZE], max_x[SIZE], max_y[SIZE];
    u32 key[SIZE];  // entries at or past `direct`: the slot held, NONE = free
    u32 first;      // slot of the first component rooted in the block's rows
    u32 direct;     // entries [0, direct) are the block's own roots, entry = slot - first
    u32 y0;         // the block's first row
};
typedef TableOf<TABLE_ENTRIES> BlockTable;

// Empties the table; every thread of the block calls it (it ends with a barrier). The block's
// own roots are row_offset[y0 + TABLE_ROWS] - first (the last block does not know: it keeps
// TABLE_ABOVE_MIN entries for components from above).
template <u32 SIZE>
__device__ void table_init(TableOf<SIZE>& t, const u32* row_offset, u32 height) {
    const u32 tid = threadIdx.y * blockDim.x + threadIdx.x, n = blockDim.x * blockDim.y;
    const u32 y0 = blockIdx.x * blockDim.y, y1 = y0 + blockDim.y;
    for (u32 e = tid; e < SIZE; e += n) {
        t.sum_x[e] = 0;
        t.area_dy[e] = 0;
        t.area[e] = 0;
        t.min_x[e] = 0xffffffffu;
        t.max_x[e] = 0;
        t.max_y[e] = 0;
        t.key[e] = NONE;
    }
    if (tid == 0) {
        const u32 first = y0 < height ? row_offset[y0] : 0;
        const u32 roots = y1 < height ? row_offset[y1] - first : NONE;
        t.first = first;
        t.direct = min(roots, SIZE - TABLE_ABOVE_MIN);
        t.y0 = y0;
    }
    __syncthreads();
}

// The table entry of statistics row s: the one it has or can take, NONE if none is free.
template <u32 SIZE>
__device__ __forceinline__ u32 table_entry(TableOf<SIZE>& t, u32 s) {
    if (s >= t.first) {
        const u32 d = s - t.first;
        return d < t.direct ? d : NONE;
    }
    // Rooted above: a multiplicative hash into [direct, SIZE), then the next entries.
    const u32 n = SIZE - t.direct;
    u32 e = t.direct + __umulhi(s * 2654435761u, n);
    for (u32 probe = 0; probe < TABLE_PROBES; probe++) {
        u32 k = t.key[e];
        if (k == NONE) {
            const u32 old = atomicCAS(&t.key[e], NONE, s);
            k = old == NONE ? s : old;
        }
        if (k == s) return e;
        e = e + 1 < SIZE ? e + 1 : t.direct;
    }
    return NONE;
}

// Adds v to a u64 in shared memory with two native 32-bit atomics (a 64-bit add there is a
// compare-and-swap loop): the low word's wrap-arounds are carried into the high word.
__device__ __forceinline__ void shared_add_u64(u64* a, u64 v) {
    u32* words = (u32*)a;
    const u32 lo = (u32)v, old = atomicAdd(&words[0], lo);
    const u32 hi = (u32)(v >> 32) + (old + lo < old ? 1u : 0u);
    if (hi) atomicAdd(&words[1], hi);
}

// Adds the part of row y to table entry e.
template <u32 SIZE>
__device__ __forceinline__ void table_add_at(TableOf<SIZE>& t, u32 e, const Part& p, u32 y) {
    const u32 dy = y - t.y0;
    atomicAdd(&t.area[e], p.area);
    shared_add_u64(&t.sum_x[e], p.sum_x);
    if (dy) atomicAdd(&t.area_dy[e], p.area * dy);
    atomicMin(&t.min_x[e], p.min_x);
    atomicMax(&t.max_x[e], p.max_x);
    atomicMax(&t.max_y[e], y);
}

// Adds the part of row y of the component in statistics row s: into the table when it has (or
// can take) an entry for s, else with global atomics.
template <u32 SIZE>
__device__ __forceinline__ void table_add(TableOf<SIZE>& t, GpuStats* stats, u32 s, const Part& p, u32 y) {
    u32 e = table_entry(t, s);
    if (e == NONE)
        add_part(stats, s, p, y);
    else
        table_add_at(t, e, p, y);
}

// The statistics row of table entry e (which holds a part).
template <u32 SIZE>
__device__ __forceinline__ u32 table_slot(const TableOf<SIZE>& t, u32 e) {
    return e < t.direct ? t.first + e : t.key[e];
}

// Σy of entry e: Σ area (y0 + dy).
template <u32 SIZE>
__device__ __forceinline__ u64 table_sum_y(const TableOf<SIZE>& t, u32 e) {
    return (u64)t.y0 * t.area[e] + t.area_dy[e];
}

// Whether entry e holds a whole component: one rooted in the block (a direct entry) that does
// not reach the block's last row, so that no other block adds to its row.
template <u32 SIZE>
__device__ __forceinline__ bool table_whole(const TableOf<SIZE>& t, u32 e) {
    return e < t.direct && t.max_y[e] != t.y0 + TABLE_ROWS - 1u;
}

// Sends the table's sums to global memory; every thread of the block calls it. A whole
// component's row (table_whole) is stored, its `top` kept (the numbering wrote it); the others
// are added to. It reads the table only, so more columns kept beside it can be flushed after it
// without a barrier.
template <u32 SIZE>
__device__ void table_flush(TableOf<SIZE>& t, GpuStats* stats) {
    __syncthreads();
    const u32 tid = threadIdx.y * blockDim.x + threadIdx.x, n = blockDim.x * blockDim.y;
    for (u32 e = tid; e < SIZE; e += n) {
        if (t.area[e] == 0) continue;  // every part has pixels: area 0 = unused entry
        const u32 s = table_slot(t, e);
        if (table_whole(t, e)) {
            GpuStats* st = &stats[s];
            st->sum_x = t.sum_x[e];
            st->sum_y = table_sum_y(t, e);
            st->area = t.area[e];
            st->min_x = t.min_x[e];
            st->max_x = t.max_x[e];
            st->max_y = t.max_y[e];
        } else {
            add_totals(stats, s, t.area[e], t.min_x[e], t.max_x[e], t.max_y[e], t.sum_x[e], table_sum_y(t, e));
        }
    }
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

// Statistics row of a new root: empty, or (OTF) the features merged into it while labeling.
template <bool OTF>
__device__ __forceinline__ GpuStats root_stats(const Feat& F, u32 id, u32 top) {
    GpuStats g = empty_stats(top);
    if (OTF) {
        g.area = F.area[id];
        g.min_x = F.min_x[id];
        g.max_x = F.max_x[id];
        g.max_y = F.max_y[id];
        g.sum_x = F.sum_x[id];
        g.sum_y = F.sum_y[id];
    }
    return g;
}

// Compresses the labels id0 .. id0 + n - 1 of one row (FLSL's runs, HA's ranked heads) to their
// roots and returns how many are roots (whole warp; the same in every lane).
__device__ __forceinline__ u32 flatten_count_ids(u32* L, u32 id0, u32 n) {
    u32 roots = 0;
    for (u32 j = threadIdx.x & 31; j < n; j += WARP) {
        if (find_compress(L, id0 + j) == id0 + j) roots++;
    }
    for (int off = 16; off; off >>= 1) roots += __shfl_xor_sync(FULL, roots, off);
    return roots;
}

// Shape sums per statistics row (FLSL's fused shape sums, descriptors.cu): Σx², Σy², Σxy, the
// 4-adjacent and the diagonal pixel pairs.
#define SHAPE_SUMS 5

// Slots of one row's roots, whose labels are id0 .. id0 + n - 1 (consecutive: FLSL's runs, HA's
// ranked heads), in raster order from `next` (the row's offset). Statistics rows at or past
// `capacity` are not written; `shapes` (if not null): the roots' shape sum rows are cleared.
// Whole warp.
template <bool OTF>
__device__ void assign_row_slots(const u32* L, u32* slot, GpuStats* stats, u32 capacity, u32 id0, u32 n, u32 next,
                                 u32 y, const Feat& F, u64* shapes = nullptr) {
    const u32 lane = threadIdx.x & 31, first = next;
    // 32 labels at a time: a root's slot is `next` plus the roots before it.
    for (u32 j0 = 0; j0 < n; j0 += WARP) {  // uniform: the ballot needs every lane
        u32 j = j0 + lane, id = id0 + j;
        bool root = j < n && L[id] == id;
        u32 ballot = __ballot_sync(FULL, root);
        if (root) {
            u32 s = next + __popc(ballot & ((1u << lane) - 1u));
            slot[id] = s;
            if (s < capacity) stats[s] = root_stats<OTF>(F, id, y);
        }
        next += __popc(ballot);
    }
    // The row's roots hold the slots [first, next): their shape rows are one contiguous range,
    // cleared by the whole warp in coalesced stores.
    if (shapes) {
        const size_t hi = (size_t)min(next, capacity) * SHAPE_SUMS;
        for (size_t k = (size_t)first * SHAPE_SUMS + lane; k < hi; k += WARP) shapes[k] = 0;
    }
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

// ---------------------------------------------------------------------------------------------
// The frame's results in one contiguous buffer, so that a single copy brings them to the host:
// a header row (area = the rows that follow, sum_x = the component count; here both the count),
// then result[1 + i] = stats[i] for i < min(count, prefix). `result` holds 1 + prefix rows;
// rows past the count are left as they are.
extern "C" __global__ void collect_results(const u32* total, const GpuStats* stats,
                                           GpuStats* result, u32 prefix) {
    const u32 count = *total;
    const u32 n = count < prefix ? count : prefix;
    const u32 first = blockIdx.x * blockDim.x + threadIdx.x;
    if (first == 0) {
        GpuStats header = {};
        header.area = count;
        header.sum_x = count;
        result[0] = header;
    }
    for (u32 i = first; i < n; i += gridDim.x * blockDim.x) result[1 + i] = stats[i];
}

// ---------------------------------------------------------------------------------------------
// The pipeline's area and aspect limits applied before the download (`ccl::RowFilter`), so
// that only the kept rows cross PCIe. Two kernels over a fixed grid: `filter_count` counts the
// rows each block's slice of 0..count keeps; `filter_collect` gives each kept row its index
// among the kept ones (the blocks before it, then a scan inside the block, in row order) and
// writes the rows whose index lies in [first, first + len). Launched with the same grid.

// Mirrors `ccl::row_filter::RowLimits`; no limit = 0, u64 max, +inf.
struct RowLimits {
    u64 min_area;
    u64 max_area;
    double max_aspect;
};

// The host's rule (`RowLimits::accepts`): the aspect is the same correctly rounded f64
// division, so rows exactly at the limit are decided alike.
__device__ __forceinline__ bool row_kept(const GpuStats& s, const RowLimits& f) {
    const u32 w = s.max_x - s.min_x + 1;
    const u32 h = s.max_y - s.top + 1;
    const u32 long_side = w > h ? w : h;
    const u32 short_side = w < h ? w : h;
    const double aspect = (double)long_side / (double)(short_side > 0 ? short_side : 1u);
    const u64 area = s.area;
    return area >= f.min_area && area <= f.max_area && aspect <= f.max_aspect;
}

// Block b's slice of rows 0..n: [begin, end), ceil(n / blocks) rows a block.
__device__ __forceinline__ void filter_slice(u32 n, u32* begin, u32* end) {
    const u64 chunk = ((u64)n + gridDim.x - 1) / gridDim.x;
    const u64 b = (u64)blockIdx.x * chunk;
    const u64 e = b + chunk;
    *begin = (u32)(b < n ? b : n);
    *end = (u32)(e < n ? e : n);
}

extern "C" __global__ void filter_count(const u32* total, const GpuStats* stats, u32 capacity,
                                        const RowLimits* limits, u32* block_kept) {
    const u32 n = *total < capacity ? *total : capacity;
    const RowLimits f = *limits;
    u32 begin, end;
    filter_slice(n, &begin, &end);
    u32 kept = 0;
    // Uniform bounds: every thread of the block takes part in each count.
    for (u32 base = begin; base < end; base += blockDim.x) {
        const u32 i = base + threadIdx.x;
        kept += __syncthreads_count(i < end && row_kept(stats[i], f));
    }
    if (threadIdx.x == 0) block_kept[blockIdx.x] = kept;
}

// Kept row k goes to out[header + k - first] with the label of its row (index + 1) in `pad`.
// With `header` (1), block 0 writes out[0]: area = the kept rows, sum_x = the component count.
// blockDim.x is a multiple of 32, at most 1024.
extern "C" __global__ void filter_collect(const u32* total, const GpuStats* stats, u32 capacity,
                                          const RowLimits* limits, const u32* block_kept,
                                          GpuStats* out, u32 first, u32 len, u32 header) {
    __shared__ u32 s_before;
    __shared__ u32 warp_kept[32];
    const u32 n = *total < capacity ? *total : capacity;
    if (threadIdx.x == 0) {
        u32 before = 0, all = 0;
        for (u32 j = 0; j < gridDim.x; ++j) {
            if (j == blockIdx.x) before = all;
            all += block_kept[j];
        }
        s_before = before;
        if (header && blockIdx.x == 0) {
            GpuStats h = {};
            h.area = all;
            h.sum_x = *total;
            out[0] = h;
        }
    }
    __syncthreads();
    u32 offset = s_before;
    const u32 mine = block_kept[blockIdx.x];
    // Nothing of this block's kept rows falls in the window.
    if (offset >= first + len || offset + mine <= first) return;
    const RowLimits f = *limits;
    u32 begin, end;
    filter_slice(n, &begin, &end);
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (u32 base = begin; base < end; base += blockDim.x) {
        const u32 i = base + threadIdx.x;
        const bool keep = i < end && row_kept(stats[i], f);
        const u32 ballot = __ballot_sync(0xffffffffu, keep);
        if (lane == 0) warp_kept[warp] = __popc(ballot);
        __syncthreads();
        u32 before_warp = 0, tile = 0;
        for (u32 j = 0; j < warps; ++j) {
            if (j == warp) before_warp = tile;
            tile += warp_kept[j];
        }
        if (keep) {
            const u32 k = offset + before_warp + __popc(ballot & ((1u << lane) - 1u));
            if (k >= first && k - first < len) {
                GpuStats row = stats[i];
                row.pad = i + 1;
                out[header + (k - first)] = row;
            }
        }
        offset += tile;
        // warp_kept is written again by the next tile.
        __syncthreads();
    }
}

// ---------------------------------------------------------------------------------------------
// A frame set labeled as one image (`ccl::frame_set`: frames stacked `pitch` rows apart): the
// labels before each frame, starts[k] for k < frames, and starts[frames] = the count, so that
// the host renumbers each frame's rows from 1 and knows each frame's count even when only the
// kept rows come down. Row i of `stats` is label i + 1, numbered in raster order, so the rows'
// first rows (`top`) never decrease: starts[k] is the first row at or past frame k's first
// row, found by a binary search, one thread a frame.
extern "C" __global__ void set_frame_starts(const u32* total, const GpuStats* stats, u32 capacity,
                                            u32 frames, u32 pitch, u32* starts) {
    const u32 k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k > frames) return;
    const u32 n = *total < capacity ? *total : capacity;
    if (k == frames) {
        starts[k] = n;
        return;
    }
    const u64 row = (u64)k * pitch;
    u32 lo = 0, hi = n;
    while (lo < hi) {
        const u32 mid = lo + (hi - lo) / 2;
        if ((u64)stats[mid].top < row) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    starts[k] = lo;
}
