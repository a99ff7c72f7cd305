//! The tracker on the GPU (`kernels/track.cu`): the CPU tracker's greedy association, kernel for
//! kernel, with the same IDs on the same detections (selftest's track group compares the two
//! frame by frame). The tracks stay on the device from frame to frame; each frame the host
//! indexes the detections in the CPU tracker's grid (the same slots, so ties break alike),
//! uploads them with the index, and takes back each detection's track ID and the IDs of the
//! tracks that ended.
//!
//! Both rules run here: the greedy one, and trackpy's subnetwork rule, whose clusters of up to
//! 16 tracks are solved on the device (at 50,000 particles none has more than 4) and larger
//! ones by the CPU tracker's solver on the host, in a wait of their own (`solve_on_host`).
//! It keeps what the frame path needs: IDs and ended tracks; trajectory tails and the tracks'
//! summaries stay with the CPU tracker (`GpuTracker::supports`).

use super::assign::NONE;
use super::grid::GridIndex;
use super::subnets::{Cluster, Solver, EXACT_MAX_TRACKS};
use super::{Assignment, Detection, Extent, TrackerConfig};
use crate::ccl::cuda::detections::DETECTION_DOUBLES;
use crate::ccl::cuda::subpixel::raw_device_ptr;
use crate::ccl::stats::ComponentStats;
use crate::ccl::subpixel::SubpixelCentroid;
use crate::ccl::DeviceDetections;
use crate::error::{Error, Result};
use crate::gpu::buffers::at_least;
use crate::gpu::events::StepEvents;
use crate::gpu::kernels::KernelFile;
use crate::gpu::launch::{launch, linear_launch, load};
use crate::gpu::staging::{download_prefix, upload_pinned, PinnedBuffer};
use crate::gpu::{cuda_err, Gpu};
use cudarc::driver::{
    CudaFunction, CudaSlice, DeviceRepr, LaunchConfig, PinnedHostSlice, PushKernelArg,
    ValidAsZeroBits,
};
use rayon::prelude::*;
use std::sync::Arc;

/// Candidates a track may keep on the GPU (`TRK_MAX_KEEP`: a track's list lives in registers).
pub const MAX_CANDIDATES: u32 = 32;
/// Bytes of `struct TrkTrack`.
const TRACK_BYTES: usize = 5 * 8 + 9 * 8 + 2 * 4;
/// Doubles per detection (`TRK_DET`): x, y, area, box left, top, right, bottom; the layout
/// a labeler leaves on the device too (`ccl::DeviceDetections`).
const DET: usize = DETECTION_DOUBLES;
/// Detections a task packs, on rayon's pool (`GpuTracker::upload`).
const PACK_BLOCK: usize = 4096;
/// Threads per block of the per-item kernels.
const THREADS: u32 = 128;
/// Threads of the one block that settles the conflicts, and of `scan_rows` (`SCAN_THREADS`).
const BLOCK: u32 = 1024;

/// Queues kernel `$kernel` on stream `$stream` over `$grid` with the arguments in order, between
/// two of `$marks`' events; `$name` names it in the phases and in an error. Unsafe as `launch`:
/// the arguments must be the kernel's parameters.
macro_rules! queue {
    [$marks:expr, $stream:expr, $kernel:expr, $grid:expr, $name:literal; $($arg:expr),+ $(,)?] => {{
        $marks.start()?;
        let mut args = $stream.launch_builder($kernel);
        $(args.arg($arg);)+
        launch(&mut args, $grid, $name)?;
        $marks.end($name)
    }};
}

/// The kernels of a frame as they are queued, each between two events while the phases are
/// timed (event 2i before kernel i, 2i + 1 after it).
struct Marks<'a> {
    gpu: &'a Gpu,
    events: &'a mut StepEvents,
    names: &'a mut Vec<&'static str>,
}

impl Marks<'_> {
    fn start(&mut self) -> Result<()> {
        self.events.record(self.gpu, 2 * self.names.len())
    }

    fn end(&mut self, name: &'static str) -> Result<()> {
        self.events.record(self.gpu, 2 * self.names.len() + 1)?;
        self.names.push(name);
        Ok(())
    }
}

/// Mirror of `struct TrkFrame` in kernels/track.cu.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct TrkFrame {
    frame: u64,
    gate_px: f64,
    gate_growth_px: f64,
    dense_radius: f64,
    merge_radius: f64,
    inv_base2: f64,
    size_weight: f64,
    merge_area_ratio: f64,
    velocity_smoothing: f64,
    x0: f64,
    y0: f64,
    inv_cell: f64,
    nx: u32,
    ny: u32,
    tracks: u32,
    slots: u32,
    points: u32,
    keep: u32,
    confirm: u32,
    predict_velocity: u32,
    max_missed: u32,
    tentative_max_missed: u32,
    max_merged: u32,
    pad: u32,
}

// SAFETY: plain old data with the layout of the CUDA struct (checked by a test).
unsafe impl DeviceRepr for TrkFrame {}

/// The kernels of kernels/track.cu.
struct Kernels {
    cells: CudaFunction,
    scatter: CudaFunction,
    sort_cells: CudaFunction,
    place: CudaFunction,
    gather: CudaFunction,
    ties: CudaFunction,
    mutual: CudaFunction,
    conflicts: CudaFunction,
    settle: CudaFunction,
    settled: CudaFunction,
    finish: CudaFunction,
    births: CudaFunction,
    scan: CudaFunction,
    compact: CudaFunction,
    born: CudaFunction,
    ids: CudaFunction,
    sub_clear: CudaFunction,
    sub_name: CudaFunction,
    sub_kind: CudaFunction,
    sub_members: CudaFunction,
    sub_solve: CudaFunction,
    sub_gather_left: CudaFunction,
    sub_apply: CudaFunction,
}

impl Kernels {
    fn load(gpu: &Gpu) -> Result<Kernels> {
        let k = |name| load(gpu, KernelFile::Track, name);
        Ok(Kernels {
            cells: k("trk_cells")?,
            scatter: k("trk_scatter")?,
            sort_cells: k("trk_sort_cells")?,
            place: k("trk_place")?,
            gather: k("trk_gather")?,
            ties: k("trk_ties")?,
            mutual: k("trk_mutual")?,
            conflicts: k("trk_conflicts")?,
            settle: k("trk_settle")?,
            settled: k("trk_settled")?,
            finish: k("trk_finish")?,
            births: k("trk_births")?,
            scan: k("scan_rows")?,
            compact: k("trk_compact")?,
            born: k("trk_born")?,
            ids: k("trk_ids")?,
            sub_clear: k("trk_sub_clear")?,
            sub_name: k("trk_sub_name")?,
            sub_kind: k("trk_sub_kind")?,
            sub_members: k("trk_sub_members")?,
            sub_solve: k("trk_sub_solve")?,
            sub_gather_left: k("trk_sub_gather_left")?,
            sub_apply: k("trk_sub_apply")?,
        })
    }
}

