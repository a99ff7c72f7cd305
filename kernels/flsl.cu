// FLSL, FLSL+OTF and FLSL+CD (Lemaitre, Hennequin & Lacassagne, ICASSP 2021): connected-component
// analysis on *full* runs, one thread per run, for 4- and 8-connectivity.
//
// Layout (types, union-find and the row scan are in common.cuh)
// - Mask: bit-packed, wpr words per row (pixel x of row y = bit x % 32 of word y * wpr + x / 32).
// - Runs of row y: run j is [start[y R + j], end[y R + j]) (half-open), R = ceil(width / 2)
//   (the most runs a row can hold); nruns[y] of them. A run's id (its provisional label) is
//   y R + j, so ids grow in raster order and the smaller-root-wins merge leaves every component's
//   first run as its root.
// - Edge ranks: an edge is a pixel that differs from its left neighbour (pixel -1 is background);
//   run j has its start edge at rank 2j and its end edge at rank 2j + 1. wrank[y wpr + w] = the
//   number of edges of row y before word w. With it, the number of edges at positions <= x is
//   one load and a popcount, which gives the runs of a row touching any pixel interval (see
//   up_run_range) and the run of any pixel (flsl_relabel): the paper's ER array, per word.
//
// Kernels, in order
//   flsl_strip*     strips of blockDim.y rows, one warp per row (the *_bytes kernels read the byte
//                   mask and store the packed one as they go, instead of a pack_bytes16 pass):
//                   A. segment detection (Algorithm 1's compress-store, one mask word per lane:
//                      popcount of the edge word, warp prefix sum, each lane stores the x of its
//                      edges at their ranks); labels L[id] = id (OTF: the run's own features)
//                   B. after the barrier, every row but the strip's first merges its runs with the
//                      runs of the row above they touch (one thread per run)
//   flsl_border*    B for the first row of every strip but the first, each row split between
//                   several warps
//   flsl_number*    compress every run to its root, count roots per row, scan the counts
//                   (decoupled look-back: row offsets and the component count), then the slot of
//                   each root in raster order and its stats row initialised (OTF: copied from the
//                   root's merged features)
//   flsl_accumulate[_cd[b]]  (not OTF) features once per run: plain atomics, or CD (Algorithm 3),
//                   or CD into a shared-memory table per block (BlockTable, common.cuh)
//   flsl_relabel    label image: per pixel, its run from the edge ranks, then the run's label

__device__ __forceinline__ u32 words_in(u32 width) { return width / 32u + ((width % 32u) != 0u); }

// Σx over [a0, a1): a1(a1 - 1)/2 - a0(a0 - 1)/2 (a0 = 0 makes the second product 0).
__device__ __forceinline__ u64 run_sum_x(u32 a0, u32 a1) {
    return ((u64)a1 * ((u64)a1 - 1) - (u64)a0 * ((u64)a0 - 1)) / 2;
}

// ---------------------------------------------------------------------------------------------
// Where segment detection gets a row's mask words: the bit-packed mask, or (byte input whose rows
// start 16-byte aligned) the bytes themselves, packed on the way and stored to the mask for the
// later kernels. Packing here saves the separate pass over the bytes (pack_bytes16), which is the
// largest fixed cost of a frame. Every lane holds word w0 + lane of the current warp step.
template <bool BYTES> struct RowWords;

template <> struct RowWords<false> {
    const u32* mrow;
    u32 nwords;
    __device__ RowWords(const u32* mrow_, u32* /*mrow_out*/, const unsigned char* /*brow*/, u32 nwords_,
                        u32 /*width*/)
        : mrow(mrow_), nwords(nwords_) {}
    __device__ __forceinline__ u32 next(u32 wi) { return wi < nwords ? mrow[wi] : 0u; }
    __device__ __forceinline__ void finish(u32 /*wpr*/) {}
};

