// Square fiducials (ArUco, AprilTag) on the GPU: the device side of src/fiducial/gpu/.
//
// The CPU detector (src/fiducial/) is the reference; every function here is a port of the one
// named in its comment, with the same double-precision operations in the same order. This file
// is compiled with FMA contraction off (--fmad=false, src/gpu/kernels.rs), so each product and
// sum is rounded as the CPU rounds it and both give the same candidates, IDs and corners.
//
// Per frame and threshold window:
//   fid_column_sums, fid_threshold  the mean-C threshold (inverse): dark pixels of the frame
//   (labeling by the engine's device labeler: labels and OpenCV's stats rows on the device)
// Then over all windows at once:
//   fid_neighbours                each pixel's neighbours of its label, a byte
//   fid_candidates                one warp per component: statistics filter, trace limit,
//                                 outer boundary, quad fit; kept quads appended to a list
//   fid_long_outlines             one block per outline whose limit is long (listed by fid_candidates):
//                                 the trace cut at seed states, walked in parallel and chained; quad fit
//                                 by the whole block
//   fid_distinct                  one block: the quads in the CPU's order, each outline once
//   fid_decode                    one block per quad, a warp per side: sub-pixel corners,
//                                 cells, Otsu, the dictionaries' codes
// Work is shared among threads only where the CPU's result does not depend on the order
// (samples, cells, maxima with the CPU's tie rule, counts); every floating-point sum is taken by
// one thread in the CPU's order.

// ---------------------------------------------------------------------------------------------
// The mean-C adaptive threshold (threshold::binarize::Binarizer::adaptive_mean, inverted): a
// pixel is dark unless round(mean of its W×W window, borders replicated) < grey + ceil(C), i.e.
// unless sum + area / 2 < (grey + ceil(C)) · area. Window sums are exact integers, so summing
// columns first and rows second gives the CPU's sums bit for bit.

// Rows a thread of fid_column_sums takes, its window's sum slid down them.
#define FID_SUM_RUN 32
// Pixels of a row a block of fid_threshold takes (its threads, one a pixel), and the largest
// window radius (MAX_ADAPTIVE_WINDOW / 2) its copy of the row's sums has room for.
#define FID_ROW_SPAN 256
#define FID_ROW_REACH 2047

// sums[y][x] = Σ_{|k| ≤ r} grey[clamp(y + k)][x]: a thread per column and run of FID_SUM_RUN
// rows (neighbouring threads on neighbouring columns), the sum taken once at the run's first
// row and then slid, a row in and a row out a step.
extern "C" __global__ void fid_column_sums(const unsigned char* grey, u32* sums, u32 width, u32 height, int r) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    u64 runs = ((u64)height + FID_SUM_RUN - 1) / FID_SUM_RUN;
    if (i >= (u64)width * runs) return;
    u64 x = i % width;
    long long h = (long long)height, y0 = (long long)(i / width) * FID_SUM_RUN;
    auto at = [&](long long y) {
        y = y < 0 ? 0 : (y >= h ? h - 1 : y);
        return (u32)grey[(u64)y * width + x];
    };
    u32 s = 0;
    for (long long k = -r; k <= r; k++) s += at(y0 + k);
    long long end = y0 + FID_SUM_RUN < h ? y0 + FID_SUM_RUN : h;
    for (long long y = y0; y < end; y++) {
        sums[(u64)y * width + x] = s;
        s += at(y + r + 1);
        s -= at(y - r);
    }
}

// mask[y][x] = 1 where dark: sum + half ≥ clamp(grey + idelta, 0, 256) · area, with
// sum = Σ_{|k| ≤ r} sums[y][clamp(x + k)] (r ≤ FID_ROW_REACH). A block of FID_ROW_SPAN threads
// takes that many pixels of one row (blockIdx.x: the row's spans one after the other, row by
// row), copying the sums they need into shared memory once.
extern "C" __global__ void __launch_bounds__(FID_ROW_SPAN)
    fid_threshold(const unsigned char* grey, const u32* sums, unsigned char* mask, u32 width, u32 height, int r,
                  u32 half, u32 area, int idelta) {
    __shared__ u32 row[FID_ROW_SPAN + 2 * FID_ROW_REACH];
    (void)height;
    u32 spans = (width + FID_ROW_SPAN - 1) / FID_ROW_SPAN;
    u64 y = blockIdx.x / spans;
    long long x0 = (long long)(blockIdx.x % spans) * FID_ROW_SPAN, w = (long long)width;
    const u32* line = sums + y * width;
    for (long long k = threadIdx.x; k < FID_ROW_SPAN + 2 * (long long)r; k += blockDim.x) {
        long long x = x0 - r + k;
        x = x < 0 ? 0 : (x >= w ? w - 1 : x);
        row[k] = line[x];
    }
    __syncthreads();
    long long x = x0 + threadIdx.x;
    if (x >= w) return;
    u32 s = 0;
    for (int k = 0; k <= 2 * r; k++) s += row[threadIdx.x + k];
    u64 i = y * width + (u64)x;
    int level = (int)grey[i] + idelta;
    level = level < 0 ? 0 : (level > 256 ? 256 : level);
    mask[i] = (s + half < (u32)level * area) ? 0 : 1;
}

// ---------------------------------------------------------------------------------------------
// Candidates (fiducial::candidates::QuadFinder::find), one warp per component.
//
// An outline trace is sequential by nature and its length is the kernel's tail (a large
// component's outline has thousands of points; those go to fid_long_outlines): each step reads one byte of neighbour codes
// (fid_neighbours) instead of eight labels, and a warp takes each component so that all lanes
// share the scans of the quad fit (farthest points, Douglas–Peucker's splits). Every lane holds
// the same trace state; the scans' maxima are combined with the CPU's tie rules, so the result
// is the CPU's exactly.

#define FID_FULL_WARP 0xffffffffu

// The eight neighbours, clockwise on screen from east (candidates::STEPS), packed two bits
// each as offset + 1: no table lookup with a different index in every lane.
#define FID_DX_PACKED 0x901au  // dx + 1 for d = 0…7: 2 2 1 0 0 0 1 2
#define FID_DY_PACKED 0x01a9u  // dy + 1 for d = 0…7: 1 2 2 2 1 0 0 0
__device__ __forceinline__ int fid_dx(u32 d) { return (int)((FID_DX_PACKED >> (2 * d)) & 3u) - 1; }
__device__ __forceinline__ int fid_dy(u32 d) { return (int)((FID_DY_PACKED >> (2 * d)) & 3u) - 1; }

// candidates::OUTLINE_POINTS_PER_BOX and OUTLINE_SLACK: the longest outline a marker's border
// in a W × H box can have is 4 · (W + H − 2) + 8 points.
#define FID_OUTLINE_POINTS_PER_BOX 4
#define FID_OUTLINE_SLACK 8

// Outlines whose limit passes this many points are traced by seeds in fid_long_outlines
// (seeded_trace::SEEDED_FROM); shorter ones by a warp's walk in fid_candidates.
#define FID_SEEDED_FROM 512

// Most corners Douglas–Peucker may keep before the outline is no quad (approximate_quad's 8).
#define FID_MAX_CORNERS 8

// A candidate quad: corners x0 y0 … x3 y3 (clockwise on screen), the window it was found at
// and its component's label (the label order is the CPU's order of components). Mirrored by
// `GpuCandidate` in src/fiducial/gpu/buffers.rs.
struct FidCandidate {
    double quad[8];
    u32 window;
    u32 label;
};

// A component whose outline fid_long_outlines traces: its room in the pool (`room` points at
// `at`), its trace limit, window and label, box, and first pixel (x on row `top`). Mirrored by
// `GpuLongOutline` in src/fiducial/gpu/buffers.rs.
struct FidLongOutline {
    u64 at;
    u64 room;
    u64 limit;
    u32 window;
    u32 label;
    u32 left;
    u32 top;
    u32 width;
    u32 height;
    u32 start;
    u32 pad;
};

__device__ __forceinline__ bool fid_is(const u32* labels, int w, int h, u32 label, int x, int y) {
    return x >= 0 && y >= 0 && x < w && y < h && labels[(u64)y * w + x] == label;
}

// Each pixel's neighbours of its own label, a bit per direction (bit d: neighbour d inside the
// image and labelled as the pixel; 0 for the background), for every window (along y): a trace
// step then reads one byte, and consecutive steps read nearby bytes.
extern "C" __global__ void fid_neighbours(const u32* labels, u64 label_stride, unsigned char* codes,
                                          u64 code_stride, u32 width, u32 height) {
    labels += (u64)blockIdx.y * label_stride;
    codes += (u64)blockIdx.y * code_stride;
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (u64)width * height) return;
    int y = (int)(i / width), x = (int)(i % width);
    u32 label = labels[i];
    u32 code = 0;
    if (label != 0) {
        for (u32 d = 0; d < 8; d++) {
            if (fid_is(labels, (int)width, (int)height, label, x + fid_dx(d), y + fid_dy(d))) code |= 1u << d;
        }
    }
    codes[i] = (unsigned char)code;
}

// The neighbour codes of a 7×7 tile around (cx, cy), held by a warp: lane k has tile places k
// and k + 32 (place p: column p % 7 − 3, row p / 7 − 3); places outside the image read 0.
struct FidTile {
    int cx, cy;
    u32 low, high;
};

__device__ __forceinline__ u32 fid_tile_code(const unsigned char* codes, int w, int h, int cx, int cy, u32 place) {
    int x = cx + (int)(place % 7) - 3, y = cy + (int)(place / 7) - 3;
    if (place >= 49 || x < 0 || y < 0 || x >= w || y >= h) return 0;
    return codes[(u64)y * w + x];
}

__device__ __forceinline__ void fid_load_tile(FidTile* t, const unsigned char* codes, int w, int h, int cx, int cy) {
    u32 lane = threadIdx.x & 31;
    t->cx = cx;
    t->cy = cy;
    t->low = fid_tile_code(codes, w, h, cx, cy, lane);
    t->high = fid_tile_code(codes, w, h, cx, cy, lane + 32);
}

// The code of pixel (x, y), from the tile when it lies within, else from a tile loaded around it.
// Every lane gets it.
__device__ __forceinline__ u32 fid_code_at(FidTile* t, const unsigned char* codes, int w, int h, int x, int y) {
    int dx = x - t->cx, dy = y - t->cy;
    if (dx < -3 || dx > 3 || dy < -3 || dy > 3) {
        fid_load_tile(t, codes, w, h, x, y);
        dx = 0;
        dy = 0;
    }
    int place = (dy + 3) * 7 + dx + 3;
    u32 low = __shfl_sync(FID_FULL_WARP, t->low, place & 31);
    u32 high = __shfl_sync(FID_FULL_WARP, t->high, place & 31);
    return place < 32 ? low : high;
}