/// Device memory, each buffer grown to the most it held and kept.
#[derive(Default)]
struct Device {
    /// The tracks (`TrkTrack` records), and where the next frame's go.
    tracks: Option<CudaSlice<u8>>,
    spare: Option<CudaSlice<u8>>,
    /// The detections (uploaded); the grid index: each point's cell and slot, each cell's
    /// count and first slot (and the end), each slot's point; each point's track ID.
    det: Option<CudaSlice<f64>>,
    point_cell: Option<CudaSlice<u32>>,
    point_slot: Option<CudaSlice<u32>>,
    cell_count: Option<CudaSlice<u32>>,
    cell_start: Option<CudaSlice<u32>>,
    slot_point: Option<CudaSlice<u32>>,
    ids: Option<CudaSlice<u64>>,
    /// Per slot.
    sx: Option<CudaSlice<f64>>,
    sy: Option<CudaSlice<f64>>,
    ln_area: Option<CudaSlice<f64>>,
    best_cost: Option<CudaSlice<u64>>,
    n_best: Option<CudaSlice<u32>>,
    slot_track: Option<CudaSlice<u32>>,
    holder: Option<CudaSlice<u32>>,
    prop_cost: Option<CudaSlice<u64>>,
    prop_track: Option<CudaSlice<u32>>,
    slot_id: Option<CudaSlice<u64>>,
    /// Per track: its candidates (`keep` places each), how many, the slot it takes, its next
    /// pair in the conflicts, kept or ended, the rank among the kept, the ended IDs.
    pair_cost: Option<CudaSlice<u64>>,
    pair_slot: Option<CudaSlice<u32>>,
    pair_n: Option<CudaSlice<u32>>,
    take_slot: Option<CudaSlice<u32>>,
    next: Option<CudaSlice<u32>>,
    kept: Option<CudaSlice<u32>>,
    kept_rank: Option<CudaSlice<u32>>,
    ended: Option<CudaSlice<u64>>,
    /// The tracks with conflicts, the slot each free track proposed in the current round, and
    /// the tracks let go in a round (two lists of `tracks`, by turns).
    list: Option<CudaSlice<u32>>,
    proposed: Option<CudaSlice<u32>>,
    work: Option<CudaSlice<u32>>,
    /// Per detection: starts a track, and its rank among those that do.
    born: Option<CudaSlice<u32>>,
    born_rank: Option<CudaSlice<u32>>,
    /// The conflict list's length, the kept tracks, the births; the clusters left to the host,
    /// their tracks, and those gathered.
    counts: Option<CudaSlice<u32>>,
    /// The subnetwork rule's clusters (`trk_sub_*`): per slot the tracks that name it, the
    /// union-find, and per cluster root its least track, its count and its list's head; per
    /// track whether it shares a candidate, its cluster's root, the next track of its
    /// cluster's list, its unlinked cost; per slot whether the cluster it is the root of is
    /// left to the host, and those clusters' tracks gathered (each one's index, root, pairs
    /// and unlinked cost); the host's picks (track, slot).
    naming: Option<CudaSlice<u32>>,
    parent: Option<CudaSlice<u32>>,
    leader: Option<CudaSlice<u32>>,
    member_count: Option<CudaSlice<u32>>,
    head: Option<CudaSlice<u32>>,
    shared: Option<CudaSlice<u32>>,
    root: Option<CudaSlice<u32>>,
    next_member: Option<CudaSlice<u32>>,
    unlinked: Option<CudaSlice<u64>>,
    left_mark: Option<CudaSlice<u32>>,
    left_track: Option<CudaSlice<u32>>,
    left_root: Option<CudaSlice<u32>>,
    left_n: Option<CudaSlice<u32>>,
    left_unlinked: Option<CudaSlice<u64>>,
    left_cost: Option<CudaSlice<u64>>,
    left_slot: Option<CudaSlice<u32>>,
    picks: Option<CudaSlice<u32>>,
}

/// Page-locked host memory the uploads read and the downloads land in.
#[derive(Default)]
struct Host {
    det: Option<PinnedBuffer<f64>>,
    ids: Option<PinnedHostSlice<u64>>,
    counts: Option<PinnedHostSlice<u32>>,
    ended: Option<PinnedHostSlice<u64>>,
}

/// A detection as the kernels read it (`TRK_DET` doubles), as it is uploaded and as a labeler
/// leaves it on the device (`ccl::DeviceDetections`).
pub fn detection_row(d: &Detection) -> [f64; DET] {
    let [l, t, r, b] = d.bbox;
    [d.x, d.y, d.area, l, t, r, b]
}

/// Room for `n` elements, in steps of powers of two (a count that creeps up does not make a
/// new buffer every frame).
fn room(n: usize) -> usize {
    n.max(1).next_power_of_two()
}

/// Lets `fill` write `n` elements into the page-locked buffer in `host` (grown when too small)
/// and queues their upload into the device buffer in `dst` (grown likewise).
fn stage_and_upload<T: DeviceRepr + ValidAsZeroBits + Copy>(
    gpu: &Gpu,
    host: &mut Option<PinnedBuffer<T>>,
    dst: &mut Option<CudaSlice<T>>,
    n: usize,
    fill: impl FnOnce(&mut [T]),
) -> Result<()> {
    let dev = at_least(gpu, dst, room(n))?;
    if n == 0 {
        return Ok(());
    }
    if host.as_ref().is_none_or(|h| h.len() < n) {
        *host = None;
        *host = Some(PinnedBuffer::alloc(gpu, room(n), true)?);
    }
    let staged = &mut host.as_mut().expect("allocated above").as_mut_slice()[..n];
    fill(staged);
    // SAFETY: the page-locked buffer is written again only in the next frame, after the host
    // has waited for this frame's stream (`GpuTracker::update` ends with a wait).
    unsafe { upload_pinned(&gpu.stream, staged, &mut dev.slice_mut(0..n)) }
}

/// Where the kernels read a frame's detections.
enum Input<'a> {
    /// Packed and uploaded by the host.
    Upload(&'a [Detection]),
    /// The labeler's rows of them, in this tracker's context.
    OnDevice(&'a DeviceDetections),
}

impl Input<'_> {
    fn len(&self) -> usize {
        match self {
            Input::Upload(d) => d.len(),
            Input::OnDevice(d) => d.len(),
        }
    }
}