template <> struct RowWords<true> {
    u32* mrow_out;
    const uint4* brow;
    u32 nwords, nvec;
    uint4 qa, qb;  // the bytes of word wi, loaded one step ahead

    __device__ RowWords(const u32* /*mrow*/, u32* mrow_out_, const unsigned char* brow_, u32 nwords_, u32 width)
        : mrow_out(mrow_out_), brow((const uint4*)brow_), nwords(nwords_), nvec(width / 16u) {
        load(threadIdx.x & 31);
    }
    __device__ __forceinline__ void load(u32 wi) {
        const uint4 zero = make_uint4(0, 0, 0, 0);
        qa = 2 * wi < nvec ? brow[2 * wi] : zero;
        qb = 2 * wi + 1 < nvec ? brow[2 * wi + 1] : zero;
    }
    __device__ __forceinline__ u32 next(u32 wi) {
        u32 m = nonzero_bytes16(qa) | (nonzero_bytes16(qb) << 16);
        if (wi < nwords) mrow_out[wi] = m;
        load(wi + WARP);
        return m;
    }
    // The row's padding words (up to the row pitch) are zero, as pack_bytes16 leaves them.
    __device__ __forceinline__ void finish(u32 wpr) {
        for (u32 wi = nwords + (threadIdx.x & 31); wi < wpr; wi += WARP) mrow_out[wi] = 0u;
    }
};

// A: segment detection of row y (whole warp). Writes the runs, the word edge ranks and returns
// the run count (the same in every lane).
template <bool BYTES>
__device__ u32 rle_row(RowWords<BYTES>& words, u32 nwords, u32 width, u32* start, u32* end, u32* wrank_row) {
    const u32 lane = threadIdx.x & 31;
    u32 n = 0, carry_top = 0;
    for (u32 w0 = 0; w0 < nwords; w0 += WARP) {
        u32 wi = w0 + lane;
        u32 m = words.next(wi);
        u32 prev = __shfl_up_sync(FULL, m, 1);
        u32 ptop = lane == 0 ? carry_top : prev >> 31;
        u32 e = m ^ ((m << 1) | ptop);
        // Only edges inside the row: the end of a run reaching the last pixel is added below.
        if (wi >= nwords) e = 0;
        else if (wi == nwords - 1 && (width & 31u)) e &= (1u << (width & 31u)) - 1u;
        u32 c = __popc(e), v = c;
        for (int off = 1; off < WARP; off <<= 1) {
            u32 t = __shfl_up_sync(FULL, v, off);
            if ((int)lane >= off) v += t;
        }
        u32 k = n + v - c;  // rank of this lane's first edge
        if (wi < nwords) wrank_row[wi] = k;
        // Compress-store: edge rank k goes to start[k / 2] (even) or end[k / 2] (odd).
        for (; e; e &= e - 1, k++) {
            u32 x = wi * 32u + (u32)(__ffs(e) - 1);
            if (k & 1u) end[k >> 1] = x;
            else start[k >> 1] = x;
        }
        n += __shfl_sync(FULL, v, WARP - 1);
        carry_top = __shfl_sync(FULL, m >> 31, WARP - 1);
    }
    if (n & 1u) {  // the last run reaches the row end
        if (lane == 0) end[n >> 1] = width;
        n++;
    }
    return n >> 1;
}

// Number of edges of a row at positions <= x (x < width).
__device__ __forceinline__ u32 edges_upto(const u32* mrow, const u32* wrank_row, u32 x) {
    u32 w = x >> 5, b = x & 31u;
    u32 m = mrow[w];
    u32 ptop = w ? mrow[w - 1] >> 31 : 0u;
    u32 e = m ^ ((m << 1) | ptop);
    return wrank_row[w] + __popc(e & (0xffffffffu >> (31u - b)));
}

// Runs j0..j1 of the row above touching the run [a0, a1) (ccl::adjacency::touching_runs).
template <bool C8>
__device__ __forceinline__ void up_run_range(const u32* up_mask, const u32* up_rank, u32 a0, u32 a1, u32 width,
                                             u32& j0, u32& j1) {
    u32 lo = (C8 && a0 > 0) ? a0 - 1 : a0;
    u32 hi = C8 ? min(a1, width - 1) : a1 - 1;
    j0 = edges_upto(up_mask, up_rank, lo) >> 1;
    j1 = (edges_upto(up_mask, up_rank, hi) + 1) >> 1;
}

