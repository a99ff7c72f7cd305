// Frame-to-frame association on the GPU: the CPU tracker's rules (src/track), phase for phase,
// in the same double arithmetic (this file is compiled without fused multiply-adds, and the
// size term's logarithm is `track_ln`, the CPU's `track::ln` line for line), so both trackers
// give the same IDs. The host uploads the frame's detections and lays out the cells of the CPU
// tracker's grid index (`GridIndex::lay_cells`); the index is built here with the same slots,
// so ties break alike. The tracks live on the device from frame to frame.
//
// Kernels of one frame, in order (one thread per slot, track, cell or detection unless said):
//   trk_cells      per detection: its cell, counted
//   scan_rows      (common.cuh) where each cell's slots start
//   trk_scatter    per detection: a slot in its cell
//   trk_sort_cells per cell: its detections back in their order; each detection's slot
//   trk_place      per slot: its position and ln(area); clears the slot's state
//   trk_gather     per track (a warp each): prediction, gate, its `keep` cheapest candidates by
//                  (cost, slot); each slot's cheapest cost (atomicMin on the cost's bits: costs
//                  are >= +0)
//   trk_ties       per track: its pairs at their slot's cheapest cost, counted per slot
//   trk_mutual     a track's cheapest pair that is its slot's only cheapest pair is taken
//   trk_conflicts  the tracks left with free candidates, listed
//   trk_settle     one block: deferred acceptance in rounds over the free tracks. Both ends
//                  rank pairs by the greedy order (cost, track, slot), so the stable matching is
//                  unique and is the greedy order's result, whatever order proposals come in
//   trk_settled    each listed track that holds a slot takes it
//   trk_finish     per track (a warp each): a taken slot is observed (`observe`), a missed
//                  confirmed track rides on a larger taken component holding its prediction;
//                  ended or not
//   trk_births     per detection: starts a track (no track took it)
//   scan_rows      (common.cuh) ranks of the kept tracks and of the births
//   trk_compact    kept tracks in order, then the new ones in detection order; ended IDs
//   trk_born       the new tracks and their slots' IDs
//   trk_ids        per detection: its track's ID

// The most candidates a track keeps: its list holds an entry a lane (trk_gather).
#define TRK_MAX_KEEP 32

struct TrkTrack {
    u64 id;
    u64 last_frame;
    u64 hits;
    u64 est_frame;
    u64 clean_frame;
    double x;
    double y;
    double vx;
    double vy;
    double area;
    double est_x;
    double est_y;
    double clean_x;
    double clean_y;
    u32 merged;
    u32 confirmed;
};

// What every kernel of a frame reads of it (src/track/gpu.rs computes it as the CPU tracker
// does).
struct TrkFrame {
    u64 frame;
    double gate_px;
    double gate_growth_px;
    double dense_radius;
    double merge_radius;
    double inv_base2;
    double size_weight;
    double merge_area_ratio;
    double velocity_smoothing;
    double x0;
    double y0;
    double inv_cell;
    u32 nx;
    u32 ny;
    u32 tracks;
    u32 slots;
    u32 points;
    u32 keep;
    u32 confirm;
    u32 predict_velocity;
    u32 max_missed;
    u32 tentative_max_missed;
    u32 max_merged;
    u32 pad;
};

// A detection in the uploaded array: x, y, area, box left, top, right, bottom.
#define TRK_DET 7

