// HA4 and HA4_64 (Hennequin & Lacassagne, GTC 2019 / DASIP 2018): direct connected-component
// labeling and analysis for 4-connectivity on GPUs, working on segments (runs) of foreground.
//
// Layout and conventions (types, union-find, packing and the row scan are in common.cuh)
// - The mask is bit-packed: pixel x of row y is bit (x % 32) of word y * words_per_row + x / 32
//   (LSB first); rows are padded to a multiple of 64 pixels with zero bits. Byte masks are packed
//   first by `pack_bytes` (that kernel is the paper's __ballot_sync of one pixel per thread).
// - One warp per image row. The warp walks its row in chunks of B pixels (B = 32 for HA4, where a
//   lane owns one pixel, and B = 64 for HA4_64, where a lane owns two): the paper's grid-stride loop.
//   A chunk's mask is one machine word, so segment starts, ends and the distance of a pixel to its
//   segment's start are bit tricks on that word (count leading zeros of the inverted, shifted word).
//   A segment that continues from the previous chunk is carried in a warp-uniform register.
// - Only segment heads (start pixels) hold labels. A head's provisional label is its linear index
//   k = y * width + x; L[k] is its parent; a root has L[k] == k. Merges keep the smaller label as
//   root (the atomicMin-based merge of Playne & Hawick), so a component's root is its first pixel
//   in raster order. That gives OpenCV's numbering for free: components are numbered by the raster
//   order of their roots.
//
// Kernels, in order
//   pack_bytes         bytes -> bits (only for byte input)
//   strip_label        strips of STRIP_ROWS rows, one block each: label heads, merge inside strip
//   border_merge       merge across the horizontal borders between strips
//   CCL:  relabel_find write root + 1 to every foreground pixel of the label image
//   CCA:  number_slots   compress every head to its root and count roots per row, scan the counts
//                        (decoupled look-back: row offsets and the component count), then give
//                        each root its final index (raster order) and initialise its stats
//         accumulate     one set of atomics per segment (at its tail): S, Σx (closed form), Σy, bbox
//         relabel_slot   (labels and stats) write slot + 1 to every foreground pixel

// ---------------------------------------------------------------------------------------------
// Word traits: HA4 uses 32-bit chunks, HA4_64 64-bit chunks.

template <typename W> struct Bits;
template <> struct Bits<u32> {
    static constexpr int B = 32;
    __device__ static int clz(u32 v) { return __clz(v); }
};
template <> struct Bits<u64> {
    static constexpr int B = 64;
    __device__ static int clz(u64 v) { return __clzll(v); }
};

template <typename W> __device__ __forceinline__ bool bit(W m, int b) { return (m >> b) & 1; }

// Number of consecutive set bits ending at bit b (inclusive), going down; b must be set.
template <typename W> __device__ __forceinline__ int run_to_bit(W m, int b) {
    return Bits<W>::clz((W)~(m << (Bits<W>::B - 1 - b)));
}

// Reads a row of chunk words: each lane loads one of 32 consecutive words at once (coalesced),
// and iteration c takes word c from lane c % 32 with a shuffle.
template <typename W> struct RowReader {
    const W* row;
    int nchunks;
    W cached;
    int base;  // first chunk index held in `cached`

    __device__ RowReader(const W* row_, int nchunks_) : row(row_), nchunks(nchunks_), cached(0), base(-WARP) {}

    // Word of chunk c (c may be >= nchunks: returns 0). Must be called by the whole warp, with c
    // increasing by one per call.
    __device__ __forceinline__ W get(int c) {
        if (c >= base + WARP) {
            base = c;
            int i = c + (int)(threadIdx.x & 31);
            cached = i < nchunks ? row[i] : (W)0;
        }
        return __shfl_sync(FULL, cached, c - base);
    }
};

// The segment state carried from one chunk to the next along a row.
struct Carry {
    bool open;   // the previous chunk's last pixel is foreground
    u32 head;    // then: the linear index of that segment's head
};

// Head (linear index) of the segment holding bit b of word m; bit b must be set.
template <typename W>
__device__ __forceinline__ u32 head_of(W m, int b, u32 chunk_index0, Carry carry) {
    int d = run_to_bit(m, b);
    if (d == b + 1 && carry.open) return carry.head;
    return chunk_index0 + b - d + 1;
}

template <typename W>
__device__ __forceinline__ Carry next_carry(W m, u32 chunk_index0, Carry carry) {
    const int last = Bits<W>::B - 1;
    Carry next;
    next.open = bit(m, last);
    next.head = next.open ? head_of(m, last, chunk_index0, carry) : 0;
    return next;
}

// ---------------------------------------------------------------------------------------------
// Row walkers shared by the kernels. Each is called by a whole warp for row y.

// Writes L[k] = k at every segment head of row y.
template <typename W>
__device__ void init_heads(u32* L, const W* mask, int words_per_row_w, int width, int y) {
    const int B = Bits<W>::B, PX = B / WARP, lane = threadIdx.x & 31;
    const int nchunks = (width + B - 1) / B;
    RowReader<W> rd(mask + (size_t)y * words_per_row_w, nchunks);
    const u32 row0 = (u32)y * (u32)width;
    bool prev_last = false;
    for (int c = 0; c < nchunks; c++) {
        W m = rd.get(c);
        for (int j = 0; j < PX; j++) {
            int b = lane * PX + j;
            bool before = b == 0 ? prev_last : bit(m, b - 1);
            if (bit(m, b) && !before) {
                u32 k = row0 + (u32)(c * B + b);
                L[k] = k;
            }
        }
        prev_last = bit(m, B - 1);
    }
}

// Merges the segments of row y with the segments of row y - 1 they touch (4-connectivity).
// Two segments touch along exactly one run of the AND of the two rows, so one merge is issued at
// the start of each such overlap run: no redundant atomics.
template <typename W>
__device__ void merge_with_row_above(u32* L, const W* mask, int words_per_row_w, int width, int y) {
    const int B = Bits<W>::B, PX = B / WARP, lane = threadIdx.x & 31;
    const int nchunks = (width + B - 1) / B;
    RowReader<W> cur(mask + (size_t)y * words_per_row_w, nchunks);
    RowReader<W> up(mask + (size_t)(y - 1) * words_per_row_w, nchunks);
    const u32 row0 = (u32)y * (u32)width, up0 = row0 - (u32)width;
    Carry cc = {false, 0}, cu = {false, 0};
    bool overlap_open = false;
    for (int c = 0; c < nchunks; c++) {
        W mc = cur.get(c), mu = up.get(c);
        W o = mc & mu;
        u32 x0 = (u32)(c * B);
        for (int j = 0; j < PX; j++) {
            int b = lane * PX + j;
            bool before = b == 0 ? overlap_open : bit(o, b - 1);
            if (bit(o, b) && !before) {
                merge(L, head_of(mc, b, row0 + x0, cc), head_of(mu, b, up0 + x0, cu));
            }
        }
        overlap_open = bit(o, B - 1);
        cc = next_carry(mc, row0 + x0, cc);
        cu = next_carry(mu, up0 + x0, cu);
    }
}

