//! The engine worker of a run of several sources (`Pipeline::start_set`): one thread takes the
//! frames of every source's capture thread and labels those that can go together as one frame
//! set (`ccl::frame_set`: one submission, one wait; two sets in flight, on two labelers with
//! streams of their own), then hands each frame to its own source's filter, tracking stage and
//! events, as its own worker would have.
//!
//! Eight sources each with a worker of its own cost eight submissions, eight waits and eight
//! hand-overs a frame set; for small frames that host work, not the GPU, set the rate (H200,
//! eight 640×480 sources: 17,665–18,235 frames/s in all a worker a source, 30,937–34,926
//! together). A set takes, from each source with a frame waiting, its next frame when it has
//! the set's size and settings (each source in turn is looked at first, so that frames of
//! another size get sets of their own); a source with none waiting is not waited for (a
//! stalled camera never holds the others back), nor is one whose tracking queue has no room
//! for its frames in flight and one more (its consumer is behind: its frames wait in its own
//! queue, as they would for its own worker, and handing a frame on never waits). Frames that
//! cannot go in a set (a CPU labeler, markers, an adaptive threshold, a pixel mask, a label
//! image asked for) are labeled alone with the source's own engine, once its frames in flight
//! are out; so is every frame once a set failed (said once). A source's messages wait for its
//! frames in flight too.

use super::capture::MaskMaker;
use super::engine::{resolve_algorithm, Pending, ResolvedAlgorithm};
use super::queue::{Captured, Doorbell, Item, Next};
use super::tracking::TrackStage;
use super::worker::Engine;
use super::{PipelineEvent, PipelineSettings, Shared, STOP_POLL};
use crate::ccl::algorithms::algorithm_info;
use crate::ccl::frame_set::GreySet;
use crate::ccl::{Backend, Backends, Connectivity, Keep, Labeler, RowFilter};
use crate::threshold::spec::ThresholdSpec;
use crate::threshold::GreyInput;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

/// How long the worker sleeps when a source with frames waiting has no room downstream (its
/// tracking stage does not ring the bell when it frees some).
const ROOM_POLL: Duration = Duration::from_millis(1);

/// One source of the set: its pipeline's state, its tracking stage and its engine (for the
/// frames it labels alone).
pub(super) struct Member {
    pub(super) shared: Arc<Shared>,
    pub(super) stage: TrackStage,
    engine: Engine,
    /// Taken from its queue but not fitting the set being made, or waiting for its frames in
    /// flight: first the next time.
    held: Option<Item>,
    /// Its queue is closed.
    ended: bool,
    /// Its frames in sets in flight.
    in_flight: usize,
    /// The settings of its last frame and their part of its frames' set key.
    key_of_settings: Option<(Arc<PipelineSettings>, Option<SetKey>)>,
}

impl Member {
    pub(super) fn new(shared: Arc<Shared>, stage: TrackStage) -> Member {
        Member {
            shared,
            stage,
            engine: Engine::new(None),
            held: None,
            ended: false,
            in_flight: 0,
            key_of_settings: None,
        }
    }

    /// Labels one of its frames alone and sends it on.
    fn alone(&mut self, captured: Captured) {
        self.engine
            .one_frame(captured, None, &self.shared, &self.stage);
    }
}

/// Whether the frames of several sources with `settings` on `backends` are labeled as frame
/// sets (`Pipeline::start_set` is then worth its one worker): a GPU labeler that labels sets is
/// handed the grey frames, with no pixel mask and no markers, and `MARKERSCOPE_FRAME_SETS` is
/// not off. Otherwise each source's own worker labels its frames beside the others'.
pub fn frames_labeled_in_sets(settings: &PipelineSettings, backends: &Backends) -> bool {
    backends.tuning().gpu.frame_sets
        && MaskMaker::for_settings(settings, backends, false) == MaskMaker::Labeler
        && settings.markers.is_none()
        && settings.mask.is_none()
        && resolve_algorithm(settings, backends).is_ok_and(|r| {
            r.backend == Backend::Cuda && algorithm_info(r.name).is_ok_and(|i| i.frame_sets)
        })
}

/// What frames must share to be labeled as one set.
#[derive(Clone, Debug, PartialEq)]
struct SetKey {
    width: u32,
    height: u32,
    algorithm: &'static str,
    connectivity: Connectivity,
    threshold: ThresholdSpec,
    invert: bool,
    subpixel: bool,
    /// The area and aspect limits, applied on the device to the set's rows.
    rows: RowFilter,
}