/// The tracker on the GPU. Feed it every frame's detections in frame order, as `Tracker`.
pub struct GpuTracker {
    config: TrackerConfig,
    gpu: Arc<Gpu>,
    kernels: Kernels,
    grid: GridIndex,
    next_id: u64,
    last_frame: Option<u64>,
    /// Active tracks on the device.
    tracks: usize,
    /// The IDs of the tracks that ended and were not drained yet, in the order they ended.
    ended: Vec<u64>,
    dev: Device,
    host: Host,
    /// Events around the kernels while the phases are timed (`time_phases`), else off.
    events: StepEvents,
    /// The latest frame's phases: name and milliseconds; the kernels it queued, in order.
    phases: Vec<(&'static str, f64)>,
    queued: Vec<&'static str>,
    /// The subnetwork rule's scratch on the host: for the clusters the kernels leave to it.
    host_solver: Solver,
    /// Clusters solved on the host, and those of them paired greedily (more than
    /// `EXACT_MAX_TRACKS` tracks), over every frame.
    host_clusters: u64,
    greedy_clusters: u64,
    /// A frame of many detections takes its extent on rayon's pool (`Tracker::set_on_pool`).
    on_pool: bool,
    /// Frames whose detections were read where the labeler left them, over every frame.
    resident_frames: u64,
}

impl GpuTracker {
    /// Why the GPU tracker cannot run with `config` (the CPU tracker can), if it cannot.
    pub fn supports(config: &TrackerConfig) -> std::result::Result<(), String> {
        if config.max_candidates > MAX_CANDIDATES {
            return Err(format!(
                "a track keeps at most {MAX_CANDIDATES} candidates on the GPU, {} asked",
                config.max_candidates
            ));
        }
        if config.tail_len > 0 {
            return Err("trajectory tails are kept by the CPU tracker".into());
        }
        Ok(())
    }

    /// A tracker on `gpu`'s stream (give it a stream of its own, `Gpu::with_own_stream`, to
    /// track beside other work).
    pub fn new(gpu: Arc<Gpu>, config: TrackerConfig) -> Result<GpuTracker> {
        config.validate()?;
        Self::supports(&config).map_err(|why| Error::Invalid(format!("GPU tracker: {why}")))?;
        Ok(GpuTracker {
            kernels: Kernels::load(&gpu)?,
            gpu,
            grid: GridIndex::new(config.gate_px),
            config,
            next_id: 1,
            last_frame: None,
            tracks: 0,
            ended: Vec::new(),
            dev: Device::default(),
            host: Host::default(),
            events: StepEvents::off(),
            phases: Vec::new(),
            queued: Vec::new(),
            host_solver: Solver::default(),
            host_clusters: 0,
            greedy_clusters: 0,
            on_pool: true,
            resident_frames: 0,
        })
    }

    /// Starts afresh with `config`, as `new` would, keeping the device buffers (a caller that
    /// tracks many short sequences does not allocate them for each).
    pub fn restart(&mut self, config: TrackerConfig) -> Result<()> {
        config.validate()?;
        Self::supports(&config).map_err(|why| Error::Invalid(format!("GPU tracker: {why}")))?;
        self.grid = GridIndex::new(config.gate_px);
        self.config = config;
        self.next_id = 1;
        self.last_frame = None;
        self.tracks = 0;
        self.ended.clear();
        self.phases.clear();
        (
            self.host_clusters,
            self.greedy_clusters,
            self.resident_frames,
        ) = (0, 0, 0);
        Ok(())
    }

    /// The device the tracker runs on.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    pub fn config(&self) -> &TrackerConfig {
        &self.config
    }

    /// Whether a frame of many detections may take its extent on rayon's pool (the default),
    /// as `Tracker::set_on_pool`.
    pub fn set_on_pool(&mut self, on: bool) {
        self.on_pool = on;
    }

    /// Would a frame of `detections` take its host passes on rayon's pool (as
    /// `Tracker::would_use_pool`)? Only from `PARALLEL_MIN_DETECTIONS` on.
    pub fn would_use_pool(&self, detections: usize) -> bool {
        super::detections_on_pool(detections)
    }

    /// Times the phases of every `update` from now on (`on`), or stops: the host's steps by
    /// its clock, each kernel by events around it (for benchmarks: see `phase_times`).
    pub fn time_phases(&mut self, on: bool) {
        self.events.set_off(!on);
        self.phases.clear();
    }

    /// The milliseconds of each phase of the latest `update`, in order, while `time_phases` is
    /// on (empty otherwise).
    pub fn phase_times(&self) -> &[(&'static str, f64)] {
        &self.phases
    }

    /// Clusters of the subnetwork rule solved on the host (more than 16 tracks, or a long
    /// search), over every frame so far.
    pub fn host_clusters(&self) -> u64 {
        self.host_clusters
    }

    /// Clusters of the subnetwork rule too large to solve exactly, paired greedily, over every
    /// frame so far (as `Tracker::greedy_clusters`).
    pub fn greedy_clusters(&self) -> u64 {
        self.greedy_clusters
    }

    /// The ID the next new track takes.
    pub fn next_id(&self) -> u64 {
        self.next_id
    }

    /// Tracks still running.
    pub fn active_count(&self) -> usize {
        self.tracks
    }

    /// Takes over the tracks of `cpu` (a tracker of the same settings, which has tracked the
    /// frames so far), in their order, with its next ID and its last frame: from here on this
    /// tracker gives the IDs `cpu` would have given. Only what association reads is taken (a
    /// track's summary sums stay with `cpu`); this tracker must hold no tracks.
    pub fn adopt(&mut self, cpu: &super::Tracker) -> Result<()> {
        if self.tracks > 0 {
            return Err(Error::Invalid(
                "GPU tracker: tracks can be taken over only by a tracker without any".into(),
            ));
        }
        let tracks = cpu.active();
        let mut records = Vec::with_capacity(tracks.len() * TRACK_BYTES);
        for t in tracks {
            for v in [t.id, t.last_frame, t.hits, t.est_frame, t.clean_frame] {
                records.extend_from_slice(&v.to_ne_bytes());
            }
            let reals = [
                t.x, t.y, t.vx, t.vy, t.area, t.est_x, t.est_y, t.clean_x, t.clean_y,
            ];
            for v in reals {
                records.extend_from_slice(&v.to_ne_bytes());
            }
            for v in [t.merged as u32, t.confirmed as u32] {
                records.extend_from_slice(&v.to_ne_bytes());
            }
        }
        debug_assert_eq!(records.len(), tracks.len() * TRACK_BYTES);
        if !records.is_empty() {
            let dst = at_least(&self.gpu, &mut self.dev.tracks, room(records.len()))?;
            (self.gpu.stream)
                .memcpy_htod(&records, &mut dst.slice_mut(0..records.len()))
                .map_err(|e| cuda_err("uploading the tracks taken over", e))?;
            // The copy reads `records`, which goes when this returns.
            (self.gpu.stream)
                .synchronize()
                .map_err(|e| cuda_err("uploading the tracks taken over", e))?;
        }
        self.tracks = tracks.len();
        self.next_id = cpu.next_id();
        self.last_frame = cpu.last_frame();
        Ok(())
    }

    /// Hands over the IDs of the tracks that ended since the last call, in the order they
    /// ended (as `Tracker::drain_finished` does their summaries).
    pub fn drain_ended(&mut self) -> std::vec::Drain<'_, u64> {
        self.ended.drain(..)
    }