// ---------------------------------------------------------------------------------------------
// fdlibm's __ieee754_log, as src/track/ln.rs.
__device__ double track_ln(double x) {
    // fdlibm's constants, by their bits (src/track/ln.rs writes the same bits).
    const double ln2_hi = __longlong_as_double(0x3fe62e42fee00000ll), ln2_lo = __longlong_as_double(0x3dea39ef35793c76ll),
                 two54 = __longlong_as_double(0x4350000000000000ll), Lg1 = __longlong_as_double(0x3fe5555555555593ll),
                 Lg2 = __longlong_as_double(0x3fd999999997fa04ll), Lg3 = __longlong_as_double(0x3fd2492494229359ll),
                 Lg4 = __longlong_as_double(0x3fcc71c51d8e78afll), Lg5 = __longlong_as_double(0x3fc7466496cb03dell),
                 Lg6 = __longlong_as_double(0x3fc39a09d078c69fll), Lg7 = __longlong_as_double(0x3fc2f112df3e5244ll),
                 third = __longlong_as_double(0x3fd5555555555555ll);
    int hx = (int)(__double_as_longlong(x) >> 32);
    const u32 lx = (u32)__double_as_longlong(x);
    int k = 0;
    if (hx < 0x00100000) {
        if ((((u32)hx & 0x7fffffffu) | lx) == 0u) return __longlong_as_double(0xfff0000000000000ll);
        if (hx < 0) return __longlong_as_double(0x7ff8000000000000ll);
        k -= 54;
        x *= two54;
        hx = (int)(__double_as_longlong(x) >> 32);
    }
    if (hx >= 0x7ff00000) return x + x;
    k += (hx >> 20) - 1023;
    hx &= 0x000fffff;
    const int i0 = (hx + 0x95f64) & 0x00100000;
    const u64 high = (u64)(u32)(hx | (i0 ^ 0x3ff00000));
    x = __longlong_as_double((long long)((high << 32) | ((u64)__double_as_longlong(x) & 0xffffffffull)));
    k += i0 >> 20;
    const double f = x - 1.0;
    const double dk = (double)k;
    if ((0x000fffff & (2 + hx)) < 3) {
        if (f == 0.0) return k == 0 ? 0.0 : dk * ln2_hi + dk * ln2_lo;
        const double r = f * f * (0.5 - third * f);
        return k == 0 ? f - r : dk * ln2_hi - ((r - dk * ln2_lo) - f);
    }
    const double s = f / (2.0 + f);
    const double z = s * s;
    const double w = z * z;
    const int i = (hx - 0x6147a) | (0x6b851 - hx);
    const double t1 = w * (Lg2 + w * (Lg4 + w * Lg6));
    const double t2 = z * (Lg1 + w * (Lg3 + w * (Lg5 + w * Lg7)));
    const double r = t2 + t1;
    if (i > 0) {
        const double hfsq = 0.5 * f * f;
        return k == 0 ? f - (hfsq - s * (hfsq + r)) : dk * ln2_hi - ((hfsq - (s * (hfsq + r) + dk * ln2_lo)) - f);
    }
    return k == 0 ? f - s * (f - r) : dk * ln2_hi - ((s * (f - r) - dk * ln2_lo) - f);
}

// Rust's `v as usize` for the non-negative or NaN values the grid gives it, capped at `cap`.
__device__ __forceinline__ u32 trk_cell_index(double v, u32 cap) {
    if (!(v > 0.0)) return 0u;
    if (v >= (double)cap) return cap;
    return (u32)v;
}

// Rust's `f64::clamp` (NaN stays NaN).
__device__ __forceinline__ double trk_clamp(double v, double lo, double hi) {
    return v < lo ? lo : (v > hi ? hi : v);
}

// The cells a query of half-side r around (x, y) visits (`GridIndex::window`); false: none.
__device__ bool trk_window(const TrkFrame& f, double x, double y, double r, u32* cx0, u32* cx1, u32* cy0, u32* cy1) {
    if (f.nx == 0u || !(isfinite(x) && isfinite(y) && isfinite(r))) return false;
    double a = (x - r - f.x0) * f.inv_cell, b = (x + r - f.x0) * f.inv_cell;
    if (b < 0.0 || a >= (double)f.nx) return false;
    *cx0 = trk_cell_index(a, 0xffffffffu);
    *cx1 = min(trk_cell_index(b, 0xffffffffu), f.nx - 1u);
    a = (y - r - f.y0) * f.inv_cell;
    b = (y + r - f.y0) * f.inv_cell;
    if (b < 0.0 || a >= (double)f.ny) return false;
    *cy0 = trk_cell_index(a, 0xffffffffu);
    *cy1 = min(trk_cell_index(b, 0xffffffffu), f.ny - 1u);
    return true;
}

// `Track::predict`.
__device__ __forceinline__ void trk_predict(const TrkTrack& t, u64 frame, double* px, double* py) {
    const double dt = (double)(frame > t.est_frame ? frame - t.est_frame : 0ull);
    *px = t.est_x + t.vx * dt;
    *py = t.est_y + t.vy * dt;
}

// ---------------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------------
// The grid index (src/track/grid.rs, `GridIndex`), built on the device: the host lays out the
// cells (`lay_cells`); here every point with a finite position is counted into its cell, the
// cells' starts are scanned (scan_rows), the points scattered into their cells and each cell's
// points put back in point order, so the slots are the CPU tracker's.

// Per point: its cell (or NONE: not finite, no slot), counted.
extern "C" __global__ void trk_cells(TrkFrame f, const double* det, u32* point_cell, u32* cell_count,
                                     u32* point_slot) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= f.points) return;
    const double x = det[(size_t)TRK_DET * i], y = det[(size_t)TRK_DET * i + 1];
    u32 c = NONE;
    if (isfinite(x) && isfinite(y)) {
        const u32 cx = min(trk_cell_index((x - f.x0) * f.inv_cell, 0xffffffffu), f.nx - 1u);
        const u32 cy = min(trk_cell_index((y - f.y0) * f.inv_cell, 0xffffffffu), f.ny - 1u);
        c = cy * f.nx + cx;
        atomicAdd(&cell_count[c], 1u);
    }
    point_cell[i] = c;
    point_slot[i] = NONE;
}

// Per point: a slot of its cell, in any order (trk_sort_cells puts them back in order).
extern "C" __global__ void trk_scatter(TrkFrame f, const u32* point_cell, const u32* cell_start, u32* cell_count,
                                       u32* slot_point) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= f.points) return;
    const u32 c = point_cell[i];
    if (c == NONE) return;
    slot_point[cell_start[c] + atomicSub(&cell_count[c], 1u) - 1u] = i;
}