// ---------------------------------------------------------------------------------------------
// B: merge the runs of row y with the touching runs of row y - 1 (whole warp, one run per lane).
// The warp takes part `part` of `parts`: runs part * 32 + lane, then every 32 * parts.
template <bool C8, bool OTF>
__device__ void merge_row(u32* L, const Feat& F, const u32* start, const u32* end, const u32* nruns,
                          const u32* wrank, const u32* mask, u32 wpr, u32 width, u32 R, u32 y, u32 part,
                          u32 parts) {
    const u32 lane = threadIdx.x & 31;
    const u32 nr = nruns[y];
    if (nruns[y - 1] == 0) return;
    const u32* up_mask = mask + (size_t)(y - 1) * wpr;
    const u32* up_rank = wrank + (size_t)(y - 1) * wpr;
    const u32 base = y * R, up_base = base - R;
    for (u32 j = part * WARP + lane; j < nr; j += WARP * parts) {
        u32 id = base + j;
        u32 j0, j1;
        up_run_range<C8>(up_mask, up_rank, start[id], end[id], width, j0, j1);
        for (u32 k = j0; k < j1; k++) {
            // Path halving on the way to the roots (ours): without it, the border merges of a
            // large component walk the chains that link the strips' roots one after another.
            if (OTF) otf_merge(L, F, id, up_base + k);
            else merge_halving(L, id, up_base + k);
        }
    }
}

// BYTES: the mask rows are packed from `bytes` here (mask_out is the mask); else bytes and
// mask_out are unused. The barrier makes the block's mask rows visible to the merges.
template <bool C8, bool OTF, bool BYTES>
__device__ void strip(const unsigned char* bytes, u32* mask_out, const u32* mask, u32 wpr, u32 width, u32 height,
                      u32 R, u32* start, u32* end, u32* nruns, u32* wrank, u32* L, const Feat& F) {
    const u32 lane = threadIdx.x & 31;
    const u32 y = blockIdx.x * blockDim.y + threadIdx.y;
    const bool active = y < height;
    if (active) {
        const u32 base = y * R;
        u32* s = start + base;
        u32* e = end + base;
        const u32 nwords = words_in(width);
        RowWords<BYTES> words(mask + (size_t)y * wpr, BYTES ? mask_out + (size_t)y * wpr : nullptr,
                              BYTES ? bytes + (size_t)y * width : nullptr, nwords, width);
        u32 nr = rle_row<BYTES>(words, nwords, width, s, e, wrank + (size_t)y * wpr);
        words.finish(wpr);
        if (lane == 0) nruns[y] = nr;
        __syncwarp();  // the runs stored by other lanes are read below
        for (u32 j = lane; j < nr; j += WARP) {
            u32 id = base + j;
            L[id] = id;
            if (OTF) {
                u32 a0 = s[j], a1 = e[j];
                F.area[id] = a1 - a0;
                F.min_x[id] = a0;
                F.max_x[id] = a1 - 1;
                F.max_y[id] = y;
                F.sum_x[id] = run_sum_x(a0, a1);
                F.sum_y[id] = (u64)(a1 - a0) * y;
            }
        }
    }
    __syncthreads();
    if (active && threadIdx.y > 0)
        merge_row<C8, OTF>(L, F, start, end, nruns, wrank, mask, wpr, width, R, y, 0, 1);
}

#define FLSL_STRIP(NAME, C8)                                                                                 \
    extern "C" __global__ void NAME(const u32* mask, u32 wpr, u32 width, u32 height, u32 R, u32* start,      \
                                    u32* end, u32* nruns, u32* wrank, u32* L) {                              \
        strip<C8, false, false>(nullptr, nullptr, mask, wpr, width, height, R, start, end, nruns, wrank, L,  \
                                no_feat());                                                                  \
    }
