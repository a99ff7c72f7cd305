//! One video file decoded by several decoders at once, each from its own IDR keyframes, the
//! frames delivered in the file's order: what makes NVDEC decoding faster than one engine
//! (a decoder keeps one NVDEC engine busy; data-centre GPUs have several).
//!
//! A planner thread reads the file's packets (not decoding them) and cuts it into segments at
//! IDR keyframes (`keyframes`), each at least `min_frames` packets long (a short last one joins
//! the one before). Decoder threads take the segments in order, each decoding its segment from
//! its first packet to the next segment's first packet into a queue of its own. The consumer
//! (`next_frame`) empties the queues segment by segment, adding to each frame index the frames
//! of the segments before: since an IDR picture closes the stream behind it, a segment decodes
//! to exactly the frames one decoder gives for that stretch (`keyframes`), so the frames, their
//! indices, the left-out frames and the notices are a single decoder's.
//!
//! Memory: at most `decoders` queues exist at once (the one being read and those of the
//! segments planned after it), each holding at most `FRAME_BUDGET / decoders` bytes of frames,
//! so the frames waiting stay under `FRAME_BUDGET`. A queue that is full makes its decoder wait (a segment longer than the queue
//! is then decoded partly in parallel only).

use super::damage::{HandOver, LeftOut};
use super::file::{packet_end_s, time_bases, Segment, SegmentStart, VideoSource};
use super::keyframes::{self, Codec, Framing};
use super::VideoDecoding;
use crate::error::{Error, Result};
use crate::frame::page_lock::PageLocker;
use crate::source::{Frame, FrameSource, Skipped};
use crossbeam_channel::{bounded, Receiver, Sender};
use ffmpeg_next as ff;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Most bytes of decoded frames waiting in the queues.
pub const FRAME_BUDGET: usize = 512 << 20;

/// What a decoder thread sends for its segment, in the order it happened.
enum Item {
    Frame(Frame),
    LeftOut(LeftOut),
    HandOver(HandOver),
    Notice(String),
    /// The segment is decoded: this many frames were indexed in it.
    End(u64),
    Failed(Error),
}

struct Job {
    segment: Segment,
    items: Sender<Item>,
}

pub struct SegmentedVideo {
    description: String,
    path: PathBuf,
    fps: Option<f64>,
    announced: Option<u64>,
    /// Until the first frame is asked for: the opened source (it decodes the first segment)
    /// and what the threads need; then the queues.
    waiting: Option<Start>,
    /// The segments' queues, in the file's order, and the one being read.
    order: Option<Receiver<Receiver<Item>>>,
    current: Option<Receiver<Item>>,
    /// Frames indexed in the segments before the current one.
    base: u64,
    notices: Vec<String>,
    skipped: Vec<Skipped>,
    threads: Vec<JoinHandle<()>>,
    /// The decoders' `VideoSource::on_gpu`, shared.
    on_gpu: Arc<AtomicBool>,
}

struct Start {
    first: VideoSource,
    /// The other decoders (a file that could not be opened again: that decoder takes no part).
    others: Vec<Result<VideoSource>>,
    decoders: usize,
    min_frames: u64,
    codec: Codec,
    framing: Framing,
    locker: Option<Arc<dyn PageLocker>>,
}

impl SegmentedVideo {
    /// `first`, opened as `decoding` says, decoded by `decoders` decoders at once; one decoder
    /// (`first` itself) where its codec's IDR keyframes cannot be found or `decoders` ≤ 1.
    pub fn open(
        first: VideoSource,
        decoding: VideoDecoding,
        decoders: usize,
        min_frames: u64,
    ) -> Box<dyn FrameSource> {
        let Some((codec, framing)) = first.idr_codec().filter(|_| decoders > 1) else {
            return Box::new(first);
        };
        let nvdec = if first.on_nvdec() {
            format!(", {decoders} NVDEC decoders")
        } else {
            String::new()
        };
        let description = match first.describe().strip_suffix(')') {
            Some(d) => format!("{d}{nvdec})"),
            None => first.describe(),
        };
        // The other decoders open now, at once (a decoder's CUDA context takes longer to make
        // than a hundred frames take to decode).
        let path = first.path().to_path_buf();
        let in_engine = first.in_engine_context;
        let others = std::thread::scope(|scope| {
            let opening: Vec<_> = (1..decoders)
                .map(|_| scope.spawn(|| VideoSource::open(&path, false, decoding, in_engine)))
                .collect();
            opening
                .into_iter()
                .map(|o| {
                    o.join().unwrap_or_else(|_| {
                        Err(Error::image(&path, "opening a decoder failed unexpectedly"))
                    })
                })
                .collect()
        });
        let on_gpu = Arc::clone(&first.on_gpu);
        Box::new(SegmentedVideo {
            on_gpu,
            description,
            path: first.path().to_path_buf(),
            fps: first.fps(),
            announced: first.frame_count(),
            waiting: Some(Start {
                first,
                others,
                decoders,
                min_frames: min_frames.max(1),
                codec,
                framing,
                locker: None,
            }),
            order: None,
            current: None,
            base: 0,
            notices: Vec::new(),
            skipped: Vec::new(),
            threads: Vec::new(),
        })
    }