// Per cell: its points in point order (the counting sort's order), and each point's slot.
extern "C" __global__ void trk_sort_cells(TrkFrame f, const u32* cell_start, u32* slot_point, u32* point_slot) {
    const u32 c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= f.nx * f.ny) return;
    const u32 a = cell_start[c], b = cell_start[c + 1u];
    for (u32 k = a + 1u; k < b; k++) {
        const u32 p = slot_point[k];
        u32 j = k;
        while (j > a && slot_point[j - 1u] > p) {
            slot_point[j] = slot_point[j - 1u];
            j--;
        }
        slot_point[j] = p;
    }
    for (u32 k = a; k < b; k++) point_slot[slot_point[k]] = k;
}

// Per point: its track's ID (0: none; a point without a slot has none).
extern "C" __global__ void trk_ids(TrkFrame f, const u32* point_slot, const u64* slot_id, u64* ids) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= f.points) return;
    const u32 s = point_slot[i];
    ids[i] = s == NONE ? 0ull : slot_id[s];
}

// ---------------------------------------------------------------------------------------------
// The association.

extern "C" __global__ void trk_place(TrkFrame f, const double* det, const u32* slot_point, double* sx, double* sy,
                                     double* ln_area, u64* best_cost, u32* n_best, u32* slot_track, u32* holder,
                                     u64* prop_cost, u32* prop_track, u64* slot_id) {
    const u32 s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= f.slots) return;
    const double* d = det + (size_t)TRK_DET * slot_point[s];
    sx[s] = d[0];
    sy[s] = d[1];
    const double area = d[2];
    ln_area[s] = (area > 0.0 && isfinite(area)) ? track_ln(area) : __longlong_as_double(0x7ff8000000000000ll);
    best_cost[s] = 0x7ff0000000000000ull;  // +inf
    n_best[s] = 0u;
    slot_track[s] = NONE;
    holder[s] = NONE;
    prop_cost[s] = ~0ull;
    prop_track[s] = NONE;
    slot_id[s] = 0ull;
}

// One warp per track: the lanes test 32 slots at once; the ones in the gate join the track's
// sorted list one at a time in slot order (entry j of the list in lane j), so that the list is
// the one a pass in slot order keeps.
extern "C" __global__ void trk_gather(TrkFrame f, const TrkTrack* tracks, const u32* cell_start, const double* sx,
                                      const double* sy, const double* ln_area, u64* pair_cost, u32* pair_slot,
                                      u32* pair_n, u64* best_cost) {
    const u32 ti = (blockIdx.x * blockDim.x + threadIdx.x) / WARP;
    const u32 lane = threadIdx.x & (WARP - 1u);
    if (ti >= f.tracks) return;  // whole warps leave together
    const TrkTrack t = tracks[ti];
    double px, py;
    trk_predict(t, f.frame, &px, &py);
    const u64 since = f.frame - t.clean_frame;
    double gate = f.gate_px + f.gate_growth_px * (double)(since > 0ull ? since - 1ull : 0ull);
    gate = fmin(gate, f.dense_radius);
    const double gate2 = gate * gate;
    const bool sized = f.size_weight > 0.0 && t.area > 0.0 && isfinite(t.area);
    const double weight = sized ? f.size_weight : 0.0;
    const double ln_track = sized ? track_ln(t.area) : 0.0;
    const u32 keep = f.keep;
    u64 my_cost = ~0ull;
    u32 my_slot = NONE, m = 0;
    u32 cx0, cx1, cy0, cy1;
    if (trk_window(f, px, py, gate, &cx0, &cx1, &cy0, &cy1)) {
        for (u32 cy = cy0; cy <= cy1; cy++) {
            const u32 row = cy * f.nx;
            const u32 a = cell_start[row + cx0], b = cell_start[row + cx1 + 1u];
            for (u32 first = a; first < b; first += WARP) {
                const u32 s = first + lane;
                bool in_gate = false;
                u64 cost = 0ull;
                if (s < b) {
                    const double dx = sx[s] - px, dy = sy[s] - py;
                    const double d2 = dx * dx + dy * dy;
                    if (d2 <= gate2) {
                        double size = fabs(ln_area[s] - ln_track);
                        size = isnan(size) ? 0.0 : weight * size;
                        cost = (u64)__double_as_longlong(d2 * f.inv_base2 + size);
                        in_gate = true;
                    }
                }
                u32 found = __ballot_sync(FULL, in_gate);
                while (found) {
                    const int src = __ffs(found) - 1;
                    found &= found - 1u;
                    const u64 c = __shfl_sync(FULL, cost, src);
                    const u32 slot = __shfl_sync(FULL, s, src);
                    // Later slots lose ties: it goes after every entry that costs no more.
                    const u64 last = __shfl_sync(FULL, my_cost, (keep - 1u) & (WARP - 1u));
                    if (m == keep && c >= last) continue;
                    const u32 at = __popc(__ballot_sync(FULL, lane < m && my_cost <= c));
                    const u64 up_cost = __shfl_up_sync(FULL, my_cost, 1);
                    const u32 up_slot = __shfl_up_sync(FULL, my_slot, 1);
                    if (lane > at && lane <= m && lane < keep) {
                        my_cost = up_cost;
                        my_slot = up_slot;
                    }
                    if (lane == at) {
                        my_cost = c;
                        my_slot = slot;
                    }
                    m = min(m + 1u, keep);
                }
            }
        }
    }
    const size_t base = (size_t)ti * keep;
    if (lane < m) {
        pair_cost[base + lane] = my_cost;
        pair_slot[base + lane] = my_slot;
        atomicMin(&best_cost[my_slot], my_cost);
    }
    if (lane == 0u) pair_n[ti] = m;
}