// candidates::trace_outer_boundary from (sx, sy), a pixel of the component: Moore-neighbour
// tracing on the neighbour codes. The first neighbour of the pixel's label clockwise after the
// backtrack is the first set bit of the code turned to start there. After a step in direction
// f the backtrack (the neighbour checked just before, seen from the new pixel) is direction
// (f rounded down to even) + 6, what candidates::direction gives for that offset. A step needs
// the code of the pixel it stands on, which depends on the step before: the warp loads the codes
// of a 7×7 tile at once and takes at least four steps from it before the next load, instead of
// waiting for one memory read a step. Every lane runs the same steps; lane 0 writes the points
// into `out` while fewer than `room` are written (the start is written again before it is
// dropped). The number of points goes to *len; false after `limit` points.
__device__ bool fid_trace(const unsigned char* codes, int w, int h, int sx, int sy, u64 limit, int2* out,
                          u64 room, u64* len) {
    u32 lane = threadIdx.x & 31;
    u64 n = 1;
    if (lane == 0 && room > 0) out[0] = make_int2(sx, sy);
    int px = sx, py = sy;
    u32 back = 4;
    bool moved = false;
    int fx = 0, fy = 0;
    FidTile tile;
    fid_load_tile(&tile, codes, w, h, sx, sy);
    while (n <= limit) {
        u32 code = fid_code_at(&tile, codes, w, h, px, py);
        u32 first = (back + 1) % 8;
        u32 turned = ((code >> first) | (code << (8 - first))) & 0xffu;
        if (turned == 0) {  // a single pixel
            *len = n;
            return true;
        }
        u32 found = (first + (u32)__ffs(turned) - 1) % 8;
        int qx = px + fid_dx(found), qy = py + fid_dy(found);
        if (px == sx && py == sy) {
            if (!moved) {
                moved = true;
                fx = qx;
                fy = qy;
            } else if (fx == qx && fy == qy) {
                *len = n - 1;  // the start, reached again
                return true;
            }
        }
        back = ((found & ~1u) + 6) % 8;
        px = qx;
        py = qy;
        if (lane == 0 && n < room) out[n] = make_int2(px, py);
        n++;
    }
    *len = n;
    return false;
}

// Point i of a closed outline of n points, for i < 2n (a chord's range may run past the start
// once): a subtraction rather than a 64-bit remainder.
__device__ __forceinline__ double2 fid_pt(const int2* c, u64 n, u64 i) {
    int2 p = c[i < n ? i : i - n];
    return make_double2((double)p.x, (double)p.y);
}

__device__ __forceinline__ double fid_dist2(double2 a, double2 b) {
    double dx = a.x - b.x, dy = a.y - b.y;
    return dx * dx + dy * dy;
}

// f64::hypot at the precision that matters here: exact for whole-pixel offsets (outlines),
// within an ulp or two otherwise (sub-pixel steps, far below the corners' 1e-3 px agreement).
__device__ __forceinline__ double fid_hypot(double x, double y) { return sqrt(x * x + y * y); }

// Iterator::max_by's choice with f64::total_cmp: `x` replaces the best so far when it is not
// smaller (the last maximum wins); NaN is larger than every number.
__device__ __forceinline__ bool fid_not_smaller(double x, double best) {
    if (isnan(x)) return true;
    if (isnan(best)) return false;
    return x >= best;
}

// Whether (x, i) wins over (best, at) in a scan where the later of equal values wins and NaN
// beats every number: the order of fid_not_smaller's scan, for combining lanes' partial scans.
__device__ __forceinline__ bool fid_later_max(double x, u64 i, double best, u64 at) {
    if (isnan(x) != isnan(best)) return isnan(x);
    if (!isnan(x) && x != best) return x > best;
    return i > at;
}

// The threads that fit one outline's quad together: a warp (fid_candidates' short outlines) or
// a whole block (fid_long_outlines). Each thread scans every `size`-th point from its `rank`;
// their partial results are combined and every thread gets the same answer, so every thread
// takes the same steps and the block's barriers are reached by all. A block combines its
// warps' partials in shared memory (`partials`, two rounds of 32 warps used in turn, so one
// barrier a combination suffices); a warp has none.
struct FidPartial {
    double best;
    u64 at;
    int have;
};

struct FidGroup {
    u32 rank, size;
    FidPartial (*partials)[32];
    u32 round;
};

__device__ __forceinline__ FidGroup fid_warp_group() {
    FidGroup g = {threadIdx.x & 31, 32, nullptr, 0};
    return g;
}

__device__ __forceinline__ FidGroup fid_block_group(FidPartial (*partials)[32]) {
    FidGroup g = {threadIdx.x, blockDim.x, partials, 0};
    return g;
}

// Whether (x, i) wins over (best, at): with `first_of_equal` the larger value, the first of
// equals (a `d > best` scan), else fid_later_max's order; a side without a value never wins.
__device__ __forceinline__ bool fid_wins(double x, u64 i, bool x_has, double best, u64 at, bool has,
                                         bool first_of_equal) {
    if (!x_has) return false;
    if (!has) return true;
    if (first_of_equal) return x > best || (x == best && i < at);
    return fid_later_max(x, i, best, at);
}

// The group's winner of every thread's (best, at, have), left in every thread's.
__device__ void fid_group_max(FidGroup* g, double* best, u64* at, bool* have, bool first_of_equal) {
    for (int offset = 16; offset > 0; offset /= 2) {
        double other = __shfl_xor_sync(FID_FULL_WARP, *best, offset);
        u64 other_at = __shfl_xor_sync(FID_FULL_WARP, *at, offset);
        bool other_has = __shfl_xor_sync(FID_FULL_WARP, (int)*have, offset) != 0;
        if (fid_wins(other, other_at, other_has, *best, *at, *have, first_of_equal)) {
            *best = other;
            *at = other_at;
            *have = true;
        }
    }
    if (g->partials == nullptr) return;
    // The round's buffer was last read two combinations ago, before the last one's barrier.
    FidPartial* part = g->partials[g->round & 1];
    g->round++;
    if ((g->rank & 31) == 0) {
        FidPartial p = {*best, *at, (int)*have};
        part[g->rank / 32] = p;
    }
    __syncthreads();
    u32 warps = (g->size + 31) / 32;
    *have = false;
    for (u32 k = 0; k < warps; k++) {
        FidPartial p = part[k];
        if (fid_wins(p.best, p.at, p.have != 0, *best, *at, *have, first_of_equal)) {
            *best = p.best;
            *at = p.at;
            *have = true;
        }
    }
}

// approximate_quad's farthest(from): the last contour index farthest from point `from`.
__device__ u64 fid_farthest(FidGroup* g, const int2* c, u64 n, u64 from) {
    double2 f = fid_pt(c, n, from);
    bool have = false;
    double best = 0.0;
    u64 at = 0;
    for (u64 i = g->rank; i < n; i += g->size) {
        double d = fid_dist2(fid_pt(c, n, i), f);
        if (!have || fid_not_smaller(d, best)) {
            best = d;
            at = i;
            have = true;
        }
    }
    fid_group_max(g, &best, &at, &have, false);
    return at;
}

// The first point strictly farthest from the chord p–q among contour indices (from, to), its
// distance in *best_out (−1 when the range is empty). The points are whole pixels, so the
// cross products are exact integers far below 2^52 and dividing them all by the chord's length
// keeps their order and their ties: the scan compares the products and divides the winner only,
// the same distance the CPU's `d > best` scan finds.
__device__ u64 fid_farthest_from_chord(FidGroup* g, const int2* c, u64 n, u64 from, u64 to, double* best_out) {
    double2 p = fid_pt(c, n, from), q = fid_pt(c, n, to);
    double dx = q.x - p.x, dy = q.y - p.y;
    double len = fmax(fid_hypot(dx, dy), 1e-12);
    double best = -1.0;
    u64 at = from;
    for (u64 i = from + 1 + g->rank; i < to; i += g->size) {
        double2 r = fid_pt(c, n, i);
        double cross = fabs((r.x - p.x) * dy - (r.y - p.y) * dx);
        if (cross > best) {
            best = cross;
            at = i;
        }
    }
    // The first of equal maxima wins.
    bool have = true;
    fid_group_max(g, &best, &at, &have, true);
    *best_out = best < 0.0 ? -1.0 : best / len;
    return at;
}

// One step of candidates::simplify between contour indices from and to: stage 0 before the
// split is found, 1 while the left part runs (its split point not yet kept), 2 while the right
// part runs.
struct FidSplit {
    u64 from, to, at;
    int stage;
};

// candidates::simplify without recursion: the same splits, the kept points in the same order.
// A split whose point is still to be kept always keeps it unless the whole outline fails
// first, so once the kept and the promised points pass `max` the answer is already "no quad":
// that bounds the depth at 2·max + 1 steps. Every thread of the group runs the same steps.
__device__ bool fid_simplify(FidGroup* g, const int2* c, u64 n, u64 from, u64 to, double epsilon, u64* out, int* kept,
                             int max) {
    FidSplit stack[2 * FID_MAX_CORNERS + 4];
    int depth = 1, promised = 0;
    stack[0].from = from;
    stack[0].to = to;
    stack[0].at = from;
    stack[0].stage = 0;
    while (depth > 0) {
        FidSplit* f = &stack[depth - 1];
        if (f->stage == 0) {
            if (f->to <= f->from + 1) {
                depth--;
                continue;
            }
            double best;
            u64 at = fid_farthest_from_chord(g, c, n, f->from, f->to, &best);
            if (best <= epsilon) {
                depth--;
                continue;
            }
            f->at = at;
            f->stage = 1;
            promised++;
            if (*kept + promised > max || depth >= 2 * FID_MAX_CORNERS + 4) return false;
            FidSplit left = {f->from, at, f->from, 0};
            stack[depth++] = left;
        } else if (f->stage == 1) {
            promised--;
            out[(*kept)++] = f->at;
            if (*kept > max) return false;
            f->stage = 2;
            if (depth >= 2 * FID_MAX_CORNERS + 4) return false;
            FidSplit right = {f->at, f->to, f->at, 0};
            stack[depth++] = right;
        } else {
            depth--;
        }
    }
    return true;
}

