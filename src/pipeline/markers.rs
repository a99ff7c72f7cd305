//! The worker's marker step: the square fiducials of `MarkerSettings` in a frame's grey image,
//! each with its track (its identity), its pose (with a marker length and a calibration) and
//! its centre's world position (with a world mapping).
//!
//! The markers are found on `MarkerLanes`: threads with a detector each, given each frame as the
//! worker submits it and read when the worker completes it, so that the frames in flight are
//! detected side by side.
//! - On the GPU each lane's detector has a CUDA stream of its own. A 1080p frame's detection is
//!   many small kernels and outlines traced by a few blocks, which leave most of the GPU idle
//!   (H200, the markers scene: one detector 1,000 frames/s, two on their own streams 1,660,
//!   three 2,190; `bench/marker_streams.rs`).
//! - On the CPU each detection spreads over a pool, but its steps (three thresholds, three
//!   labelings, the outlines, the corners) join between them and leave cores idle; with
//!   several frames' detections on the pool at once the cores stay busy (`cpu_marker_lanes`).
//!   The lanes' pool is not the one of the stages that take a frame at a time
//!   (`CpuMarkerPools`).

use super::PipelineSettings;
use crate::ccl::{Backend, BackendChoice, Backends};
use crate::error::Result;
use crate::fiducial::observation::marker_track;
use crate::fiducial::{estimate_pose, Dictionary, Marker, MarkerDetector};
use crate::fiducial::{MarkerObservation, MarkerSettings};
use crate::frame::grey::FrameGrey;
use crate::frame::image::GrayImage;
use crate::geometry::WorldMapping;
use crossbeam_channel::{Receiver, Sender};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Instant;

/// Finds the markers of each frame, keeping the detector (and its buffers) while the
/// detector's settings and backend choice stay the same: the one place the pipeline's detector
/// is made, on the labeling's backend choice (auto: the GPU when there is one), a GPU detector
/// on a CUDA stream of its own (a lane's, not the engine's).
#[derive(Default)]
pub(super) struct MarkerStep {
    detector: Option<(BackendChoice, MarkerDetector)>,
}

impl MarkerStep {
    pub(super) fn run(
        &mut self,
        grey: &GrayImage,
        settings: &MarkerSettings,
        world: Option<&WorldMapping>,
        (choice, backends): (BackendChoice, &Backends),
    ) -> Result<Vec<MarkerObservation>> {
        let detector = match &mut self.detector {
            Some((c, d)) if *c == choice && *d.params() == settings.params => d,
            slot => {
                let made =
                    MarkerDetector::on_own_stream(settings.params.clone(), choice, backends)?;
                &mut slot.insert((choice, made)).1
            }
        };
        let dictionaries: Vec<&Dictionary> =
            settings.dictionaries.iter().map(Arc::as_ref).collect();
        // A CPU detector on the lanes' pool (`CpuMarkerPools`), where there is one.
        let pools = (detector.backend() == Backend::Cpu)
            .then(made_cpu_marker_pools)
            .flatten();
        let found = match pools {
            Some(pools) => pools
                .lanes
                .install(|| detector.detect(grey, &dictionaries))?,
            None => detector.detect(grey, &dictionaries)?,
        };
        Ok(observe(&found.markers, settings, world))
    }
}

/// A frame's markers from a lane, or why there are none (`frame N: markers: …`), and the
/// detection's wall time on the lane (ms).
pub(super) type LaneReply = (std::result::Result<Vec<MarkerObservation>, String>, f64);

/// Marker lanes at least (more with more frames in flight): two frames' detections side by
/// side take most of what the GPU leaves idle at 1080p (a third adds 5 % beside the engine's
/// labeling).
pub(super) const MARKER_LANES: usize = 2;

/// Marker lanes when the CPU finds the markers: a quarter of the host's threads, from 2 to 4.
/// 16-core host, the markers scene at 1080p (4K), frames/s: the detector on the worker's
/// thread 176 (69); on 3 lanes 221 (75), 4 lanes 230 (76), 6 lanes 218 (73). Lanes with a
/// pool of their own each (4 × 4, 4 × 3, 6 × 2 threads) were no faster and doubled the latency;
/// they share one (`CpuMarkerPools`).
pub(super) fn cpu_marker_lanes() -> usize {
    (pipeline_threads() / 4).clamp(2, 4)
}