extern "C" __global__ void trk_ties(TrkFrame f, const u64* pair_cost, const u32* pair_slot, const u32* pair_n,
                                    const u64* best_cost, u32* n_best) {
    const u32 ti = blockIdx.x * blockDim.x + threadIdx.x;
    if (ti >= f.tracks) return;
    const size_t base = (size_t)ti * f.keep;
    for (u32 j = 0; j < pair_n[ti]; j++) {
        const u32 s = pair_slot[base + j];
        if (pair_cost[base + j] == best_cost[s]) atomicAdd(&n_best[s], 1u);
    }
}

extern "C" __global__ void trk_mutual(TrkFrame f, const u64* pair_cost, const u32* pair_slot, const u32* pair_n,
                                      const u64* best_cost, const u32* n_best, u32* slot_track, u32* take_slot) {
    const u32 ti = blockIdx.x * blockDim.x + threadIdx.x;
    if (ti >= f.tracks) return;
    const size_t base = (size_t)ti * f.keep;
    u32 take = NONE;
    if (pair_n[ti] > 0u) {
        const u32 s = pair_slot[base];
        if (best_cost[s] == pair_cost[base] && n_best[s] == 1u) {
            slot_track[s] = ti;  // the slot's only pair at that cost: no other track writes it
            take = s;
        }
    }
    take_slot[ti] = take;
}

// The tracks that took nothing and have a candidate no track took: listed (in any order: the
// settled result does not depend on it), each from its first pair.
extern "C" __global__ void trk_conflicts(TrkFrame f, const u32* pair_slot, const u32* pair_n, const u32* slot_track,
                                         const u32* take_slot, u32* next, u32* list, u32* list_len) {
    const u32 ti = blockIdx.x * blockDim.x + threadIdx.x;
    if (ti >= f.tracks) return;
    next[ti] = 0u;
    if (take_slot[ti] != NONE) return;
    const size_t base = (size_t)ti * f.keep;
    for (u32 j = 0; j < pair_n[ti]; j++) {
        if (slot_track[pair_slot[base + j]] == NONE) {
            list[atomicAdd(list_len, 1u)] = ti;
            return;
        }
    }
}

// Deferred acceptance in rounds, one block. In a round every free track proposes its next pair
// whose slot no mutual pair took; each slot keeps the least (cost, track) of its holder and its
// proposers; the others move on to their next pair and are free in the next round. The free
// tracks of a round are a list (the listed tracks first, then those let go, in `work` and
// `work + tracks` by turns); it ends when a round lets none go.
extern "C" __global__ void trk_settle(TrkFrame f, const u32* list, const u32* list_len, const u64* pair_cost,
                                      const u32* pair_slot, const u32* pair_n, const u32* slot_track, u32* next,
                                      u32* holder, u64* prop_cost, u32* prop_track, u32* proposed, u32* work) {
    __shared__ u32 n_free, n_next;
    const u32 keep = f.keep;
    if (threadIdx.x == 0) {
        n_free = *list_len;
        n_next = 0u;
    }
    __syncthreads();
    const u32* free = list;
    for (u32 round = 0;; round++) {
        u32* let_go = work + (size_t)(round & 1u) * f.tracks;
        const u32 n = n_free;
        for (u32 k = threadIdx.x; k < n; k += blockDim.x) {
            const u32 t = free[k];
            const size_t base = (size_t)t * keep;
            u32 j = next[t], slot = NONE;
            while (j < pair_n[t] && slot_track[pair_slot[base + j]] != NONE) j++;
            next[t] = j;
            if (j < pair_n[t]) {
                slot = pair_slot[base + j];
                atomicMin(&prop_cost[slot], pair_cost[base + j]);
            }
            proposed[k] = slot;
        }
        __syncthreads();
        for (u32 k = threadIdx.x; k < n; k += blockDim.x) {
            const u32 s = proposed[k];
            if (s == NONE) continue;
            const u32 t = free[k];
            if (pair_cost[(size_t)t * keep + next[t]] == prop_cost[s]) atomicMin(&prop_track[s], t);
        }
        __syncthreads();
        for (u32 k = threadIdx.x; k < n; k += blockDim.x) {
            const u32 s = proposed[k];
            if (s == NONE) continue;
            const u32 t = free[k];
            u32 gone = t;  // the track this proposal leaves free, if any
            if (prop_track[s] == t) {
                const u32 h = holder[s];
                const u64 cost = pair_cost[(size_t)t * keep + next[t]];
                if (h == NONE) {
                    holder[s] = t;
                    gone = NONE;
                } else {
                    const u64 held = pair_cost[(size_t)h * keep + next[h]];
                    if (cost < held || (cost == held && t < h)) {
                        holder[s] = t;
                        gone = h;  // only this thread touches h: it holds s and proposes nothing
                    }
                }
            }
            if (gone != NONE) {
                next[gone]++;
                let_go[atomicAdd(&n_next, 1u)] = gone;
            }
        }
        __syncthreads();
        for (u32 k = threadIdx.x; k < n; k += blockDim.x) {
            const u32 s = proposed[k];
            if (s == NONE) continue;
            atomicExch(&prop_cost[s], ~0ull);
            atomicExch(&prop_track[s], NONE);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            n_free = n_next;
            n_next = 0u;
        }
        __syncthreads();
        if (n_free == 0u) return;
        free = let_go;
    }
}

