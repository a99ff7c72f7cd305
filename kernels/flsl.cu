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
//   flsl_number_shapes, flsl_accumulate[_cd[b]]_shapes{4,8}  the same, and the shape
//                   descriptor sums of every component with the features, from the runs and the
//                   mask (no label image): see "Shape sums" below
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
// pairs} (descriptors.cu's layout), cleared by flsl_number_shapes.
//
// Moments in closed form per run [a0, a1) of row y: Σx² = S2(a1) − S2(a0), S2(n) = Σ_{i<n} i²
// = (n − 1) n (2n − 1) / 6; Σxy = y Σx and Σy² = area y² from the run's Part. u64 is exact up to
// 65536 pixels per side (x² < 2^32, a component < 2^32 pixels; the host checks the size).
//
// Pixel pairs per run, each pair counted from its lower (side by side: its right) pixel; the
// Rust model is ccl::descriptors (count_between, run_contacts, run_pairs), proven there against
// the pixel scan, and the functions below mirror it: the run holds a1 − a0 − 1 pairs side by
// side; its pairs with row y − 1 are the foreground pixels there above, above-right and
// above-left of its pixels, all three from one count of the packed row above over [a0, a1) and
// four bits at the run's ends (one or two mask words for most runs). A pixel above that touches
// the run through a foreground 4-neighbour is in its component; only the diagonal contacts past
// the run's two ends may not (4-connectivity, the pixel between background): the roots of the
// two runs decide. The two counts travel packed in one u64 (32 bits each: a block's part of a
// component has fewer than 2 × TABLE_ROWS × 65536 < 2^32 pairs), so the reduction and the block
// table add them with one operation.

// Σ i² for i < n (n <= 65536: the product < 2^50).
__device__ __forceinline__ u64 sum_squares_below(u32 n) {
    return n == 0u ? 0ull : (u64)(n - 1u) * (u64)n * (u64)(2u * n - 1u) / 6u;
}

// The bits of word w inside the run [a0, a1) (which overlaps the word).
__device__ __forceinline__ u32 run_bits(u32 w, u32 a0, u32 a1) {
    const u32 lo = max(a0, 32u * w) - 32u * w, hi = min(a1, 32u * w + 32u) - 32u * w;
    const u32 below_hi = hi == 32u ? FULL : (1u << hi) - 1u;
    return below_hi & ~((1u << lo) - 1u);
}

// Foreground pixels of a mask row in [a0, a1) (a0 < a1 <= width).
__device__ __forceinline__ u32 count_between(const u32* row, u32 a0, u32 a1) {
    u32 n = 0;
    for (u32 w = a0 >> 5; w <= (a1 - 1u) >> 5; w++) n += __popc(row[w] & run_bits(w, a0, a1));
    return n;
}

// Pixel x of a mask row (0 outside [0, width)).
__device__ __forceinline__ u32 mask_bit(const u32* row, int x, u32 width) {
    return x >= 0 && (u32)x < width ? (row[x >> 5] >> (x & 31)) & 1u : 0u;
}

// The root of the run holding foreground pixel (x, y) (L flattened).
__device__ __forceinline__ u32 root_at(const u32* L, const u32* mask, const u32* wrank, u32 wpr, u32 R, u32 x,
                                       u32 y) {
    const u32 k = edges_upto(mask + (size_t)y * wpr, wrank + (size_t)y * wpr, x);
    return L[y * R + ((k - 1u) >> 1)];
}

// What the shape sums read besides the runs; `cols` is the block's shared columns (cdb) or
// nullptr.
struct ShapeColumns;
struct ShapeArgs {
    const u32* mask;   // the packed mask, wpr words a row
    const u32* wrank;  // edge ranks (4-connectivity's unsure contacts)
    u32 wpr, width;
    u64* shapes;
    ShapeColumns* cols;
};

// The two pair counts packed in one u64: 4-adjacent at bits 0 … 31, diagonal at 32 … 63.
__device__ __forceinline__ u64 pack_pairs(u32 pairs_4, u32 diagonal) { return (u64)pairs_4 | ((u64)diagonal << 32); }

// The pixel pairs of the run [a0, a1) of row y whose root is `root` (run_pairs), packed.
template <bool C8>
__device__ __forceinline__ u64 run_pairs(const u32* L, const ShapeArgs& sh, u32 R, u32 y, u32 root, u32 a0,
                                         u32 a1) {
    if (y == 0) return pack_pairs(a1 - a0 - 1u, 0u);
    const u32* up = sh.mask + (size_t)(y - 1u) * sh.wpr;
    const u32 vertical = count_between(up, a0, a1);
    const u32 above_first = mask_bit(up, (int)a0, sh.width), above_last = mask_bit(up, (int)a1 - 1, sh.width);
    const u32 past_end = mask_bit(up, (int)a1, sh.width), before_start = mask_bit(up, (int)a0 - 1, sh.width);
    u32 right = vertical - above_first + past_end;   // above [a0 + 1, a1 + 1)
    u32 left = vertical - above_last + before_start;  // above [a0 − 1, a1 − 1)
    if (!C8) {
        // A diagonal contact through two background pixels: maybe another component.
        if (past_end && !above_last && root_at(L, sh.mask, sh.wrank, sh.wpr, R, a1, y - 1u) != root) right--;
        if (before_start && !above_first && root_at(L, sh.mask, sh.wrank, sh.wpr, R, a0 - 1u, y - 1u) != root)
            left--;
    }
    return pack_pairs(a1 - a0 - 1u + vertical, right + left);
}