// candidates::approximate_quad: the closed outline as a convex quadrilateral, clockwise on
// screen, when Douglas–Peucker at `epsilon` keeps four corners.
__device__ bool fid_approximate_quad(FidGroup* g, const int2* c, u64 n, double epsilon, double2 quad[4]) {
    if (n < 8) return false;
    u64 a = fid_farthest(g, c, n, 0);
    u64 b = fid_farthest(g, c, n, a);
    if (a == b) return false;
    if (b < a) {
        u64 t = a;
        a = b;
        b = t;
    }
    u64 corners[FID_MAX_CORNERS + 2];
    int kept = 0;
    corners[kept++] = a;
    if (!fid_simplify(g, c, n, a, b, epsilon, corners, &kept, FID_MAX_CORNERS)) return false;
    corners[kept++] = b;
    if (!fid_simplify(g, c, n, b, a + n, epsilon, corners, &kept, FID_MAX_CORNERS)) return false;
    if (kept != 4) return false;
    for (int k = 0; k < 4; k++) quad[k] = fid_pt(c, n, corners[k]);
    double turns[4];
    for (int k = 0; k < 4; k++) {
        double2 p = quad[k], q = quad[(k + 1) % 4], r = quad[(k + 2) % 4];
        turns[k] = (q.x - p.x) * (r.y - q.y) - (q.y - p.y) * (r.x - q.x);
    }
    bool all_positive = turns[0] > 0.0 && turns[1] > 0.0 && turns[2] > 0.0 && turns[3] > 0.0;
    bool all_negative = turns[0] < 0.0 && turns[1] < 0.0 && turns[2] < 0.0 && turns[3] < 0.0;
    if (!all_positive && !all_negative) return false;
    if (turns[0] < 0.0) {
        double2 t = quad[1];
        quad[1] = quad[3];
        quad[3] = t;
    }
    return true;
}

// The tail of QuadFinder::find for a traced outline of `len` points (its length already
// checked): candidate_quad's fit and checks, and the quad appended to `out` at counters[1] (none
// written past `out_capacity`). Every thread of the group calls it; the first writes.
__device__ void fid_keep_quad(FidGroup* g, const int2* contour, u64 len, double accuracy_rate,
                              double min_corner_rate, double border, u32 width, u32 height, u32 window, u32 label,
                              FidCandidate* out, u64 out_capacity, u64* counters) {
    double n = (double)len;
    double2 quad[4];
    if (!fid_approximate_quad(g, contour, len, n * accuracy_rate, quad)) return;
    double min_side = 1.7976931348623157e308;
    for (int k = 0; k < 4; k++) min_side = fmin(min_side, fid_dist2(quad[k], quad[(k + 1) % 4]));
    double shortest = n * min_corner_rate;
    if (min_side < shortest * shortest) return;
    for (int k = 0; k < 4; k++) {
        double x = quad[k].x, y = quad[k].y;
        if (!(x >= border && y >= border && x <= (double)width - 1.0 - border &&
              y <= (double)height - 1.0 - border))
            return;
    }
    if (g->rank != 0) return;
    u64 slot = atomicAdd(&counters[1], 1ull);
    if (slot >= out_capacity) return;
    FidCandidate* c = out + slot;
    for (int k = 0; k < 4; k++) {
        c->quad[2 * k] = quad[k].x;
        c->quad[2 * k + 1] = quad[k].y;
    }
    c->window = window;
    c->label = label;
}

// The candidate quads of every window at once (the windows' outline traces overlap): along y
// the window, along x warp l − 1 takes the window's component l (stats row l of OpenCV's
// layout: left, top, width, height, area). `windows` holds per window its stats rows' device
// address and its component count; `labels` the windows' label images one after the other,
// `label_stride` values apart, `codes` their neighbour codes `code_stride` apart.
// A component that passes its statistics gets room in `pool` for as many points as its
// outline can have (a pixel is passed at most four times, and a trace stops after `limit`),
// taken with one atomic, and is traced once into it. Past `pool_capacity` nothing is written
// and the host, which reads counters[0], runs the kernel again with room enough. Quads go to
// `out` at counters[1] (the same: none written past `out_capacity`). A component whose trace
// may pass FID_SEEDED_FROM points is listed in `longs` at counters[2] instead (none written
// past `long_capacity`) for fid_long_outlines.
extern "C" __global__ void fid_candidates(const u32* labels, u64 label_stride, const unsigned char* codes,
                                          u64 code_stride, const u64* windows, u32 width, u32 height,
                                          double min_perimeter, double max_perimeter, u64 limit,
                                          double accuracy_rate, double min_corner_rate, double border, int2* pool,
                                          u64 pool_capacity, FidCandidate* out, u64 out_capacity,
                                          FidLongOutline* longs, u64 long_capacity, u64* counters) {
    u32 window = blockIdx.y;
    u64 count = windows[2 * window + 1];
    const int* stats = (const int*)windows[2 * window];
    labels += (u64)window * label_stride;
    codes += (u64)window * code_stride;
    u64 l = ((u64)blockIdx.x * blockDim.x + threadIdx.x) / 32 + 1;
    u32 lane = threadIdx.x & 31;
    if (l > count) return;
    const int* s = stats + 5 * l;
    u32 left = (u32)s[0], top = (u32)s[1], sw = (u32)s[2], sh = (u32)s[3];
    u64 area = (u64)(u32)s[4];
    // A square of side a has a boundary of about 4a and a box of a to a·√2 a side.
    double box_perimeter = 2.0 * (double)(sw + sh);
    if (box_perimeter < min_perimeter || box_perimeter > 1.5 * max_perimeter) return;
    if (sw < 4 || sh < 4) return;
    // OutlineLimits::trace_limit: no marker border in this box has a longer outline.
    u64 in_box = (u64)FID_OUTLINE_POINTS_PER_BOX * ((u64)sw + sh - 2) + FID_OUTLINE_SLACK;
    if (in_box < limit) limit = in_box;
    // The component's first pixel: the first of its label on its top row.
    const u32* row = labels + (u64)top * width;
    u32 end = left + sw < width ? left + sw : width;
    int start = -1;
    for (u32 base = left; base < end; base += 32) {
        u32 x = base + lane;
        u32 hits = __ballot_sync(FID_FULL_WARP, x < end && row[x] == (u32)l);
        if (hits) {
            start = (int)(base + (u32)__ffs(hits) - 1);
            break;
        }
    }
    if (start < 0) return;
    // Room for the outline and its start written again.
    u64 room = 4 * area < limit ? 4 * area + 2 : limit + 2;
    u64 at = 0;
    if (lane == 0) at = atomicAdd(&counters[0], room);
    at = __shfl_sync(FID_FULL_WARP, at, 0);
    if (at + room > pool_capacity) return;
    if (limit > FID_SEEDED_FROM) {
        // A long outline: fid_long_outlines traces it by seeds, a block for it.
        if (lane != 0) return;
        u64 slot = atomicAdd(&counters[2], 1ull);
        if (slot >= long_capacity) return;
        FidLongOutline o = {at, room, limit, window, (u32)l, left, top, sw, sh, (u32)start, 0};
        longs[slot] = o;
        return;
    }
    int2* contour = pool + at;
    u64 len = 0;
    if (!fid_trace(codes, (int)width, (int)height, start, (int)top, limit, contour, room, &len)) return;
    double n = (double)len;
    if (n < min_perimeter || n > max_perimeter || len < 8) return;
    if (len + 1 > room) {
        // More visits than the bound allows: never expected; trace again into room enough.
        u64 more = len + 1;
        if (lane == 0) at = atomicAdd(&counters[0], more);
        at = __shfl_sync(FID_FULL_WARP, at, 0);
        if (at + more > pool_capacity) return;
        contour = pool + at;
        fid_trace(codes, (int)width, (int)height, start, (int)top, limit, contour, more, &len);
    }
    __syncwarp();
    FidGroup warp = fid_warp_group();
    fid_keep_quad(&warp, contour, len, accuracy_rate, min_corner_rate, border, width, height, window, (u32)l, out,
                  out_capacity, counters);
}

// ---------------------------------------------------------------------------------------------
// Long outlines by seeds (docs/algorithms.md, "Outline limits"; the CPU proof is
// candidates::seeded_trace). A trace state is a pixel and its backtrack, and the next state
// depends on nothing else: from any state the rest of the trace is fixed. Seed states are cut
// out of the box: on every 2^shift-th row each pixel of the label whose west or east neighbour
// is not the label, on every such column each whose north or south neighbour is not (the ends
// of the label's runs on the line), each with every even backtrack that points outside the
// label. At most FID_SEED_SLOTS seed pixels: with more the lines thin (shift + 1) until they fit,
// and where even the first row and column have more, each line keeps only its two extremes. A
// thread per seed state walks from it until it stands on a seed state (a binary search in the
// ordered seeds of the line it stands on), closes the outline (Jacob's rule) or has taken `limit` steps; then one thread
// chains the walks from the start state (slot 0: the top row's leftmost pixel, backtrack 4): the
// start's walk is the trace up to its first seed, and from there the trace is that seed's walk,
// so the chain is the sequential trace and seeds off the outline are never reached. Each
// chained walk then writes its own points at its offset in the chain.

// Rows and columns with seeds, at most this many each way (seeded_trace::SEED_LINES).
#define FID_SEED_LINES 64
// Seed pixels an outline may have at most (seeded_trace::SEED_SLOTS).
#define FID_SEED_SLOTS 256
#define FID_SEED_STATES (4 * FID_SEED_SLOTS)
// Where the trailing zeros of a seed row's index (at the first spacing) are counted up to: a
// row is on the lines taken at step 2^z when its index has z trailing zeros or more, and a box
// has at most FID_SEED_LINES = 2^6 rows, so row 0 stands for all of 6 and more.
#define FID_ROW_LEVELS 7
// Seed lines (rows, then columns, at the first spacing) each lane of fid_seeds_of's warp 0 sums.
#define FID_LINES_PER_LANE (2 * FID_SEED_LINES / 32)
// Threads of fid_long_outlines' block: one per seed state.
#define FID_LONG_THREADS FID_SEED_STATES
// What a walk stopped on, besides a seed state (0 …  FID_SEED_STATES − 1).
#define FID_STOP_END -1
#define FID_STOP_LIMIT -2
#define FID_NO_WALK -3