extern "C" __global__ void trk_settled(TrkFrame f, const u32* list, const u32* list_len, const u32* pair_slot,
                                       const u32* pair_n, const u32* next, const u32* holder, u32* slot_track,
                                       u32* take_slot) {
    const u32 k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= *list_len) return;
    const u32 t = list[k];
    const u32 j = next[t];
    if (j >= pair_n[t]) return;
    const u32 s = pair_slot[(size_t)t * f.keep + j];
    if (holder[s] == t) {
        slot_track[s] = t;
        take_slot[t] = s;
    }
}

// `observe` (src/track/mod.rs): track t moves to detection d.
__device__ void trk_observe(TrkTrack& t, const TrkFrame& f, const double* d) {
    const double x = d[0], y = d[1], area = d[2];
    t.confirmed |= f.confirm;
    if (t.hits > 1ull && area > f.merge_area_ratio * t.area) {
        double px, py;
        trk_predict(t, f.frame, &px, &py);
        t.est_x = trk_clamp(px, d[3], d[5]);
        t.est_y = trk_clamp(py, d[4], d[6]);
        t.est_frame = f.frame;
        t.merged = 1u;
        t.x = x;
        t.y = y;
        t.last_frame = f.frame;
        t.hits += 1ull;
        return;
    }
    if (f.predict_velocity) {
        const double dt = (double)(f.frame - t.clean_frame);
        const double vx = (x - t.clean_x) / dt, vy = (y - t.clean_y) / dt;
        if (t.hits == 1ull) {
            t.vx = vx;
            t.vy = vy;
        } else {
            const double a = f.velocity_smoothing;
            t.vx = a * vx + (1.0 - a) * t.vx;
            t.vy = a * vy + (1.0 - a) * t.vy;
        }
    }
    t.x = x;
    t.y = y;
    t.est_x = x;
    t.est_y = y;
    t.est_frame = f.frame;
    t.clean_x = x;
    t.clean_y = y;
    t.clean_frame = f.frame;
    t.merged = 0u;
    t.last_frame = f.frame;
    t.hits += 1ull;
    t.area += 0.2 * (area - t.area);
}

// The nearest taken component larger than `area` whose box holds (px, py), among the cells
// within the merge radius (ties: the first slot), searched by the warp: NONE if none.
__device__ u32 trk_merge_host(const TrkFrame& f, double area, double px, double py, const double* det,
                              const u32* slot_point, const u32* cell_start, const double* sx, const double* sy,
                              const u32* slot_track, u32 lane) {
    double best = 0.0;
    u32 host = NONE;
    u32 cx0, cx1, cy0, cy1;
    if (trk_window(f, px, py, f.merge_radius, &cx0, &cx1, &cy0, &cy1)) {
        for (u32 cy = cy0; cy <= cy1; cy++) {
            const u32 row = cy * f.nx;
            const u32 a = cell_start[row + cx0], b = cell_start[row + cx1 + 1u];
            // Each lane keeps the best of the slots it sees, which come in slot order.
            for (u32 s = a + lane; s < b; s += WARP) {
                if (slot_track[s] == NONE) continue;
                const double dx = sx[s] - px, dy = sy[s] - py;
                const double d2 = dx * dx + dy * dy;
                if (host != NONE && !(d2 < best)) continue;  // later slots lose ties
                const double* d = det + (size_t)TRK_DET * slot_point[s];
                if (d[2] > area && px >= d[3] && px <= d[5] && py >= d[4] && py <= d[6]) {
                    best = d2;
                    host = s;
                }
            }
        }
    }
    // The least (d2, slot) of the lanes'.
    for (int off = WARP / 2; off > 0; off >>= 1) {
        const double other = __shfl_down_sync(FULL, best, off);
        const u32 other_host = __shfl_down_sync(FULL, host, off);
        if (other_host != NONE && (host == NONE || other < best || (other == best && other_host < host))) {
            best = other;
            host = other_host;
        }
    }
    return __shfl_sync(FULL, host, 0);
}