    /// Frames whose detections the kernels read where the labeler left them (`update_from_rows`),
    /// over every frame so far.
    pub fn resident_frames(&self) -> u64 {
        self.resident_frames
    }

    /// Assigns the detections of `frame` to tracks and returns each detection's track ID, as
    /// `Tracker::update` does (the same IDs).
    pub fn update(&mut self, frame: u64, detections: &[Detection]) -> Result<Vec<u64>> {
        let clock = std::time::Instant::now();
        let many = self.many(detections.len());
        let extent = Extent::of(detections, many);
        self.track(frame, Input::Upload(detections), extent, (many, clock))
    }

    /// `update` of the detections `Detection::from_rows(stats, subpixel)` makes, the kernels
    /// reading them from `on_device` (the labeler's rows of them, made with the sub-pixel
    /// centroids: `Labeling::device_detections`) where it holds one row per detection in this
    /// tracker's context. The host reads the rows for the frame's extent and cells without
    /// making the detections (a dense frame's 98,871: megabytes written and read again).
    /// Where the kernels cannot read `on_device`, the detections are made and uploaded.
    pub fn update_from_rows(
        &mut self,
        frame: u64,
        (stats, subpixel): (&[ComponentStats], &[SubpixelCentroid]),
        on_device: &DeviceDetections,
    ) -> Result<Vec<u64>> {
        let n = stats.len();
        if subpixel.len() != n || !self.reads(on_device, n) {
            return self.update(frame, &Detection::from_rows(stats, subpixel));
        }
        let clock = std::time::Instant::now();
        let many = self.many(n);
        let extent = Extent::of_rows(stats, subpixel, many);
        self.track(frame, Input::OnDevice(on_device), extent, (many, clock))
    }

    /// A frame of `n` detections takes its host passes on rayon's pool.
    fn many(&self, n: usize) -> bool {
        self.on_pool && rayon::current_num_threads() > 1 && self.would_use_pool(n)
    }

    /// Can the kernels read a frame of `n` detections from `on_device`?
    fn reads(&self, on_device: &DeviceDetections, n: usize) -> bool {
        on_device.len() == n && **on_device.context() == *self.gpu.ctx
    }

    /// Tracks a frame of `input`'s detections, whose extent is `extent`. `many`: its host
    /// passes on rayon's pool; `clock`: when the frame's first phase began.
    fn track(
        &mut self,
        frame: u64,
        input: Input<'_>,
        extent: Extent,
        (many, mut clock): (bool, std::time::Instant),
    ) -> Result<Vec<u64>> {
        if self.last_frame.is_some_and(|last| frame <= last) {
            self.end_all()?;
        }
        let n = input.len();
        if n >= u32::MAX as usize / 2 {
            return Err(Error::Invalid(format!(
                "GPU tracker: {n} detections in one frame, more than it can index"
            )));
        }
        self.last_frame = Some(frame);
        self.phases.clear();
        let mut lap = |phases: &mut Vec<(&'static str, f64)>, timed: bool, name| {
            if timed {
                let now = std::time::Instant::now();
                phases.push((name, now.duration_since(clock).as_secs_f64() * 1e3));
                clock = now;
            }
        };
        let timed = !self.events.is_off();
        let cfg = self.config;
        // The frame's cells, exactly as the CPU tracker's (`Tracker::index_detections`); the
        // kernels sort the detections into them.
        let dense_radius = extent.dense_radius(cfg.max_candidates);
        self.grid.set_min_cell(cfg.gate_px.min(dense_radius));
        let cells = self.grid.lay_cells(extent.bounds, n);
        if cells >= u32::MAX as usize / 2 {
            return Err(Error::Invalid(format!(
                "GPU tracker: {cells} grid cells for one frame, more than it can index"
            )));
        }
        let reach = (4.0 * cfg.gate_px).min(dense_radius).min(extent.reach) + 1.0;
        let slots = extent.finite;
        lap(&mut self.phases, timed, "extent + cells (host)");
        let (x0, y0, inv_cell, nx, ny) = self.grid.geometry();
        let f = TrkFrame {
            frame,
            gate_px: cfg.gate_px,
            gate_growth_px: cfg.gate_growth_px,
            dense_radius,
            merge_radius: reach + cfg.gate_px.min(dense_radius),
            inv_base2: 1.0 / (cfg.gate_px * cfg.gate_px),
            size_weight: cfg.size_weight,
            merge_area_ratio: cfg.merge_area_ratio,
            velocity_smoothing: cfg.velocity_smoothing,
            x0,
            y0,
            inv_cell,
            nx: nx as u32,
            ny: ny as u32,
            tracks: self.tracks as u32,
            slots: slots as u32,
            points: n as u32,
            keep: cfg.max_candidates,
            confirm: (dense_radius >= cfg.gate_px) as u32,
            predict_velocity: cfg.predict_velocity as u32,
            max_missed: cfg.max_missed,
            tentative_max_missed: cfg.tentative_max_missed,
            max_merged: cfg.max_merged,
            pad: 0,
        };
        // Where the kernels read the detections: the labeler's rows, or the upload's.
        let (on_device, name) = match input {
            Input::OnDevice(d) => {
                self.resident_frames += 1;
                let rows = raw_device_ptr(d.rows(), &self.gpu.stream);
                (Some(rows), "detections on the device (host)")
            }
            Input::Upload(detections) => {
                self.upload(detections, many)?;
                (None, "pack + stage + upload (host)")
            }
        };
        self.allocate(f)?;
        lap(&mut self.phases, timed, name);
        self.queue_frame(&f, on_device)?;
        lap(&mut self.phases, timed, "queue the kernels (host)");
        let (kept, born) = self.read_back(n)?;
        lap(&mut self.phases, timed, "wait for the frame (host)");
        if timed {
            for (i, name) in self.queued.iter().enumerate() {
                let ms = self.events.elapsed_ms(2 * i, 2 * i + 1)?;
                self.phases.push((name, ms));
            }
        }
        let ids = match &self.host.ids {
            Some(h) if n > 0 => {
                let ids = h.as_slice().map_err(|e| cuda_err("reading the IDs", e))?;
                ids[..n].to_vec()
            }
            _ => vec![0; n],
        };
        std::mem::swap(&mut self.dev.tracks, &mut self.dev.spare);
        self.tracks = kept + born;
        self.next_id += born as u64;
        lap(&mut self.phases, timed, "IDs (host)");
        Ok(ids)
    }