FLSL_STRIP(flsl_strip4, false)
FLSL_STRIP(flsl_strip8, true)

#define FLSL_STRIP_OTF(NAME, C8)                                                                             \
    extern "C" __global__ void NAME(const u32* mask, u32 wpr, u32 width, u32 height, u32 R, u32* start,      \
                                    u32* end, u32* nruns, u32* wrank, u32* L, u32* area, u32* min_x,         \
                                    u32* max_x, u32* max_y, u64* sum_x, u64* sum_y) {                        \
        Feat F = {area, min_x, max_x, max_y, sum_x, sum_y};                                                  \
        strip<C8, true, false>(nullptr, nullptr, mask, wpr, width, height, R, start, end, nruns, wrank, L,   \
                               F);                                                                           \
    }
FLSL_STRIP_OTF(flsl_strip_otf4, false)
FLSL_STRIP_OTF(flsl_strip_otf8, true)

// The same from the byte mask (width % 16 == 0): the kernel packs the mask as it goes.
#define FLSL_STRIP_BYTES(NAME, C8)                                                                           \
    extern "C" __global__ void NAME(const unsigned char* bytes, u32* mask, u32 wpr, u32 width, u32 height,   \
                                    u32 R, u32* start, u32* end, u32* nruns, u32* wrank, u32* L) {           \
        strip<C8, false, true>(bytes, mask, mask, wpr, width, height, R, start, end, nruns, wrank, L,        \
                               no_feat());                                                                   \
    }
FLSL_STRIP_BYTES(flsl_strip4_bytes, false)
FLSL_STRIP_BYTES(flsl_strip8_bytes, true)

#define FLSL_STRIP_OTF_BYTES(NAME, C8)                                                                       \
    extern "C" __global__ void NAME(const unsigned char* bytes, u32* mask, u32 wpr, u32 width, u32 height,   \
                                    u32 R, u32* start, u32* end, u32* nruns, u32* wrank, u32* L, u32* area,  \
                                    u32* min_x, u32* max_x, u32* max_y, u64* sum_x, u64* sum_y) {            \
        Feat F = {area, min_x, max_x, max_y, sum_x, sum_y};                                                  \
        strip<C8, true, true>(bytes, mask, mask, wpr, width, height, R, start, end, nruns, wrank, L, F);     \
    }
FLSL_STRIP_OTF_BYTES(flsl_strip_otf4_bytes, false)
FLSL_STRIP_OTF_BYTES(flsl_strip_otf8_bytes, true)

// B across strip borders: one warp per border row y = k * strip_rows (k >= 1) and part of its runs
// (blockIdx.y of gridDim.y parts), so that the few border rows still fill the GPU.
#define FLSL_BORDER(NAME, C8)                                                                                \
    extern "C" __global__ void NAME(const u32* mask, u32 wpr, u32 width, u32 height, u32 R,                  \
                                    const u32* start, const u32* end, const u32* nruns, const u32* wrank,    \
                                    u32* L, u32 strip_rows) {                                                \
        u32 y = (blockIdx.x * blockDim.y + threadIdx.y + 1) * strip_rows;                                    \
        if (y >= height) return;                                                                             \
        merge_row<C8, false>(L, no_feat(), start, end, nruns, wrank, mask, wpr, width, R, y, blockIdx.y,     \
                             gridDim.y);                                                                     \
    }
FLSL_BORDER(flsl_border4, false)
FLSL_BORDER(flsl_border8, true)

#define FLSL_BORDER_OTF(NAME, C8)                                                                            \
    extern "C" __global__ void NAME(const u32* mask, u32 wpr, u32 width, u32 height, u32 R,                  \
                                    const u32* start, const u32* end, const u32* nruns, const u32* wrank,    \
                                    u32* L, u32 strip_rows, u32* area, u32* min_x, u32* max_x, u32* max_y,   \
                                    u64* sum_x, u64* sum_y) {                                                \
        u32 y = (blockIdx.x * blockDim.y + threadIdx.y + 1) * strip_rows;                                    \
        if (y >= height) return;                                                                             \
        Feat F = {area, min_x, max_x, max_y, sum_x, sum_y};                                                  \
        merge_row<C8, true>(L, F, start, end, nruns, wrank, mask, wpr, width, R, y, blockIdx.y, gridDim.y);  \
    }