struct FidSeeds {
    // The seed pixels in seeded_trace::Seeds' order, each as a key (fid_seed_key): rows before
    // columns, then the line, then the position along it; `slots` of them.
    u64 key[FID_SEED_SLOTS];
    u32 slots;
    // Per line at the first spacing (rows 0 … FID_SEED_LINES − 1, then columns): its run ends,
    // the first and last of them, and where its seeds start among the slots.
    u32 ends[2 * FID_SEED_LINES];
    int first[2 * FID_SEED_LINES], last[2 * FID_SEED_LINES];
    u32 line_at[2 * FID_SEED_LINES];
    // Per column at the first spacing, its run ends that also end a run on a row at the first
    // spacing, by that row's level (FID_ROW_LEVELS): the ones a taken row has.
    u32 on_rows[FID_SEED_LINES * FID_ROW_LEVELS];
    // The first spacing's shift, the lines taken (every `step`-th at it), and whether only
    // their extremes.
    u32 base;
    u32 step;
    int extremes;
    // Per seed state (slot · 4 + backtrack / 2): what its walk stopped on, its steps, and its
    // offset in the chain (−1: not chained).
    int stop[FID_SEED_STATES];
    u32 steps[FID_SEED_STATES];
    int offset[FID_SEED_STATES];
    // The outline being traced, and what the chain found.
    FidLongOutline o;
    u64 len, point_at;
    int keep;
};

// A seed's key: rows (kind 0, line y, position x) before columns (kind 1, line x, position y).
__device__ __forceinline__ u64 fid_seed_key(u32 column, int line, int along) {
    return ((u64)column << 62) | ((u64)(u32)line << 31) | (u64)(u32)along;
}

// The pixel of seed slot `slot`.
__device__ __forceinline__ void fid_seed_pixel(const FidSeeds* s, int slot, int* x, int* y) {
    u64 key = s->key[slot];
    int line = (int)((key >> 31) & 0x7fffffffu), along = (int)(key & 0x7fffffffu);
    bool column = (key >> 62) != 0;
    *x = column ? line : along;
    *y = column ? along : line;
}

// The slot whose key is `key`, or −1: a binary search, only among the slots of seed line
// `line` (at the first spacing: rows 0 … FID_SEED_LINES − 1, then columns), from line_at[line]
// to the next line's: a walk asks at every step it takes on a seed line, and a line has a few
// seeds of the outline's hundreds.
__device__ __forceinline__ int fid_seed_find(const FidSeeds* s, u32 line, u64 key) {
    if (line >= 2 * FID_SEED_LINES) return -1;
    int slots = (int)s->slots;
    int lo = (int)s->line_at[line], end = line + 1 < 2 * FID_SEED_LINES ? (int)s->line_at[line + 1] : slots;
    lo = lo < slots ? lo : slots;
    end = end < slots ? end : slots;
    int hi = end;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (s->key[mid] < key) lo = mid + 1;
        else hi = mid;
    }
    return lo < end && s->key[lo] == key ? lo : -1;
}

// seeded_trace::Seeds::slot_of: the slot whose pixel is (x, y), its row's when it has one, or −1.
__device__ __forceinline__ int fid_seed_slot(const FidSeeds* s, u32 shift, int x, int y) {
    int u = x - (int)s->o.left, v = y - (int)s->o.top;
    int mask = (1 << shift) - 1;
    if (u < 0 || v < 0) return -1;
    int slot = -1;
    if ((v & mask) == 0 && ((u32)v >> s->base) < FID_SEED_LINES) {
        slot = fid_seed_find(s, (u32)v >> s->base, fid_seed_key(0, y, x));
    }
    if (slot < 0 && (u & mask) == 0) {
        u32 column = (u32)u >> s->base;
        if (column < FID_SEED_LINES) slot = fid_seed_find(s, FID_SEED_LINES + column, fid_seed_key(1, x, y));
    }
    return slot;
}

// Which lines the pixel (x, y) ends a run of `label` on, from its neighbour code (fid_neighbours):
// bit 0 its row (its west or east neighbour is not the label, bits 4 and 0 of the code), bit 1
// its column (north or south, bits 6 and 2); 0 when it is not of the label. The label is read only
// where the code says a run ends: a component in a box of 4 × 4 or more has no pixel without a
// neighbour of its label, so a zero code is never the label's.
__device__ __forceinline__ u32 fid_code_ends(u32 code) {
    if (code == 0) return 0;
    return ((code & 0x11u) != 0x11u ? 1u : 0u) | ((code & 0x44u) != 0x44u ? 2u : 0u);
}

// Pixels each thread of fid_seeds_of's count (and each lane of its placing) reads at once, their
// reads in flight together.
#define FID_COUNT_BATCH 4

// In the extremes' case (the lines at the first spacing, only each one's first and last run
// end): whether (x, y), a column's extreme, is one of its row's, so that the row has its slot.
__device__ __forceinline__ bool fid_extreme_of_row(const FidSeeds* s, u32 base, u32 rows, int x, int y) {
    u32 v = (u32)(y - (int)s->o.top);
    if ((v & ((1u << base) - 1)) != 0 || (v >> base) >= rows) return false;
    return x == s->first[v >> base] || x == s->last[v >> base];
}

// Seeds::of: the seed pixels of the outline in s->o into s->key, by the whole block, each pixel
// of a seed line read once to count and once more, on the lines taken only, to place.
// Counting: the block takes the pixels of every line at the first spacing at once (a row's
// pixels side by side, a column's pixel next to the other columns' on the same row), and adds
// each run end to its line's count, first and last. A column's run end that also ends a run on a
// seed row is that row's seed when the row is taken; it is counted by the row's level (the
// trailing zeros of its index), so that every spacing's seed count is known without reading again.
// Placing: a warp a line taken, 32 pixels at a time, a ballot ordering the seeds within a chunk.
__device__ void fid_seeds_of(FidSeeds* s, const unsigned char* codes, const u32* lab, u32 width, u32* shift_out) {
    u32 t = threadIdx.x, lane = t % 32, warp = t / 32, warps = blockDim.x / 32, threads = blockDim.x;
    u32 left = s->o.left, top = s->o.top, bw = s->o.width, bh = s->o.height, label = s->o.label;
    u32 longer = bw > bh ? bw : bh;
    u32 spacing = (longer + FID_SEED_LINES - 1) / FID_SEED_LINES;
    u32 base = 0;
    while ((1u << base) < spacing) base++;
    u32 rows = ((bh - 1) >> base) + 1, cols = ((bw - 1) >> base) + 1;
    for (u32 i = t; i < 2 * FID_SEED_LINES; i += threads) {
        s->ends[i] = 0;
        s->first[i] = 0x7fffffff;
        s->last[i] = -1;
    }
    for (u32 i = t; i < FID_SEED_LINES * FID_ROW_LEVELS; i += threads) s->on_rows[i] = 0;
    __syncthreads();
    u32 row_pixels = rows * bw, pixels = row_pixels + cols * bh;
    // Item k: pixel k % bw of row line k / bw, then pixel (k − row_pixels) / cols of column line
    // (k − row_pixels) % cols.
    auto pixel_of = [&](u32 k, int* x, int* y) {
        bool column = k >= row_pixels;
        u32 c = column ? (k - row_pixels) % cols : 0, v = column ? (k - row_pixels) / cols : 0;
        u32 r = column ? 0 : k / bw, u = column ? 0 : k % bw;
        *x = column ? (int)(left + (c << base)) : (int)(left + u);
        *y = column ? (int)(top + v) : (int)(top + (r << base));
    };
    for (u32 k0 = t; k0 < pixels; k0 += FID_COUNT_BATCH * threads) {
        u32 code[FID_COUNT_BATCH];
#pragma unroll
        for (u32 b = 0; b < FID_COUNT_BATCH; b++) {
            u32 k = k0 + b * threads;
            int x = 0, y = 0;
            if (k < pixels) pixel_of(k, &x, &y);
            code[b] = k < pixels ? codes[(u64)y * width + x] : 0;
        }
#pragma unroll
        for (u32 b = 0; b < FID_COUNT_BATCH; b++) {
            u32 k = k0 + b * threads;
            bool column = k >= row_pixels;
            u32 ends = fid_code_ends(code[b]);
            if ((ends & (column ? 2u : 1u)) == 0) continue;
            int x, y;
            pixel_of(k, &x, &y);
            if (lab[(u64)y * width + x] != label) continue;
            u32 c = (u32)(x - (int)left) >> base, v = (u32)(y - (int)top);
            u32 i = column ? FID_SEED_LINES + c : v >> base;
            int along = column ? y : x;
            atomicAdd(&s->ends[i], 1u);
            atomicMin(&s->first[i], along);
            atomicMax(&s->last[i], along);
            if (column && (ends & 1u) && (v & ((1u << base) - 1)) == 0) {
                u32 row = v >> base;
                u32 level = row == 0 ? FID_ROW_LEVELS - 1 : (u32)__ffs(row) - 1;
                if (level > FID_ROW_LEVELS - 1) level = FID_ROW_LEVELS - 1;
                atomicAdd(&s->on_rows[c * FID_ROW_LEVELS + level], 1u);
            }
        }
    }
    __syncthreads();
    // The spacing: the first that leaves at most FID_SEED_SLOTS ends (counted on rows and
    // columns both), else the first one's extremes. Then each line's seeds (a column's run ends
    // less those its taken rows have) and their prefix sum, rows before columns, each in order.
    // Warp 0, a lane FID_LINES_PER_LANE lines in a row (the sums are of whole numbers: their
    // order does not matter).
    if (warp == 0) {
        for (u32 j = 0; j < FID_LINES_PER_LANE; j++) {
            u32 i = lane * FID_LINES_PER_LANE + j;
            if (s->ends[i] == 0) s->first[i] = -1;
        }
        __syncwarp();
        u32 step = 1, shift = base;
        bool extremes = true;
        for (;;) {
            u32 total = 0;
            for (u32 j = 0; j < FID_LINES_PER_LANE; j++) {
                u32 i = lane * FID_LINES_PER_LANE + j;
                if ((i % FID_SEED_LINES) % step == 0) total += s->ends[i];
            }
            for (int offset = 16; offset > 0; offset /= 2) total += __shfl_xor_sync(FID_FULL_WARP, total, offset);
            if (total <= FID_SEED_SLOTS) {
                extremes = false;
                break;
            }
            if ((1u << shift) >= longer) break;
            shift++;
            step *= 2;
        }
        if (extremes) step = 1;
        u32 level = extremes ? 0 : shift - base;
        u32 seeds[FID_LINES_PER_LANE], mine = 0;
        for (u32 j = 0; j < FID_LINES_PER_LANE; j++) {
            u32 i = lane * FID_LINES_PER_LANE + j;
            bool column = i >= FID_SEED_LINES;
            u32 k = column ? i - FID_SEED_LINES : i;
            u32 n = 0;
            if (k < (column ? cols : rows) && k % step == 0) {
                if (extremes) {
                    int ends[2] = {s->first[i], s->last[i]};
                    u32 two = s->ends[i] > 1 ? 2 : 1;
                    for (u32 e = 0; s->ends[i] > 0 && e < two; e++) {
                        n += !column || !fid_extreme_of_row(s, base, rows, (int)(left + (k << base)), ends[e]);
                    }
                } else {
                    n = s->ends[i];
                    for (u32 l = level; column && l < FID_ROW_LEVELS; l++) n -= s->on_rows[k * FID_ROW_LEVELS + l];
                }
            }
            seeds[j] = n;
            mine += n;
        }
        // The lanes' inclusive prefix sum, then each line's start.
        u32 sum = mine;
        for (int offset = 1; offset < 32; offset *= 2) {
            u32 before = __shfl_up_sync(FID_FULL_WARP, sum, offset);
            if ((int)lane >= offset) sum += before;
        }
        u32 at = sum - mine;
        for (u32 j = 0; j < FID_LINES_PER_LANE; j++) {
            s->line_at[lane * FID_LINES_PER_LANE + j] = at;
            at += seeds[j];
        }
        if (lane == 31) {
            s->step = step;
            s->base = base;
            s->extremes = extremes ? 1 : 0;
            s->slots = sum < FID_SEED_SLOTS ? sum : FID_SEED_SLOTS;
        }
    }
    __syncthreads();
    u32 step = s->step, shift = base;
    while ((1u << (shift - base)) < step) shift++;
    bool extremes = s->extremes != 0;
    for (u32 i = warp; i < 2 * FID_SEED_LINES; i += warps) {
        bool column = i >= FID_SEED_LINES;
        u32 k = column ? i - FID_SEED_LINES : i;
        if (k >= (column ? cols : rows) || k % step != 0 || s->ends[i] == 0) continue;
        int line = column ? (int)(left + (k << base)) : (int)(top + (k << base));
        int first = s->first[i], last = s->last[i];
        u32 at = s->line_at[i];
        if (extremes) {
            // Only the line's extremes: nothing to read.
            if (lane == 0) {
                int ends[2] = {first, last};
                u32 two = first != last ? 2 : 1;
                for (u32 e = 0; e < two; e++) {
                    if (column && fid_extreme_of_row(s, base, rows, line, ends[e])) continue;
                    if (at < FID_SEED_SLOTS) s->key[at] = fid_seed_key(column ? 1 : 0, line, ends[e]);
                    at++;
                }
            }
            continue;
        }
        // The chunks from the first run end's to the last's: no seed lies outside them. A lane
        // reads its pixel of FID_COUNT_BATCH chunks at once, then the labels where runs end,
        // then the chunks are placed in order.
        int from = column ? (int)top : (int)left;
        u64 pixel = column ? (u64)width : 1, line_base = column ? (u64)line : (u64)line * width;
        for (int c0 = first - ((first - from) & 31); c0 <= last; c0 += 32 * FID_COUNT_BATCH) {
            u32 ends[FID_COUNT_BATCH];
#pragma unroll
            for (u32 b = 0; b < FID_COUNT_BATCH; b++) {
                int along = c0 + 32 * (int)b + (int)lane;
                ends[b] = along <= last ? fid_code_ends(codes[line_base + (u64)along * pixel]) : 0;
            }
#pragma unroll
            for (u32 b = 0; b < FID_COUNT_BATCH; b++) {
                int along = c0 + 32 * (int)b + (int)lane;
                if (ends[b] != 0 && lab[line_base + (u64)along * pixel] != label) ends[b] = 0;
            }
#pragma unroll
            for (u32 b = 0; b < FID_COUNT_BATCH; b++) {
                int along = c0 + 32 * (int)b + (int)lane;
                bool seed = (ends[b] & (column ? 2u : 1u)) != 0;
                // A column's pixel that is also a taken row's seed takes the row's slot.
                if (seed && column && (ends[b] & 1u)) {
                    u32 v = (u32)(along - (int)top);
                    seed = (v & ((1u << shift) - 1)) != 0;
                }
                u32 hits = __ballot_sync(FID_FULL_WARP, seed);
                if (seed) {
                    u32 slot = at + __popc(hits & ((1u << lane) - 1));
                    if (slot < FID_SEED_SLOTS) s->key[slot] = fid_seed_key(column ? 1 : 0, line, along);
                }
                at += __popc(hits);
            }
        }
    }
    __syncthreads();
    *shift_out = shift;
}