// ---------------------------------------------------------------------------------------------
// Kernels. Launch geometry: blockDim = (32, rows per block); warp threadIdx.y handles one row.

// Strip labeling: block b handles rows [b * blockDim.y, (b + 1) * blockDim.y). First every warp
// labels the heads of its row; after the barrier, every row but the strip's first merges with the
// row above. Merges only touch heads of this strip, so the strip is independent of the others.
template <typename W>
__device__ void strip_label(u32* L, const W* mask, int words_per_row_w, int width, int height) {
    int y = blockIdx.x * blockDim.y + threadIdx.y;
    bool active = y < height;
    if (active) init_heads<W>(L, mask, words_per_row_w, width, y);
    __syncthreads();
    if (active && threadIdx.y > 0) merge_with_row_above<W>(L, mask, words_per_row_w, width, y);
}

// `total` (the component count) is reset here, so that later kernels can count into it.
extern "C" __global__ void strip_label32(u32* L, const u32* mask, int wpr32, int width, int height, u32* total) {
    if (blockIdx.x == 0 && threadIdx.x == 0 && threadIdx.y == 0) *total = 0;
    strip_label<u32>(L, mask, wpr32, width, height);
}
extern "C" __global__ void strip_label64(u32* L, const u32* mask, int wpr32, int width, int height, u32* total) {
    if (blockIdx.x == 0 && threadIdx.x == 0 && threadIdx.y == 0) *total = 0;
    strip_label<u64>(L, (const u64*)mask, wpr32 / 2, width, height);
}

// Border merging: one warp per strip border row y = k * strip_rows (k >= 1).
template <typename W>
__device__ void border_merge(u32* L, const W* mask, int words_per_row_w, int width, int height, int strip_rows) {
    int k = blockIdx.x * blockDim.y + threadIdx.y + 1;
    int y = k * strip_rows;
    if (y >= height) return;
    merge_with_row_above<W>(L, mask, words_per_row_w, width, y);
}

extern "C" __global__ void border_merge32(u32* L, const u32* mask, int wpr32, int width, int height, int strip_rows) {
    border_merge<u32>(L, mask, wpr32, width, height, strip_rows);
}
extern "C" __global__ void border_merge64(u32* L, const u32* mask, int wpr32, int width, int height, int strip_rows) {
    border_merge<u64>(L, (const u64*)mask, wpr32 / 2, width, height, strip_rows);
}

// Writes the label image: `value(head)` + 1 on foreground, 0 on background. The label of each
// segment is computed once, by the lane holding the head or, for a segment continuing from the
// previous chunk, taken from the carry; other lanes get it with a shuffle.
//   FROM_SLOT = false: value = root (raw provisional label; CCL only, no numbering pass). Roots
//                      are counted into *total (reset by strip_label) with one atomic per row.
//   FROM_SLOT = true:  value = slot[L[head]] (heads already flattened; raster-order numbering)
template <typename W, bool FROM_SLOT>
__device__ void relabel(u32* out, u32* L, const u32* slot, const W* mask, int words_per_row_w,
                        int width, int height, u32* total) {
    const int B = Bits<W>::B, PX = B / WARP, lane = threadIdx.x & 31;
    int y = blockIdx.x * blockDim.y + threadIdx.y;
    if (y >= height) return;
    const int nchunks = (width + B - 1) / B;
    RowReader<W> rd(mask + (size_t)y * words_per_row_w, nchunks);
    const u32 row0 = (u32)y * (u32)width;
    bool open = false;      // a segment continues from the previous chunk
    u32 open_label = 0;     // ... and this is its output label
    u32 roots = 0;
    for (int c = 0; c < nchunks; c++) {
        W m = rd.get(c);
        u32 x0 = (u32)(c * B);
        // Label of the segment headed in this lane (at most one head per lane).
        u32 my_label = 0;
        bool is_root = false;
        for (int j = 0; j < PX; j++) {
            int b = lane * PX + j;
            bool before = b == 0 ? open : bit(m, b - 1);
            if (bit(m, b) && !before) {
                u32 head = row0 + x0 + (u32)b;
                u32 v = FROM_SLOT ? slot[L[head]] : find_compress(L, head);
                is_root = v == head;
                my_label = v + 1;
            }
        }
        if (!FROM_SLOT) roots += __popc(__ballot_sync(FULL, is_root));
        u32 labels[PX];
        for (int j = 0; j < PX; j++) {
            int b = lane * PX + j;
            bool fg = bit(m, b);
            bool from_carry = false;
            int src = 0;
            if (fg) {
                int d = run_to_bit(m, b);
                if (d == b + 1 && open) from_carry = true;
                else src = (b - d + 1) / PX;  // lane holding the head
            }
            u32 got = __shfl_sync(FULL, my_label, src);  // all lanes take part
            labels[j] = fg ? (from_carry ? open_label : got) : 0;
        }
        // Next carry: the label of the segment reaching the chunk's last pixel.
        u32 last_label = __shfl_sync(FULL, labels[PX - 1], WARP - 1);
        u32 x = x0 + (u32)(lane * PX);
        for (int j = 0; j < PX; j++) {
            if (x + j < (u32)width) out[row0 + x + j] = labels[j];
        }
        open = bit(m, B - 1);
        open_label = last_label;
    }
    if (!FROM_SLOT && lane == 0 && roots > 0) atomicAdd(total, roots);
}

extern "C" __global__ void relabel_find32(u32* out, u32* L, const u32* mask, int wpr32, int width, int height,
                                          u32* total) {
    relabel<u32, false>(out, L, nullptr, mask, wpr32, width, height, total);
}
extern "C" __global__ void relabel_find64(u32* out, u32* L, const u32* mask, int wpr32, int width, int height,
                                          u32* total) {
    relabel<u64, false>(out, L, nullptr, (const u64*)mask, wpr32 / 2, width, height, total);
}
extern "C" __global__ void relabel_slot32(u32* out, u32* L, const u32* slot, const u32* mask, int wpr32,
                                          int width, int height) {
    relabel<u32, true>(out, L, slot, mask, wpr32, width, height, nullptr);
}
extern "C" __global__ void relabel_slot64(u32* out, u32* L, const u32* slot, const u32* mask, int wpr32,
                                          int width, int height) {
    relabel<u64, true>(out, L, slot, (const u64*)mask, wpr32 / 2, width, height, nullptr);
}