    /// Starts the planner and the decoders.
    fn start(&mut self, start: Start) {
        let Start {
            first,
            others,
            decoders,
            min_frames,
            codec,
            framing,
            locker,
        } = start;
        let (width, height) = (first.width(), first.height());
        let frame_bytes = (width as usize * height as usize).max(1);
        let queue = (FRAME_BUDGET / decoders / frame_bytes).max(2);
        // The planner waits for a free decoder; the queues of the segments planned wait for
        // the consumer (`decoders` − 1 of them beside the one it reads).
        let (jobs_tx, jobs_rx) = bounded::<Job>(0);
        let (order_tx, order_rx) = bounded::<Receiver<Item>>(decoders - 1);
        let path = first.path().to_path_buf();
        let stream_index = first.stream_index();
        let sources = std::iter::once(Ok(first)).chain(others);
        for (k, source) in sources.enumerate() {
            let source = source.map(|mut s| {
                s.keep_buffers(queue + 4, locker.clone());
                s.on_gpu = Arc::clone(&self.on_gpu);
                s
            });
            let jobs = jobs_rx.clone();
            self.threads.push(
                std::thread::Builder::new()
                    .name(format!("video decoder {k}"))
                    .spawn(move || decode_segments(source, jobs))
                    .expect("a thread can be started"),
            );
        }
        drop(jobs_rx);
        self.threads.push(
            std::thread::Builder::new()
                .name("video planner".into())
                .spawn(move || {
                    let planner = Planner::new(&path, stream_index, codec, framing, min_frames);
                    plan(planner, queue, jobs_tx, order_tx)
                })
                .expect("a thread can be started"),
        );
        self.current = order_rx.recv().ok();
        self.order = Some(order_rx);
    }
}

/// Cuts the file at IDR keyframes into segments, reading its packets as they are asked for.
pub(super) struct Planner {
    /// None once unreadable: the last segment reads to the end itself and says what it finds.
    input: Option<ff::format::context::Input>,
    stream_index: usize,
    codec: Codec,
    framing: Framing,
    min_frames: u64,
    /// The current segment's first packet (None: the file's start) and its packets so far.
    start: Option<SegmentStart>,
    count: u64,
    /// The segment before, complete but held back: a short last segment joins it.
    held: Option<Segment>,
    done: bool,
    /// Where the data of the packets read so far ends (`SegmentStart::data_end_before_s`).
    time_bases: Vec<f64>,
    data_end_s: f64,
}

impl Planner {
    pub(super) fn new(
        path: &std::path::Path,
        stream_index: usize,
        codec: Codec,
        framing: Framing,
        min_frames: u64,
    ) -> Planner {
        let input = ff::format::input(&path).ok();
        Planner {
            time_bases: input.as_ref().map(time_bases).unwrap_or_default(),
            data_end_s: f64::NEG_INFINITY,
            input,
            stream_index,
            codec,
            framing,
            min_frames: min_frames.max(1),
            start: None,
            count: 0,
            held: None,
            done: false,
        }
    }

    /// The next segment of the file; None after the last.
    pub(super) fn next_segment(&mut self) -> Option<Segment> {
        while let Some(input) = &mut self.input {
            let mut packet = ff::Packet::empty();
            match packet.read(input) {
                Ok(()) => {}
                Err(ff::Error::Other { errno }) if errno == ff::util::error::EAGAIN => continue,
                Err(_) => {
                    self.input = None;
                    break;
                }
            }
            let data_end_before_s = self.data_end_s;
            if let Some(end) = packet_end_s(&packet, &self.time_bases) {
                self.data_end_s = self.data_end_s.max(end);
            }
            if packet.stream() != self.stream_index || packet.size() == 0 {
                continue;
            }
            let pos = packet.position() as i64;
            let cut = self.count >= self.min_frames
                && packet.is_key()
                && pos >= 0
                && self.start.is_none_or(|s| pos > s.pos)
                && packet.dts().is_some()
                && packet
                    .data()
                    .is_some_and(|d| keyframes::starts_with_idr(self.codec, self.framing, d));
            self.count += 1;
            if cut {
                let next = SegmentStart {
                    pos,
                    dts: packet.dts().unwrap_or(0),
                    data_end_before_s,
                };
                let ended = Segment {
                    start: self.start.replace(next),
                    end: Some(pos),
                };
                self.count = 1;
                if let Some(before) = self.held.replace(ended) {
                    return Some(before);
                }
            }
        }
        if self.done {
            return self.held.take();
        }
        self.done = true;
        // The last segment reads to the end of the file; a short one joins the one before.
        let last = Segment {
            start: self.start,
            end: None,
        };
        match self.held.take() {
            Some(before) if self.count < self.min_frames => Some(Segment {
                start: before.start,
                end: None,
            }),
            Some(before) => {
                self.held = Some(last);
                Some(before)
            }
            None => Some(last),
        }
    }
}