// One Moore step on the neighbour codes (fid_trace's): from (x, y) with backtrack *back to the
// first neighbour of the label clockwise after it; false for a single pixel.
__device__ __forceinline__ bool fid_moore_step(const unsigned char* codes, int w, int x, int y, u32 back, int* qx,
                                               int* qy, u32* next_back) {
    u32 code = codes[(u64)y * w + x];
    u32 first = (back + 1) % 8;
    u32 turned = ((code >> first) | (code << (8 - first))) & 0xffu;
    if (turned == 0) return false;
    u32 found = (first + (u32)__ffs(turned) - 1) % 8;
    *qx = x + fid_dx(found);
    *qy = y + fid_dy(found);
    *next_back = ((found & ~1u) + 6) % 8;
    return true;
}

// seeded_trace::walk from seed state `state`: what it stopped on and after how many steps.
__device__ void fid_seed_walk(FidSeeds* s, const unsigned char* codes, int w, u32 shift, int state, int fx, int fy) {
    int slot = state / 4;
    u32 back = 2 * (u32)(state % 4);
    if (slot >= (int)s->slots) {
        s->stop[state] = FID_NO_WALK;
        s->steps[state] = 0;
        return;
    }
    int px, py;
    fid_seed_pixel(s, slot, &px, &py);
    // A seed state: a pixel of the label in its own slot, its backtrack outside the label.
    if (fid_seed_slot(s, shift, px, py) != slot || ((codes[(u64)py * w + px] >> back) & 1u)) {
        s->stop[state] = FID_NO_WALK;
        s->steps[state] = 0;
        return;
    }
    int sx = (int)s->o.start, sy = (int)s->o.top;
    u64 steps = 0;
    int stop;
    for (;;) {
        int qx, qy;
        u32 next_back;
        if (!fid_moore_step(codes, w, px, py, back, &qx, &qy, &next_back)) {
            stop = FID_STOP_END;  // a single pixel: not in a box of 4 × 4 or more
            break;
        }
        if (steps > 0) {
            if (px == sx && py == sy && qx == fx && qy == fy) {
                stop = FID_STOP_END;
                break;
            }
            int hit = fid_seed_slot(s, shift, px, py);
            if (hit >= 0) {
                stop = 4 * hit + (int)(back / 2);
                break;
            }
        }
        if (steps == s->o.limit) {
            stop = FID_STOP_LIMIT;
            break;
        }
        px = qx;
        py = qy;
        back = next_back;
        steps++;
    }
    s->stop[state] = stop;
    s->steps[state] = (u32)steps;
}

// seeded_trace::trace_by_seeds' chain, by one thread: the outline's length into s->len and
// whether it closed within the limit into s->keep (−1 offsets stay on walks not chained).
__device__ void fid_chain(FidSeeds* s) {
    int state = 2;  // slot 0 (the top row's leftmost pixel: the start), backtrack 4
    u64 pos = 0, limit = s->o.limit;
    s->keep = 0;
    s->len = 0;
    int x0, y0;
    if (s->slots == 0) return;
    fid_seed_pixel(s, 0, &x0, &y0);
    if (x0 != (int)s->o.start || y0 != (int)s->o.top) return;
    for (;;) {
        // The state's three values read together (the loop waits on them alone): a state
        // without a walk has steps 0.
        int stop = s->stop[state], seen = s->offset[state];
        u64 steps = s->steps[state];
        // A state met twice: the trace runs in a circle without closing, to the limit.
        if (stop == FID_NO_WALK || seen >= 0) return;
        s->offset[state] = (int)pos;
        if (stop == FID_STOP_END) {
            s->len = pos + steps;
            s->keep = s->len < limit;
            return;
        }
        if (stop == FID_STOP_LIMIT) return;
        pos += steps;
        if (pos >= limit) return;
        state = stop;
    }
}

// The long outlines listed by fid_candidates (counters[2] of them, at most `long_capacity`),
// one block each, blocks taking every gridDim.x-th: seeds, walks, chain, points into the room
// fid_candidates took, then the whole block fits and checks the quad as fid_candidates' warps do. A phase's
// shared values are written by their own threads and read after a barrier.
// It takes fid_candidates' parameters; `windows` and `limit` are unused (each listed outline
// carries its window, box and limit).
extern "C" __global__ void __launch_bounds__(FID_LONG_THREADS)
    fid_long_outlines(const u32* labels, u64 label_stride, const unsigned char* codes, u64 code_stride,
                      const u64* windows, u32 width, u32 height, double min_perimeter, double max_perimeter,
                      u64 limit, double accuracy_rate, double min_corner_rate, double border, int2* pool,
                      u64 pool_capacity, FidCandidate* out, u64 out_capacity, const FidLongOutline* longs,
                      u64 long_capacity, u64* counters) {
    (void)windows;
    (void)limit;
    __shared__ FidSeeds s;
    __shared__ FidPartial partials[2][32];
    u64 count = counters[2] < long_capacity ? counters[2] : long_capacity;
    u32 t = threadIdx.x, threads = blockDim.x;
    int w = (int)width;
    for (u64 item = blockIdx.x; item < count; item += gridDim.x) {
        if (t == 0) s.o = longs[item];
        __syncthreads();
        const u32* lab = labels + (u64)s.o.window * label_stride;
        const unsigned char* code = codes + (u64)s.o.window * code_stride;
        u32 top = s.o.top, shift;
        for (u32 k = t; k < FID_SEED_STATES; k += threads) s.offset[k] = -1;
        fid_seeds_of(&s, code, lab, width, &shift);
        // The first move from the start state: Jacob's rule closes the outline when it recurs.
        int sx = (int)s.o.start, sy = (int)top, fx = sx, fy = sy;
        u32 unused_back;
        fid_moore_step(code, w, sx, sy, 4, &fx, &fy, &unused_back);
        for (u32 k = t; k < FID_SEED_STATES; k += threads) fid_seed_walk(&s, code, w, shift, (int)k, fx, fy);
        __syncthreads();
        if (t == 0) {
            fid_chain(&s);
            double n = (double)s.len;
            if (s.keep && (n < min_perimeter || n > max_perimeter || s.len < 8)) s.keep = 0;
            s.point_at = s.o.at;
            if (s.keep && s.len + 1 > s.o.room) {
                // More points than the room taken for them: never expected; room enough.
                s.point_at = atomicAdd(&counters[0], s.len + 1);
                if (s.point_at + s.len + 1 > pool_capacity) s.keep = 0;
            }
        }
        __syncthreads();
        if (s.keep) {
            int2* contour = pool + s.point_at;
            for (u32 k = t; k < FID_SEED_STATES; k += threads) {
                int o = s.offset[k];
                if (o < 0) continue;
                u32 back = 2 * (k % 4);
                int px, py;
                fid_seed_pixel(&s, (int)k / 4, &px, &py);
                for (u32 j = 0; j < s.steps[k]; j++) {
                    if (j > 0) {
                        int qx, qy;
                        u32 next_back;
                        if (!fid_moore_step(code, w, px, py, back, &qx, &qy, &next_back)) break;
                        px = qx;
                        py = qy;
                        back = next_back;
                    }
                    u64 n = (u64)o + j;
                    if (n < s.len) contour[n] = make_int2(px, py);
                }
            }
        }
        __syncthreads();
        if (s.keep) {
            FidGroup block = fid_block_group(partials);
            fid_keep_quad(&block, pool + s.point_at, s.len, accuracy_rate, min_corner_rate, border, width, height,
                          s.o.window, s.o.label, out, out_capacity, counters);
        }
        __syncthreads();
    }
}