// Features and shape sums of one or more runs of one component in one row (Σxy and Σy² follow
// from base.sum_x and base.area when the row is known).
struct ShapePart {
    Part base;
    u64 sum_xx;
    u64 pairs;  // pack_pairs

    __device__ __forceinline__ void add_lane(int src, bool take) {
        base.add_lane(src, take);
        const u64 xx = __shfl_sync(FULL, sum_xx, src);
        const u64 p = __shfl_sync(FULL, pairs, src);
        if (take) {
            sum_xx += xx;
            pairs += p;
        }
    }
};

// Adds shape totals to row s of the shape sums (zero terms skipped).
__device__ __forceinline__ void add_shape_totals(u64* shapes, u32 s, u64 xx, u64 yy, u64 xy, u64 pairs) {
    u64* r = shapes + SHAPE_SUMS * (size_t)s;
    const u64 pairs_4 = pairs & 0xffffffffull, diagonal = pairs >> 32;
    if (xx) atomicAdd(&r[0], xx);
    if (yy) atomicAdd(&r[1], yy);
    if (xy) atomicAdd(&r[2], xy);
    if (pairs_4) atomicAdd(&r[3], pairs_4);
    if (diagonal) atomicAdd(&r[4], diagonal);
}

__device__ __forceinline__ void add_shape_part(u64* shapes, u32 s, const ShapePart& p, u32 y) {
    add_shape_totals(shapes, s, p.sum_xx, (u64)p.base.area * y * y, p.base.sum_x * y, p.pairs);
}

// The shape columns beside the block table of flsl_accumulate_cdb_shapes, entry for entry. The
// table keeps SHAPE_TABLE_DIRECT direct entries so that both fit the 48 KB of static shared
// memory: (672 + 64) × (32 + 32) bytes. (Measured and not kept: 64 KB of dynamic shared memory
// for 952 direct entries, a larger hashed part, whole components stored instead of added, blocks
// of 8 rows: no faster; the global atomics of the shape rows are most of what the sums cost at
// 8192², not the table.)
#define SHAPE_TABLE_DIRECT 672
#define SHAPE_TABLE_SIZE (SHAPE_TABLE_DIRECT + TABLE_HASH)
struct ShapeColumns {
    u64 sum_xx[SHAPE_TABLE_SIZE], sum_yy[SHAPE_TABLE_SIZE], sum_xy[SHAPE_TABLE_SIZE];
    u64 pairs[SHAPE_TABLE_SIZE];  // pack_pairs
};

// Empties the columns (before table_init, whose barrier covers them).
__device__ void shape_columns_init(ShapeColumns& c) {
    const u32 tid = threadIdx.y * blockDim.x + threadIdx.x, n = blockDim.x * blockDim.y;
    for (u32 e = tid; e < SHAPE_TABLE_SIZE; e += n) {
        c.sum_xx[e] = 0;
        c.sum_yy[e] = 0;
        c.sum_xy[e] = 0;
        c.pairs[e] = 0;
    }
}

__device__ __forceinline__ void shape_columns_add(ShapeColumns& c, u32 e, const ShapePart& p, u32 y) {
    atomicAdd(&c.sum_xx[e], p.sum_xx);
    atomicAdd(&c.sum_yy[e], (u64)p.base.area * y * y);
    atomicAdd(&c.sum_xy[e], p.base.sum_x * y);
    if (p.pairs) atomicAdd(&c.pairs[e], p.pairs);
}

// After table_flush (its barrier made the columns complete): the columns of the used entries.
__device__ void shape_columns_flush(const TableOf<SHAPE_TABLE_DIRECT>& t, const ShapeColumns& c, u64* shapes) {
    const u32 tid = threadIdx.y * blockDim.x + threadIdx.x, n = blockDim.x * blockDim.y;
    for (u32 e = tid; e < SHAPE_TABLE_SIZE; e += n) {
        if (t.area[e] == 0) continue;
        add_shape_totals(shapes, table_slot(t, e), c.sum_xx[e], c.sum_yy[e], c.sum_xy[e], c.pairs[e]);
    }
}