impl Member {
    /// The key of a frame that can go in a set: a grey frame handed to a GPU labeler that
    /// labels sets (the settings' part found once per settings), with no pixel mask.
    fn set_key(&mut self, captured: &Captured) -> Option<SetKey> {
        let handed_grey = captured.packed.is_none() && captured.binary.is_none();
        let gpu_given_up = (self.shared.gpu_given_up).load(std::sync::atomic::Ordering::Relaxed);
        if !handed_grey || captured.pixel_mask.is_some() || gpu_given_up {
            return None;
        }
        let settings = &captured.settings;
        let known = (self.key_of_settings.as_ref()).filter(|(s, _)| Arc::ptr_eq(s, settings));
        let key = match known {
            Some((_, key)) => key.clone(),
            None => {
                let key = settings_key(settings, &self.shared.backends);
                self.key_of_settings = Some((settings.clone(), key.clone()));
                key
            }
        };
        let (width, height) = (captured.frame.grey.width, captured.frame.grey.height);
        key.map(|key| SetKey {
            width,
            height,
            ..key
        })
    }
}

/// The part of a set's key that `settings` decide (the frame's size 0), where its frames can
/// go in a set: no markers, label image, mask view or shape descriptors asked for, a global
/// threshold, an algorithm of the GPU that labels sets.
fn settings_key(settings: &PipelineSettings, backends: &Backends) -> Option<SetKey> {
    if settings.markers.is_some()
        || settings.want_labels
        || settings.want_binary
        || settings.shapes
        || settings.filter.has_shape_limits()
        || matches!(settings.threshold, ThresholdSpec::Adaptive { .. })
    {
        return None;
    }
    let resolved = resolve_algorithm(settings, backends).ok()?;
    let info = algorithm_info(resolved.name).ok()?;
    (resolved.backend == Backend::Cuda && info.frame_sets).then(|| SetKey {
        width: 0,
        height: 0,
        algorithm: resolved.name,
        connectivity: settings.connectivity,
        threshold: settings.threshold,
        invert: settings.invert,
        subpixel: settings.subpixel,
        rows: settings.filter.rows(),
    })
}

/// Sets in flight at once: the host makes and hands on one set while the GPU labels the next.
const SETS_IN_FLIGHT: usize = 2;