    /// Ends every active track (a jump back in the frame index, or the end of a stream).
    pub fn end_all(&mut self) -> Result<()> {
        if self.tracks == 0 {
            return Ok(());
        }
        let mut records = vec![0u8; self.tracks * TRACK_BYTES];
        if let Some(tracks) = &self.dev.tracks {
            (self.gpu.stream)
                .memcpy_dtoh(&tracks.slice(0..records.len()), &mut records)
                .map_err(|e| cuda_err("downloading the tracks", e))?;
            (self.gpu.stream)
                .synchronize()
                .map_err(|e| cuda_err("downloading the tracks", e))?;
        }
        // A record starts with its ID.
        let ids = records
            .chunks_exact(TRACK_BYTES)
            .map(|r| u64::from_ne_bytes(r[..8].try_into().expect("a record holds its ID")));
        self.ended.extend(ids);
        self.tracks = 0;
        Ok(())
    }

    /// Queues the upload of the detections, in the layout the kernels read (`DET` doubles
    /// each), written straight into page-locked memory; `many`: on rayon's pool (a dense
    /// frame's 98,871 detections took most of its 0.9 ms of packing and upload on one thread).
    fn upload(&mut self, detections: &[Detection], many: bool) -> Result<()> {
        let (gpu, dev, host) = (&self.gpu, &mut self.dev, &mut self.host);
        let pack_some = |out: &mut [f64], some: &[Detection]| {
            for (o, d) in out.chunks_exact_mut(DET).zip(some) {
                o.copy_from_slice(&detection_row(d));
            }
        };
        let pack = |out: &mut [f64]| {
            if many {
                out.par_chunks_mut(DET * PACK_BLOCK)
                    .zip(detections.par_chunks(PACK_BLOCK))
                    .for_each(|(o, some)| pack_some(o, some));
            } else {
                pack_some(out, detections);
            }
        };
        stage_and_upload(
            gpu,
            &mut host.det,
            &mut dev.det,
            DET * detections.len(),
            pack,
        )
    }

    /// Every buffer the frame's kernels use, large enough.
    fn allocate(&mut self, f: TrkFrame) -> Result<()> {
        let (gpu, d) = (&*self.gpu, &mut self.dev);
        let (slots, tracks, points) = (f.slots as usize, f.tracks as usize, f.points as usize);
        let pairs = tracks * f.keep as usize;
        at_least(gpu, &mut d.tracks, room(tracks * TRACK_BYTES))?;
        at_least(gpu, &mut d.spare, room((tracks + points) * TRACK_BYTES))?;
        let cells = (f.nx * f.ny) as usize;
        at_least(gpu, &mut d.point_cell, room(points))?;
        at_least(gpu, &mut d.point_slot, room(points))?;
        at_least(gpu, &mut d.ids, room(points))?;
        at_least(gpu, &mut d.cell_count, room(cells))?;
        at_least(gpu, &mut d.cell_start, room(cells + 1))?;
        at_least(gpu, &mut d.slot_point, room(slots))?;
        at_least(gpu, &mut d.sx, room(slots))?;
        at_least(gpu, &mut d.sy, room(slots))?;
        at_least(gpu, &mut d.ln_area, room(slots))?;
        at_least(gpu, &mut d.best_cost, room(slots))?;
        at_least(gpu, &mut d.n_best, room(slots))?;
        at_least(gpu, &mut d.slot_track, room(slots))?;
        at_least(gpu, &mut d.holder, room(slots))?;
        at_least(gpu, &mut d.prop_cost, room(slots))?;
        at_least(gpu, &mut d.prop_track, room(slots))?;
        at_least(gpu, &mut d.slot_id, room(slots))?;
        at_least(gpu, &mut d.pair_cost, room(pairs))?;
        at_least(gpu, &mut d.pair_slot, room(pairs))?;
        at_least(gpu, &mut d.pair_n, room(tracks))?;
        at_least(gpu, &mut d.take_slot, room(tracks))?;
        at_least(gpu, &mut d.next, room(tracks))?;
        at_least(gpu, &mut d.kept, room(tracks))?;
        at_least(gpu, &mut d.kept_rank, room(tracks))?;
        at_least(gpu, &mut d.ended, room(tracks))?;
        at_least(gpu, &mut d.list, room(tracks))?;
        at_least(gpu, &mut d.proposed, room(tracks))?;
        at_least(gpu, &mut d.work, room(2 * tracks))?;
        at_least(gpu, &mut d.born, room(points))?;
        at_least(gpu, &mut d.born_rank, room(points))?;
        at_least(gpu, &mut d.counts, 8)?;
        if self.config.assignment == Assignment::Subnetwork {
            let per_slot = [&mut d.naming, &mut d.parent, &mut d.leader, &mut d.head];
            for b in per_slot
                .into_iter()
                .chain([&mut d.member_count, &mut d.left_mark])
            {
                at_least(gpu, b, room(slots))?;
            }
            for b in [&mut d.shared, &mut d.root, &mut d.next_member] {
                at_least(gpu, b, room(tracks))?;
            }
            at_least(gpu, &mut d.unlinked, room(tracks))?;
        }
        Ok(())
    }