// Compresses every head of row y to point at its root; returns the row's roots (whole warp).
template <typename W>
__device__ u32 flatten_count_row(u32* L, const W* mask, int words_per_row_w, int width, int y) {
    const int B = Bits<W>::B, PX = B / WARP, lane = threadIdx.x & 31;
    const int nchunks = (width + B - 1) / B;
    RowReader<W> rd(mask + (size_t)y * words_per_row_w, nchunks);
    const u32 row0 = (u32)y * (u32)width;
    bool prev_last = false;
    u32 roots = 0;
    for (int c = 0; c < nchunks; c++) {
        W m = rd.get(c);
        bool is_root = false;
        for (int j = 0; j < PX; j++) {
            int b = lane * PX + j;
            bool before = b == 0 ? prev_last : bit(m, b - 1);
            if (bit(m, b) && !before) {
                u32 head = row0 + (u32)(c * B + b);
                if (find_compress(L, head) == head) is_root = true;
            }
        }
        roots += __popc(__ballot_sync(FULL, is_root));
        prev_last = bit(m, B - 1);
    }
    return roots;
}

// Gives each root of row y its index in raster order (from `next`, the row's offset, on by rank
// in the row) and initialises its statistics (whole warp).
template <typename W>
__device__ void assign_slots_row(const u32* L, u32* slot, GpuStats* stats, const W* mask, int words_per_row_w,
                                 int width, int y, u32 next) {
    const int B = Bits<W>::B, PX = B / WARP, lane = threadIdx.x & 31;
    const int nchunks = (width + B - 1) / B;
    RowReader<W> rd(mask + (size_t)y * words_per_row_w, nchunks);
    const u32 row0 = (u32)y * (u32)width;
    bool prev_last = false;
    for (int c = 0; c < nchunks; c++) {
        W m = rd.get(c);
        u32 root = 0;
        bool is_root = false;
        for (int j = 0; j < PX; j++) {
            int b = lane * PX + j;
            bool before = b == 0 ? prev_last : bit(m, b - 1);
            if (bit(m, b) && !before) {
                u32 head = row0 + (u32)(c * B + b);
                if (L[head] == head) {
                    is_root = true;
                    root = head;
                }
            }
        }
        u32 ballot = __ballot_sync(FULL, is_root);
        if (is_root) {
            u32 s = next + __popc(ballot & ((1u << lane) - 1));
            slot[root] = s;
            stats[s] = empty_stats((u32)y);
        }
        next += __popc(ballot);
        prev_last = bit(m, B - 1);
    }
}

// Numbering in one kernel (number_rows_offset, common.cuh): flatten and count each row, scan the
// counts across the image by look-back, then give each root its slot. blockDim = (32, NUMBER_ROWS).
template <typename W>
__device__ void number_slots(u32* L, u32* slot, u32* row_offset, GpuStats* stats, const W* mask,
                             int words_per_row_w, int width, int height, u64* status, u32 epoch, u32* total) {
    const int y = blockIdx.x * blockDim.y + threadIdx.y;
    const bool active = y < height;
    const u32 roots = active ? flatten_count_row<W>(L, mask, words_per_row_w, width, y) : 0u;
    const u32 offset = number_rows_offset(roots, status, epoch, total);
    if (!active) return;
    if ((threadIdx.x & 31) == 0) row_offset[y] = offset;
    assign_slots_row<W>(L, slot, stats, mask, words_per_row_w, width, y, offset);
}

extern "C" __global__ void __launch_bounds__(WARP * NUMBER_ROWS)
    number_slots32(u32* L, u32* slot, u32* row_offset, GpuStats* stats, const u32* mask, int wpr32, int width,
                   int height, u64* status, u32 epoch, u32* total) {
    number_slots<u32>(L, slot, row_offset, stats, mask, wpr32, width, height, status, epoch, total);
}
extern "C" __global__ void __launch_bounds__(WARP * NUMBER_ROWS)
    number_slots64(u32* L, u32* slot, u32* row_offset, GpuStats* stats, const u32* mask, int wpr32, int width,
                   int height, u64* status, u32 epoch, u32* total) {
    number_slots<u64>(L, slot, row_offset, stats, (const u64*)mask, wpr32 / 2, width, height, status, epoch, total);
}

// Segment-based analysis: the lane holding a segment's last pixel adds the whole segment
// [x0, x1) to its component: S = x1 - x0, Σx = (x1(x1-1) - x0(x0-1)) / 2, Σy = S·y, bbox.
// Min/max atomics are skipped when a plain read already shows they cannot change (values only
// move one way, so a stale read can only cause an unneeded atomic, never a missed one).
template <typename W>
__device__ void accumulate(const u32* L, const u32* slot, GpuStats* stats, const W* mask, int words_per_row_w,
                           int width, int height) {
    const int B = Bits<W>::B, PX = B / WARP, lane = threadIdx.x & 31;
    int y = blockIdx.x * blockDim.y + threadIdx.y;
    if (y >= height) return;
    const int nchunks = (width + B - 1) / B;
    RowReader<W> rd(mask + (size_t)y * words_per_row_w, nchunks);
    const u32 row0 = (u32)y * (u32)width;
    Carry carry = {false, 0};
    W m = rd.get(0);
    for (int c = 0; c < nchunks; c++) {
        W next_m = rd.get(c + 1);
        u32 x0c = (u32)(c * B);
        for (int j = 0; j < PX; j++) {
            int b = lane * PX + j;
            bool after = b == B - 1 ? bit(next_m, 0) : bit(m, b + 1);
            if (bit(m, b) && !after) {
                u32 head = head_of(m, b, row0 + x0c, carry);
                GpuStats* s = &stats[slot[L[head]]];
                u64 x0 = head - row0, x1 = x0c + (u32)b + 1;
                atomicAdd(&s->area, (u32)(x1 - x0));
                atomicAdd(&s->sum_x, (x1 * (x1 - 1) - x0 * (x0 - 1)) / 2);
                atomicAdd(&s->sum_y, (x1 - x0) * (u64)y);
                if ((u32)x0 < *(volatile u32*)&s->min_x) atomicMin(&s->min_x, (u32)x0);
                if ((u32)x1 - 1 > *(volatile u32*)&s->max_x) atomicMax(&s->max_x, (u32)x1 - 1);
                if ((u32)y > *(volatile u32*)&s->max_y) atomicMax(&s->max_y, (u32)y);
            }
        }
        carry = next_carry(m, row0 + x0c, carry);
        m = next_m;
    }
}

