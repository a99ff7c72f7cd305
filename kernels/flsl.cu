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
//   up_run_range) and the run of any pixel (flsl_relabel): the paper's ER array, per word. For
//   the shape sums (flsl_strip_ranks*, frames at most 65536 wide) the high 16 bits of the same
//   word hold the row's foreground pixels before word w (see "Shape sums"); every reader takes
//   the edge rank through rank_mask, which keeps the low 16 bits for such widths (where an edge
//   rank is below 2^16 anyway) and all 32 beyond.
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
//   flsl_strip_ranks*, flsl_number_shapes, flsl_accumulate[_cd[b]]_shapes{4,8}  the same, and
//                   the shape descriptor sums of every component with the features, from the
//                   runs, the mask and the foreground ranks (no label image): see "Shape sums"
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

// The bits of a word of edge ranks that hold the edge rank (see the layout above).
__device__ __forceinline__ u32 rank_mask(u32 width) { return width <= 65536u ? 0xffffu : FULL; }

// A: segment detection of row y (whole warp). Writes the runs, the word edge ranks and returns
// the run count (the same in every lane). FR (width <= 65536): the foreground pixels of the row
// before each word too, in the high 16 bits of its edge rank (the shape sums' pair counts read
// them); the same warp scan carries both counts, the edges in the low 16 bits and the pixels in
// the high 16 (each at most 32 × 32 per step).
template <bool BYTES, bool FR = false>
__device__ u32 rle_row(RowWords<BYTES>& words, u32 nwords, u32 width, u32* start, u32* end, u32* wrank_row) {
    const u32 lane = threadIdx.x & 31;
    u32 n = 0, carry_top = 0, fore = 0;
    for (u32 w0 = 0; w0 < nwords; w0 += WARP) {
        u32 wi = w0 + lane;
        u32 m = words.next(wi);
        u32 prev = __shfl_up_sync(FULL, m, 1);
        u32 ptop = lane == 0 ? carry_top : prev >> 31;
        u32 e = m ^ ((m << 1) | ptop);
        // Only edges inside the row: the end of a run reaching the last pixel is added below.
        if (wi >= nwords) e = 0;
        else if (wi == nwords - 1 && (width & 31u)) e &= (1u << (width & 31u)) - 1u;
        const u32 pixels = FR ? __popc(m) : 0u;
        u32 c = __popc(e), v = c | (pixels << 16);
        for (int off = 1; off < WARP; off <<= 1) {
            u32 t = __shfl_up_sync(FULL, v, off);
            if ((int)lane >= off) v += t;
        }
        u32 before = 0;  // FR: foreground pixels before this word
        if (FR) {
            before = fore + (v >> 16) - pixels;
            fore += __shfl_sync(FULL, v, WARP - 1) >> 16;
            v &= 0xffffu;
        }
        u32 k = n + v - c;  // rank of this lane's first edge
        if (wi < nwords) wrank_row[wi] = k | (before << 16);
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

// Number of edges of a row at positions <= x (x < width); `ranks` = rank_mask(width).
__device__ __forceinline__ u32 edges_upto(const u32* mrow, const u32* wrank_row, u32 x, u32 ranks) {
    u32 w = x >> 5, b = x & 31u;
    u32 m = mrow[w];
    u32 ptop = w ? mrow[w - 1] >> 31 : 0u;
    u32 e = m ^ ((m << 1) | ptop);
    return (wrank_row[w] & ranks) + __popc(e & (0xffffffffu >> (31u - b)));
}

// Runs j0..j1 of the row above touching the run [a0, a1) (ccl::adjacency::touching_runs).
template <bool C8>
__device__ __forceinline__ void up_run_range(const u32* up_mask, const u32* up_rank, u32 a0, u32 a1, u32 width,
                                             u32& j0, u32& j1) {
    u32 lo = (C8 && a0 > 0) ? a0 - 1 : a0;
    u32 hi = C8 ? min(a1, width - 1) : a1 - 1;
    const u32 ranks = rank_mask(width);
    j0 = edges_upto(up_mask, up_rank, lo, ranks) >> 1;
    j1 = (edges_upto(up_mask, up_rank, hi, ranks) + 1) >> 1;
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
// FR: the foreground ranks too (rle_row).
template <bool C8, bool OTF, bool BYTES, bool FR = false>
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
        u32 nr = rle_row<BYTES, FR>(words, nwords, width, s, e, wrank + (size_t)y * wpr);
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

// The same with the foreground ranks in the edge ranks' high bits, for the shape sums (width
// <= 65536).
#define FLSL_STRIP_RANKS(NAME, C8)                                                                           \
    extern "C" __global__ void NAME(const u32* mask, u32 wpr, u32 width, u32 height, u32 R, u32* start,      \
                                    u32* end, u32* nruns, u32* wrank, u32* L) {                              \
        strip<C8, false, false, true>(nullptr, nullptr, mask, wpr, width, height, R, start, end, nruns,      \
                                      wrank, L, no_feat());                                                  \
    }
FLSL_STRIP_RANKS(flsl_strip_ranks4, false)
FLSL_STRIP_RANKS(flsl_strip_ranks8, true)

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

#define FLSL_STRIP_RANKS_BYTES(NAME, C8)                                                                     \
    extern "C" __global__ void NAME(const unsigned char* bytes, u32* mask, u32 wpr, u32 width, u32 height,   \
                                    u32 R, u32* start, u32* end, u32* nruns, u32* wrank, u32* L) {           \
        strip<C8, false, true, true>(bytes, mask, mask, wpr, width, height, R, start, end, nruns, wrank, L,  \
                                     no_feat());                                                             \
    }
FLSL_STRIP_RANKS_BYTES(flsl_strip_ranks4_bytes, false)
FLSL_STRIP_RANKS_BYTES(flsl_strip_ranks8_bytes, true)

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
                       u32 height, u64* status, u32 epoch, u32* total, u32 assign, const Feat& F,
                       u64* shapes = nullptr) {
    const u32 y = blockIdx.x * blockDim.y + threadIdx.y;
    const bool active = y < height;
    const u32 nr = active ? nruns[y] : 0u, base = y * R;
    const u32 offset = number_rows_offset(flatten_count_ids(L, base, nr), status, epoch, total);
    if (!active) return;
    if ((threadIdx.x & 31) == 0) row_offset[y] = offset;
    if (assign) assign_row_slots<OTF>(L, slot, stats, capacity, base, nr, offset, y, F, shapes);
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

// Numbering for the shape sums: as flsl_number (assign != 0), and the shape sum row of each new
// slot cleared with its statistics row, for flsl_accumulate*_shapes.
extern "C" __global__ void __launch_bounds__(WARP * NUMBER_ROWS)
    flsl_number_shapes(u32* L, const u32* nruns, u32* row_offset, u32* slot, GpuStats* stats, u32 capacity, u32 R,
                       u32 height, u64* status, u32 epoch, u32* total, u32 assign, u64* shapes) {
    number<false>(L, nruns, row_offset, slot, stats, capacity, R, height, status, epoch, total, assign, no_feat(),
                  shapes);
}

// Part, cd_reduce (Algorithm 3) and add_part are in common.cuh (HA+CD uses them too).

// ---------------------------------------------------------------------------------------------
// Shape sums (the shape descriptors of ccl::descriptors), fused into the feature accumulation:
// per component Σx², Σy², Σxy and its pixel pairs (4-adjacent, diagonal: the Crofton
// perimeter's counts), the same exact integers as the CPU's, with no label image. Rows of
// SHAPE_SUMS u64 per statistics row, {0: Σx², 1: Σy², 2: Σxy, 3: 4-adjacent pairs, 4: diagonal
// pairs} (descriptors.cu's layout), cleared by flsl_number_shapes (with the block table, most
// are stored whole instead: flsl_number_blocks).
//
// Moments per run [a0, a1) of row y: six times Σx² from two cubes (run_sum_xx6); Σxy = y Σx and
// Σy² = area y² from the run's part. u64 is exact up to 65536 pixels per side (x² < 2^32, a
// component < 2^32 pixels; the host checks the size).
//
// Pixel pairs per run, each pair counted from its lower (side by side: its right) pixel; the
// Rust model is ccl::descriptors (run_contacts, run_pairs), proven there against the pixel scan,
// and the functions below count the same way. The run holds a1 − a0 − 1 pairs side by side; its
// pairs with row y − 1 are the foreground pixels there above, above-right and above-left of its
// pixels. With F(x) the foreground pixels of row y − 1 in [0, x] (0 for x < 0, F(width − 1)
// past the row): above = F(a1 − 1) − F(a0 − 1), above-right = F(a1) − F(a0), above-left =
// F(a1 − 2) − F(a0 − 2). Each F is a foreground rank (the high half of the edge rank word,
// written by flsl_strip_ranks*) plus a popcount in one mask word, so a run of any length costs
// two mask words and two rank words; a run within two mask words, their popcounts alone
// (run_pairs). A pixel above that touches the run through a foreground 4-neighbour is in its
// component; only the diagonal contacts past the run's two ends may not (4-connectivity, the
// pixel between background): the roots of the two runs decide.
//
// A run's pairs travel through the reduction as one u32 (RunPairs): the pixels above, the run
// count and the diagonal pairs less twice the pixels above, plus 4 per run (that difference is
// −4 … 2 per run), in fields no warp step can fill. The 4-adjacent pairs of a part are then its
// area − runs + pixels above.

// Six times Σ x² over the run [a0, a1) (a1 <= 65536): g(a1) − g(a0), g(a) = a (a − 1)(2a − 1) =
// 6 Σ_{x < a} x² (a (a − 1) < 2^32, g < 2^49). The sums carry 6 Σx² (a block's part < 2^53) and
// divide by six once, where a part or a table entry goes to its row (sum_xx_of): three
// multiplications a run instead of the closed form's divisions.
__device__ __forceinline__ u64 g_squares(u32 a) { return (u64)(a * (a - 1u)) * (2u * a - 1u); }
__device__ __forceinline__ u64 run_sum_xx6(u32 a0, u32 a1) { return g_squares(a1) - g_squares(a0); }
__device__ __forceinline__ u64 sum_xx_of(u64 sum_xx6) { return sum_xx6 / 6u; }

// Edges of a row (width <= 65536) before pixel 32 w + b, from word w of its mask (m) and of its
// edge ranks (r): the pixel before the word is foreground when an odd number of edges precede it,
// so the word before is not needed.
__device__ __forceinline__ u32 edges_before(u32 m, u32 r, u32 b) {
    r &= 0xffffu;
    const u32 e = m ^ ((m << 1) | (r & 1u));
    return r + __popc(e & ((1u << b) - 1u));
}

// What the shape sums read besides the runs; `cols` is the block's shared columns (cdb) or
// nullptr.
struct ShapeColumns;
struct ShapeArgs {
    const u32* mask;   // the packed mask, wpr words a row
    const u32* wrank;  // edge ranks, foreground ranks in the high half (flsl_strip_ranks*)
    u32 wpr, width;
    u64* shapes;
    ShapeColumns* cols;
};

// RunPairs fields: pixels above at bits 0 … 16 (a row's parts hold at most 65536), runs at 17 …
// 22 (at most 32), diagonal pairs − 2 × pixels above + 4 × runs at 23 … 30 (at most 6 × 32).
#define PAIRS_RUN_SHIFT 17
#define PAIRS_DIAGONAL_SHIFT 23
__device__ __forceinline__ u32 pack_run_pairs(u32 above, u32 diagonal) {
    return above | (1u << PAIRS_RUN_SHIFT) | ((diagonal + 4u - 2u * above) << PAIRS_DIAGONAL_SHIFT);
}
// The 4-adjacent and the diagonal pairs of a part of `area` pixels with packed pairs p.
__device__ __forceinline__ u32 part_pairs_4(u32 p, u32 area) {
    return area - ((p >> PAIRS_RUN_SHIFT) & 63u) + (p & 0x1ffffu);
}
__device__ __forceinline__ u32 part_pairs_diagonal(u32 p) {
    return 2u * (p & 0x1ffffu) + (p >> PAIRS_DIAGONAL_SHIFT) - 4u * ((p >> PAIRS_RUN_SHIFT) & 63u);
}

// The pixel pairs of the run [a0, a1) of row y whose root is `root` (run_pairs), packed. With
// B(x) pixel x of the row above (0 outside it): above = F(a1 − 1) − F(a0 − 1), above-right =
// above − B(a0) + B(a1), above-left = above + B(a0 − 1) − B(a1 − 1). So one count difference (a
// foreground rank plus a popcount at each end) and four bits of the two end words (the word
// before or after them once in 32 runs) give all three.
template <bool C8>
__device__ __forceinline__ u32 run_pairs(const u32* L, const ShapeArgs& sh, u32 R, u32 y, u32 root, u32 a0,
                                         u32 a1) {
    if (y == 0) return pack_run_pairs(0u, 0u);
    const u32 up = (y - 1u) * sh.wpr;  // below (y − 1) R, which is 32 bits
    const u32 *row = sh.mask + up, *ranks = sh.wrank + up;
    const u32 w0 = a0 >> 5, b0 = a0 & 31u, w1 = (a1 - 1u) >> 5, b1 = (a1 - 1u) & 31u;
    const u32 m0 = row[w0], m1 = row[w1];
    const u32 before_b0 = (1u << b0) - 1u, upto_b1 = FULL >> (31u - b1);
    // B(a0 − 1) and B(a1) from their own words (mostly m0 and m1 again): loads that go out with
    // the others, where a branch to the word before or after would wait on them (in a warp of 32
    // runs some run nearly always starts or ends at a word's edge).
    const u32 x_left = a0 ? a0 - 1u : 0u, x_past = min(a1, sh.width - 1u);
    const u32 m_past = row[x_past >> 5];
    const u32 left_of = (row[x_left >> 5] >> (x_left & 31u)) & (u32)(a0 != 0u);
    const u32 past = (m_past >> (x_past & 31u)) & (u32)(a1 < sh.width);
    // Pixels above: a popcount in the run's one or two words, else F(a1 − 1) − F(a0 − 1).
    u32 above;
    if (w1 == w0)
        above = __popc(m0 & ~before_b0 & upto_b1);
    else if (w1 == w0 + 1u)
        above = __popc(m0 & ~before_b0) + __popc(m1 & upto_b1);
    else
        above = (ranks[w1] >> 16) + __popc(m1 & upto_b1) - (ranks[w0] >> 16) - __popc(m0 & before_b0);
    const u32 first = (m0 >> b0) & 1u, last = (m1 >> b1) & 1u;  // B(a0), B(a1 − 1)
    // The RunPairs diagonal field: above-right + above-left + 4 − 2 above.
    u32 diagonal = 4u + past + left_of - first - last;
    if (!C8) {
        // A diagonal contact through two background pixels: maybe another component. Above-right
        // a run of the row above starts at a1, above-left one ends at a0; either's index is the
        // edges of that row before the pixel, halved (rounded down: 2j before a start, 2j + 1
        // before an end).
        const u32* L_up = L + (y - 1u) * R;
        if (past && !last && L_up[edges_before(m_past, ranks[a1 >> 5], a1 & 31u) >> 1] != root) diagonal--;
        if (left_of && !first && L_up[edges_before(m0, ranks[w0], b0) >> 1] != root) diagonal--;
    }
    return above | (1u << PAIRS_RUN_SHIFT) | (diagonal << PAIRS_DIAGONAL_SHIFT);
}

// Features and shape sums of one or more runs of one component in one row, as few registers as
// a frame at most 65536 wide allows (the shape kernels' limit): the bounds in one word (min_x low,
// max_x high), Σx of a row in 32 bits (at most 65535 · 65536 / 2). Σxy and Σy² follow from sum_x
// and area when the row is known.
struct ShapePart {
    u32 area, bounds, sum_x;
    u64 sum_xx6;  // six times Σx² (run_sum_xx6)
    u32 pairs;    // RunPairs, summed

    __device__ __forceinline__ void add_lane(int src, bool take) {
        const u32 a = __shfl_sync(FULL, area, src), b = __shfl_sync(FULL, bounds, src);
        const u32 sx = __shfl_sync(FULL, sum_x, src), pp = __shfl_sync(FULL, pairs, src);
        const u64 xx = __shfl_sync(FULL, sum_xx6, src);
        if (take) {
            area += a;
            bounds = (__vminu2(bounds, b) & 0xffffu) | (__vmaxu2(bounds, b) & 0xffff0000u);
            sum_x += sx;
            sum_xx6 += xx;
            pairs += pp;
        }
    }

    __device__ __forceinline__ void add_warp() {
#if __CUDA_ARCH__ >= 800
        area = __reduce_add_sync(FULL, area);
        bounds = __reduce_min_sync(FULL, bounds & 0xffffu) | (__reduce_max_sync(FULL, bounds >> 16) << 16);
        sum_x = __reduce_add_sync(FULL, sum_x);
        pairs = __reduce_add_sync(FULL, pairs);
#else
        for (int off = 16; off; off >>= 1) {
            const u32 b = __shfl_xor_sync(FULL, bounds, off);
            area += __shfl_xor_sync(FULL, area, off);
            bounds = (__vminu2(bounds, b) & 0xffffu) | (__vmaxu2(bounds, b) & 0xffff0000u);
            sum_x += __shfl_xor_sync(FULL, sum_x, off);
            pairs += __shfl_xor_sync(FULL, pairs, off);
        }
#endif
        sum_xx6 = warp_sum_u64(sum_xx6);
    }
};

// The part of the run [a0, a1): the statistics alone (accumulate_runs without shapes), or with
// the moments (the pairs are set apart, from the row above).
__device__ __forceinline__ void set_run(Part& p, u32 a0, u32 a1) {
    p.area = a1 - a0;
    p.min_x = a0;
    p.max_x = a1 - 1;
    p.sum_x = run_sum_x(a0, a1);
}
__device__ __forceinline__ void set_run(ShapePart& p, u32 a0, u32 a1) {
    p.area = a1 - a0;
    p.bounds = a0 | ((a1 - 1u) << 16);
    p.sum_x = (a1 * (a1 - 1u)) / 2u - (a0 * (a0 - 1u)) / 2u;  // each product < 2^32
    p.sum_xx6 = run_sum_xx6(a0, a1);
}

// The statistics of a part.
__device__ __forceinline__ Part part_of(const Part& p) { return p; }
__device__ __forceinline__ Part part_of(const ShapePart& p) {
    const Part q = {p.area, p.bounds & 0xffffu, p.bounds >> 16, (u64)p.sum_x};
    return q;
}

// The part a lane holds (ShapePart with the shape sums, Part without), and the one it holds
// without a run (it changes no sum or bound).
template <bool SHAPES>
struct PartOf {
    typedef Part type;
    __device__ static Part none() { return {0, NONE, 0, 0}; }
};
template <>
struct PartOf<true> {
    typedef ShapePart type;
    __device__ static ShapePart none() { return {0, 0xffffu, 0, 0, 0}; }
};

// Adds shape totals to row s of the shape sums (zero terms skipped).
__device__ __forceinline__ void add_shape_totals(u64* shapes, u32 s, u64 xx, u64 yy, u64 xy, u32 pairs_4,
                                                 u32 diagonal) {
    u64* r = shapes + SHAPE_SUMS * (size_t)s;
    if (xx) atomicAdd(&r[0], xx);
    if (yy) atomicAdd(&r[1], yy);
    if (xy) atomicAdd(&r[2], xy);
    if (pairs_4) atomicAdd(&r[3], (u64)pairs_4);
    if (diagonal) atomicAdd(&r[4], (u64)diagonal);
}

__device__ __forceinline__ void add_shape_part(u64* shapes, u32 s, const ShapePart& p, u32 y) {
    add_shape_totals(shapes, s, sum_xx_of(p.sum_xx6), (u64)p.area * y * y, (u64)p.sum_x * y,
                     part_pairs_4(p.pairs, p.area), part_pairs_diagonal(p.pairs));
}

// The shape columns beside the block table of flsl_accumulate_cdb_shapes, entry for entry: 6 Σx²
// (run_sum_xx6), Σ x dy and Σ area dy² with dy the row less the block's first (so Σxy and Σy²
// follow from the table's sums: shape_columns_xy, shape_columns_yy; parts of the block's first
// row add nothing there, and the others seldom reach a second 32-bit word), and the two pair
// counts (a block part's fit 32 bits). Table and columns live in SHAPE_TABLE_BYTES of dynamic
// shared memory, 56 KB: the most that keeps four blocks of 512 threads on an SM (4 × (56 + 1) KB
// = 228 KB), so SHAPE_TABLE_SIZE = 952 entries of 32 + 28 bytes; the host launches with that
// much and raises the kernels' limit to it. (Measured and not kept: 64 KB, three blocks per SM;
// blocks of 8 rows.)
#define SHAPE_TABLE_BYTES 57344
#define SHAPE_TABLE_SIZE 952
struct ShapeColumns {
    u64 sum_xx6[SHAPE_TABLE_SIZE], sum_xdy[SHAPE_TABLE_SIZE];
    u32 area_dyy[SHAPE_TABLE_SIZE], pairs_4[SHAPE_TABLE_SIZE], diagonal[SHAPE_TABLE_SIZE];
};

struct ShapeTable {
    ShapeColumns cols;
    TableOf<SHAPE_TABLE_SIZE> table;
};
static_assert(sizeof(ShapeTable) <= SHAPE_TABLE_BYTES, "the shape table outgrows its shared memory");

// Empties the columns (before table_init, whose barrier covers them).
__device__ void shape_columns_init(ShapeColumns& c) {
    const u32 tid = threadIdx.y * blockDim.x + threadIdx.x, n = blockDim.x * blockDim.y;
    for (u32 e = tid; e < SHAPE_TABLE_SIZE; e += n) {
        c.sum_xx6[e] = 0;
        c.sum_xdy[e] = 0;
        c.area_dyy[e] = 0;
        c.pairs_4[e] = 0;
        c.diagonal[e] = 0;
    }
}

// Adds the part of row y (the block's first row y0) to entry e.
__device__ __forceinline__ void shape_columns_add(ShapeColumns& c, u32 e, const ShapePart& p, u32 y, u32 y0) {
    const u32 dy = y - y0, a = p.area;
    shared_add_u64(&c.sum_xx6[e], p.sum_xx6);
    if (dy) {
        shared_add_u64(&c.sum_xdy[e], (u64)p.sum_x * dy);
        atomicAdd(&c.area_dyy[e], a * dy * dy);
    }
    const u32 pairs_4 = part_pairs_4(p.pairs, a), diagonal = part_pairs_diagonal(p.pairs);
    if (pairs_4) atomicAdd(&c.pairs_4[e], pairs_4);
    if (diagonal) atomicAdd(&c.diagonal[e], diagonal);
}

// Σy² of entry e: Σ area (y0 + dy)² = y0² A + 2 y0 Σ area dy + Σ area dy², the first two from
// the table.
__device__ __forceinline__ u64 shape_columns_yy(const TableOf<SHAPE_TABLE_SIZE>& t, const ShapeColumns& c, u32 e) {
    const u64 y0 = t.y0;
    return y0 * y0 * t.area[e] + 2u * y0 * t.area_dy[e] + c.area_dyy[e];
}

// Σxy of entry e: Σ x (y0 + dy) = y0 Σx + Σ x dy.
__device__ __forceinline__ u64 shape_columns_xy(const TableOf<SHAPE_TABLE_SIZE>& t, const ShapeColumns& c, u32 e) {
    return (u64)t.y0 * t.sum_x[e] + c.sum_xdy[e];
}

// After table_flush (its barrier made the columns complete): the shape rows of the used entries.
// A warp takes 32 entries, a lane computes the five sums of one, and the 160 words go out a word
// per lane (shuffled from the lane that holds them): for direct entries (slots first + e) they
// are consecutive, so the stores coalesce, where one lane per row would stride by a row. A
// component rooted in the block and not in its last row lies wholly in the block: its row is
// stored; the others are added to.
__device__ void shape_columns_flush(const TableOf<SHAPE_TABLE_SIZE>& t, const ShapeColumns& c, u64* shapes) {
    const u32 lane = threadIdx.x & 31;
    for (u32 e0 = threadIdx.y * WARP; e0 < SHAPE_TABLE_SIZE; e0 += blockDim.y * WARP) {
        const u32 e = e0 + lane;
        const bool in_use = e < SHAPE_TABLE_SIZE && t.area[e] != 0;
        const u32 used = __ballot_sync(FULL, in_use);
        if (used == 0) continue;  // in dense frames, most groups of 32
        u64 xx = 0, yy = 0, xy = 0;  // the sums that take arithmetic; the pair counts are read below
        bool whole = false;
        if (in_use) {
            xx = sum_xx_of(c.sum_xx6[e]);
            yy = shape_columns_yy(t, c, e);
            xy = shape_columns_xy(t, c, e);
            whole = table_whole(t, e);
        }
        const u32 wholes = __ballot_sync(FULL, whole);
        for (u32 k = lane; k < WARP * SHAPE_SUMS; k += WARP) {
            const u32 i = k / SHAPE_SUMS, f = k - SHAPE_SUMS * i;  // word f of entry e0 + i
            const u64 v0 = __shfl_sync(FULL, xx, i), v1 = __shfl_sync(FULL, yy, i);
            const u64 v2 = __shfl_sync(FULL, xy, i);
            if (!((used >> i) & 1u)) continue;
            const u32 ei = e0 + i;
            const u64 v = f == 0 ? v0 : f == 1 ? v1 : f == 2 ? v2 : f == 3 ? c.pairs_4[ei] : c.diagonal[ei];
            u64* r = shapes + SHAPE_SUMS * (size_t)table_slot(t, ei) + f;
            if ((wholes >> i) & 1u)
                *r = v;
            else if (v)
                atomicAdd(r, v);
        }
    }
}

// Numbering for flsl_accumulate_cdb_shapes*: as flsl_number (assign != 0), and the shape rows
// that block's accumulation adds to rather than stores cleared (its blocks are the numbering's,
// TABLE_ROWS rows): those of the block's roots past its table's direct entries (at most
// SHAPE_TABLE_SIZE − TABLE_ABOVE_MIN: table_init), and those of its roots with a run in its
// last row, the only ones a block below can add to (a component that goes on below the block
// crosses its last row). All other rows are stored whole by the accumulation, so most rows are
// written once.
static_assert(NUMBER_ROWS == TABLE_ROWS, "the numbering's blocks are the block table's");
extern "C" __global__ void __launch_bounds__(WARP * NUMBER_ROWS)
    flsl_number_blocks(u32* L, const u32* nruns, u32* row_offset, u32* slot, GpuStats* stats, u32 capacity, u32 R,
                       u32 height, u64* status, u32 epoch, u32* total, u32 assign, u64* shapes) {
    __shared__ u32 block_first, block_end;
    const u32 lane = threadIdx.x & 31, y = blockIdx.x * blockDim.y + threadIdx.y;
    const bool active = y < height;
    const u32 nr = active ? nruns[y] : 0u, base = y * R;
    const u32 roots = flatten_count_ids(L, base, nr);
    const u32 offset = number_rows_offset(roots, status, epoch, total);
    if (lane == 0 && threadIdx.y == 0) block_first = offset;
    if (lane == 0 && threadIdx.y == blockDim.y - 1u) block_end = offset + roots;  // rows past the image: 0
    if (active) {
        if (lane == 0) row_offset[y] = offset;
        if (assign) assign_row_slots<false>(L, slot, stats, capacity, base, nr, offset, y, no_feat());
    }
    __syncthreads();  // the slots of the block's roots
    const u32 first = block_first, end = min(block_end, capacity);
    const u32 direct_end = first + min(block_end - first, (u32)(SHAPE_TABLE_SIZE - TABLE_ABOVE_MIN));
    const u32 tid = threadIdx.y * blockDim.x + threadIdx.x, n = blockDim.x * blockDim.y;
    for (size_t k = (size_t)direct_end * SHAPE_SUMS + tid; k < (size_t)end * SHAPE_SUMS; k += n) shapes[k] = 0;
    const u32 last = blockIdx.x * blockDim.y + blockDim.y - 1u;  // the block's last row
    if (last >= height) return;  // no block below
    const u32 own = blockIdx.x * blockDim.y * R;  // the block's first run: roots from it on are its own
    const u32 last_runs = nruns[last];
    for (u32 j = tid; j < last_runs; j += n) {  // the whole block: a chain of two loads per run
        const u32 root = L[last * R + j];
        const u32 s = root >= own ? slot[root] : NONE;
        if (s < capacity) {
            u64* r = shapes + SHAPE_SUMS * (size_t)s;
            for (u32 i = 0; i < SHAPE_SUMS; i++) r[i] = 0;
        }
    }
}

// Features once per run (L flattened by flsl_number). CD: one update per component per
// warp step instead of one per run; with a block table (FLSL+CD+B), those updates go to shared
// memory and the block sends one per component. Rows past the image still reach the barriers.
// SHAPES: the shape sums too, in the same updates (C8: their connectivity).
template <bool CD, bool SHAPES, u32 SIZE, bool C8 = true>
__device__ void accumulate_runs(const u32* L, const u32* slot, const u32* start, const u32* end, const u32* nruns,
                                GpuStats* stats, u32 capacity, u32 R, u32 height, TableOf<SIZE>* table,
                                const ShapeArgs& sh) {
    const u32 y = blockIdx.x * blockDim.y + threadIdx.y;
    const u32 lane = threadIdx.x & 31, nr = y < height ? nruns[y] : 0u, base = y * R;
    typedef typename PartOf<SHAPES>::type P;
    for (u32 j0 = 0; j0 < nr; j0 += WARP) {  // uniform loop: CD needs every lane
        u32 j = j0 + lane, id = base + j;
        u32 s = NONE;
        P p = PartOf<SHAPES>::none();
        if (j < nr) {
            const u32 root = L[id], a0 = start[id], a1 = end[id];
            s = slot[root];
            if constexpr (SHAPES) {
                p.pairs = run_pairs<C8>(L, sh, R, y, root, a0, a1);
            }
            set_run(p, a0, a1);
        }
        if (s >= capacity) s = NONE;
        const bool leader = CD ? cd_reduce(s, p) : true;
        if (leader && s != NONE) {
            const u32 e = table ? table_entry(*table, s) : NONE;
            if (e == NONE) {
                add_part(stats, s, part_of(p), y);
                if constexpr (SHAPES) add_shape_part(sh.shapes, s, p, y);
            } else {
                table_add_at(*table, e, part_of(p), y);
                if constexpr (SHAPES) shape_columns_add(*sh.cols, e, p, y, table->y0);
            }
        }
    }
}

__device__ __forceinline__ ShapeArgs no_shapes() {
    ShapeArgs sh = {nullptr, nullptr, 0, 0, nullptr, nullptr};
    return sh;
}

extern "C" __global__ void flsl_accumulate(const u32* L, const u32* slot, const u32* start, const u32* end,
                                           const u32* nruns, GpuStats* stats, u32 capacity, u32 R, u32 height) {
    accumulate_runs<false, false>(L, slot, start, end, nruns, stats, capacity, R, height, (BlockTable*)nullptr,
                                  no_shapes());
}
extern "C" __global__ void flsl_accumulate_cd(const u32* L, const u32* slot, const u32* start, const u32* end,
                                              const u32* nruns, GpuStats* stats, u32 capacity, u32 R,
                                              u32 height) {
    accumulate_runs<true, false>(L, slot, start, end, nruns, stats, capacity, R, height, (BlockTable*)nullptr,
                                 no_shapes());
}
// blockDim = (32, TABLE_ROWS).
extern "C" __global__ void __launch_bounds__(WARP * TABLE_ROWS)
    flsl_accumulate_cdb(const u32* L, const u32* slot, const u32* start, const u32* end, const u32* nruns,
                        GpuStats* stats, u32 capacity, u32 R, u32 height, const u32* row_offset) {
    __shared__ BlockTable table;
    table_init(table, row_offset, height);
    accumulate_runs<true, false>(L, slot, start, end, nruns, stats, capacity, R, height, &table, no_shapes());
    table_flush(table, stats);
}

// The same with the shape sums (rows cleared by flsl_number_shapes), 4 or 8 for the pairs'
// connectivity. The arguments after `height` (and row_offset for cdb): the packed mask, the edge
// ranks (with the foreground ranks: flsl_strip_ranks*), the words per row, the width and the
// shape sums.
#define FLSL_ACCUMULATE_SHAPES(NAME, CD, C8)                                                                 \
    extern "C" __global__ void NAME(const u32* L, const u32* slot, const u32* start, const u32* end,         \
                                    const u32* nruns, GpuStats* stats, u32 capacity, u32 R, u32 height,      \
                                    const u32* mask, const u32* wrank, u32 wpr, u32 width, u64* shapes) {    \
        ShapeArgs sh = {mask, wrank, wpr, width, shapes, nullptr};                                           \
        accumulate_runs<CD, true, TABLE_ENTRIES, C8>(L, slot, start, end, nruns, stats, capacity, R, height,   \
                                                    (BlockTable*)nullptr, sh);                               \
    }
FLSL_ACCUMULATE_SHAPES(flsl_accumulate_shapes4, false, false)
FLSL_ACCUMULATE_SHAPES(flsl_accumulate_shapes8, false, true)
FLSL_ACCUMULATE_SHAPES(flsl_accumulate_cd_shapes4, true, false)
FLSL_ACCUMULATE_SHAPES(flsl_accumulate_cd_shapes8, true, true)

template <bool C8>
__device__ void accumulate_cdb_shapes(const u32* L, const u32* slot, const u32* start, const u32* end,
                                      const u32* nruns, GpuStats* stats, u32 capacity, u32 R, u32 height,
                                      const u32* row_offset, const ShapeArgs& args) {
    extern __shared__ __align__(16) unsigned char shape_table_memory[];  // SHAPE_TABLE_BYTES
    ShapeTable& st = *reinterpret_cast<ShapeTable*>(shape_table_memory);
    TableOf<SHAPE_TABLE_SIZE>& table = st.table;
    shape_columns_init(st.cols);
    table_init(table, row_offset, height);
    ShapeArgs sh = args;
    sh.cols = &st.cols;
    accumulate_runs<true, true, SHAPE_TABLE_SIZE, C8>(L, slot, start, end, nruns, stats, capacity, R, height,
                                                       &table, sh);
    table_flush(table, stats);
    shape_columns_flush(table, st.cols, sh.shapes);
}
// blockDim = (32, TABLE_ROWS), SHAPE_TABLE_BYTES of dynamic shared memory; after
// flsl_number_blocks.
#define FLSL_ACCUMULATE_CDB_SHAPES(NAME, C8)                                                                 \
    extern "C" __global__ void __launch_bounds__(WARP * TABLE_ROWS, 4)                                       \
        NAME(const u32* L, const u32* slot, const u32* start, const u32* end, const u32* nruns,              \
             GpuStats* stats, u32 capacity, u32 R, u32 height, const u32* row_offset, const u32* mask,       \
             const u32* wrank, u32 wpr, u32 width, u64* shapes) {                                            \
        ShapeArgs sh = {mask, wrank, wpr, width, shapes, nullptr};                                           \
        accumulate_cdb_shapes<C8>(L, slot, start, end, nruns, stats, capacity, R, height, row_offset, sh);   \
    }
FLSL_ACCUMULATE_CDB_SHAPES(flsl_accumulate_cdb_shapes4, false)
FLSL_ACCUMULATE_CDB_SHAPES(flsl_accumulate_cdb_shapes8, true)

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
    const u32 ranks = rank_mask(width);
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
            const u32 r0 = rrow[c] & ranks;
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