FLSL_BORDER_OTF(flsl_border_otf4, false)
FLSL_BORDER_OTF(flsl_border_otf8, true)

// ---------------------------------------------------------------------------------------------
// Numbering and features. Row kernels: one warp per row, blockDim = (32, rows per block).

// Numbering (one kernel, number_rows_offset in common.cuh): every run is compressed to its root
// and the roots of the row counted; after the look-back scan of the counts, the roots get their
// slots in raster order (assign != 0; OTF: the root's features, merged while labeling, are its
// statistics row). blockDim = (32, NUMBER_ROWS).
template <bool OTF>
__device__ void number(u32* L, const u32* nruns, u32* row_offset, u32* slot, GpuStats* stats, u32 capacity, u32 R,
                       u32 height, u64* status, u32 epoch, u32* total, u32 assign, const Feat& F) {
    const u32 y = blockIdx.x * blockDim.y + threadIdx.y;
    const bool active = y < height;
    const u32 nr = active ? nruns[y] : 0u, base = y * R;
    const u32 offset = number_rows_offset(flatten_count_ids(L, base, nr), status, epoch, total);
    if (!active) return;
    if ((threadIdx.x & 31) == 0) row_offset[y] = offset;
    if (assign) assign_row_slots<OTF>(L, slot, stats, capacity, base, nr, offset, y, F);
}

extern "C" __global__ void __launch_bounds__(WARP * NUMBER_ROWS)
    flsl_number(u32* L, const u32* nruns, u32* row_offset, u32* slot, GpuStats* stats, u32 capacity, u32 R,
                u32 height, u64* status, u32 epoch, u32* total, u32 assign) {
    number<false>(L, nruns, row_offset, slot, stats, capacity, R, height, status, epoch, total, assign, no_feat());
}
extern "C" __global__ void __launch_bounds__(WARP * NUMBER_ROWS)
    flsl_number_otf(u32* L, const u32* nruns, u32* row_offset, u32* slot, GpuStats* stats, u32 capacity, u32 R,
                    u32 height, u64* status, u32 epoch, u32* total, u32 assign, u32* area, u32* min_x, u32* max_x,
                    u32* max_y, u64* sum_x, u64* sum_y) {
    Feat F = {area, min_x, max_x, max_y, sum_x, sum_y};
    number<true>(L, nruns, row_offset, slot, stats, capacity, R, height, status, epoch, total, assign, F);
}

// Part, cd_reduce (Algorithm 3) and add_part are in common.cuh (HA+CD uses them too).

// Features once per run (L flattened by flsl_number). CD: one update per component per
// warp step instead of one per run; with a block table (FLSL+CD+B), those updates go to shared
// memory and the block sends one per component. Rows past the image still reach the barriers.
template <bool CD>
__device__ void accumulate_runs(const u32* L, const u32* slot, const u32* start, const u32* end, const u32* nruns,
                                GpuStats* stats, u32 capacity, u32 R, u32 height, BlockTable* table) {
    const u32 y = blockIdx.x * blockDim.y + threadIdx.y;
    const u32 lane = threadIdx.x & 31, nr = y < height ? nruns[y] : 0u, base = y * R;
    for (u32 j0 = 0; j0 < nr; j0 += WARP) {  // uniform loop: CD needs every lane
        u32 j = j0 + lane, id = base + j;
        u32 s = NONE;
        Part p = {0, NONE, 0, 0};
        if (j < nr) {
            s = slot[L[id]];
            u32 a0 = start[id], a1 = end[id];
            p.area = a1 - a0;
            p.min_x = a0;
            p.max_x = a1 - 1;
            p.sum_x = run_sum_x(a0, a1);
        }
        if (s >= capacity) s = NONE;
        bool leader = CD ? cd_reduce(s, p) : true;
        if (leader && s != NONE) {
            if (table)
                table_add(*table, stats, s, p, y);
            else
                add_part(stats, s, p, y);
        }
    }
}