extern "C" __global__ void accumulate32(const u32* L, const u32* slot, GpuStats* stats, const u32* mask, int wpr32,
                                        int width, int height) {
    accumulate<u32>(L, slot, stats, mask, wpr32, width, height);
}
extern "C" __global__ void accumulate64(const u32* L, const u32* slot, GpuStats* stats, const u32* mask, int wpr32,
                                        int width, int height) {
    accumulate<u64>(L, slot, stats, (const u64*)mask, wpr32 / 2, width, height);
}

// =============================================================================================
// HA4w: the same algorithm (segments, heads-only labels, strips + border merge, atomicMin merge,
// segment-based analysis) with one 32-bit mask word per lane: a warp step covers 1024 pixels
// instead of 32, which cuts the instruction count per pixel by an order of magnitude.
//
// Labels are head ranks, not pixel indices: the k-th head (from 0) of row y has the label
// id = y * R + k, R = ceil(width / 2) (the most heads a row can hold). Ids grow in raster order
// like pixel indices, so the smaller-root-wins merge still makes every component's root its first
// segment; but a row's labels are now consecutive entries of L, where pixel indices scattered
// them over a frame-sized array: one memory sector serves 8 heads instead of one, and L is half
// the size. (The measured cost of the pixel-indexed L was most of the strip kernel's time.)
// The rank of the head of the segment through bit b of a lane's word is the lane's first rank
// (a warp prefix sum of head counts, plus the heads of earlier steps) plus the heads at or below
// b, minus one. Features need the head's x too: the highest head bit <= b in the word, or, if
// there is none, the last head of an earlier lane (a warp max-scan) or of an earlier step.

// The label of row y's first head (row y's labels are y * R + rank).
__device__ __forceinline__ u32 row_id0(int width, int y) { return (u32)y * (((u32)width + 1u) / 2u); }

// Walks one row, 32 words per step. All lanes must call step() together.
struct WordWalker {
    const u32* row;
    int nwords;
    u32 row0;        // linear index of the row's first pixel
    u32 id0;         // label of the row's first head (row_id0)
    bool carry_open; // the previous step's last pixel is foreground
    u32 carry_head;  // ... and the head (pixel index) of its segment
    u32 carry_count; // heads of the row in the previous steps
    // Per-step, per-lane state:
    u32 m;           // this lane's mask word
    u32 heads;       // segment starts in m
    u32 first;       // rank in the row of this lane's first head (= heads before this word)
    u32 step_first;  // rank of the step's first head
    u32 step_count;  // heads in the step
    u32 incoming;    // head of the segment entering this word at bit 0 (NONE if bit 0 is clear)
    u32 x0;          // x of bit 0 of this lane's word
    u32 prev_top;    // the pixel before bit 0 (1 = foreground; 0 at the row start)
    u32 prev_head;   // ... and then the head of its segment (NONE if background)

    __device__ WordWalker(const u32* row_, int nwords_, u32 row0_, u32 id0_)
        : row(row_), nwords(nwords_), row0(row0_), id0(id0_), carry_open(false), carry_head(0), carry_count(0),
          m(0), heads(0), first(0), step_first(0), step_count(0), incoming(NONE), x0(0), prev_top(0),
          prev_head(NONE) {}

    __device__ __forceinline__ void step(int w0) {
        const int lane = threadIdx.x & 31;
        int wi = w0 + lane;
        m = wi < nwords ? row[wi] : 0u;
        x0 = (u32)wi * 32u;
        u32 prev = __shfl_up_sync(FULL, m, 1);
        prev_top = lane == 0 ? (u32)carry_open : prev >> 31;
        heads = m & ~((m << 1) | prev_top);
        // Inclusive sum-scan of head counts (ranks) and max-scan of (last head in word + 1; 0 = no
        // head so far in this step).
        const u32 n = __popc(heads);
        u32 last = heads ? row0 + x0 + 31u - (u32)__clz(heads) : NONE;
        u32 v = heads ? last + 1u : 0u, c = n;
        for (int off = 1; off < WARP; off <<= 1) {
            u32 t = __shfl_up_sync(FULL, v, off);
            u32 k = __shfl_up_sync(FULL, c, off);
            if (lane >= off) {
                v = max(v, t);
                c += k;
            }
        }
        step_first = carry_count;
        first = carry_count + c - n;
        step_count = __shfl_sync(FULL, c, WARP - 1);
        carry_count += step_count;
        u32 before = __shfl_up_sync(FULL, v, 1);
        if (lane == 0) before = 0;
        // The segment through the pixel before bit 0 started at the last head before this word.
        prev_head = prev_top ? (before ? before - 1u : carry_head) : NONE;
        incoming = (m & 1u) ? prev_head : NONE;
        // Carry to the next step: the segment through the last lane's bit 31.
        u32 top_head = heads ? last : incoming;
        carry_open = __shfl_sync(FULL, m >> 31, WARP - 1) != 0;
        carry_head = __shfl_sync(FULL, top_head, WARP - 1);
    }

    // Starts the walk at word w0 (a multiple of WARP) instead of the row start: the carry is the
    // segment through the pixel before word w0, whose head may lie many words back (the warp
    // looks 32 words back at a time for one that is not all foreground), and the heads before
    // w0 are counted.
    __device__ void seed(int w0) {
        const int lane = threadIdx.x & 31;
        u32 top = 0;
        carry_count = 0;
        for (int s0 = 0; s0 < w0; s0 += WARP) {
            u32 mw = row[s0 + lane];
            u32 prev = __shfl_up_sync(FULL, mw, 1);
            u32 n = __popc(mw & ~((mw << 1) | (lane == 0 ? top : prev >> 31)));
            for (int off = 16; off; off >>= 1) n += __shfl_xor_sync(FULL, n, off);
            carry_count += n;
            top = __shfl_sync(FULL, mw >> 31, WARP - 1);
        }
        carry_open = top != 0;
        carry_head = 0;
        if (!carry_open) return;
        for (int base = w0 - 1;; base -= WARP) {
            int wi = base - lane;
            u32 mw = wi >= 0 ? row[wi] : 0u;  // before the row start: background
            u32 broken = __ballot_sync(FULL, mw != FULL);
            if (broken) {
                int l = __ffs(broken) - 1;
                u32 ml = __shfl_sync(FULL, mw, l);
                // The segment starts just above the highest background bit of word base - l.
                carry_head = row0 + (u32)((base - l) * 32 + 32 - __clz(~ml));
                return;
            }
        }
    }