/// The thread pools of a frame path that labels on the CPU and finds markers there: one for
/// its stages that take a frame at a time (the capture thread's threshold, the worker's
/// labeling, the tracker), one for the lanes' detections. On rayon's one pool the stages'
/// steps waited behind the detections' (rayon takes the work its threads made before the work
/// handed in from outside): on a 16-core host at full rate the threshold took 2.8 ms a 1080p
/// frame and the tracker 3.0, against 0.27 and 0.7 with one frame in flight, and set the rate.
/// A quarter of the threads for the stages, the rest for the lanes; 16-core host, the markers
/// scene, frames/s, alternately: 1080p 283–313 → 325–359, 4K 123–129 → 130–136 (the median
/// latency 4.0–4.5 → 5.0–5.4 ms: a frame's stages have a quarter of the cores). Rayon's one pool for
/// the stages and a pool of its own for the lanes, at a lower priority or not, lost. None below
/// 8 threads.
pub(super) struct CpuMarkerPools {
    pub(super) stages: rayon::ThreadPool,
    pub(super) lanes: rayon::ThreadPool,
}

/// The pools, where the frame's markers are found on the CPU and the host has 8 threads or
/// more (else rayon's one pool serves both).
pub(super) fn cpu_marker_pools(
    markers: bool,
    (choice, backends): (BackendChoice, &Backends),
) -> Option<&'static CpuMarkerPools> {
    if !markers || MarkerDetector::picks_gpu(choice, backends) {
        return None;
    }
    made_cpu_marker_pools()
}

/// Runs `f` (a stage's work on one frame: the threshold, the labeling) on the stage pool
/// where the frame's markers are found on the CPU (`cpu_marker_pools`), else here.
pub(super) fn on_stage_pool<R: Send>(
    settings: &PipelineSettings,
    backends: &Backends,
    f: impl FnOnce() -> R + Send,
) -> R {
    match cpu_marker_pools(settings.markers.is_some(), (settings.backend, backends)) {
        Some(pools) => pools.stages.install(f),
        None => f(),
    }
}

/// The pools (made at the first call), whatever the frame.
pub(super) fn made_cpu_marker_pools() -> Option<&'static CpuMarkerPools> {
    static POOLS: OnceLock<Option<CpuMarkerPools>> = OnceLock::new();
    POOLS
        .get_or_init(|| {
            let (stages, lanes) = cpu_marker_pool_sizes(pipeline_threads())?;
            let pool = |n: usize, name: &'static str| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(n)
                    .thread_name(move |k| format!("markerscope-{name}-{k}"))
                    .build()
                    .ok()
            };
            Some(CpuMarkerPools {
                stages: pool(stages, "stage")?,
                lanes: pool(lanes, "lane")?,
            })
        })
        .as_ref()
}

/// The threads the pipeline's pools share out: those of rayon's global pool (the host's by
/// default, `RAYON_NUM_THREADS` where set), so that a process given part of the host, as each
/// of several Dask workers on one machine is, keeps to its part. Called from the pipeline's
/// own threads, outside any pool (inside one it would count that pool's).
pub(super) fn pipeline_threads() -> usize {
    rayon::current_num_threads()
}

/// Threads of the stages' pool and of the lanes' pool for a host of `threads`.
fn cpu_marker_pool_sizes(threads: usize) -> Option<(usize, usize)> {
    (threads >= 8).then(|| (threads / 4, threads - threads / 4))
}

/// What a lane needs for one frame.
struct LaneJob {
    index: u64,
    grey: FrameGrey,
    settings: Arc<MarkerSettings>,
    world: Option<Arc<WorldMapping>>,
    choice: BackendChoice,
    backends: Arc<Backends>,
    reply: Sender<LaneReply>,
}

/// Threads that find markers beside the worker, a detector each (on a CUDA stream of its own),
/// taking the frames in the order they come; each frame's reply goes to its own channel.
#[derive(Default)]
pub(super) struct MarkerLanes {
    /// Both ends of the lanes' queue (the receiving end kept to start more lanes on).
    queue: Option<(Sender<LaneJob>, Receiver<LaneJob>)>,
    threads: Vec<JoinHandle<()>>,
}