    /// Queues the frame's kernels (`kernels/track.cu` lists them in order). With the
    /// subnetwork rule it waits once in the middle, for the count of the clusters left to the
    /// host, and solves those (`solve_on_host`) before it queues the rest. `on_device`: where
    /// the detections are when not uploaded (`update_from_rows`).
    fn queue_frame(&mut self, f: &TrkFrame, on_device: Option<u64>) -> Result<()> {
        let s = &self.gpu.stream;
        let d = &mut self.dev;
        let p = |b: &Option<CudaSlice<u32>>| b.as_ref().map_or(0, |b| raw_device_ptr(b, s));
        let p64 = |b: &Option<CudaSlice<u64>>| b.as_ref().map_or(0, |b| raw_device_ptr(b, s));
        let pf = |b: &Option<CudaSlice<f64>>| b.as_ref().map_or(0, |b| raw_device_ptr(b, s));
        let pb = |b: &Option<CudaSlice<u8>>| b.as_ref().map_or(0, |b| raw_device_ptr(b, s));
        let counts = d.counts.as_mut().expect("allocated");
        s.memset_zeros(counts)
            .map_err(|e| cuda_err("clearing the tracker's counts", e))?;
        let counts = raw_device_ptr(counts, s);
        let (list_len, kept_total, born_total, n_left) =
            (counts, counts + 4, counts + 8, counts + 12);
        let n_gathered = counts + 20;
        let cells = (f.nx * f.ny) as usize;
        let cell_count = d.cell_count.as_mut().expect("allocated");
        s.memset_zeros(&mut cell_count.slice_mut(0..cells))
            .map_err(|e| cuda_err("clearing the grid's counts", e))?;
        let (point_cell, cell_count, ids) = (p(&d.point_cell), p(&d.cell_count), p64(&d.ids));
        // The scan writes the cells' starts and, as its total, the end of the last.
        let cells_end = p(&d.cell_start) + 4 * cells as u64;
        let (tracks, spare) = (pb(&d.tracks), pb(&d.spare));
        let det = on_device.unwrap_or_else(|| pf(&d.det));
        let (slot_point, cell_start, point_slot) =
            (p(&d.slot_point), p(&d.cell_start), p(&d.point_slot));
        let (sx, sy, ln_area) = (pf(&d.sx), pf(&d.sy), pf(&d.ln_area));
        let (best_cost, n_best, slot_track, holder) = (
            p64(&d.best_cost),
            p(&d.n_best),
            p(&d.slot_track),
            p(&d.holder),
        );
        let (prop_cost, prop_track, slot_id) =
            (p64(&d.prop_cost), p(&d.prop_track), p64(&d.slot_id));
        let (pair_cost, pair_slot, pair_n) = (p64(&d.pair_cost), p(&d.pair_slot), p(&d.pair_n));
        let (take_slot, next, kept, kept_rank) =
            (p(&d.take_slot), p(&d.next), p(&d.kept), p(&d.kept_rank));
        let (ended, list, proposed, work) = (p64(&d.ended), p(&d.list), p(&d.proposed), p(&d.work));
        let (born, born_rank) = (p(&d.born), p(&d.born_rank));
        let (naming, parent, leader, member_count, head) = (
            p(&d.naming),
            p(&d.parent),
            p(&d.leader),
            p(&d.member_count),
            p(&d.head),
        );
        let (shared, root, next_member, unlinked, left_mark) = (
            p(&d.shared),
            p(&d.root),
            p(&d.next_member),
            p64(&d.unlinked),
            p(&d.left_mark),
        );
        let per_slot = linear_launch(f.slots as u64, THREADS);
        let per_track = linear_launch(f.tracks as u64, THREADS);
        let warp_per_track = linear_launch(f.tracks as u64 * 32, THREADS);
        let per_point = linear_launch(f.points as u64, THREADS);
        let per_cell = linear_launch(cells as u64, THREADS);
        let one_block = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        let k = &self.kernels;
        self.queued.clear();
        let mut marks = Marks {
            gpu: &self.gpu,
            events: &mut self.events,
            names: &mut self.queued,
        };
        let (tracks_i32, points_i32, cells_i32) = (f.tracks as i32, f.points as i32, cells as i32);
        let first_id = self.next_id;
        // SAFETY (every launch below): each passes the kernel's parameters in its order and
        // types (see kernels/track.cu); every buffer was sized by `allocate` and `upload` for
        // this frame's cells, slots, tracks, pairs and points, which bound the threads that
        // index it.
        // A frame without detections pairs nothing: every track is missed, none is born. Its
        // kernels are those that end and keep tracks (with the empty grid's cells, which the
        // merge search reads), and every track's taken slot is cleared to none: 4 kernels and
        // a memset, not 18 kernels (the clutter scene has 6 such frames in 11).
        let empty = f.points == 0;
        unsafe {
            if !empty {
                queue![marks, s, &k.cells, per_point, "trk_cells"; f, &det, &point_cell,
                    &cell_count, &point_slot]?;
            }
            queue![marks, s, &k.scan, one_block, "scan_rows (cells)"; &cell_count, &cell_start,
                &cells_end, &cells_i32]?;
            if !empty {
                queue![marks, s, &k.scatter, per_point, "trk_scatter"; f, &point_cell,
                    &cell_start, &cell_count, &slot_point]?;
                queue![marks, s, &k.sort_cells, per_cell, "trk_sort_cells"; f, &cell_start,
                    &slot_point, &point_slot]?;
                queue![marks, s, &k.place, per_slot, "trk_place"; f, &det, &slot_point, &sx,
                    &sy, &ln_area, &best_cost, &n_best, &slot_track, &holder, &prop_cost,
                    &prop_track, &slot_id]?;
                queue![marks, s, &k.gather, warp_per_track, "trk_gather"; f, &tracks,
                    &cell_start, &sx, &sy, &ln_area, &pair_cost, &pair_slot, &pair_n,
                    &best_cost]?;
            }
        }
        let assignment = if empty {
            None
        } else {
            Some(self.config.assignment)
        };
        match assignment {
            None if f.tracks == 0 => {}
            None => {
                // SAFETY: `take_slot` holds room for the frame's tracks (`allocate`); all ones
                // is NONE.
                unsafe {
                    cudarc::driver::result::memset_d8_async(
                        take_slot,
                        0xff,
                        4 * f.tracks as usize,
                        s.cu_stream(),
                    )
                }
                .map_err(|e| cuda_err("clearing the tracks' taken slots", e))?;
            }
            // SAFETY: as above.
            Some(Assignment::Greedy) => unsafe {
                queue![marks, s, &k.ties, per_track, "trk_ties"; f, &pair_cost, &pair_slot,
                    &pair_n, &best_cost, &n_best]?;
                queue![marks, s, &k.mutual, per_track, "trk_mutual"; f, &pair_cost, &pair_slot,
                    &pair_n, &best_cost, &n_best, &slot_track, &take_slot]?;
                queue![marks, s, &k.conflicts, per_track, "trk_conflicts"; f, &pair_slot,
                    &pair_n, &slot_track, &take_slot, &next, &list, &list_len]?;
                queue![marks, s, &k.settle, one_block, "trk_settle"; f, &list, &list_len,
                    &pair_cost, &pair_slot, &pair_n, &slot_track, &next, &holder, &prop_cost,
                    &prop_track, &proposed, &work]?;
                queue![marks, s, &k.settled, per_track, "trk_settled"; f, &list, &list_len,
                    &pair_slot, &pair_n, &next, &holder, &slot_track, &take_slot]?;
            },
            Some(Assignment::Subnetwork) => {
                // SAFETY: as above.
                unsafe {
                    queue![marks, s, &k.sub_clear, per_slot, "trk_sub_clear"; f, &naming,
                        &parent, &leader, &head, &member_count, &left_mark]?;
                    queue![marks, s, &k.sub_name, per_track, "trk_sub_name"; f, &pair_slot,
                        &pair_n, &naming]?;
                    queue![marks, s, &k.sub_kind, per_track, "trk_sub_kind"; f, &tracks,
                        &pair_cost, &pair_slot, &pair_n, &naming, &parent, &slot_track,
                        &take_slot, &shared, &unlinked]?;
                    queue![marks, s, &k.sub_members, per_track, "trk_sub_members"; f,
                        &pair_slot, &shared, &parent, &root, &leader, &member_count, &head,
                        &next_member]?;
                    queue![marks, s, &k.sub_solve, per_track, "trk_sub_solve"; f, &pair_cost,
                        &pair_slot, &pair_n, &unlinked, &root, &leader, &member_count, &head,
                        &next_member, &slot_track, &take_slot, &left_mark, &n_left]?;
                }
                let (gpu, d, h) = (&*self.gpu, &mut self.dev, &mut self.host);
                let (clusters, m) = clusters_left(gpu, d, h)?;
                if clusters > 0 {
                    let keep = f.keep as usize;
                    for b in [&mut d.left_track, &mut d.left_root, &mut d.left_n] {
                        at_least(gpu, b, room(m))?;
                    }
                    at_least(gpu, &mut d.left_slot, room(m * keep))?;
                    at_least(gpu, &mut d.left_unlinked, room(m))?;
                    at_least(gpu, &mut d.left_cost, room(m * keep))?;
                    let (left_track, left_root, left_n, left_slot) = (
                        p(&d.left_track),
                        p(&d.left_root),
                        p(&d.left_n),
                        p(&d.left_slot),
                    );
                    let (left_unlinked, left_cost) = (p64(&d.left_unlinked), p64(&d.left_cost));
                    // SAFETY: as above; the gathered buffers hold the `m` tracks of the left
                    // clusters (counted by `trk_sub_solve`), `keep` pairs each.
                    unsafe {
                        queue![marks, s, &k.sub_gather_left, per_track, "trk_sub_gather_left"; f,
                            &pair_cost, &pair_slot, &pair_n, &unlinked, &root, &left_mark,
                            &left_track, &left_root, &left_n, &left_unlinked, &left_cost,
                            &left_slot, &n_gathered]?;
                    }
                }
                let picks = solve_on_host(gpu, d, &mut self.host_solver, f, (clusters, m))?;
                self.host_clusters += clusters as u64;
                self.greedy_clusters += picks.greedy as u64;
                if picks.n > 0 {
                    let (n, picks) = (picks.n as u32, p(&d.picks));
                    // SAFETY: as above; `solve_on_host` uploaded `n` picks (pairs of u32).
                    unsafe {
                        queue![marks, s, &k.sub_apply, linear_launch(n as u64, THREADS),
                            "trk_sub_apply"; &n, &picks, &slot_track, &take_slot]?;
                    }
                }
            }
        }
        // SAFETY: as above.
        unsafe {
            queue![marks, s, &k.finish, warp_per_track, "trk_finish"; f, &tracks, &det,
                &slot_point, &cell_start, &sx, &sy, &slot_track, &take_slot, &slot_id, &kept]?;
            if !empty {
                queue![marks, s, &k.births, per_point, "trk_births"; f, &point_slot,
                    &slot_track, &born]?;
            }
            queue![marks, s, &k.scan, one_block, "scan_rows (kept)"; &kept, &kept_rank,
                &kept_total, &tracks_i32]?;
            // Without detections the count of births stays as cleared: 0.
            if !empty {
                queue![marks, s, &k.scan, one_block, "scan_rows (born)"; &born, &born_rank,
                    &born_total, &points_i32]?;
            }
            queue![marks, s, &k.compact, per_track, "trk_compact"; f, &tracks, &kept,
                &kept_rank, &spare, &ended]?;
            if !empty {
                queue![marks, s, &k.born, per_point, "trk_born"; f, &det, &point_slot, &born,
                    &born_rank, &kept_total, &first_id, &spare, &slot_id]?;
                queue![marks, s, &k.ids, per_point, "trk_ids"; f, &point_slot, &slot_id,
                    &ids]?;
            }
        }
        Ok(())
    }
}