/// The labelers of the sets, made for the first set of their algorithm: one a set in flight
/// (the first, and its twins: streams of their own).
struct SetLabelers {
    backends: Arc<Backends>,
    /// Each with whether a set of it is in flight.
    labelers: Vec<(Box<dyn Labeler>, bool)>,
    made_for: Option<(&'static str, Connectivity)>,
    /// A set failed: every frame goes alone from then on.
    failed: bool,
}

impl SetLabelers {
    /// A labeler for `key` with no set in flight (the caller has fewer than
    /// `SETS_IN_FLIGHT` in flight), and its place.
    fn free_for(&mut self, key: &SetKey) -> crate::error::Result<usize> {
        if self.made_for != Some((key.algorithm, key.connectivity)) {
            self.labelers.clear();
            self.made_for = None;
            let made = self.backends.create(key.algorithm, key.connectivity)?;
            self.labelers.push((made, false));
            self.made_for = Some((key.algorithm, key.connectivity));
        }
        if let Some(at) = self.labelers.iter().position(|(_, busy)| !busy) {
            return Ok(at);
        }
        let twin = self.labelers[0].0.twin()?;
        self.labelers.push((twin, false));
        Ok(self.labelers.len() - 1)
    }
}

/// A set submitted to labeler `at`: its frames with their sources.
struct SetInFlight {
    at: usize,
    key: SetKey,
    frames: Vec<(usize, Box<Captured>)>,
}

/// The set worker's loop (see the module comment). `set_backends`: the device for the sets'
/// labelers (streams of their own).
pub(super) fn set_worker_loop(
    mut members: Vec<Member>,
    bell: &Doorbell,
    set_backends: Arc<Backends>,
) {
    let mut sets = SetLabelers {
        backends: set_backends,
        labelers: Vec::new(),
        made_for: None,
        failed: false,
    };
    if let Some(first) = members.first() {
        for why in &first.shared.backends.tuning().notices {
            first.stage.send(PipelineEvent::Notice(why.clone()));
        }
    }
    let mut in_flight: VecDeque<SetInFlight> = VecDeque::new();
    let mut turn = 0;
    loop {
        if members.iter().any(|m| m.shared.stopping()) {
            break;
        }
        let rung = bell.rung();
        // Each source in turn is looked at first, so that one whose frames fit no other's
        // set (another size) gets its own sets.
        turn = (turn + 1) % members.len().max(1);
        let (set, key, short_of_room) = gather(&mut members, turn, sets.failed);
        if set.is_empty() {
            // Nothing new: the oldest set is not held back for one to come.
            if let Some(oldest) = in_flight.pop_front() {
                complete(&mut members, oldest, &mut sets);
                continue;
            }
            if members.iter().all(|m| m.ended && m.held.is_none()) {
                break;
            }
            let wait = if short_of_room { ROOM_POLL } else { STOP_POLL };
            bell.wait_past(rung, wait);
            continue;
        }
        // A frame with no key went alone in `gather`: the set has one (a set of one frame
        // too: a frame of its source may be in flight, and goes first).
        let Some(key) = key else { continue };
        let other_labeler = in_flight.back().is_some_and(|f| {
            (f.key.algorithm, f.key.connectivity) != (key.algorithm, key.connectivity)
        });
        if other_labeler {
            while let Some(oldest) = in_flight.pop_front() {
                complete(&mut members, oldest, &mut sets);
            }
        }
        match submit(&mut members, set, key, &mut sets) {
            Ok(submitted) => in_flight.push_back(submitted),
            Err((frames, why)) => {
                // The sets before it first: its sources' frames in them come first.
                while let Some(oldest) = in_flight.pop_front() {
                    complete(&mut members, oldest, &mut sets);
                }
                give_up_sets(&mut members, frames, &why, &mut sets);
            }
        }
        while in_flight.len() >= SETS_IN_FLIGHT {
            let oldest = in_flight.pop_front().expect("checked above");
            complete(&mut members, oldest, &mut sets);
        }
    }
    // Stopping, or the end: every set submitted is completed.
    while let Some(oldest) = in_flight.pop_front() {
        complete(&mut members, oldest, &mut sets);
    }
}

/// What `gather` gives: the set's frames with their sources, its key, and whether a source
/// was skipped for lack of room.
type Gathered = (Vec<(usize, Box<Captured>)>, Option<SetKey>, bool);

/// One frame from each source that has one waiting and room downstream, of the key of the
/// first such frame from source `first` on (the others are held for the next set); frames
/// that cannot go in a set are labeled alone on the way, and messages passed on in their place,
/// once none of their source's frames is in flight (else they wait, and so does the source).
/// Returns the frames with their sources, the set's key (None when there is no frame) and
/// whether a source with frames waiting was skipped for lack of room.
fn gather(members: &mut [Member], first: usize, sets_failed: bool) -> Gathered {
    let mut set: Vec<(usize, Box<Captured>)> = Vec::new();
    let mut key: Option<SetKey> = None;
    let mut short_of_room = false;
    let n = members.len();
    for k in (0..n).map(|i| (i + first) % n) {
        let member = &mut members[k];
        if member.ended && member.held.is_none() {
            continue;
        }
        // Room downstream for its frames in flight and one more: handing a frame on never
        // waits (a source whose consumer is behind would hold the worker, and every other
        // source with it).
        loop {
            if !member.stage.has_room_for(member.in_flight + 1) {
                short_of_room |= member.held.is_some() || member.shared.queue.waiting_frames() > 0;
                break;
            }
            let item = match member.held.take() {
                Some(item) => item,
                None => match member.shared.queue.try_pop() {
                    Next::Item(item) => item,
                    Next::Empty => break,
                    Next::Closed => {
                        member.ended = true;
                        break;
                    }
                },
            };
            let captured = match item {
                // Its frames in flight go first.
                item @ Item::Event(_) if member.in_flight > 0 => {
                    member.held = Some(item);
                    break;
                }
                // No frame of this source is in the set yet: its messages keep their place.
                Item::Event(event) => {
                    member.stage.send(event);
                    continue;
                }
                Item::Frame(captured) => captured,
            };
            let frame_key = if sets_failed {
                None
            } else {
                member.set_key(&captured)
            };
            match frame_key {
                None if member.in_flight > 0 => member.held = Some(Item::Frame(captured)),
                None => member.alone(*captured),
                Some(fk) if key.as_ref().is_none_or(|k| *k == fk) => {
                    key = Some(fk);
                    set.push((k, captured));
                }
                Some(_) => member.held = Some(Item::Frame(captured)),
            }
            break;
        }
    }
    (set, key, short_of_room)
}

/// The frames' grey inputs for their set.
fn inputs_of(frames: &[(usize, Box<Captured>)]) -> Vec<GreyInput<'_>> {
    frames
        .iter()
        .map(|(_, c)| GreyInput {
            grey: &c.frame.grey,
            threshold: &c.settings.threshold,
            invert: c.settings.invert,
            pixel_mask: None,
            staged: c.staged_grey.as_ref(),
        })
        .collect()
}

