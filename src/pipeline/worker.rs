//! The engine worker: labels and filters each frame, has its square fiducials found beside it
//! when asked (`markers`), and hands it to the tracking stage (`tracking`), which sends it on.

use super::backlog::result_bytes;
use super::engine::{EngineLabeler, FrameInput, FrameRequest, Labeled, Pending, ResolvedAlgorithm};
use super::handover::{host_may_poll, Arrivals};
use super::markers::{cpu_marker_lanes, on_stage_pool, LaneReply, MarkerLanes, MARKER_LANES};
use super::queue::{Captured, Item, Next};
use super::tracking::{cpu_frames_tracked_beside, single_stage, TrackStage, Untracked};
use super::{
    ms, ComponentFilter, FrameResult, FrameTimings, PipelineEvent, Shared, FILTER_REST_STEP,
};
use crate::ccl::descriptors::ShapeDescriptors;
use crate::ccl::descriptors::ShapeSums;
use crate::ccl::stats::ComponentStats;
use crate::ccl::subpixel::{GreyWeights, SubpixelCentroid};
use crate::ccl::{Labeler, Mask, RowFilter, StepTime, Want};
use crate::fiducial::MarkerDetector;
use crossbeam_channel::Receiver;
use std::collections::{HashSet, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// The labeler in use and what has been said about it.
pub(super) struct Engine {
    pub(super) labeler: EngineLabeler,
    /// The marker lanes, which find the markers beside the worker when
    /// `PipelineSettings::markers` is set, a frame in flight a lane.
    pub(super) lanes: MarkerLanes,
    /// Lanes the newest frame's markers went to (its backend's count).
    lanes_in_use: usize,
    pub(super) notices: HashSet<String>,
    pub(super) last_error: Option<String>,
}

/// A frame submitted to the labeler, waiting for its turn to be completed.
pub(super) struct InFlight {
    captured: Captured,
    pending: Pending,
    /// Its markers' reply, when a lane finds them.
    markers: Option<Receiver<LaneReply>>,
}

/// The worker's loop; `sink` is the tracking stage, which tracks the frames and sends
/// everything on in order.
pub(super) fn worker_loop(shared: &Shared, sink: &TrackStage, first: Option<Box<dyn Labeler>>) {
    let mut engine = Engine::new(first);
    // Tuning values that could not be used (`Tuning::notices`), said once per run.
    for why in &shared.backends.tuning().notices {
        sink.send(PipelineEvent::Notice(why.clone()));
    }
    // Submitted frames, oldest first: completed and sent in this order.
    let mut in_flight: VecDeque<InFlight> = VecDeque::new();
    let mut arrivals = Arrivals::default();
    loop {
        let item = if in_flight.is_empty() {
            match shared.queue.pop(arrivals.poll_window()) {
                Some(item) => item,
                None => break,
            }
        } else {
            match shared.queue.try_pop() {
                Next::Item(item) => item,
                // Nothing waiting: the oldest result is not held back for a frame to come.
                Next::Empty => {
                    engine.finish_oldest(&mut in_flight, shared, sink);
                    continue;
                }
                Next::Closed => break,
            }
        };
        match item {
            Item::Event(event) => {
                // Messages keep their place among the frames (end of stream after the last).
                engine.drain(&mut in_flight, shared, sink);
                sink.send(event);
            }
            Item::Frame(captured) => {
                arrivals.arrived();
                if in_flight
                    .back()
                    .is_some_and(|last| !same_labeler(&last.captured, &captured))
                {
                    engine.drain(&mut in_flight, shared, sink);
                }
                let markers = engine.send_markers(&captured, shared);
                let pending = engine.guarded(|engine| engine.submit(&captured, shared, sink));
                let pending = pending.unwrap_or_else(|why| Pending::Done(Err(why)));
                // The threads that wait for a frame on the GPU poll for it (`handover`), unless
                // other pipelines run or the host is small: the sources need the cores.
                let polled = pending.on_gpu()
                    && single_stage()
                    && host_may_poll(super::markers::pipeline_threads());
                arrivals.polling(polled);
                if polled {
                    sink.expect_frame();
                }
                in_flight.push_back(InFlight {
                    captured: *captured,
                    pending,
                    markers,
                });
                // A frame labeled at submission is not held back either once it is the oldest,
                // unless its markers are still on their lane: the next frame's go to the next
                // lane meanwhile.
                let limit = engine.frames_in_flight(in_flight.back());
                while in_flight.len() >= limit
                    || in_flight
                        .front()
                        .is_some_and(|f| f.pending.is_done() && f.markers.is_none())
                {
                    engine.finish_oldest(&mut in_flight, shared, sink);
                }
            }
        }
    }
    // Stopping, or the end: every frame submitted is completed (and sent unless stopping).
    engine.drain(&mut in_flight, shared, sink);
}

/// Do frames `a` and `b` go to the same labeler the same way (algorithm, backend,
/// connectivity, frame size)? Frames in flight are completed before one that does not.
fn same_labeler(a: &Captured, b: &Captured) -> bool {
    let (sa, sb) = (&a.settings, &b.settings);
    (&sa.algorithm, sa.backend, sa.connectivity) == (&sb.algorithm, sb.backend, sb.connectivity)
        && (a.frame.grey.width, a.frame.grey.height) == (b.frame.grey.width, b.frame.grey.height)
}

/// Sends each notice to the consumers the first time it comes.
fn notifier<'a>(notices: &'a mut HashSet<String>, sink: &'a TrackStage) -> impl FnMut(String) + 'a {
    |notice: String| {
        if notices.insert(notice.clone()) {
            sink.send(PipelineEvent::Notice(notice));
        }
    }
}

/// The frame's labeling request, made from what the capture thread handed over, for `f`.
/// `device_detections`: the tracking stage tracks on the GPU, which then reads the detections
/// where the labeler leaves them.
fn with_request<R>(
    captured: &Captured,
    device_detections: bool,
    f: impl FnOnce(&FrameRequest<'_>) -> R,
) -> R {
    let settings = &captured.settings;
    let filter = settings.filter;
    let want = if settings.want_labels {
        Want::Both
    } else {
        Want::Stats
    };
    let mask = match (&captured.packed, &captured.binary) {
        (Some(p), _) => Some(Mask::Packed(p)),
        (None, Some(b)) => Some(Mask::Bytes(b)),
        (None, None) => None,
    };
    let input = match mask {
        Some(mask) => FrameInput::Mask {
            mask,
            weights: captured.levels.as_deref().map(|levels| GreyWeights {
                grey: &captured.frame.grey,
                levels,
                invert: settings.invert,
            }),
        },
        // The capture thread left the threshold to the labeler (`MaskMaker::Device`).
        None => FrameInput::Grey {
            grey: &captured.frame.grey,
            threshold: &settings.threshold,
            invert: settings.invert,
            subpixel: settings.subpixel,
            pixel_mask: captured.pixel_mask.as_ref(),
            staged: captured.staged_grey.as_ref(),
        },
    };
    let accepts = |c: &ComponentStats| filter.accepts(c);
    let request = FrameRequest {
        input,
        want,
        // Sub-pixel centroids only for the components the filter keeps.
        keep: &accepts,
        rows: filter.rows(),
        shapes: settings.shapes || filter.has_shape_limits(),
        device_detections,
        frame: captured.frame.index,
    };
    f(&request)
}

impl Engine {
    /// `first`: the labeler of the first frames (`Pipeline::start_with_labeler`).
    pub(super) fn new(first: Option<Box<dyn Labeler>>) -> Engine {
        Engine {
            labeler: EngineLabeler::new(first),
            lanes: MarkerLanes::default(),
            lanes_in_use: MARKER_LANES,
            notices: HashSet::new(),
            last_error: None,
        }
    }

    /// Completes one frame and sends it on, nothing else in flight: labeled here, or already
    /// (`labeled`: a frame of a set, `set_worker`).
    pub(super) fn one_frame(
        &mut self,
        captured: Captured,
        labeled: Option<Pending>,
        shared: &Shared,
        sink: &TrackStage,
    ) {
        let (pending, markers) = match labeled {
            Some(pending) => (pending, None),
            None => {
                let markers = self.send_markers(&captured, shared);
                let pending = self.guarded(|engine| engine.submit(&captured, shared, sink));
                (
                    pending.unwrap_or_else(|why| Pending::Done(Err(why))),
                    markers,
                )
            }
        };
        let frame = InFlight {
            captured,
            pending,
            markers,
        };
        self.finish(frame, shared, sink);
    }

    /// Runs `f`; a panic in it (a labeler that crashed) becomes the frame's error, and the
    /// labeler is made again for the next frame.
    fn guarded<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> std::result::Result<R, String> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(self))).map_err(|_| {
            self.labeler.forget_instances();
            "the labeler crashed on this frame; it will be recreated".to_string()
        })
    }

    /// Starts labeling one frame (`EngineLabeler::submit`).
    fn submit(&mut self, captured: &Captured, shared: &Shared, sink: &TrackStage) -> Pending {
        let Engine {
            labeler, notices, ..
        } = self;
        let mut notify = notifier(notices, sink);
        on_stage_pool(&captured.settings, &shared.backends, || {
            with_request(captured, sink.tracks_on_gpu(), |request| {
                labeler.submit(&captured.settings, &shared.backends, request, &mut notify)
            })
        })
    }

    /// Frames kept in flight after `newest`: the labeler's, and one a marker lane when the
    /// frame's markers went to one.
    fn frames_in_flight(&self, newest: Option<&InFlight>) -> usize {
        match newest {
            Some(f) if f.markers.is_some() => self.lanes_in_use,
            _ => self.labeler.frames_in_flight(),
        }
    }

    /// Hands the frame's markers to a lane when they are wanted: on the GPU one lane a frame
    /// the labeler keeps in flight, at least `MARKER_LANES`; on the CPU `cpu_marker_lanes`.
    fn send_markers(
        &mut self,
        captured: &Captured,
        shared: &Shared,
    ) -> Option<Receiver<LaneReply>> {
        let settings = &captured.settings;
        let wanted = settings.markers.as_ref()?;
        self.lanes_in_use = if MarkerDetector::picks_gpu(settings.backend, &shared.backends) {
            self.labeler.frames_in_flight().max(MARKER_LANES)
        } else {
            cpu_marker_lanes()
        };
        Some(self.lanes.send(
            self.lanes_in_use,
            captured.frame.index,
            &captured.frame.grey,
            (wanted, settings.world.as_ref()),
            (settings.backend, &shared.backends),
        ))
    }

    /// Completes, filters and tracks the oldest frame in flight, and sends its result.
    fn finish_oldest(
        &mut self,
        in_flight: &mut VecDeque<InFlight>,
        shared: &Shared,
        sink: &TrackStage,
    ) {
        if let Some(oldest) = in_flight.pop_front() {
            self.finish(oldest, shared, sink);
        }
    }

    /// Completes, filters and tracks a frame in flight, and sends its result.
    fn finish(&mut self, frame: InFlight, shared: &Shared, sink: &TrackStage) {
        let InFlight {
            captured,
            pending,
            markers,
        } = frame;
        let outcome = self
            .guarded(|engine| engine.process(captured, pending, markers, shared, sink))
            .and_then(|outcome| outcome);
        match outcome {
            Ok((frame, pipelined)) => {
                self.last_error = None;
                sink.track(frame, !pipelined);
            }
            // The same failure on every frame is said once.
            Err(why) if self.last_error.as_deref() == Some(&why) => {}
            Err(why) => {
                self.last_error = Some(why.clone());
                sink.send(PipelineEvent::EngineError(why));
            }
        }
    }

    /// Completes every frame in flight, in order.
    fn drain(&mut self, in_flight: &mut VecDeque<InFlight>, shared: &Shared, sink: &TrackStage) {
        while !in_flight.is_empty() {
            self.finish_oldest(in_flight, shared, sink);
        }
    }

    /// Completes the labeling of one frame, filters it and takes its markers from their lane:
    /// the frame for the tracking stage, and whether it may be tracked while the next frame is
    /// worked on (its labeling ran on the GPU, or its markers on a lane, or the host has the
    /// threads for both: `tracking::cpu_frames_tracked_beside`).
    pub(super) fn process(
        &mut self,
        captured: Captured,
        pending: Pending,
        lane: Option<Receiver<LaneReply>>,
        shared: &Shared,
        sink: &TrackStage,
    ) -> std::result::Result<(Untracked, bool), String> {
        let completed = self.complete(&captured, pending, shared, sink);
        let Captured {
            frame,
            settings,
            binary,
            mut steps,
            ..
        } = captured;
        let ((labeling, subpixel, shape_sums), resolved) = completed?;
        let device_detections = labeling.device_detections;
        if self.labeler.gpu_failed.is_some() {
            shared.gpu_given_up.store(true, Ordering::Relaxed);
        }
        steps.extend(labeling.timings);
        let components = labeling
            .stats
            .ok_or_else(|| format!("algorithm '{}' returned no statistics", resolved.name))?;
        let t = Instant::now();
        let kept = KeptRows::filter(
            &settings.filter,
            labeling.filtered,
            components,
            subpixel,
            shape_sums,
            resolved.name,
        )?;
        steps.push(StepTime::new(kept.step, ms(t)));
        // Tracking and the result take a few hundred bytes a component more: a frame too dense
        // for the memory left is an error here, not a process killed in the tracker.
        crate::frame::image::check_component_memory(kept.components.len() as u64)
            .map_err(|e| format!("frame {}: {e}", frame.index))?;
        let on_lane = lane.is_some();
        let markers = match lane {
            Some(replies) => {
                let (found, lane_ms) = replies.recv().map_err(|_| {
                    format!("frame {}: markers: the marker lane stopped", frame.index)
                })?;
                steps.push(StepTime::new("markers", lane_ms));
                found?
            }
            None => Vec::new(),
        };
        let result = FrameResult {
            index: frame.index,
            time_s: frame.time_s,
            name: frame.name,
            grey: frame.grey,
            binary: binary.filter(|_| settings.want_binary),
            labels: labeling
                .labels
                .filter(|_| settings.want_labels)
                .map(Arc::new),
            components: kept.components,
            track_ids: Vec::new(),
            ended_tracks: Vec::new(),
            subpixel: kept.subpixel,
            shapes: kept.shapes,
            world: Vec::new(),
            markers,
            all_count: labeling.count,
            timings: FrameTimings {
                steps,
                latency_ms: 0.0,
            },
            algorithm: resolved.name,
            backend: resolved.backend,
            connectivity: settings.connectivity,
        };
        let pipelined = resolved.backend == crate::ccl::Backend::Cuda
            || on_lane
            || cpu_frames_tracked_beside(result_bytes(&result));
        let untracked = Untracked {
            result,
            world: settings.world.clone(),
            captured_at: frame.captured_at,
            markers_on_lane: on_lane,
            device_detections,
        };
        Ok((untracked, pipelined))
    }

    /// The labeler's result for a submitted frame (`EngineLabeler::complete`).
    fn complete(
        &mut self,
        captured: &Captured,
        pending: Pending,
        shared: &Shared,
        sink: &TrackStage,
    ) -> std::result::Result<(Labeled, ResolvedAlgorithm), String> {
        let Engine {
            labeler, notices, ..
        } = self;
        let mut notify = notifier(notices, sink);
        on_stage_pool(&captured.settings, &shared.backends, || {
            with_request(captured, sink.tracks_on_gpu(), |request| {
                labeler.complete(
                    pending,
                    &captured.settings,
                    &shared.backends,
                    request,
                    &mut notify,
                )
            })
        })
    }
}