impl MarkerLanes {
    /// Hands frame `index` to the lanes, with `lanes` threads (one per frame in flight); its
    /// reply comes on the returned channel. Fewer lanes than before (the markers moved from the
    /// CPU's lanes to the GPU's) end the lanes and start that many: each lane keeps a detector,
    /// on the GPU three windows' masks and labels (31 MB at 1080p).
    pub(super) fn send(
        &mut self,
        lanes: usize,
        index: u64,
        grey: &FrameGrey,
        (settings, world): (&Arc<MarkerSettings>, Option<&Arc<WorldMapping>>),
        (choice, backends): (BackendChoice, &Arc<Backends>),
    ) -> Receiver<LaneReply> {
        if self.threads.len() > lanes.max(1) {
            // The old lanes finish what they hold (nothing: the worker completes its frames
            // before the backend changes) and end.
            *self = MarkerLanes::default();
        }
        let (reply, replies) = crossbeam_channel::bounded(1);
        let job = LaneJob {
            index,
            grey: grey.clone(),
            settings: settings.clone(),
            world: world.cloned(),
            choice,
            backends: backends.clone(),
            reply,
        };
        let (jobs, queue) = self.queue.get_or_insert_with(crossbeam_channel::unbounded);
        while self.threads.len() < lanes.max(1) {
            let queue = queue.clone();
            match std::thread::Builder::new()
                .name("markerscope-markers".into())
                .spawn(move || lane_loop(&queue))
            {
                Ok(thread) => self.threads.push(thread),
                Err(_) => break,
            }
        }
        if self.threads.is_empty() {
            // No lane could be started: found here instead.
            run_job(&mut MarkerStep::default(), job);
        } else {
            // Cannot fail: the receiving end is held here.
            let _ = jobs.send(job);
        }
        replies
    }
}

impl Drop for MarkerLanes {
    /// The lanes finish the frames they hold and end.
    fn drop(&mut self) {
        self.queue = None;
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// One lane: its own detector (made at its first frame, kept while the settings stay).
fn lane_loop(queue: &Receiver<LaneJob>) {
    let mut step = MarkerStep::default();
    while let Ok(job) = queue.recv() {
        run_job(&mut step, job);
    }
}

/// Finds one frame's markers and replies; a detector that panics is made again for the next
/// frame, and the frame gets the error.
fn run_job(step: &mut MarkerStep, job: LaneJob) {
    let t = Instant::now();
    let found = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        step.run(
            &job.grey,
            &job.settings,
            job.world.as_deref(),
            (job.choice, &job.backends),
        )
    }));
    let found = match found {
        Ok(Ok(found)) => Ok(found),
        Ok(Err(e)) => Err(format!("frame {}: markers: {e}", job.index)),
        Err(_) => {
            step.detector = None;
            Err(format!(
                "frame {}: markers: the detector crashed on this frame; it will be recreated",
                job.index
            ))
        }
    };
    // The worker may have given the frame up (an error before its markers): nobody waits.
    let _ = job.reply.send((found, super::ms(t)));
}