// Features once per run (L flattened by flsl_number). CD: one update per component per
// warp step instead of one per run; with a block table (FLSL+CD+B), those updates go to shared
// memory and the block sends one per component. Rows past the image still reach the barriers.
// SHAPES: the shape sums too, in the same updates (C8: their connectivity).
template <bool CD, bool SHAPES, u32 DIRECT, bool C8 = true>
__device__ void accumulate_runs(const u32* L, const u32* slot, const u32* start, const u32* end, const u32* nruns,
                                GpuStats* stats, u32 capacity, u32 R, u32 height, TableOf<DIRECT>* table,
                                const ShapeArgs& sh) {
    const u32 y = blockIdx.x * blockDim.y + threadIdx.y;
    const u32 lane = threadIdx.x & 31, nr = y < height ? nruns[y] : 0u, base = y * R;
    for (u32 j0 = 0; j0 < nr; j0 += WARP) {  // uniform loop: CD needs every lane
        u32 j = j0 + lane, id = base + j;
        u32 s = NONE;
        ShapePart p = {{0, NONE, 0, 0}, 0, 0};  // without SHAPES only p.base is used
        if (j < nr) {
            const u32 root = L[id], a0 = start[id], a1 = end[id];
            s = slot[root];
            p.base.area = a1 - a0;
            p.base.min_x = a0;
            p.base.max_x = a1 - 1;
            p.base.sum_x = run_sum_x(a0, a1);
            if (SHAPES) {
                p.sum_xx = sum_squares_below(a1) - sum_squares_below(a0);
                p.pairs = run_pairs<C8>(L, sh, R, y, root, a0, a1);
            }
        }
        if (s >= capacity) s = NONE;
        bool leader = CD ? (SHAPES ? cd_reduce(s, p) : cd_reduce(s, p.base)) : true;
        if (leader && s != NONE) {
            const u32 e = table ? table_entry(*table, s) : NONE;
            if (e == NONE) {
                add_part(stats, s, p.base, y);
                if (SHAPES) add_shape_part(sh.shapes, s, p, y);
            } else {
                table_add_at(*table, e, p.base, y);
                if (SHAPES) shape_columns_add(*sh.cols, e, p, y);
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
// ranks, the words per row, the width and the shape sums.
#define FLSL_ACCUMULATE_SHAPES(NAME, CD, C8)                                                                 \
    extern "C" __global__ void NAME(const u32* L, const u32* slot, const u32* start, const u32* end,         \
                                    const u32* nruns, GpuStats* stats, u32 capacity, u32 R, u32 height,      \
                                    const u32* mask, const u32* wrank, u32 wpr, u32 width, u64* shapes) {    \
        ShapeArgs sh = {mask, wrank, wpr, width, shapes, nullptr};                                           \
        accumulate_runs<CD, true, TABLE_DIRECT, C8>(L, slot, start, end, nruns, stats, capacity, R, height,   \
                                                    (BlockTable*)nullptr, sh);                               \
    }
FLSL_ACCUMULATE_SHAPES(flsl_accumulate_shapes4, false, false)
FLSL_ACCUMULATE_SHAPES(flsl_accumulate_shapes8, false, true)
FLSL_ACCUMULATE_SHAPES(flsl_accumulate_cd_shapes4, true, false)
FLSL_ACCUMULATE_SHAPES(flsl_accumulate_cd_shapes8, true, true)

template <bool C8>
__device__ void accumulate_cdb_shapes(const u32* L, const u32* slot, const u32* start, const u32* end,
                                      const u32* nruns, GpuStats* stats, u32 capacity, u32 R, u32 height,
                                      const u32* row_offset, const u32* mask, const u32* wrank, u32 wpr, u32 width,
                                      u64* shapes) {
    __shared__ TableOf<SHAPE_TABLE_DIRECT> table;
    __shared__ ShapeColumns cols;
    shape_columns_init(cols);
    table_init(table, row_offset, height);
    ShapeArgs sh = {mask, wrank, wpr, width, shapes, &cols};
    accumulate_runs<true, true, SHAPE_TABLE_DIRECT, C8>(L, slot, start, end, nruns, stats, capacity, R, height,
                                                       &table, sh);
    table_flush(table, stats);
    shape_columns_flush(table, cols, shapes);
}
// blockDim = (32, TABLE_ROWS).
#define FLSL_ACCUMULATE_CDB_SHAPES(NAME, C8)                                                                 \
    extern "C" __global__ void __launch_bounds__(WARP * TABLE_ROWS)                                          \
        NAME(const u32* L, const u32* slot, const u32* start, const u32* end, const u32* nruns,              \
             GpuStats* stats, u32 capacity, u32 R, u32 height, const u32* row_offset, const u32* mask,       \
             const u32* wrank, u32 wpr, u32 width, u64* shapes) {                                            \
        accumulate_cdb_shapes<C8>(L, slot, start, end, nruns, stats, capacity, R, height, row_offset, mask,  \
                                  wrank, wpr, width, shapes);                                                \
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