// One warp per track (the merge search is the warp's; lane 0 writes the track).
extern "C" __global__ void trk_finish(TrkFrame f, TrkTrack* tracks, const double* det, const u32* slot_point,
                                      const u32* cell_start, const double* sx, const double* sy,
                                      const u32* slot_track, const u32* take_slot, u64* slot_id, u32* kept) {
    const u32 ti = (blockIdx.x * blockDim.x + threadIdx.x) / WARP;
    const u32 lane = threadIdx.x & (WARP - 1u);
    if (ti >= f.tracks) return;  // whole warps leave together
    TrkTrack t = tracks[ti];
    const u32 took = take_slot[ti];
    if (took != NONE) {
        if (lane == 0u) {
            slot_id[took] = t.id;
            trk_observe(t, f, det + (size_t)TRK_DET * slot_point[took]);
        }
    } else {
        t.merged = 0u;
        if (t.confirmed && f.frame - t.clean_frame <= (u64)f.max_merged) {
            double px, py;
            trk_predict(t, f.frame, &px, &py);
            const u32 host =
                trk_merge_host(f, t.area, px, py, det, slot_point, cell_start, sx, sy, slot_track, lane);
            if (host != NONE) {
                const double* d = det + (size_t)TRK_DET * slot_point[host];
                t.est_x = trk_clamp(px, d[3], d[5]);
                t.est_y = trk_clamp(py, d[4], d[6]);
                t.est_frame = f.frame;
                t.merged = 1u;
            }
        }
    }
    if (lane != 0u) return;
    const u32 max_missed = t.confirmed ? f.max_missed : min(f.tentative_max_missed, f.max_missed);
    kept[ti] = f.frame - t.est_frame > (u64)max_missed ? 0u : 1u;
    tracks[ti] = t;
}

// Per detection (in the caller's order): 1 when it starts a track (it has a slot, so a finite
// position, and no track took it).
extern "C" __global__ void trk_births(TrkFrame f, const u32* point_slot, const u32* slot_track, u32* born) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= f.points) return;
    const u32 s = point_slot[i];
    born[i] = (s != NONE && slot_track[s] == NONE) ? 1u : 0u;
}

// The kept tracks, in order, into `out`; the ended ones' IDs, in order, into `ended`.
extern "C" __global__ void trk_compact(TrkFrame f, const TrkTrack* tracks, const u32* kept, const u32* kept_rank,
                                       TrkTrack* out, u64* ended) {
    const u32 ti = blockIdx.x * blockDim.x + threadIdx.x;
    if (ti >= f.tracks) return;
    const u32 r = kept_rank[ti];
    if (kept[ti]) {
        out[r] = tracks[ti];
    } else {
        ended[ti - r] = tracks[ti].id;
    }
}

// The new tracks after the kept ones, in detection order, with IDs from `first_id` on.
extern "C" __global__ void trk_born(TrkFrame f, const double* det, const u32* point_slot, const u32* born,
                                    const u32* born_rank, const u32* kept_total, u64 first_id, TrkTrack* out,
                                    u64* slot_id) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= f.points || !born[i]) return;
    const u64 id = first_id + born_rank[i];
    const double* d = det + (size_t)TRK_DET * i;
    TrkTrack t;
    t.id = id;
    t.last_frame = f.frame;
    t.hits = 1ull;
    t.est_frame = f.frame;
    t.clean_frame = f.frame;
    t.x = d[0];
    t.y = d[1];
    t.vx = 0.0;
    t.vy = 0.0;
    t.area = d[2];
    t.est_x = d[0];
    t.est_y = d[1];
    t.clean_x = d[0];
    t.clean_y = d[1];
    t.merged = 0u;
    t.confirmed = 0u;
    out[*kept_total + born_rank[i]] = t;
    slot_id[point_slot[i]] = id;
}

// ---------------------------------------------------------------------------------------------
// The subnetwork rule (src/track/subnets.rs), in place of trk_ties .. trk_settled: nothing is
// taken before, every track's pairs are as trk_gather left them (by cost, then slot). A track
// whose candidates no other track names is alone and takes its cheapest; the tracks that share
// a candidate are joined into clusters (union-find over the slots), and each cluster's least
// track solves it on its thread: the least total cost, ties by the tie rule (track by track in
// order, each's candidates in order, then unlinked), by a search in that order that keeps the
// first cheapest assignment it meets. A cluster of more than TRK_SUB_TRACKS tracks, or whose
// search runs past TRK_SUB_STEPS steps, is marked for the host: its tracks' pairs are gathered
// (trk_sub_gather_left), the host solves it with the CPU tracker's solver and hands back its
// picks (trk_sub_apply).
//   trk_sub_clear   per slot: named by no track, a set and a cluster of its own
//   trk_sub_name    per track: each of its candidates named once more
//   trk_sub_kind    per track: alone (takes its cheapest), without candidates, or sharing (its
//                   unlinked cost; its slots joined)
//   trk_sub_members per sharing track: its cluster's root, leader (least track) and list
//   trk_sub_solve   per cluster, on its leader's thread
//   trk_sub_gather_left  per track of a cluster left to the host: its pairs, compacted (queued
//                   by the host only when there are any)
//   trk_sub_apply   per track the host solved: its pick