/// A set that could not be submitted: its frames, and why.
type NotSubmitted = (Vec<(usize, Box<Captured>)>, String);

/// Submits `frames` (of `key`) as one frame set; where the labeler cannot, gives the frames
/// back with the reason.
fn submit(
    members: &mut [Member],
    frames: Vec<(usize, Box<Captured>)>,
    key: SetKey,
    sets: &mut SetLabelers,
) -> std::result::Result<SetInFlight, NotSubmitted> {
    let submitted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let at = sets.free_for(&key)?;
        let labeler = sets.labelers[at].0.as_mut();
        labeler.set_row_filter(key.rows);
        let inputs = inputs_of(&frames);
        let request = GreySet {
            frames: &inputs,
            connectivity: key.connectivity,
            subpixel: key.subpixel,
        };
        labeler
            .submit_grey_set(request)
            .map(|done| done.then_some(at))
    }));
    let failed = match submitted {
        Ok(Ok(Some(at))) => {
            sets.labelers[at].1 = true;
            for (k, _) in &frames {
                members[*k].in_flight += 1;
            }
            return Ok(SetInFlight { at, key, frames });
        }
        Ok(Ok(None)) => "the labeler does not label frame sets".to_string(),
        Ok(Err(e)) => e.to_string(),
        Err(_) => "the labeler crashed".to_string(),
    };
    Err((frames, failed))
}

/// Completes a set in flight and hands each frame on, in order; a set that failed is labeled
/// frame by frame (the sets after it hold later frames of their sources: order is kept).
fn complete(members: &mut [Member], set: SetInFlight, sets: &mut SetLabelers) {
    let SetInFlight { at, key, frames } = set;
    for (k, _) in &frames {
        members[*k].in_flight -= 1;
    }
    let completed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let filters: Vec<_> = frames.iter().map(|(_, c)| c.settings.filter).collect();
        let accepts: Vec<_> = filters
            .iter()
            .map(|f| move |c: &crate::ccl::stats::ComponentStats| f.accepts(c))
            .collect();
        let keeps: Vec<Keep<'_>> = accepts.iter().map(|a| a as Keep<'_>).collect();
        sets.labelers[at].0.complete_grey_set(&keeps)
    }));
    if let Some(labeler) = sets.labelers.get_mut(at) {
        labeler.1 = false;
    }
    let why = match completed {
        Ok(Ok(out)) if out.len() == frames.len() => {
            let resolved = ResolvedAlgorithm {
                name: key.algorithm,
                backend: Backend::Cuda,
                notice: None,
            };
            for ((k, captured), (labeling, centroids)) in frames.into_iter().zip(out) {
                let pending = Pending::Done(Ok(((labeling, centroids, None), resolved.clone())));
                let member = &mut members[k];
                (member.engine).one_frame(*captured, Some(pending), &member.shared, &member.stage);
            }
            return;
        }
        Ok(Ok(out)) => format!("{} results for {} frames", out.len(), frames.len()),
        Ok(Err(e)) => e.to_string(),
        Err(_) => "the labeler crashed".to_string(),
    };
    give_up_sets(members, frames, &why, sets);
}

/// A set could not be labeled: said once, every frame goes alone from now on, these first.
fn give_up_sets(
    members: &mut [Member],
    frames: Vec<(usize, Box<Captured>)>,
    why: &str,
    sets: &mut SetLabelers,
) {
    if !sets.failed {
        if let Some((k, _)) = frames.first() {
            members[*k].stage.send(PipelineEvent::Notice(format!(
                "labeling the sources' frames together failed ({why}); each frame is labeled \
                 alone from now on"
            )));
        }
    }
    sets.failed = true;
    for (k, captured) in frames {
        members[k].alone(*captured);
    }
}