    // Head (pixel index) of the segment through bit b of this lane's word (bit b must be set).
    __device__ __forceinline__ u32 head_at(int b) const {
        u32 h = heads & (0xffffffffu >> (31 - b));
        return h ? row0 + x0 + 31u - (u32)__clz(h) : incoming;
    }
    // Label of the segment through bit b (bit b must be set).
    __device__ __forceinline__ u32 id_at(int b) const {
        return id0 + first + __popc(heads & (0xffffffffu >> (31 - b))) - 1u;
    }
    // Label of the first head after bit b (in this word or the next).
    __device__ __forceinline__ u32 id_after(int b) const {
        return id0 + first + __popc(heads & (0xffffffffu >> (31 - b)));
    }
    // Label of the segment through the pixel before bit 0 (prev_top must be set).
    __device__ __forceinline__ u32 prev_id() const { return id0 + first - 1u; }
};

// Merges the segments of row y with those of row y - 1, once per overlap run (as in
// merge_with_row_above).
// One merge of two segments' labels: plain (union-find only) or OTF (features move along).
template <bool OTF>
__device__ __forceinline__ void join(u32* L, const Feat& F, u32 a, u32 b) {
    if (OTF) otf_merge(L, F, a, b);
    else merge_halving(L, a, b);
}

// Words [w_begin, w_end) of the rows only (w_begin a multiple of WARP): the border kernels
// split a row between warps.
template <bool OTF>
__device__ void merge_rows_w(u32* L, const Feat& F, const u32* mask, int wpr, int width, int y, int w_begin,
                             int w_end) {
    const int nwords = (width + 31) / 32;
    const u32* cur_row = mask + (size_t)y * wpr;
    const u32* up_row = cur_row - wpr;
    WordWalker cur(cur_row, nwords, (u32)y * (u32)width, row_id0(width, y));
    WordWalker up(up_row, nwords, (u32)(y - 1) * (u32)width, row_id0(width, y - 1));
    cur.seed(w_begin);
    up.seed(w_begin);
    // An overlap run open at w_begin was merged at its start, by the part before.
    bool o_open = w_begin > 0 && ((cur_row[w_begin - 1] & up_row[w_begin - 1]) >> 31);
    for (int w0 = w_begin; w0 < min(w_end, nwords); w0 += WARP) {
        cur.step(w0);
        up.step(w0);
        u32 o = cur.m & up.m;
        u32 o_prev = __shfl_up_sync(FULL, o, 1);
        u32 o_prev_top = (threadIdx.x & 31) == 0 ? (u32)o_open : o_prev >> 31;
        u32 starts = o & ~((o << 1) | o_prev_top);
        for (; starts; starts &= starts - 1) {
            int b = __ffs(starts) - 1;
            join<OTF>(L, F, cur.id_at(b), up.id_at(b));
        }
        o_open = __shfl_sync(FULL, o >> 31, WARP - 1) != 0;
    }
}

template <bool OTF>
__device__ void merge_rows8_w(u32* L, const Feat& F, const u32* mask, int wpr, int width, int y, int w_begin,
                              int w_end);

// Segment detection of a strip (heads: L[id] = id, the warp's stores of a step covering one
// contiguous range; OTF: each segment's features stored at its label by the lane holding its last
// pixel), then, after the barrier, every row but the strip's first merges with the row above.
// BYTES: each warp first packs its row from the byte mask (width % 16 == 0) into `mask`, which
// saves the separate pack_bytes16 pass and its launch; the barriers make the rows visible.
template <bool C8, bool OTF, bool BYTES>
__device__ void strip_w(u32* L, const Feat& F, const unsigned char* bytes, u32* mask, int wpr, int width,
                        int height, u32* total) {
    if (blockIdx.x == 0 && threadIdx.x == 0 && threadIdx.y == 0) *total = 0;
    int y = blockIdx.x * blockDim.y + threadIdx.y;
    bool active = y < height;
    const int nwords = (width + 31) / 32;
    if (BYTES && active) {
        pack_row16(bytes + (size_t)y * width, mask + (size_t)y * wpr, width, wpr);
        __syncwarp();
    }
    if (active) {
        const int lane = threadIdx.x & 31;
        const u32* row = mask + (size_t)y * wpr;
        WordWalker wk(row, nwords, (u32)y * (u32)width, row_id0(width, y));
        for (int w0 = 0; w0 < nwords; w0 += WARP) {
            wk.step(w0);
            for (u32 j = lane; j < wk.step_count; j += WARP) {
                u32 id = wk.id0 + wk.step_first + j;
                L[id] = id;
            }
            if (OTF) {
                // First bit of the next word (the next lane's, or the next step's for lane 31).
                u32 next_m = __shfl_down_sync(FULL, wk.m, 1);
                if (lane == WARP - 1) next_m = (w0 + WARP < nwords) ? row[w0 + WARP] : 0u;
                u32 tails = wk.m & ~((wk.m >> 1) | ((next_m & 1u) << 31));
                for (; tails; tails &= tails - 1) {
                    int b = __ffs(tails) - 1;
                    u32 id = wk.id_at(b);
                    u32 x0 = wk.head_at(b) - wk.row0, x1 = wk.x0 + (u32)b + 1;
                    F.area[id] = x1 - x0;
                    F.min_x[id] = x0;
                    F.max_x[id] = x1 - 1;
                    F.max_y[id] = (u32)y;
                    F.sum_x[id] = ((u64)x1 * ((u64)x1 - 1) - (u64)x0 * ((u64)x0 - 1)) / 2;
                    F.sum_y[id] = (u64)(x1 - x0) * (u32)y;
                }
            }
        }
    }
    __syncthreads();
    if (active && threadIdx.y > 0) {
        if (C8) merge_rows8_w<OTF>(L, F, mask, wpr, width, y, 0, nwords);
        else merge_rows_w<OTF>(L, F, mask, wpr, width, y, 0, nwords);
    }
}

// One warp per border row y = k * strip_rows (k >= 1) and part of it: the row's warp steps are
// split into gridDim.y parts of consecutive steps (blockIdx.y is the part), so that the few border
// rows still fill the GPU.
template <bool C8, bool OTF>
__device__ void border_w(u32* L, const Feat& F, const u32* mask, int wpr, int width, int height, int strip_rows) {
    int y = (blockIdx.x * blockDim.y + threadIdx.y + 1) * strip_rows;
    if (y >= height) return;
    const int nsteps = ((width + 31) / 32 + WARP - 1) / WARP;
    const int per_part = (nsteps + (int)gridDim.y - 1) / (int)gridDim.y;
    const int s0 = (int)blockIdx.y * per_part, s1 = min(nsteps, s0 + per_part);
    if (s0 >= s1) return;
    if (C8) merge_rows8_w<OTF>(L, F, mask, wpr, width, y, s0 * WARP, s1 * WARP);
    else merge_rows_w<OTF>(L, F, mask, wpr, width, y, s0 * WARP, s1 * WARP);
}