/// The planner's thread: the segments handed out in order, each with its queue (given to the
/// consumer first: it waits on it), until the consumer or the decoders are gone.
fn plan(mut planner: Planner, queue: usize, jobs: Sender<Job>, order: Sender<Receiver<Item>>) {
    while let Some(segment) = planner.next_segment() {
        let (items_tx, items_rx) = bounded(queue);
        let job = Job {
            segment,
            items: items_tx,
        };
        if order.send(items_rx).is_err() || jobs.send(job).is_err() {
            return;
        }
    }
}

/// A decoder thread: its segments, one after the other, into their queues. One that could not
/// open the file takes none (the others decode them; the first decoder is open already).
fn decode_segments(source: Result<VideoSource>, jobs: Receiver<Job>) {
    let Ok(mut source) = source else {
        return;
    };
    while let Ok(job) = jobs.recv() {
        if !decode_segment(&mut source, job) {
            return;
        }
    }
}

/// False when the consumer has gone.
fn decode_segment(source: &mut VideoSource, job: Job) -> bool {
    let out = job.items;
    if let Err(e) = source.enter_segment(job.segment) {
        return out.send(Item::Failed(e)).is_ok();
    }
    loop {
        let next = source.next_frame();
        let (left_out, hand_overs, notices) = source.take_events();
        let events = notices
            .into_iter()
            .map(Item::Notice)
            .chain(hand_overs.into_iter().map(Item::HandOver))
            .chain(left_out.into_iter().map(Item::LeftOut));
        for item in events {
            if out.send(item).is_err() {
                return false;
            }
        }
        let (item, done) = match next {
            Ok(Some(frame)) => (Item::Frame(frame), false),
            Ok(None) => (Item::End(source.frames_indexed()), true),
            Err(e) => (Item::Failed(e), true),
        };
        if out.send(item).is_err() {
            return false;
        }
        if done {
            return true;
        }
    }
}

impl SegmentedVideo {
    /// Stops the threads: every queue is closed, those still being planned as they come, so
    /// each decoder ends at its next frame and the planner at its next segment.
    fn close(&mut self) {
        self.current = None;
        if let Some(order) = self.order.take() {
            while order.recv().is_ok() {}
        }
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

impl Drop for SegmentedVideo {
    fn drop(&mut self) {
        self.close();
    }
}

impl FrameSource for SegmentedVideo {
    fn describe(&self) -> String {
        self.description.clone()
    }

    fn is_live(&self) -> bool {
        false
    }

    fn next_frame(&mut self) -> Result<Option<Frame>> {
        if let Some(start) = self.waiting.take() {
            self.start(start);
        }
        loop {
            let Some(current) = &self.current else {
                return Ok(None);
            };
            match current.recv() {
                Ok(Item::Frame(mut frame)) => {
                    frame.index += self.base;
                    return Ok(Some(frame));
                }
                Ok(Item::LeftOut(left)) => self.skipped.push(left.skipped(self.base)),
                Ok(Item::HandOver(h)) => self.notices.push(h.notice(self.base)),
                Ok(Item::Notice(n)) => {
                    if !self.notices.contains(&n) {
                        self.notices.push(n)
                    }
                }
                Ok(Item::End(frames)) => {
                    self.base += frames;
                    self.current = self.order.as_ref().and_then(|o| o.recv().ok());
                }
                Ok(Item::Failed(e)) => {
                    self.close();
                    return Err(e);
                }
                Err(_) => {
                    self.close();
                    return Err(Error::image(
                        &self.path,
                        "a video decoding thread stopped before the end of its part of the file",
                    ));
                }
            }
        }
    }

    fn take_notices(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notices)
    }

    fn take_skipped(&mut self) -> Vec<Skipped> {
        std::mem::take(&mut self.skipped)
    }

    fn frame_count(&self) -> Option<u64> {
        self.announced
    }

    fn fps(&self) -> Option<f64> {
        self.fps
    }

    fn set_page_locker(&mut self, locker: Arc<dyn PageLocker>) {
        if let Some(start) = &mut self.waiting {
            start.locker = Some(locker);
        }
    }

    fn keep_frames_on_gpu(&mut self, keep: bool) {
        self.on_gpu.store(keep, Ordering::Relaxed);
    }

    fn set_skip_damaged(&mut self, skip: bool) {
        if let Some(start) = &mut self.waiting {
            start.first.set_skip_damaged(skip);
            for other in start.others.iter_mut().flatten() {
                other.set_skip_damaged(skip);
            }
        }
    }
}