#define TRK_SUB_TRACKS 16
#define TRK_SUB_STEPS 4096

// `subnets::fixed`: a cost (its bits) in units of 2^-32, capped at 2^40.
__device__ __forceinline__ long long trk_fixed(u64 cost) {
    const double c = __longlong_as_double((long long)cost) * 4294967296.0;
    return c < 1099511627776.0 ? (long long)round(c) : (1ll << 40);
}

extern "C" __global__ void trk_sub_clear(TrkFrame f, u32* naming, u32* parent, u32* leader, u32* head, u32* count,
                                         u32* left_mark) {
    const u32 s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= f.slots) return;
    left_mark[s] = 0u;
    naming[s] = 0u;
    parent[s] = s;
    leader[s] = NONE;
    head[s] = NONE;
    count[s] = 0u;
}

extern "C" __global__ void trk_sub_name(TrkFrame f, const u32* pair_slot, const u32* pair_n, u32* naming) {
    const u32 ti = blockIdx.x * blockDim.x + threadIdx.x;
    if (ti >= f.tracks) return;
    const size_t base = (size_t)ti * f.keep;
    for (u32 j = 0; j < pair_n[ti]; j++) atomicAdd(&naming[pair_slot[base + j]], 1u);
}

// `shared`: 1 for a track that shares a candidate. Its unlinked cost (`subnets::unlinked_cost`):
// a pair's on the edge of its gate (without the dense frame's cut), and no less than its
// costliest candidate's.
extern "C" __global__ void trk_sub_kind(TrkFrame f, const TrkTrack* tracks, const u64* pair_cost, const u32* pair_slot,
                                        const u32* pair_n, const u32* naming, u32* parent, u32* slot_track,
                                        u32* take_slot, u32* shared, u64* unlinked) {
    const u32 ti = blockIdx.x * blockDim.x + threadIdx.x;
    if (ti >= f.tracks) return;
    const size_t base = (size_t)ti * f.keep;
    const u32 n = pair_n[ti];
    bool sharing = false;
    for (u32 j = 0; j < n; j++) sharing |= naming[pair_slot[base + j]] != 1u;
    u32 take = NONE;
    if (n > 0u && !sharing) {
        take = pair_slot[base];
        slot_track[take] = ti;  // no other track names it
    }
    if (sharing) {
        const u64 since = f.frame - tracks[ti].clean_frame;
        const double gate = f.gate_px + f.gate_growth_px * (double)(since > 0ull ? since - 1ull : 0ull);
        double edge = gate / f.gate_px;
        edge = edge * edge;
        u64 cost = (u64)__double_as_longlong(edge);
        for (u32 j = 0; j < n; j++) cost = max(cost, pair_cost[base + j]);
        unlinked[ti] = cost;
        for (u32 j = 1; j < n; j++) merge_halving(parent, pair_slot[base], pair_slot[base + j]);
    }
    take_slot[ti] = take;
    shared[ti] = sharing ? 1u : 0u;
}

// `root`: a sharing track's cluster (NONE: none); each cluster's least track, its count and a
// list of its tracks (in any order) through `next_member`.
extern "C" __global__ void trk_sub_members(TrkFrame f, const u32* pair_slot, const u32* shared, const u32* parent,
                                           u32* root, u32* leader, u32* count, u32* head, u32* next_member) {
    const u32 ti = blockIdx.x * blockDim.x + threadIdx.x;
    if (ti >= f.tracks) return;
    if (!shared[ti]) {
        root[ti] = NONE;
        return;
    }
    const u32 r = find_root(parent, pair_slot[(size_t)ti * f.keep]);
    root[ti] = r;
    atomicMin(&leader[r], ti);
    atomicAdd(&count[r], 1u);
    next_member[ti] = atomicExch(&head[r], ti);
}

// Cluster r, of n tracks, left to the host: marked at its root; the clusters and their tracks
// counted (n_left[0], n_left[1]).
__device__ __forceinline__ void trk_sub_leave(u32 r, u32 n, u32* left_mark, u32* n_left) {
    left_mark[r] = 1u;
    atomicAdd(&n_left[0], 1u);
    atomicAdd(&n_left[1], n);
}