/// The markers as the product carries them: dictionary name, track, pose and world position
/// (a pose that cannot be solved, from degenerate corners, is left out).
pub fn observe(
    markers: &[Marker],
    settings: &MarkerSettings,
    world: Option<&WorldMapping>,
) -> Vec<MarkerObservation> {
    markers
        .iter()
        .map(|m| {
            let pose = match (settings.marker_length, &settings.calibration) {
                (Some(length), Some(calibration)) => {
                    let corners = std::array::from_fn(|k| m.corner(k));
                    estimate_pose(&corners, length, calibration).ok()
                }
                _ => None,
            };
            let centre = m.centre();
            MarkerObservation {
                marker: *m,
                dictionary: settings
                    .dictionaries
                    .get(m.dictionary)
                    .map_or_else(|| Arc::from(""), |d| d.shared_name()),
                track: marker_track(m.dictionary, m.id),
                pose,
                world: world.map(|w| w.to_world(centre[0], centre[1])),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fiducial::render::{render_scene, SceneSpec};
    use crate::geometry::calibration::Calibration;

    /// A quarter of the threads for the stages, the rest for the lanes, every thread used once;
    /// none below 8 threads.
    #[test]
    fn cpu_marker_pools_split_the_host_from_8_threads() {
        assert_eq!(cpu_marker_pool_sizes(16), Some((4, 12)));
        assert_eq!(cpu_marker_pool_sizes(8), Some((2, 6)));
        assert_eq!(cpu_marker_pool_sizes(7), None);
        for threads in 8..=256 {
            let (stages, lanes) = cpu_marker_pool_sizes(threads).unwrap();
            assert!(stages >= 2 && lanes >= 6);
            assert_eq!(stages + lanes, threads);
        }
    }

    /// Markers found on the GPU, or none wanted: no pools of their own.
    #[test]
    fn only_markers_found_on_the_cpu_get_the_pools() {
        let backends = Backends::cpu_only();
        assert!(cpu_marker_pools(false, (BackendChoice::Cpu, &backends)).is_none());
        let on_cpu = cpu_marker_pools(true, (BackendChoice::Cpu, &backends));
        assert_eq!(
            on_cpu.is_some(),
            cpu_marker_pool_sizes(pipeline_threads()).is_some()
        );
    }

    #[test]
    fn markers_get_their_identity_as_track_and_a_pose_with_a_calibration() {
        let dicts: Vec<Arc<Dictionary>> = ["DICT_4X4_50", "DICT_5X5_100"]
            .iter()
            .map(|n| Arc::new(Dictionary::predefined(n).unwrap()))
            .collect();
        let spec = SceneSpec {
            width: 640,
            height: 360,
            markers: 4,
            min_side: 50.0,
            max_side: 70.0,
            seed: 9,
            ..SceneSpec::default()
        };
        let scene = render_scene(&dicts[1], &spec).unwrap();
        let mut settings = MarkerSettings::new(dicts.clone());
        let mut step = MarkerStep::default();
        let backends = Backends::cpu_only();
        let cpu = (BackendChoice::Cpu, &backends);
        let found = step.run(&scene.image, &settings, None, cpu).unwrap();
        assert_eq!(found.len(), 4, "{found:?}");
        for o in &found {
            assert_eq!(&*o.dictionary, "DICT_5X5_100");
            assert_eq!(o.track, marker_track(1, o.marker.id));
            assert_eq!(o.pose, None);
            assert_eq!(o.world, None);
        }
        let calibration = Calibration {
            fx: 800.0,
            fy: 800.0,
            cx: 320.0,
            cy: 180.0,
            dist: [0.0; 5],
        };
        settings.marker_length = Some(0.05);
        settings.calibration = Some(calibration);
        let posed = step.run(&scene.image, &settings, None, cpu).unwrap();
        for o in &posed {
            let corners = std::array::from_fn(|k| o.marker.corner(k));
            let want = estimate_pose(&corners, 0.05, &calibration).unwrap();
            assert_eq!(o.pose, Some(want));
        }
    }

    /// The frames of a run of `synthetic:markers` on the CPU with `markers`, and the engine's
    /// errors.
    fn run_scene(
        markers: Option<MarkerSettings>,
        frames: usize,
    ) -> (Vec<Arc<crate::pipeline::FrameResult>>, Vec<String>) {
        use crate::pipeline::{Delivery, Pipeline, PipelineEvent, PipelineSettings};
        use crate::source::fiducial_scene::FiducialOptions;
        use crate::source::synthetic::SyntheticSource;
        use crate::source::SyntheticKind;
        let options = FiducialOptions::parse("count=6,size=40-60,seed=3").unwrap();
        let source =
            SyntheticSource::new(SyntheticKind::Fiducials(options), 480, 320, false).unwrap();
        let settings = PipelineSettings {
            backend: BackendChoice::Cpu,
            markers: markers.map(Arc::new),
            ..PipelineSettings::default()
        };
        let backends = Arc::new(Backends::cpu_only());
        let p = Pipeline::start(Box::new(source), settings, Delivery::Lossless, backends).unwrap();
        let (mut results, mut messages) = (Vec::new(), Vec::new());
        while results.len() + messages.len() < frames {
            match p.events().recv_timeout(std::time::Duration::from_secs(60)) {
                Ok(PipelineEvent::Frame(r)) => results.push(r),
                Ok(PipelineEvent::EngineError(why)) => messages.push(why),
                Ok(_) => {}
                Err(e) => panic!("no event within 60 s: {e}"),
            }
        }
        p.stop();
        (results, messages)
    }

    #[test]
    fn markers_found_beside_the_tracker_are_those_of_each_step_alone() {
        let dict = Arc::new(Dictionary::predefined("DICT_4X4_50").unwrap());
        let settings = MarkerSettings::new(vec![dict.clone()]);
        let (with, errors) = run_scene(Some(settings.clone()), 6);
        assert!(errors.is_empty(), "{errors:?}");
        let (without, _) = run_scene(None, 6);
        let mut detector =
            crate::fiducial::Detector::new(crate::fiducial::DetectorParams::default()).unwrap();
        let mut found = 0;
        for (a, b) in with.iter().zip(&without) {
            assert_eq!(a.index, b.index);
            // The tracker's results do not depend on the markers running beside it.
            assert_eq!(a.components, b.components);
            assert_eq!(a.track_ids, b.track_ids);
            assert_eq!(a.ended_tracks, b.ended_tracks);
            // The markers are the detector's on the frame, alone.
            let alone = detector.detect(&a.grey, &[dict.as_ref()]).unwrap();
            assert_eq!(a.markers, observe(&alone.markers, &settings, None));
            found += a.markers.len();
            // Each step keeps its own time, in the order of the steps.
            let names: Vec<&str> = a.timings.steps.iter().map(|s| s.step.as_str()).collect();
            assert_eq!(names[names.len() - 2..], ["track", "markers"], "{names:?}");
            assert!(!b.timings.steps.iter().any(|s| s.step == "markers"));
        }
        assert!(found >= 6 * 5, "only {found} markers in 6 frames of 6");
    }

    /// Frames handed to the lanes (two lanes, four frames out at once) get the markers the
    /// step finds on the calling thread, each frame its own; a frame the detector refuses
    /// gets its error, and the lanes go on. (The lanes take any detector: the CPU's here.)
    #[test]
    fn lanes_give_each_frame_its_own_markers_and_errors() {
        let dict = Arc::new(Dictionary::predefined("DICT_4X4_50").unwrap());
        let settings = Arc::new(MarkerSettings::new(vec![dict.clone()]));
        let backends = Arc::new(Backends::cpu_only());
        let frames: Vec<FrameGrey> = (0..4u64)
            .map(|seed| {
                let spec = SceneSpec {
                    width: 480,
                    height: 320,
                    markers: 1 + seed as usize,
                    min_side: 40.0,
                    max_side: 60.0,
                    seed: 20 + seed,
                    ..SceneSpec::default()
                };
                FrameGrey::from(render_scene(&dict, &spec).unwrap().image)
            })
            .collect();
        let mut lanes = MarkerLanes::default();
        let mut step = MarkerStep::default();
        let cpu = (BackendChoice::Cpu, &backends);
        for round in 0..2u64 {
            let replies: Vec<_> = frames
                .iter()
                .enumerate()
                .map(|(k, grey)| lanes.send(2, 4 * round + k as u64, grey, (&settings, None), cpu))
                .collect();
            assert_eq!(lanes.threads.len(), 2);
            for (grey, replies) in frames.iter().zip(replies) {
                let (found, lane_ms) = replies.recv().unwrap();
                let here = step.run(grey, &settings, None, (BackendChoice::Cpu, &backends));
                assert_eq!(found.unwrap(), here.unwrap());
                assert!(lane_ms > 0.0);
            }
        }
        let tiny = FrameGrey::from(GrayImage::empty());
        let (found, _) = lanes
            .send(2, 9, &tiny, (&settings, None), cpu)
            .recv()
            .unwrap();
        let why = found.unwrap_err();
        assert!(why.starts_with("frame 9: markers: "), "{why}");
        let (found, _) = lanes
            .send(2, 10, &frames[0], (&settings, None), cpu)
            .recv()
            .unwrap();
        let here = step.run(&frames[0], &settings, None, (BackendChoice::Cpu, &backends));
        assert_eq!(found.unwrap(), here.unwrap());
        // More lanes, then fewer: as many threads as asked for, and the frames still answered.
        for (count, k) in [(4, 11u64), (3, 12)] {
            let (found, _) = lanes
                .send(count, k, &frames[1], (&settings, None), cpu)
                .recv()
                .unwrap();
            assert_eq!(lanes.threads.len(), count);
            let here = step.run(&frames[1], &settings, None, (BackendChoice::Cpu, &backends));
            assert_eq!(found.unwrap(), here.unwrap());
        }
        // Dropping the lanes ends their threads.
        drop(lanes);
    }

    #[test]
    fn marker_tracks_are_apart_from_component_tracks_and_per_dictionary() {
        use crate::fiducial::observation::is_marker_track;
        assert!(!is_marker_track(1) && !is_marker_track(999_999_999_999));
        assert!(is_marker_track(marker_track(0, 0)));
        assert_ne!(marker_track(0, 7), marker_track(1, 7));
        assert!(marker_track(40, 999_999) < 1 << 53);
    }
}