/// The rows a frame keeps after the filter, with their sub-pixel centroids and shape
/// descriptors (each empty, or one per row), and the name of the step that kept them.
struct KeptRows {
    components: Vec<ComponentStats>,
    subpixel: Vec<SubpixelCentroid>,
    shapes: Vec<ShapeDescriptors>,
    step: &'static str,
}

impl KeptRows {
    /// Applies `filter` to the labeler's rows. The labeler may have dropped the rows the area
    /// and aspect limits reject already (`filtered`; GPU: before the download); then this step
    /// is only what is left (shape limits). The centroids and shape sums are for the rows the
    /// area and aspect limits keep, in order.
    fn filter(
        filter: &ComponentFilter,
        filtered: Option<RowFilter>,
        mut components: Vec<ComponentStats>,
        subpixel: Option<Vec<SubpixelCentroid>>,
        shape_sums: Option<Vec<ShapeSums>>,
        algorithm: &str,
    ) -> std::result::Result<KeptRows, String> {
        let rows = filter.rows();
        let rows_filtered = filtered == Some(rows);
        // In place: the rows the filter keeps, which are the rows the centroids were made for.
        if !rows_filtered && !filter.is_unlimited() {
            components.retain(|c| filter.accepts(c));
        }
        let count_mismatch = |what: &str, n: usize, kept: usize| {
            format!("{algorithm}: {n} {what} for {kept} kept components")
        };
        let mut subpixel = match subpixel {
            Some(centroids) if centroids.len() == components.len() => centroids,
            Some(centroids) => {
                return Err(count_mismatch(
                    "sub-pixel centroids",
                    centroids.len(),
                    components.len(),
                ))
            }
            None => Vec::new(),
        };
        let mut shapes: Vec<ShapeDescriptors> = match shape_sums {
            Some(sums) if sums.len() == components.len() => components
                .iter()
                .zip(&sums)
                .map(|(c, s)| s.descriptors(c))
                .collect(),
            Some(sums) => {
                return Err(count_mismatch(
                    "shape descriptors",
                    sums.len(),
                    components.len(),
                ))
            }
            None => Vec::new(),
        };
        if filter.has_shape_limits() {
            let passes: Vec<bool> = shapes.iter().map(|d| filter.accepts_shape(d)).collect();
            retain_where(&mut components, &passes);
            retain_where(&mut shapes, &passes);
            if !subpixel.is_empty() {
                retain_where(&mut subpixel, &passes);
            }
        }
        let step = if rows_filtered && !rows.is_unlimited() {
            FILTER_REST_STEP
        } else {
            "filter"
        };
        Ok(KeptRows {
            components,
            subpixel,
            shapes,
            step,
        })
    }
}

/// Keeps the items whose flag is set (`keep` is as long as `items`).
fn retain_where<T>(items: &mut Vec<T>, keep: &[bool]) {
    let mut flags = keep.iter();
    items.retain(|_| flags.next().copied().unwrap_or(false));
}