// ---------------------------------------------------------------------------------------------
// The candidates of every window in the CPU's order (window by window, each window's by label:
// its components' raster order), the same outline kept once (detect::add_distinct: a quad is
// kept when no quad kept before it is the same outline), written in that order for fid_decode,
// so that the frame's quads never go to the host and back. One block: the threads rank the
// candidates by (window, label) and find, for every pair, whether the later one is the same
// outline as the earlier; then one warp decides quad after quad, a look at the few earlier
// quads each one matches.

// Candidates fid_distinct takes at most (FID_DISTINCT_MOST in src/fiducial/gpu/launches.rs):
// the host orders and de-duplicates a frame with more.
#define FID_DISTINCT_MOST 2048
// Threads of fid_distinct's block.
#define FID_DISTINCT_THREADS 1024
// Earlier quads a candidate may match that are listed for the decision; one that matches more
// is compared with the quads kept before it instead.
#define FID_DISTINCT_LISTED 4

// detect::same_outline: every corner of `a` within two pixels (and a 20th of its diagonal) of a
// corner of `b`. The corners are outline points (whole pixels), so the diagonal is exact.
__device__ bool fid_same_outline(const double* a, const double* b) {
    double size = fid_hypot(a[0] - a[4], a[1] - a[5]);
    double reach = 2.0 + 0.05 * size;
    double tolerance = reach * reach;
    for (int i = 0; i < 4; i++) {
        bool near = false;
        for (int j = 0; j < 4 && !near; j++) {
            double dx = a[2 * i] - b[2 * j], dy = a[2 * i + 1] - b[2 * j + 1];
            near = dx * dx + dy * dy <= tolerance;
        }
        if (!near) return false;
    }
    return true;
}

// counters[1] candidates in `found` (at most `capacity` written); the quads kept go to `quads`
// (room for `capacity`) and their number to counters[3]. With more candidates than the list
// holds the host runs the frame again; with more than FID_DISTINCT_MOST it orders them itself:
// none here.
extern "C" __global__ void __launch_bounds__(FID_DISTINCT_THREADS)
    fid_distinct(const FidCandidate* found, u64 capacity, u64* counters, double* quads) {
    __shared__ u64 keys[FID_DISTINCT_THREADS];
    // The candidates in order (their indices in `found`), and per place the earlier places
    // whose quad it matches: how many, and the first FID_DISTINCT_LISTED of them.
    __shared__ u32 order[FID_DISTINCT_MOST];
    __shared__ u32 matched[FID_DISTINCT_MOST];
    __shared__ unsigned short listed[FID_DISTINCT_MOST][FID_DISTINCT_LISTED];
    __shared__ u32 kept_bits[FID_DISTINCT_MOST / 32];
    u32 t = threadIdx.x, lane = t % 32, warp = t / 32, warps = blockDim.x / 32, threads = blockDim.x;
    u64 n = counters[1];
    if (n > capacity || n > FID_DISTINCT_MOST) {
        if (t == 0) counters[3] = 0;
        return;
    }
    for (u32 i = t; i < FID_DISTINCT_MOST; i += threads) matched[i] = 0;
    for (u32 i = t; i < FID_DISTINCT_MOST / 32; i += threads) kept_bits[i] = 0;
    // Each candidate's place: the candidates before it in (window, label), keys being distinct
    // (a component gives one candidate at most).
    auto key_of = [&](u64 i) { return ((u64)found[i].window << 32) | found[i].label; };
    for (u64 i0 = 0; i0 < n; i0 += threads) {
        u64 i = i0 + t;
        u64 key = i < n ? key_of(i) : 0;
        u32 place = 0;
        for (u64 j0 = 0; j0 < n; j0 += threads) {
            __syncthreads();
            if (j0 + t < n) keys[t] = key_of(j0 + t);
            __syncthreads();
            u64 m = n - j0 < threads ? n - j0 : threads;
            for (u64 j = 0; j < m; j++) place += keys[j] < key;
        }
        if (i < n) order[place] = (u32)i;
    }
    __syncthreads();
    // Which earlier places each place's quad matches: a warp takes 32 earlier places at once.
    u64 words = (n + 31) / 32;
    for (u64 p = warp; p < n * words; p += warps) {
        u64 r = p / words, a0 = (p % words) * 32;
        if (a0 >= r) continue;
        u64 a = a0 + lane;
        bool same = a < r && fid_same_outline(found[order[a]].quad, found[order[r]].quad);
        u32 bits = __ballot_sync(FID_FULL_WARP, same);
        if (lane == 0) {
            for (; bits != 0; bits &= bits - 1) {
                u32 at = atomicAdd(&matched[r], 1u);
                if (at < FID_DISTINCT_LISTED) listed[r][at] = (unsigned short)(a0 + (u32)__ffs(bits) - 1);
            }
        }
    }
    __syncthreads();
    if (warp != 0) return;
    u64 kept = 0;
    for (u64 r = 0; r < n; r++) {
        const double* quad = found[order[r]].quad;
        u32 m = matched[r];
        bool same = false;
        if (m <= FID_DISTINCT_LISTED) {
            for (u32 k = 0; k < m; k++) same |= ((kept_bits[listed[r][k] / 32] >> (listed[r][k] % 32)) & 1u) != 0;
        } else {
            bool mine = false;
            for (u64 k = lane; k < kept; k += 32) mine |= fid_same_outline(quads + 8 * k, quad);
            same = __any_sync(FID_FULL_WARP, mine);
        }
        if (same) continue;
        if (lane == 0) kept_bits[r / 32] |= 1u << (r % 32);
        if (lane < 8) quads[8 * kept + lane] = quad[lane];
        kept++;
        // The kept mark and quad are seen by every lane at the next place.
        __syncwarp();
    }
    if (lane == 0) counters[3] = kept;
}

// ---------------------------------------------------------------------------------------------
// Sub-pixel corners (fiducial::corners).

// corners::bilinear: the grey value at (x, y), pixel centres at whole coordinates.
__device__ bool fid_bilinear(const unsigned char* g, u32 w, u32 h, double x, double y, double* v) {
    if (!(x >= 0.0 && y >= 0.0 && x <= (double)(w - 1) && y <= (double)(h - 1))) return false;
    u64 x0 = (u64)floor(x), y0 = (u64)floor(y);
    u64 x1 = x0 + 1 < (u64)w - 1 ? x0 + 1 : (u64)w - 1;
    u64 y1 = y0 + 1 < (u64)h - 1 ? y0 + 1 : (u64)h - 1;
    double fx = x - (double)x0, fy = y - (double)y0;
    double p00 = g[y0 * w + x0], p10 = g[y0 * w + x1], p01 = g[y1 * w + x0], p11 = g[y1 * w + x1];
    double top = p00 + (p10 - p00) * fx;
    double bottom = p01 + (p11 - p01) * fx;
    *v = top + (bottom - top) * fy;
    return true;
}

// f64::clamp: NaN stays NaN.
__device__ __forceinline__ double fid_clamp(double x, double lo, double hi) {
    if (x < lo) x = lo;
    if (x > hi) x = hi;
    return x;
}

// A line a·x + b·y = c, (a, b) a unit normal pointing out of the quad.
struct FidLine {
    double a, b, c;
};

// Most edge points along one side (corners::fit_side's 200).
#define FID_MAX_SAMPLES 200
// The smallest rise (grey levels per pixel) that counts as an edge (corners::MIN_EDGE_RISE).
#define FID_MIN_EDGE_RISE 3.0

// Whether a point lies within 0.75 px of a line (fit_side's second fit keeps those).
__device__ __forceinline__ bool fid_near(const FidLine* line, double x, double y) {
    return fabs(line->a * x + line->b * y - line->c) <= 0.75;
}

// corners::fit_line: the weighted total-least-squares line through the points (only those
// whose `use` flag is set when `use` is given: fit_side's second fit, the points within 0.75 px of
// the first line), its normal turned towards (nx, ny). The three sums of the centre run side
// by side, each in the points' order as the CPU takes it.
__device__ bool fid_fit_line(const double* px, const double* py, const double* pw, int count,
                             const unsigned char* use, double nx, double ny, FidLine* line) {
    double wsum = -0.0, sx = -0.0, sy = -0.0;
    for (int i = 0; i < count; i++) {
        if (use && !use[i]) continue;
        double w = pw[i];
        wsum += w;
        sx += w * px[i];
        sy += w * py[i];
    }
    double mx = sx / wsum, my = sy / wsum;
    double sxx = 0.0, sxy = 0.0, syy = 0.0;
    for (int i = 0; i < count; i++) {
        if (use && !use[i]) continue;
        double x = px[i] - mx, y = py[i] - my, w = pw[i];
        sxx += w * x * x;
        sxy += w * x * y;
        syy += w * y * y;
    }
    // The normal is the eigenvector of the smaller eigenvalue of the scatter matrix.
    double theta = 0.5 * atan2(2.0 * sxy, sxx - syy);
    double a = -sin(theta), b = cos(theta);
    if (a * nx + b * ny < 0.0) {
        a = -a;
        b = -b;
    }
    line->a = a;
    line->b = b;
    line->c = a * mx + b * my;
    return isfinite(line->c);
}

// The edge points of one side, one per profile across it: a warp measures them side by side in
// shared memory (`ok` says which profiles found an edge), then lane 0 fits the line through them
// in the profiles' order, as the CPU sums them.
struct FidSidePoints {
    double px[FID_MAX_SAMPLES], py[FID_MAX_SAMPLES], pw[FID_MAX_SAMPLES];
    unsigned char ok[FID_MAX_SAMPLES];
};