extern "C" __global__ void flsl_accumulate(const u32* L, const u32* slot, const u32* start, const u32* end,
                                           const u32* nruns, GpuStats* stats, u32 capacity, u32 R, u32 height) {
    accumulate_runs<false>(L, slot, start, end, nruns, stats, capacity, R, height, nullptr);
}
extern "C" __global__ void flsl_accumulate_cd(const u32* L, const u32* slot, const u32* start, const u32* end,
                                              const u32* nruns, GpuStats* stats, u32 capacity, u32 R,
                                              u32 height) {
    accumulate_runs<true>(L, slot, start, end, nruns, stats, capacity, R, height, nullptr);
}
// blockDim = (32, TABLE_ROWS).
extern "C" __global__ void __launch_bounds__(WARP * TABLE_ROWS)
    flsl_accumulate_cdb(const u32* L, const u32* slot, const u32* start, const u32* end, const u32* nruns,
                        GpuStats* stats, u32 capacity, u32 R, u32 height, const u32* row_offset) {
    __shared__ BlockTable table;
    table_init(table, row_offset, height);
    accumulate_runs<true>(L, slot, start, end, nruns, stats, capacity, R, height, &table);
    table_flush(table, stats);
}

// Label image: per pixel, its run j = (edges at positions <= x - 1) / 2 (a foreground pixel has
// an odd count), then root + 1 (use_slot = 0: raw labels, CCL) or slot[root] + 1 (raster-order
// numbering). L is flattened. A warp step covers 4 words: each lane takes 4 consecutive pixels and
// stores them at once (uint4), so a warp writes 512 contiguous bytes per store.
extern "C" __global__ void flsl_relabel(u32* out, const u32* L, const u32* slot, u32 use_slot, const u32* mask,
                                        const u32* wrank, u32 wpr, u32 width, u32 height, u32 R) {
    const u32 y = blockIdx.x * blockDim.y + threadIdx.y;
    if (y >= height) return;
    const u32 lane = threadIdx.x & 31, base = y * R;
    const u32* mrow = mask + (size_t)y * wpr;
    const u32* rrow = wrank + (size_t)y * wpr;
    u32* orow = out + (size_t)y * width;
    const u32 nwords = words_in(width);
    const bool vec = (width & 3u) == 0;  // rows start 16-byte aligned
    const u32 bo = (lane & 7u) * 4u;     // this lane's first bit in its word
    for (u32 c0 = 0; c0 < nwords; c0 += 4) {
        const u32 c = c0 + (lane >> 3);  // this lane's word
        if (c >= nwords) break;
        const u32 x = c * 32u + bo;
        if (x >= width) break;
        const u32 m = mrow[c];
        u32 v[4] = {0u, 0u, 0u, 0u};
        if ((m >> bo) & 0xfu) {
            const u32 ptop = c ? mrow[c - 1] >> 31 : 0u;
            const u32 e = m ^ ((m << 1) | ptop);
            const u32 r0 = rrow[c];
#pragma unroll
            for (u32 i = 0; i < 4; i++) {
                const u32 b = bo + i;
                if ((m >> b) & 1u) {
                    u32 k = r0 + __popc(e & (0xffffffffu >> (31u - b)));
                    u32 r = L[base + ((k - 1u) >> 1)];
                    v[i] = (use_slot ? slot[r] : r) + 1u;
                }
            }
        }
        if (vec && x + 3u < width) {
            *(uint4*)(orow + x) = make_uint4(v[0], v[1], v[2], v[3]);
        } else {
            for (u32 i = 0; i < 4; i++)
                if (x + i < width) orow[x + i] = v[i];
        }
    }
}