// Label image, in two phases per step. A: the lanes compute the values of the step's heads (find
// or slot lookup), round-robin over the step's consecutive labels, into a list in shared memory
// (a lane's word may hold up to 16 heads, its neighbours' none). B: the warp stores the 1024
// pixels as 8 coalesced rows of 32 lanes × 4 pixels (uint4); each pixel's value comes from its
// head's list entry, found by counting heads. The stores are streaming (__stcs, evict first): the
// label image is not read again by this frame's kernels, and keeping it out of L2 leaves L2 to L
// (ha4w CCL 248 -> 274 Gpx/s at g = 4 on H100; FLSL's relabel, measured the same way, gained
// nothing and keeps plain stores).
//   FROM_SLOT = false: root + 1, and roots are counted into *total.
//   FROM_SLOT = true:  slot[L[head]] + 1 (heads flattened by number_slotsw).
// Most segment heads one warp step (32 words, 1024 pixels) can hold: one per two pixels.
#define STEP_HEADS (WARP * 16)
// Rows per block of the row kernels (ROWS_PER_BLOCK in src/ccl/cuda/launches.rs).
#define BLOCK_ROWS 8

template <bool FROM_SLOT>
__device__ void relabel_w(u32* out, u32* L, const u32* slot, const u32* mask, int wpr, int width, int height,
                          u32* total) {
    // Each head's value stays in its list entry for the pixels of its segment.
    __shared__ u32 step_heads[BLOCK_ROWS][STEP_HEADS];
    int y = blockIdx.x * blockDim.y + threadIdx.y;
    if (y >= height) return;
    u32* list = step_heads[threadIdx.y];
    const int lane = threadIdx.x & 31;
    const int nwords = (width + 31) / 32;
    WordWalker wk(mask + (size_t)y * wpr, nwords, (u32)y * (u32)width, row_id0(width, y));
    u32* orow = out + (size_t)y * width;
    const bool vec = (width & 3) == 0;  // rows start 16-byte aligned
    u32 roots = 0;
    u32 carry_val = 0;  // value of the last head of the earlier steps
    for (int w0 = 0; w0 < nwords; w0 += WARP) {
        wk.step(w0);
        const u32 step_total = wk.step_count;
        const u32 first = wk.first - wk.step_first;  // this lane's first head in the list
        for (u32 j = lane; j < step_total; j += WARP) {
            u32 id = wk.id0 + wk.step_first + j;
            u32 r = FROM_SLOT ? slot[L[id]] : find_compress(L, id);
            if (!FROM_SLOT && r == id) roots++;
            list[j] = r + 1;
        }
        __syncwarp();
        for (int j = 0; j < 8; j++) {
            int wj = j * 4 + (lane >> 3);  // the walker lane whose word holds my 4 pixels
            int bo = (lane & 7) * 4;       // their first bit in that word
            u32 m = __shfl_sync(FULL, wk.m, wj);
            u32 hd = __shfl_sync(FULL, wk.heads, wj);
            u32 f = __shfl_sync(FULL, first, wj);
            if (w0 + wj >= nwords) continue;  // past the row (after the shuffles)
            u32 x = (u32)(w0 + wj) * 32u + (u32)bo;
            // A foreground pixel's segment starts at the last head at or before it: in this word
            // (rank f + heads so far - 1), else the last one of an earlier word or step.
            u32 before = f ? list[f - 1] : carry_val;
            u32 v[4];
            for (int i = 0; i < 4; i++) {
                int b = bo + i;
                u32 hb = __popc(hd & (0xffffffffu >> (31 - b)));
                v[i] = ((m >> b) & 1) ? (hb ? list[f + hb - 1] : before) : 0u;
            }
            if (vec && x + 3 < (u32)width) {
                __stcs((uint4*)(orow + x), make_uint4(v[0], v[1], v[2], v[3]));
            } else {
                for (int i = 0; i < 4; i++)
                    if (x + i < (u32)width) orow[x + i] = v[i];
            }
        }
        if (step_total) carry_val = list[step_total - 1];
        __syncwarp();  // the list is rewritten by the next step
    }
    if (!FROM_SLOT && roots) atomicAdd(total, roots);
}

extern "C" __global__ void relabel_findw(u32* out, u32* L, const u32* mask, int wpr, int width, int height,
                                         u32* total) {
    relabel_w<false>(out, L, nullptr, mask, wpr, width, height, total);
}
extern "C" __global__ void relabel_slotw(u32* out, u32* L, const u32* slot, const u32* mask, int wpr, int width,
                                         int height) {
    relabel_w<true>(out, L, slot, mask, wpr, width, height, nullptr);
}

// Heads of row y (whole warp; the same in every lane): the row's labels are id0 .. id0 + count - 1.
__device__ __forceinline__ u32 row_head_count(const u32* mask, int wpr, int width, int y) {
    const int nwords = (width + 31) / 32, lane = threadIdx.x & 31;
    const u32* row = mask + (size_t)y * wpr;
    u32 n = 0;
    for (int wi = lane; wi < nwords; wi += WARP) {
        u32 m = row[wi], before = wi ? row[wi - 1] >> 31 : 0u;
        n += __popc(m & ~((m << 1) | before));
    }
    for (int off = 16; off; off >>= 1) n += __shfl_xor_sync(FULL, n, off);
    return n;
}

// Numbering in one kernel, as number_slots: flatten and count each row's heads, scan by look-back,
// then the slots of the roots; each statistics row starts empty, or (OTF) holds the features
// merged into its root during labeling. blockDim = (32, NUMBER_ROWS).
template <bool OTF>
__device__ void number_slots_w(u32* L, u32* slot, u32* row_offset, GpuStats* stats, const u32* mask, int wpr,
                               int width, int height, u64* status, u32 epoch, u32* total, const Feat& F) {
    const int y = blockIdx.x * blockDim.y + threadIdx.y;
    const bool active = y < height;
    const int lane = threadIdx.x & 31;
    const u32 id0 = row_id0(width, y), n = active ? row_head_count(mask, wpr, width, y) : 0u;
    const u32 offset = number_rows_offset(flatten_count_ids(L, id0, n), status, epoch, total);
    if (!active) return;
    if (lane == 0) row_offset[y] = offset;
    // stats holds a row for every possible component, so no capacity limit.
    assign_row_slots<OTF>(L, slot, stats, NONE, id0, n, offset, (u32)y, F);
}