// corners::fit_side by one warp: the edge line of the side from a to b (clockwise on screen,
// the outside to the left of the direction of travel), from up to 200 grey profiles across it,
// each lane measuring every 32nd profile. The line is written by lane 0; the answer is the
// same in every lane.
__device__ bool fid_fit_side(const unsigned char* g, u32 w, u32 h, double2 a, double2 b, double reach,
                             FidSidePoints* sp, FidLine* line) {
    u32 lane = threadIdx.x & 31;
    double dx = b.x - a.x, dy = b.y - a.y;
    double len = fid_hypot(dx, dy);
    if (len < 4.0) return false;
    double ux = dx / len, uy = dy / len;
    double nx = uy, ny = -ux;
    double margin = fmax(0.1 * len, reach + 0.5);
    // `as usize` saturates (negative and NaN to 0), then clamp(0, 200).
    double whole = floor(len - 2.0 * margin);
    int samples = whole >= (double)FID_MAX_SAMPLES ? FID_MAX_SAMPLES : (whole > 0.0 ? (int)whole : 0);
    if (samples < 3) return false;
    double step = (len - 2.0 * margin) / (double)(samples - 1);
    // Profile points every half pixel across the side, one more at each end for the rise.
    int half = (int)ceil(reach * 2.0) + 1;
    int m = 2 * half + 1;
    if (m > 24) return false;  // reach ≤ 4 keeps m ≤ 19
    for (int i = (int)lane; i < samples; i += 32) {
        sp->ok[i] = 0;
        double profile[24];
        double t = margin + (double)i * step;
        double qx = a.x + ux * t, qy = a.y + uy * t;
        bool inside = true;
        for (int j = 0; j < m; j++) {
            double s = (double)(j - half) * 0.5;
            if (!fid_bilinear(g, w, h, qx + nx * s, qy + ny * s, &profile[j])) {
                inside = false;
                break;
            }
        }
        if (!inside) continue;
        // Rise over one pixel at each half-pixel offset; the strongest.
        double best = -1.7976931348623157e308;
        int at = 0;
        for (int j = 2; j < m - 2; j++) {
            double rise = profile[j + 1] - profile[j - 1];
            if (rise > best) {
                best = rise;
                at = j;
            }
        }
        if (best < FID_MIN_EDGE_RISE) continue;
        // The edge from the area under the profile in a window centred on the strongest rise.
        // A rise at an end of the search (k = 2) gets one more point beyond that end, so that
        // its window too reaches 1.5 px to each side (corners::fit_side).
        int k = at < m - 1 - at ? at : m - 1 - at;
        double extended[7];
        const double* window;
        int lo, n;
        if (k >= 3) {
            window = profile + (at - k);
            lo = at - k;
            n = 2 * k + 1;
        } else {
            int beyond = at == 2 ? -half - 1 : half + 1;
            double sb = (double)beyond * 0.5, v;
            if (!fid_bilinear(g, w, h, qx + nx * sb, qy + ny * sb, &v)) continue;
            if (at == 2) {
                extended[0] = v;
                for (int j = 0; j < 6; j++) extended[j + 1] = profile[j];
                lo = -1;
            } else {
                for (int j = 0; j < 6; j++) extended[j] = profile[m - 6 + j];
                extended[6] = v;
                lo = at - 3;
            }
            window = extended;
            n = 7;
        }
        double dark = 0.5 * (window[0] + window[1]);
        double light = 0.5 * (window[n - 1] + window[n - 2]);
        if (light - dark < FID_MIN_EDGE_RISE) continue;
        double dark_share = -0.0;
        for (int j = 0; j + 1 < n; j++) {
            double mid = 0.5 * (window[j] + window[j + 1]);
            dark_share += fid_clamp((light - mid) / (light - dark), 0.0, 1.0) * 0.5;
        }
        double s = (double)(lo - half) * 0.5 + dark_share;
        sp->px[i] = qx + nx * s;
        sp->py[i] = qy + ny * s;
        sp->pw[i] = best;
        sp->ok[i] = 1;
    }
    __syncwarp();
    // The profiles with an edge, in order, moved down in place by the warp (each chunk read
    // before any of it is written; a point only moves down).
    int count = 0;
    for (int base = 0; base < samples; base += 32) {
        int i = base + (int)lane;
        bool ok = i < samples && sp->ok[i];
        double x = ok ? sp->px[i] : 0.0, y = ok ? sp->py[i] : 0.0, pw = ok ? sp->pw[i] : 0.0;
        u32 hits = __ballot_sync(FID_FULL_WARP, ok);
        __syncwarp();
        if (ok) {
            int at = count + __popc(hits & ((1u << lane) - 1));
            sp->px[at] = x;
            sp->py[at] = y;
            sp->pw[at] = pw;
        }
        count += __popc(hits);
        __syncwarp();
    }
    int fitted = 0;
    if (lane == 0) {
        fitted = count >= 3 && count * 2 >= samples && fid_fit_line(sp->px, sp->py, sp->pw, count, 0, nx, ny, line);
    }
    fitted = __shfl_sync(FID_FULL_WARP, fitted, 0);
    if (!fitted) return false;
    __syncwarp();  // the line lane 0 wrote, for every lane
    // Once more without the points far off the first line (a neighbour's edge, a blemish): the
    // warp marks the points near it.
    FidLine first = *line;
    int kept = 0;
    for (int base = 0; base < count; base += 32) {
        int i = base + (int)lane;
        bool near = i < count && fid_near(&first, sp->px[i], sp->py[i]);
        if (i < count) sp->ok[i] = near ? 1 : 0;
        kept += __popc(__ballot_sync(FID_FULL_WARP, near));
    }
    __syncwarp();
    if (kept >= 3 && kept < count) {
        if (lane == 0) fitted = fid_fit_line(sp->px, sp->py, sp->pw, count, sp->ok, nx, ny, line);
        fitted = __shfl_sync(FID_FULL_WARP, fitted, 0);
        __syncwarp();
    }
    return __shfl_sync(FID_FULL_WARP, fitted, 0) != 0;
}

// corners::intersect.
__device__ bool fid_intersect(const FidLine* p, const FidLine* q, double2* at) {
    double det = p->a * q->b - p->b * q->a;
    if (fabs(det) < 1e-9) return false;
    *at = make_double2((p->c * q->b - p->b * q->c) / det, (p->a * q->c - p->c * q->a) / det);
    return true;
}

// Cells of the largest grid: 8×8 inner cells (a 64-bit code) and the border.
#define FID_MAX_CELLS 100
// Samples per cell side (decode::SAMPLES).
#define FID_SAMPLES 3

// What the block decoding one quad shares: each warp's side, the corners between passes, the
// cells' homography and values, and the answers thread 0 gives the others.
struct FidDecodeShared {
    FidSidePoints sides[4];
    FidLine lines[4];
    int side_fitted[4];
    double2 current[4];
    double hm[9];
    double values[FID_MAX_CELLS];
    double sorted[FID_MAX_CELLS];
    int ok;
    int cells_read;
    u64 code;
    u32 border_errors;
    u32 first_id;
};

// corners::refine_quad by a block of four warps, one a side: the corners moved onto the
// intersections of the fitted side lines (two passes); false when a side shows no clear edge
// or a corner moves beyond the reach. Every thread gets the answer and the corners.
__device__ bool fid_refine_quad(const unsigned char* g, u32 w, u32 h, const double2 quad[4], double cell,
                                double2 out[4], FidDecodeShared* sh) {
    u32 t = threadIdx.x, side = t / 32;
    double reach = fid_clamp(0.6 * cell, 1.5, 4.0);
    __syncthreads();
    if (t < 4) sh->current[t] = quad[t];
    __syncthreads();
    for (int pass = 0; pass < 2; pass++) {
        double r = pass == 0 ? reach : fmin(reach, 2.5);
        bool fitted = fid_fit_side(g, w, h, sh->current[side], sh->current[(side + 1) % 4], r, &sh->sides[side],
                                   &sh->lines[side]);
        if ((t & 31) == 0) sh->side_fitted[side] = fitted;
        __syncthreads();
        if (t == 0) {
            int ok = sh->side_fitted[0] && sh->side_fitted[1] && sh->side_fitted[2] && sh->side_fitted[3];
            double2 next[4];
            for (int k = 0; ok && k < 4; k++) {
                if (!fid_intersect(&sh->lines[(k + 3) % 4], &sh->lines[k], &next[k])) ok = 0;
            }
            if (ok) {
                for (int k = 0; k < 4; k++) sh->current[k] = next[k];
            }
            sh->ok = ok;
        }
        __syncthreads();
        if (!sh->ok) return false;
    }
    double moved = 0.0;
    for (int k = 0; k < 4; k++) {
        moved = fmax(moved, fid_hypot(sh->current[k].x - quad[k].x, sh->current[k].y - quad[k].y));
    }
    for (int k = 0; k < 4; k++) out[k] = sh->current[k];
    return moved <= reach + 1.5;
}

// ---------------------------------------------------------------------------------------------
// Cells and codes (fiducial::decode, pose::square_homography, Dictionary::identify).

// pose::solve8: Gaussian elimination with partial pivoting (the last largest pivot, as max_by
// picks it) on an 8×8 system, right-hand side in column 8.
__device__ bool fid_solve8(double a[8][9], double x[8]) {
    for (int col = 0; col < 8; col++) {
        int pivot = col;
        double best = fabs(a[col][col]);
        for (int i = col + 1; i < 8; i++) {
            double v = fabs(a[i][col]);
            if (fid_not_smaller(v, best)) {
                best = v;
                pivot = i;
            }
        }
        if (fabs(a[pivot][col]) < 1e-300) return false;
        for (int k = 0; k < 9; k++) {
            double t = a[col][k];
            a[col][k] = a[pivot][k];
            a[pivot][k] = t;
        }
        for (int row = col + 1; row < 8; row++) {
            double f = a[row][col] / a[col][col];
            for (int k = col; k < 9; k++) a[row][k] -= f * a[col][k];
        }
    }
    for (int row = 7; row >= 0; row--) {
        double s = -0.0;
        for (int k = row + 1; k < 8; k++) s += a[row][k] * x[k];
        x[row] = (a[row][8] - s) / a[row][row];
    }
    for (int i = 0; i < 8; i++) {
        if (!isfinite(x[i])) return false;
    }
    return true;
}