// The leader of each cluster solves it, or leaves it to the host.
extern "C" __global__ void trk_sub_solve(TrkFrame f, const u64* pair_cost, const u32* pair_slot, const u32* pair_n,
                                         const u64* unlinked, const u32* root, const u32* leader, const u32* count,
                                         const u32* head, const u32* next_member, u32* slot_track, u32* take_slot,
                                         u32* left_mark, u32* n_left) {
    const u32 ti = blockIdx.x * blockDim.x + threadIdx.x;
    if (ti >= f.tracks) return;
    const u32 r = root[ti];
    if (r == NONE || leader[r] != ti) return;
    const u32 n = count[r];
    if (n > TRK_SUB_TRACKS) {
        trk_sub_leave(r, n, left_mark, n_left);
        return;
    }
    // The members, ascending.
    u32 member[TRK_SUB_TRACKS];
    u32 t = head[r];
    for (u32 k = 0; k < n; k++) {
        u32 j = k;
        while (j > 0u && member[j - 1u] > t) {
            member[j] = member[j - 1u];
            j--;
        }
        member[j] = t;
        t = next_member[t];
    }
    // Depth d decides member d: option k[d] next (its candidates, then unlinked at pair_n),
    // part[d] the cost of the members before it, chosen[d] the slot it took (NONE: unlinked).
    u32 options[TRK_SUB_TRACKS], k[TRK_SUB_TRACKS], pick[TRK_SUB_TRACKS], best_pick[TRK_SUB_TRACKS],
        chosen[TRK_SUB_TRACKS];
    long long unlinked_fixed[TRK_SUB_TRACKS], part[TRK_SUB_TRACKS + 1];
    for (u32 d = 0; d < n; d++) {
        options[d] = pair_n[member[d]];
        unlinked_fixed[d] = trk_fixed(unlinked[member[d]]);
    }
    long long best = 0x7fffffffffffffffll;
    u32 depth = 0, steps = 0;
    part[0] = 0;
    k[0] = 0u;
    for (;;) {
        if (depth == n) {
            // Reached only below the best (the bound below): the first of the least total so far.
            best = part[n];
            for (u32 d = 0; d < n; d++) best_pick[d] = pick[d];
            depth--;
            continue;
        }
        const u32 j = k[depth];
        if (j > options[depth]) {
            if (depth == 0u) break;
            depth--;
            continue;
        }
        if (++steps > TRK_SUB_STEPS) {
            trk_sub_leave(r, n, left_mark, n_left);
            return;
        }
        k[depth] = j + 1u;
        const bool linked = j < options[depth];
        const size_t at = (size_t)member[depth] * f.keep + j;
        const long long sum = part[depth] + (linked ? trk_fixed(pair_cost[at]) : unlinked_fixed[depth]);
        if (sum >= best) {
            // A track's later options cost no less (its unlinked cost last, the dearest): none
            // of them can do better.
            k[depth] = options[depth] + 1u;
            continue;
        }
        const u32 s = linked ? pair_slot[at] : NONE;
        bool used = false;
        if (linked)
            for (u32 d = 0; d < depth; d++) used |= chosen[d] == s;
        if (used) continue;
        chosen[depth] = s;
        pick[depth] = j;
        part[depth + 1u] = sum;
        depth++;
        if (depth < n) k[depth] = 0u;
    }
    for (u32 d = 0; d < n; d++) {
        if (best_pick[d] < options[d]) {
            const u32 s = pair_slot[(size_t)member[d] * f.keep + best_pick[d]];
            slot_track[s] = member[d];
            take_slot[member[d]] = s;
        }
    }
}

// The tracks of the clusters left to the host, compacted in any order (`n_out` counts them):
// each one's index, cluster root, pairs and unlinked cost.
extern "C" __global__ void trk_sub_gather_left(TrkFrame f, const u64* pair_cost, const u32* pair_slot,
                                               const u32* pair_n, const u64* unlinked, const u32* root,
                                               const u32* left_mark, u32* out_track, u32* out_root, u32* out_n,
                                               u64* out_unlinked, u64* out_cost, u32* out_slot, u32* n_out) {
    const u32 ti = blockIdx.x * blockDim.x + threadIdx.x;
    if (ti >= f.tracks) return;
    const u32 r = root[ti];
    if (r == NONE || !left_mark[r]) return;
    const u32 k = atomicAdd(n_out, 1u);
    const u32 n = pair_n[ti];
    out_track[k] = ti;
    out_root[k] = r;
    out_n[k] = n;
    out_unlinked[k] = unlinked[ti];
    const size_t from = (size_t)ti * f.keep, to = (size_t)k * f.keep;
    for (u32 j = 0; j < n; j++) {
        out_cost[to + j] = pair_cost[from + j];
        out_slot[to + j] = pair_slot[from + j];
    }
}

// The host's picks: (track, slot) pairs, the slot NONE for a track left unlinked.
extern "C" __global__ void trk_sub_apply(u32 n, const u32* picks, u32* slot_track, u32* take_slot) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const u32 t = picks[2u * i], s = picks[2u * i + 1u];
    take_slot[t] = s;
    if (s != NONE) slot_track[s] = t;
}