/// What `solve_on_host` did: the clusters it paired greedily, the picks it uploaded.
struct HostPicks {
    greedy: usize,
    n: usize,
}

/// Waits for the subnetwork kernels' counts of the clusters they left to the host and of those
/// clusters' tracks.
fn clusters_left(gpu: &Gpu, d: &Device, h: &mut Host) -> Result<(usize, usize)> {
    let counts = d.counts.as_ref().expect("allocated");
    let what = "counting the clusters left to the host";
    download_prefix(gpu, &mut h.counts, counts, 5, 8, what)?;
    (gpu.stream)
        .synchronize()
        .map_err(|e| cuda_err("tracking a frame", e))?;
    let counts = h.counts.as_ref().expect("downloaded");
    let counts = counts.as_slice().map_err(|e| cuda_err(what, e))?;
    Ok((counts[3] as usize, counts[4] as usize))
}

/// Solves the `clusters` clusters the kernels left to the host, whose `m` tracks
/// `trk_sub_gather_left` gathered, as the CPU tracker does (`Cluster::solve`: exactly up to
/// `EXACT_MAX_TRACKS` tracks, greedily above), and uploads the picks (track, slot; `NONE`:
/// unlinked) into `d.picks`.
fn solve_on_host(
    gpu: &Gpu,
    d: &mut Device,
    solver: &mut Solver,
    f: &TrkFrame,
    (clusters, m): (usize, usize),
) -> Result<HostPicks> {
    if clusters == 0 {
        return Ok(HostPicks { greedy: 0, n: 0 });
    }
    let keep = f.keep as usize;
    let s = &gpu.stream;
    let what = "downloading the clusters left to the host";
    let down = |b: &Option<CudaSlice<u32>>, n: usize| -> Result<Vec<u32>> {
        let mut v = vec![0u32; n];
        let b = b.as_ref().expect("allocated");
        s.memcpy_dtoh(&b.slice(0..n), &mut v)
            .map_err(|e| cuda_err(what, e))?;
        Ok(v)
    };
    let (track, root, n_pairs) = (
        down(&d.left_track, m)?,
        down(&d.left_root, m)?,
        down(&d.left_n, m)?,
    );
    let slot = down(&d.left_slot, m * keep)?;
    let (mut cost, mut unlinked) = (vec![0u64; m * keep], vec![0u64; m]);
    let b = d.left_cost.as_ref().expect("allocated");
    s.memcpy_dtoh(&b.slice(0..m * keep), &mut cost)
        .map_err(|e| cuda_err(what, e))?;
    let b = d.left_unlinked.as_ref().expect("allocated");
    s.memcpy_dtoh(&b.slice(0..m), &mut unlinked)
        .map_err(|e| cuda_err(what, e))?;
    s.synchronize().map_err(|e| cuda_err(what, e))?;
    // The gathered rows by cluster, each cluster's tracks ascending; each track's pairs as the
    // CPU tracker keeps them (by cost, then slot).
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_unstable_by_key(|&k| (root[k], track[k]));
    let pairs: Vec<Vec<(u64, u32)>> = (0..m)
        .map(|k| {
            let (a, n) = (k * keep, n_pairs[k] as usize);
            (a..a + n).map(|j| (cost[j], slot[j])).collect()
        })
        .collect();
    // Rows of one cluster are a run of `order`; `row[ti]` is track ti's row.
    let row: std::collections::HashMap<u32, usize> = (0..m).map(|k| (track[k], k)).collect();
    let members: Vec<Vec<u32>> = order
        .chunk_by(|&a, &b| root[a] == root[b])
        .map(|run| run.iter().map(|&k| track[k]).collect())
        .collect();
    let mut local = std::collections::HashMap::new();
    let (mut picks, mut out) = (Vec::new(), Vec::new());
    for of_cluster in &members {
        local.clear();
        for &ti in of_cluster {
            for &(_, slot) in &pairs[row[&ti]] {
                let next = local.len() as u32;
                local.entry(slot).or_insert(next);
            }
        }
        let cluster = Cluster {
            members: of_cluster,
            n_slots: local.len(),
            pairs_of: |ti| pairs[row[&ti]].as_slice(),
            unlinked_of: |ti| unlinked[row[&ti]],
            local_of: |slot| local[&slot],
        };
        cluster.solve(solver, &mut picks);
        for (&ti, &pick) in of_cluster.iter().zip(&picks) {
            let slot = if pick == NONE {
                NONE
            } else {
                pairs[row[&ti]][pick as usize].1
            };
            out.extend([ti, slot]);
        }
    }
    let dev = at_least(gpu, &mut d.picks, room(out.len()))?;
    (gpu.stream)
        .memcpy_htod(&out, &mut dev.slice_mut(0..out.len()))
        .map_err(|e| cuda_err("uploading the host's picks", e))?;
    Ok(HostPicks {
        greedy: (members.iter())
            .filter(|m| m.len() > EXACT_MAX_TRACKS)
            .count(),
        n: out.len() / 2,
    })
}