// pose::square_homography from the cell grid's corners (0, 0), (side, 0), (side, side),
// (0, side) to the quad's: h row-major, h[8] = 1.
__device__ bool fid_grid_homography(double side, const double2 quad[4], double h[9]) {
    const double from[4][2] = {{0.0, 0.0}, {side, 0.0}, {side, side}, {0.0, side}};
    double a[8][9];
    for (int k = 0; k < 4; k++) {
        double x = from[k][0], y = from[k][1], u = quad[k].x, v = quad[k].y;
        double r0[9] = {x, y, 1.0, 0.0, 0.0, 0.0, -u * x, -u * y, u};
        double r1[9] = {0.0, 0.0, 0.0, x, y, 1.0, -v * x, -v * y, v};
        for (int j = 0; j < 9; j++) {
            a[2 * k][j] = r0[j];
            a[2 * k + 1][j] = r1[j];
        }
    }
    double s[8];
    if (!fid_solve8(a, s)) return false;
    for (int i = 0; i < 8; i++) h[i] = s[i];
    h[8] = 1.0;
    return true;
}

// decode::otsu_split on the values sorted ascending: the level between the two classes with the
// largest between-class variance, and the difference of their means.
__device__ void fid_otsu(const double* sorted, int n, double* level, double* contrast) {
    double total = -0.0;
    for (int i = 0; i < n; i++) total += sorted[i];
    double best = -1.0, low = 0.0;
    *level = sorted[0];
    *contrast = 0.0;
    for (int k = 1; k < n; k++) {
        low += sorted[k - 1];
        double n0 = (double)k, n1 = (double)(n - k);
        double m0 = low / n0, m1 = (total - low) / n1;
        double d = m1 - m0;
        double between = n0 * n1 * (d * d);
        if (between > best && sorted[k] > sorted[k - 1]) {
            best = between;
            *level = 0.5 * (sorted[k - 1] + sorted[k]);
            *contrast = m1 - m0;
        }
    }
}

// decode::read_cells by a block, a thread a cell: the inner cells' code (row by row, 1 =
// white, first cell in the most significant bit) and the border cells that read white. Thread
// 0 makes the homography and, from the cells' values, the statistics and the code, as the CPU
// in its order. Every thread gets the answer.
__device__ bool fid_read_cells(const unsigned char* g, u32 w, u32 h, const double2 quad[4], u32 marker_size,
                               double margin, double min_std_dev, u64* code, u32* border_errors,
                               FidDecodeShared* sh) {
    int cells = (int)marker_size + 2;
    if (cells * cells > FID_MAX_CELLS) return false;
    double side = (double)cells;
    __syncthreads();
    if (threadIdx.x == 0) {
        sh->ok = fid_grid_homography(side, quad, sh->hm);
        sh->cells_read = 1;
    }
    __syncthreads();
    if (!sh->ok) return false;
    const double* hm = sh->hm;
    double inner = 1.0 - 2.0 * margin;
    for (int cell = (int)threadIdx.x; cell < cells * cells; cell += (int)blockDim.x) {
        int r = cell / cells, c = cell % cells;
        double sum = 0.0;
        bool read = true;
        for (int i = 0; read && i < FID_SAMPLES; i++) {
            for (int j = 0; j < FID_SAMPLES; j++) {
                double u = (double)c + margin + inner * ((double)j + 0.5) / (double)FID_SAMPLES;
                double v = (double)r + margin + inner * ((double)i + 0.5) / (double)FID_SAMPLES;
                double wz = hm[6] * u + hm[7] * v + hm[8];
                if (fabs(wz) < 1e-12) {
                    read = false;
                    break;
                }
                double x = (hm[0] * u + hm[1] * v + hm[2]) / wz;
                double y = (hm[3] * u + hm[4] * v + hm[5]) / wz;
                double value;
                if (!fid_bilinear(g, w, h, x, y, &value)) {
                    read = false;
                    break;
                }
                sum += value;
            }
        }
        if (read) {
            sh->values[cell] = sum / (double)(FID_SAMPLES * FID_SAMPLES);
        } else {
            sh->cells_read = 0;
        }
    }
    __syncthreads();
    if (!sh->cells_read) return false;
    // The values sorted for Otsu, a thread a value: its place is the number of smaller values
    // and of equal ones before it (the values are finite and not negative, so this is
    // total_cmp's order; equal values are the same number).
    int n = cells * cells;
    for (int i = (int)threadIdx.x; i < n; i += (int)blockDim.x) {
        double v = sh->values[i];
        int place = 0;
        for (int j = 0; j < n; j++) {
            double u = sh->values[j];
            place += (u < v || (u == v && j < i)) ? 1 : 0;
        }
        sh->sorted[place] = v;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        const double* values = sh->values;
        double mean = -0.0;
        for (int i = 0; i < n; i++) mean += values[i];
        mean = mean / (double)n;
        double var = -0.0;
        for (int i = 0; i < n; i++) {
            double d = values[i] - mean;
            var += d * d;
        }
        var = var / (double)n;
        sh->ok = sqrt(var) >= min_std_dev;
        if (sh->ok) {
            double level, contrast;
            fid_otsu(sh->sorted, n, &level, &contrast);
            u64 bits = 0;
            u32 errors = 0;
            for (int r = 0; r < cells; r++) {
                for (int c = 0; c < cells; c++) {
                    bool white = values[r * cells + c] > level;
                    if (r == 0 || c == 0 || r == cells - 1 || c == cells - 1) {
                        errors += white ? 1u : 0u;
                    } else {
                        bits = (bits << 1) | (white ? 1ull : 0ull);
                    }
                }
            }
            sh->code = bits;
            sh->border_errors = errors;
        }
    }
    __syncthreads();
    *code = sh->code;
    *border_errors = sh->border_errors;
    return sh->ok != 0;
}


// A dictionary as fid_decode reads it (5 u32 each, `DeviceDictionaries` in
// src/fiducial/gpu/dictionaries.rs): marker size, markers, border errors allowed, bits
// corrected, and its first marker's row in the code table (4 codes a marker, OpenCV's
// rotations).
#define FID_DICT_WORDS 5

// What became of a quad. Mirrored by `GpuOutcome` in src/fiducial/gpu/buffers.rs.
struct FidOutcome {
    double corners[8];  // the refined quad (the outline's when the refinement failed)
    u32 marker;         // 1: a marker of `dictionary`; 0: rejected
    u32 dictionary;
    u32 id;
    u32 rotation;
    u32 hamming;
    u32 pad;
};


// Threads of the block decoding one quad: four warps, one a side of the corner refinement.
#define FID_DECODE_THREADS 128

// The nearest rotation of marker `id` to `code`: bits that differ and the rotation.
__device__ __forceinline__ u32 fid_nearest_rotation(const u64* table, u32 id, u64 code, u32* rotation) {
    u32 best = 0xffffffffu;
    *rotation = 0;
    for (u32 r = 0; r < 4; r++) {
        u32 diff = (u32)__popcll(table[4 * (u64)id + r] ^ code);
        if (diff < best) {
            best = diff;
            *rotation = r;
        }
    }
    return best;
}

// detect::decode_quad for one quad a block: refine (rejected with the outline's corners when
// that fails), then each dictionary in turn: cells, border check, the nearest code within the
// correction (Dictionary::identify: the first marker whose nearest rotation is close enough —
// the block's threads try the markers side by side and the smallest ID that fits wins).
__device__ void fid_decode_one(const double* quads, u64 q, const unsigned char* grey, u32 width, u32 height,
                               int refine, double largest_grid, double cell_margin, double min_cell_std_dev,
                               const u32* dicts, u32 ndicts, const u64* codes, FidOutcome* out,
                               FidDecodeShared& sh) {
    double2 quad[4];
    for (int k = 0; k < 4; k++) quad[k] = make_double2(quads[8 * (u64)q + 2 * k], quads[8 * (u64)q + 2 * k + 1]);
    FidOutcome o;
    o.marker = 0;
    o.dictionary = 0;
    o.id = 0;
    o.rotation = 0;
    o.hamming = 0;
    o.pad = 0;
    double2 refined[4];
    bool ok = true;
    if (refine) {
        double perimeter = -0.0;
        for (int k = 0; k < 4; k++) {
            perimeter += fid_hypot(quad[k].x - quad[(k + 1) % 4].x, quad[k].y - quad[(k + 1) % 4].y);
        }
        ok = fid_refine_quad(grey, width, height, quad, perimeter / 4.0 / largest_grid, refined, &sh);
    } else {
        for (int k = 0; k < 4; k++) refined[k] = quad[k];
    }
    const double2* corners = ok ? refined : quad;
    for (u32 d = 0; ok && d < ndicts && !o.marker; d++) {
        const u32* info = dicts + FID_DICT_WORDS * (u64)d;
        u64 code;
        u32 border_errors;
        if (!fid_read_cells(grey, width, height, refined, info[0], cell_margin, min_cell_std_dev, &code,
                            &border_errors, &sh))
            continue;
        if (border_errors > info[2]) continue;
        const u64* table = codes + 4 * (u64)info[4];
        __syncthreads();
        if (threadIdx.x == 0) sh.first_id = 0xffffffffu;
        __syncthreads();
        for (u32 id = threadIdx.x; id < info[1]; id += blockDim.x) {
            u32 rotation;
            if (fid_nearest_rotation(table, id, code, &rotation) <= info[3]) atomicMin(&sh.first_id, id);
        }
        __syncthreads();
        u32 id = sh.first_id;
        if (id != 0xffffffffu) {
            u32 rotation;
            o.hamming = fid_nearest_rotation(table, id, code, &rotation);
            o.marker = 1;
            o.dictionary = d;
            o.id = id;
            o.rotation = rotation;
        }
    }
    if (threadIdx.x != 0) return;
    for (int k = 0; k < 4; k++) {
        o.corners[2 * k] = corners[k].x;
        o.corners[2 * k + 1] = corners[k].y;
    }
    out[q] = o;
}

// The quads to decode are counters[3] (fid_distinct's, or the host's); the blocks take every
// gridDim.x-th, so that the host launches without knowing their number.
extern "C" __global__ void __launch_bounds__(FID_DECODE_THREADS)
    fid_decode(const double* quads, const u64* counters, const unsigned char* grey, u32 width, u32 height,
               int refine, double largest_grid, double cell_margin, double min_cell_std_dev, const u32* dicts,
               u32 ndicts, const u64* codes, FidOutcome* out) {
    __shared__ FidDecodeShared sh;
    u64 count = counters[3];
    for (u64 q = blockIdx.x; q < count; q += gridDim.x) {
        fid_decode_one(quads, q, grey, width, height, refine, largest_grid, cell_margin, min_cell_std_dev, dicts,
                       ndicts, codes, out, sh);
        // The next quad's refinement reuses the shared values.
        __syncthreads();
    }
}