extern "C" __global__ void __launch_bounds__(WARP * NUMBER_ROWS)
    number_slotsw(u32* L, u32* slot, u32* row_offset, GpuStats* stats, const u32* mask, int wpr, int width,
                  int height, u64* status, u32 epoch, u32* total) {
    number_slots_w<false>(L, slot, row_offset, stats, mask, wpr, width, height, status, epoch, total, no_feat());
}
extern "C" __global__ void __launch_bounds__(WARP * NUMBER_ROWS)
    number_slots_otfw(u32* L, u32* slot, u32* row_offset, GpuStats* stats, const u32* mask, int wpr, int width,
                      int height, u64* status, u32 epoch, u32* total, u32* area, u32* min_x, u32* max_x,
                      u32* max_y, u64* sum_x, u64* sum_y) {
    Feat F = {area, min_x, max_x, max_y, sum_x, sum_y};
    number_slots_w<true>(L, slot, row_offset, stats, mask, wpr, width, height, status, epoch, total, F);
}

// Features of the segments one lane has seen since its last flush, all of one component.
struct Pending {
    u32 slot;  // NONE = empty
    u32 area, min_x, max_x;
    u64 sum_x;
};

// Sends a lane's pending features to the block table (table_add, common.cuh).
__device__ __forceinline__ void flush(BlockTable& t, GpuStats* stats, const Pending& p, u32 y) {
    if (p.slot == NONE) return;
    Part part = {p.area, p.min_x, p.max_x, p.sum_x};
    table_add(t, stats, p.slot, part, y);
}

// One row of accumulatew (one warp).
__device__ void accumulate_row_w(BlockTable& t, const u32* L, const u32* slot, GpuStats* stats, const u32* mask,
                                 int wpr, int width, int y) {
    const int lane = threadIdx.x & 31;
    const int nwords = (width + 31) / 32;
    const u32* row = mask + (size_t)y * wpr;
    WordWalker wk(row, nwords, (u32)y * (u32)width, row_id0(width, y));
    Pending p = {NONE, 0, 0xffffffffu, 0, 0};
    for (int w0 = 0; w0 < nwords; w0 += WARP) {
        wk.step(w0);
        // First bit of the next word (the next lane's, or the next step's for lane 31).
        u32 next_m = __shfl_down_sync(FULL, wk.m, 1);
        if (lane == WARP - 1) next_m = (w0 + WARP < nwords) ? row[w0 + WARP] : 0u;
        u32 tails = wk.m & ~((wk.m >> 1) | ((next_m & 1u) << 31));
        for (; tails; tails &= tails - 1) {
            int b = __ffs(tails) - 1;
            u32 s = slot[L[wk.id_at(b)]];
            u32 x0 = wk.head_at(b) - wk.row0, x1 = wk.x0 + (u32)b + 1;
            if (s != p.slot) {
                flush(t, stats, p, (u32)y);
                p.slot = s;
                p.area = 0;
                p.sum_x = 0;
                p.min_x = x0;
            }
            p.area += x1 - x0;
            p.sum_x += ((u64)x1 * (x1 - 1) - (u64)x0 * (x0 - 1)) / 2;
            p.max_x = x1 - 1;
        }
    }
    // With few distinct components (groups) left in the warp, the warp reduces group by group;
    // with many, contention is low and every lane flushes on its own.
    unsigned group = __match_any_sync(FULL, p.slot);
    bool leader = (unsigned)lane == (unsigned)(__ffs(group) - 1);
    unsigned leaders = __ballot_sync(FULL, leader && p.slot != NONE);
    if (__popc(leaders) > 4) {
        flush(t, stats, p, (u32)y);
        return;
    }
    for (; leaders; leaders &= leaders - 1) {
        int l = __ffs(leaders) - 1;
        u32 s = __shfl_sync(FULL, p.slot, l);
        bool in = p.slot == s;
        u32 area = in ? p.area : 0, mn = in ? p.min_x : 0xffffffffu, mx = in ? p.max_x : 0;
        u64 sx = in ? p.sum_x : 0;
        for (int off = 16; off; off >>= 1) {
            area += __shfl_xor_sync(FULL, area, off);
            sx += __shfl_xor_sync(FULL, sx, off);
            mn = min(mn, __shfl_xor_sync(FULL, mn, off));
            mx = max(mx, __shfl_xor_sync(FULL, mx, off));
        }
        if (lane == l) {
            Pending all = {s, area, mn, mx, sx};
            flush(t, stats, all, (u32)y);
        }
    }
}

// Segment-based analysis with aggregation at three levels: each lane sums the consecutive segments
// of one component in registers and flushes only when the component changes; at the end of the
// row, if few components remain in the warp (the large-component case that would otherwise
// serialise on one address), the warp reduces them first and one lane per component flushes; and
// flushes go to the block's shared-memory table, which sends one set of global atomics per
// component per block. blockDim = (32, TABLE_ROWS).
extern "C" __global__ void __launch_bounds__(WARP * TABLE_ROWS)
    accumulatew(const u32* L, const u32* slot, GpuStats* stats, const u32* mask, int wpr, int width, int height,
                const u32* row_offset) {
    __shared__ BlockTable table;
    table_init(table, row_offset, (u32)height);
    const int y = blockIdx.x * blockDim.y + threadIdx.y;
    if (y < height) accumulate_row_w(table, L, slot, stats, mask, wpr, width, y);
    table_flush(table, stats);
}

// =============================================================================================
// HA8: the HA4w machinery for 8-connectivity. Only the merge between two rows differs; heads,
// relabeling, flattening, slots and accumulation are the same kernels (they see heads only).
//
// A segment T = [a0, a1] of row y and a segment U = [b0, b1] of row y - 1 touch (8-connectivity)
// when [a0, a1] meets [b0 - 1, b1 + 1]. One merge per touching pair, issued at the first pixel x
// of that intersection, x = max(a0, b0 - 1):
//   x = a0 (a head of T):  up[x] set:                   U is the segment through x       (V)
//                          up[x] clear, up[x - 1] set:  U is the segment through x - 1   (DL)
//                          up[x] clear, up[x + 1] set:  U starts at x + 1                (DR)
//   x = b0 - 1 > a0:       cur[x], up[x] clear, up[x + 1] set: U starts at x + 1         (DR)
// In bits: V = heads & up, DL = heads & ~up & up<<1, DR = cur & ~up & up>>1.
// (ccl::adjacency::merges_8 is the same rule on the CPU, tested against the oracle.)
template <bool OTF>
__device__ void merge_rows8_w(u32* L, const Feat& F, const u32* mask, int wpr, int width, int y, int w_begin,
                              int w_end) {
    const int lane = threadIdx.x & 31;
    const int nwords = (width + 31) / 32;
    const u32* up_row = mask + (size_t)(y - 1) * wpr;
    WordWalker cur(mask + (size_t)y * wpr, nwords, (u32)y * (u32)width, row_id0(width, y));
    WordWalker up(up_row, nwords, (u32)(y - 1) * (u32)width, row_id0(width, y - 1));
    cur.seed(w_begin);
    up.seed(w_begin);
    for (int w0 = w_begin; w0 < min(w_end, nwords); w0 += WARP) {
        cur.step(w0);
        up.step(w0);
        // Bit 0 of the next word of the row above (the next lane's, or the next step's).
        u32 up_next = __shfl_down_sync(FULL, up.m, 1);
        if (lane == WARP - 1) up_next = (w0 + WARP < nwords) ? up_row[w0 + WARP] : 0u;
        u32 up_left = (up.m << 1) | up.prev_top;       // bit b: up[x - 1]
        u32 up_right = (up.m >> 1) | (up_next << 31);  // bit b: up[x + 1]
        u32 v = cur.heads & up.m;
        u32 dl = cur.heads & ~up.m & up_left;
        u32 dr = cur.m & ~up.m & up_right;
        for (; v; v &= v - 1) {
            int b = __ffs(v) - 1;
            join<OTF>(L, F, cur.id_at(b), up.id_at(b));
        }
        for (; dl; dl &= dl - 1) {
            int b = __ffs(dl) - 1;
            join<OTF>(L, F, cur.id_at(b), b > 0 ? up.id_at(b - 1) : up.prev_id());
        }
        for (; dr; dr &= dr - 1) {  // up starts a segment at x + 1
            int b = __ffs(dr) - 1;
            join<OTF>(L, F, cur.id_at(b), up.id_after(b));
        }
    }
}