impl GpuTracker {
    /// Queues the downloads of the detections' IDs, the counts and the IDs of the tracks that
    /// may have ended (as many as there were tracks: one wait a frame rather than a second for
    /// the ended ones once their count is known), and waits for the frame; returns the kept
    /// tracks and the births, and adds the ended IDs to `ended`.
    fn read_back(&mut self, points: usize) -> Result<(usize, usize)> {
        let (gpu, d, h) = (&*self.gpu, &self.dev, &mut self.host);
        let tracks = self.tracks;
        let ids = d.ids.as_ref().expect("allocated");
        download_prefix(
            gpu,
            &mut h.ids,
            ids,
            points,
            room(points),
            "downloading the IDs",
        )?;
        let counts = d.counts.as_ref().expect("allocated");
        let what = "downloading the tracker's counts";
        download_prefix(gpu, &mut h.counts, counts, 3, 4, what)?;
        let ended = d.ended.as_ref().expect("allocated");
        let what = "downloading the ended tracks";
        download_prefix(gpu, &mut h.ended, ended, tracks, room(tracks), what)?;
        (gpu.stream)
            .synchronize()
            .map_err(|e| cuda_err("tracking a frame", e))?;
        let counts = h.counts.as_ref().expect("downloaded");
        let counts = counts
            .as_slice()
            .map_err(|e| cuda_err("reading the tracker's counts", e))?;
        let (kept, born) = (counts[1] as usize, counts[2] as usize);
        if kept > tracks {
            return Err(Error::Cuda {
                step: "tracking a frame".into(),
                why: format!("{kept} tracks kept of {tracks}"),
            });
        }
        if kept < tracks {
            let ended = h.ended.as_ref().expect("downloaded");
            let ended = ended
                .as_slice()
                .map_err(|e| cuda_err("reading the ended tracks", e))?;
            self.ended.extend_from_slice(&ended[..tracks - kept]);
        }
        Ok((kept, born))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cuda_fields(name: &str) -> Vec<String> {
        crate::gpu::kernels::struct_fields(include_str!("../../kernels/track.cu"), name)
    }

    /// The frame's parameters have the CUDA struct's fields in the same order, and the track
    /// record its size.
    #[test]
    fn mirrors_match_the_kernel_structs() {
        let fields = cuda_fields("TrkFrame");
        let expected = [
            "u64 frame",
            "double gate_px",
            "double gate_growth_px",
            "double dense_radius",
            "double merge_radius",
            "double inv_base2",
            "double size_weight",
            "double merge_area_ratio",
            "double velocity_smoothing",
            "double x0",
            "double y0",
            "double inv_cell",
            "u32 nx",
            "u32 ny",
            "u32 tracks",
            "u32 slots",
            "u32 points",
            "u32 keep",
            "u32 confirm",
            "u32 predict_velocity",
            "u32 max_missed",
            "u32 tentative_max_missed",
            "u32 max_merged",
            "u32 pad",
        ];
        assert_eq!(fields, expected);
        assert_eq!(std::mem::size_of::<TrkFrame>(), 8 + 11 * 8 + 12 * 4);
        let track = cuda_fields("TrkTrack");
        assert_eq!(track.len(), 16);
        let bytes: usize = track
            .iter()
            .map(|f| if f.starts_with("u32") { 4 } else { 8 })
            .sum();
        assert_eq!(bytes, TRACK_BYTES);
        assert!(include_str!("../../kernels/track.cu")
            .contains(&format!("#define TRK_MAX_KEEP {MAX_CANDIDATES}")));
        assert!(include_str!("../../kernels/track.cu").contains(&format!("#define TRK_DET {DET}")));
    }
}