// Kernels of the word-per-lane family: 4- and 8-connectivity, plain and OTF (HA+OTF).
#define FEAT_PARAMS u32 *area, u32 *min_x, u32 *max_x, u32 *max_y, u64 *sum_x, u64 *sum_y
#define FEAT_ARGS Feat{area, min_x, max_x, max_y, sum_x, sum_y}

// The strip kernels only read `mask` (non-const for the BYTES variants, which write it).
extern "C" __global__ void strip_labelw(u32* L, u32* mask, int wpr, int width, int height, u32* total) {
    strip_w<false, false, false>(L, no_feat(), nullptr, mask, wpr, width, height, total);
}
extern "C" __global__ void strip_label8w(u32* L, u32* mask, int wpr, int width, int height, u32* total) {
    strip_w<true, false, false>(L, no_feat(), nullptr, mask, wpr, width, height, total);
}
extern "C" __global__ void strip_labelw_bytes(u32* L, const unsigned char* bytes, u32* mask, int wpr, int width,
                                              int height, u32* total) {
    strip_w<false, false, true>(L, no_feat(), bytes, mask, wpr, width, height, total);
}
extern "C" __global__ void strip_label8w_bytes(u32* L, const unsigned char* bytes, u32* mask, int wpr, int width,
                                               int height, u32* total) {
    strip_w<true, false, true>(L, no_feat(), bytes, mask, wpr, width, height, total);
}
extern "C" __global__ void border_mergew(u32* L, const u32* mask, int wpr, int width, int height, int strip_rows) {
    border_w<false, false>(L, no_feat(), mask, wpr, width, height, strip_rows);
}
extern "C" __global__ void border_merge8w(u32* L, const u32* mask, int wpr, int width, int height, int strip_rows) {
    border_w<true, false>(L, no_feat(), mask, wpr, width, height, strip_rows);
}
extern "C" __global__ void strip_label_otfw(u32* L, u32* mask, int wpr, int width, int height, u32* total,
                                            FEAT_PARAMS) {
    strip_w<false, true, false>(L, FEAT_ARGS, nullptr, mask, wpr, width, height, total);
}
extern "C" __global__ void strip_label8_otfw(u32* L, u32* mask, int wpr, int width, int height, u32* total,
                                             FEAT_PARAMS) {
    strip_w<true, true, false>(L, FEAT_ARGS, nullptr, mask, wpr, width, height, total);
}
extern "C" __global__ void strip_label_otfw_bytes(u32* L, const unsigned char* bytes, u32* mask, int wpr,
                                                  int width, int height, u32* total, FEAT_PARAMS) {
    strip_w<false, true, true>(L, FEAT_ARGS, bytes, mask, wpr, width, height, total);
}
extern "C" __global__ void strip_label8_otfw_bytes(u32* L, const unsigned char* bytes, u32* mask, int wpr,
                                                   int width, int height, u32* total, FEAT_PARAMS) {
    strip_w<true, true, true>(L, FEAT_ARGS, bytes, mask, wpr, width, height, total);
}
extern "C" __global__ void border_merge_otfw(u32* L, const u32* mask, int wpr, int width, int height,
                                             int strip_rows, FEAT_PARAMS) {
    border_w<false, true>(L, FEAT_ARGS, mask, wpr, width, height, strip_rows);
}
extern "C" __global__ void border_merge8_otfw(u32* L, const u32* mask, int wpr, int width, int height,
                                              int strip_rows, FEAT_PARAMS) {
    border_w<true, true>(L, FEAT_ARGS, mask, wpr, width, height, strip_rows);
}

// HA+CD: segment-based analysis where each warp step's segments go through conflict detection
// (cd_reduce, common.cuh): lanes take their segments (tails) one at a time, all lanes together,
// and the lanes holding the same component reduce into one leader, which alone does the atomics.
extern "C" __global__ void accumulate_cdw(const u32* L, const u32* slot, GpuStats* stats, const u32* mask, int wpr,
                                          int width, int height) {
    int y = blockIdx.x * blockDim.y + threadIdx.y;
    if (y >= height) return;
    const int lane = threadIdx.x & 31;
    const int nwords = (width + 31) / 32;
    const u32* row = mask + (size_t)y * wpr;
    WordWalker wk(row, nwords, (u32)y * (u32)width, row_id0(width, y));
    for (int w0 = 0; w0 < nwords; w0 += WARP) {
        wk.step(w0);
        u32 next_m = __shfl_down_sync(FULL, wk.m, 1);
        if (lane == WARP - 1) next_m = (w0 + WARP < nwords) ? row[w0 + WARP] : 0u;
        u32 tails = wk.m & ~((wk.m >> 1) | ((next_m & 1u) << 31));
        while (__any_sync(FULL, tails)) {  // uniform: every lane calls cd_reduce
            u32 key = NONE;
            Part p = {0, NONE, 0, 0};
            if (tails) {
                int b = __ffs(tails) - 1;
                tails &= tails - 1;
                key = slot[L[wk.id_at(b)]];
                u32 x0 = wk.head_at(b) - wk.row0, x1 = wk.x0 + (u32)b + 1;
                p.area = x1 - x0;
                p.min_x = x0;
                p.max_x = x1 - 1;
                p.sum_x = ((u64)x1 * (x1 - 1) - (u64)x0 * ((u64)x0 - 1)) / 2;
            }
            if (cd_reduce(key, p) && key != NONE) add_part(stats, key, p, (u32)y);
        }
    }
}
