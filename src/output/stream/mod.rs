//! Live result streams (`--stream URL`): TUIO over OSC/UDP, JSON over UDP, JSON to WebSocket
//! clients. Each stream has its own dropping queue and sending thread: the consumer that
//! publishes a frame only queues a reference to it, so no stream, network or client can slow
//! the engine; a stream that falls behind loses its oldest frames and counts them.
//!
//! Opening a stream checks its address (syntax, scheme, host name) and, for `ws://`, binds the
//! port, so a bad address fails before any work. Sending errors later (no route to the host,
//! nobody listening) are reported once as a notice, and the stream keeps trying with the next
//! frames.
//!
//! - `spec`: the addresses; `queue`: the dropping queue;
//! - `osc`: OSC 1.0 encoding; `tuio`: TUIO 1.1 `/tuio/2Dblb` (components) and `/tuio/2Dobj`
//!   (markers) bundles;
//! - `json`: one JSON object per frame; `websocket`: the WebSocket server.
//!
//! In a run of several sources each frame is published with its source (`SourceTag`): the
//! JSON objects carry `source`, `source_name` and `frame_set`, and TUIO keeps the tracks of
//! each source apart, each source's bundles with a `source` message of its own
//! (`markerscope:K`, K from 0). A run of one source sends what it always has. When every
//! source maps into the world, the JSON components and markers also carry their merged world
//! view's columns, and TUIO streams get the world view's bundles (`tuio::WorldView`, source
//! `markerscope:world`: the merged objects as blobs, the merged markers as objects) after each
//! frame set's frames.

pub mod json;
pub mod osc;
mod queue;
pub mod spec;
pub mod tuio;
mod websocket;

pub use spec::{StreamKind, StreamSpec};

use crate::error::Result;
use crate::output::row_text::MergedObservation;
use crate::pipeline::FrameResult;
use crossbeam_channel::{Receiver, Sender};
use queue::{DropQueue, Popped};
use spec::stream_error;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use websocket::WebSocketServer;

/// Frames a stream may fall behind before its oldest is dropped.
pub const STREAM_QUEUE: usize = 8;

/// What a stream has done so far (for the window and the closing summary).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StreamStatus {
    pub url: String,
    /// Frames sent (to a WebSocket stream: encoded for the clients).
    pub sent: u64,
    /// Frames dropped because the stream was behind.
    pub dropped: u64,
    /// Frames that could not be sent (see `error`).
    pub failed: u64,
    /// The last sending error, until frames have gone out for `RECOVERED_AFTER` without one.
    pub error: Option<String>,
    /// Connected clients (WebSocket streams only).
    pub clients: Option<usize>,
}

/// Which source a published frame is of, in a run of several.
#[derive(Clone, Debug, PartialEq)]
pub struct SourceTag {
    /// The source's position among those given, from 0.
    pub index: usize,
    /// The source as given.
    pub name: Arc<str>,
    pub frame_set: u64,
    /// Each component's object of the merged world view (empty: no merged view).
    pub merged: Arc<[MergedObservation]>,
    /// Each square marker's object of the merged world view (empty: none).
    pub merged_markers: Arc<[MergedObservation]>,
}

/// What a stream queues: a frame, with its source in a run of several, or the merged world
/// view of a frame set.
enum Published {
    Frame(Arc<FrameResult>, Option<SourceTag>),
    World(Arc<tuio::WorldView>),
}

/// Where a stream's frames go.
enum Sink {
    Tuio {
        socket: UdpSocket,
        /// The frames of a run of one source.
        encoder: tuio::TuioEncoder,
        /// Per source of a run of several (each remembers its own tracks' motion).
        per_source: Vec<tuio::TuioEncoder>,
        /// The merged world view's (boxed: the sinks of other kinds are small).
        world: Box<tuio::TuioEncoder>,
    },
    JsonUdp {
        socket: UdpSocket,
    },
    WebSocket(Arc<WebSocketServer>),
}

impl Sink {
    fn open(spec: &StreamSpec) -> Result<Sink> {
        Ok(match spec.kind {
            StreamKind::Tuio => Sink::Tuio {
                socket: udp_socket(spec)?,
                encoder: tuio::TuioEncoder::new(),
                per_source: Vec::new(),
                world: Box::new(tuio::TuioEncoder::for_world()),
            },
            StreamKind::JsonUdp => Sink::JsonUdp {
                socket: udp_socket(spec)?,
            },
            StreamKind::WebSocket => Sink::WebSocket(Arc::new(WebSocketServer::bind(spec)?)),
        })
    }

    fn send(&mut self, frame: &FrameResult, source: Option<&SourceTag>) -> std::io::Result<()> {
        match self {
            Sink::Tuio {
                socket,
                encoder,
                per_source,
                ..
            } => {
                let encoder = match source {
                    Some(tag) => {
                        while per_source.len() <= tag.index {
                            per_source.push(tuio::TuioEncoder::for_source(per_source.len()));
                        }
                        &mut per_source[tag.index]
                    }
                    None => encoder,
                };
                encoder.encode_each(frame, &mut |d: &[u8]| socket.send(d).map(drop))
            }
            Sink::JsonUdp { socket } => json::encode_frame_parts(frame, source, tuio::MAX_DATAGRAM)
                .iter()
                .try_for_each(|d| socket.send(d).map(drop)),
            Sink::WebSocket(server) => {
                let text = json::encode_frame(frame, source);
                // The encoder writes UTF-8 only (serde_json escapes nothing into invalid UTF-8).
                let text = String::from_utf8(text)
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
                server.broadcast(&text.into());
                Ok(())
            }
        }
    }
}

impl Sink {
    /// The merged world view of a frame set: TUIO's bundle of it; the JSON streams carry it in
    /// their frames' components.
    fn send_world(&mut self, view: &tuio::WorldView) -> std::io::Result<()> {
        match self {
            Sink::Tuio { socket, world, .. } => {
                world.encode_world_each(view, &mut |d: &[u8]| socket.send(d).map(drop))
            }
            Sink::JsonUdp { .. } | Sink::WebSocket(_) => Ok(()),
        }
    }
}

/// A UDP socket connected to the spec's address, so that the system reports errors (no
/// route, nobody listening) on later sends.
fn udp_socket(spec: &StreamSpec) -> Result<UdpSocket> {
    let addr = spec.resolve()?;
    let local: SocketAddr = if addr.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let socket = UdpSocket::bind(local)
        .map_err(|e| stream_error(&spec.url, format!("cannot open a UDP socket: {e}")))?;
    socket.connect(addr).map_err(|e| {
        stream_error(
            &spec.url,
            format!("cannot send to {addr}: {e}; check the host and the network"),
        )
    })?;
    Ok(socket)
}

/// How long a stream must send without an error before it counts as recovered. A UDP
/// receiver that is not there fails every other send (the system reports the refusal on the
/// send after it), so an error is not forgotten at the first send that succeeds.
pub const RECOVERED_AFTER: Duration = Duration::from_secs(5);

/// State the sending thread shares with the handle.
#[derive(Default)]
struct Shared {
    sent: AtomicU64,
    failed: AtomicU64,
    /// The last error and when it last happened.
    error: Mutex<Option<(String, Instant)>>,
}

/// One open stream: its queue and its sending thread. Dropping it sends what is queued, then
/// ends the thread (and closes a WebSocket server's connections).
pub struct Stream {
    spec: StreamSpec,
    queue: Arc<DropQueue<Published>>,
    shared: Arc<Shared>,
    server: Option<Arc<WebSocketServer>>,
    thread: Option<JoinHandle<()>>,
}

impl Stream {
    /// Opens the stream at `url`; `notices` receives its sending errors (and their end).
    pub fn open(url: &str, notices: Sender<String>) -> Result<Stream> {
        let spec = StreamSpec::parse(url)?;
        let mut sink = Sink::open(&spec)?;
        let server = match &sink {
            Sink::WebSocket(server) => Some(server.clone()),
            _ => None,
        };
        let queue: Arc<DropQueue<Published>> = Arc::new(DropQueue::new(STREAM_QUEUE));
        let shared = Arc::new(Shared::default());
        let thread = {
            let (queue, shared, url) = (queue.clone(), shared.clone(), spec.url.clone());
            std::thread::Builder::new()
                .name("markerscope-stream".into())
                .spawn(move || loop {
                    match queue.pop(Duration::from_millis(200)) {
                        Popped::Item(Published::Frame(frame, source)) => {
                            let outcome = sink.send(&frame, source.as_ref());
                            report(&shared, &url, outcome, &notices);
                        }
                        // The counts are of frames: a world view counts only when it fails.
                        Popped::Item(Published::World(view)) => {
                            if let Err(e) = sink.send_world(&view) {
                                report(&shared, &url, Err(e), &notices);
                            }
                        }
                        Popped::Empty => {}
                        Popped::Closed => return,
                    }
                })
                .map_err(|e| stream_error(&spec.url, format!("cannot start a thread: {e}")))?
        };
        Ok(Stream {
            spec,
            queue,
            shared,
            server,
            thread: Some(thread),
        })
    }

    pub fn spec(&self) -> &StreamSpec {
        &self.spec
    }

    /// Queues `frame` for sending; never waits.
    pub fn publish(&self, frame: &Arc<FrameResult>) {
        self.queue.push(Published::Frame(frame.clone(), None));
    }

    /// Queues `frame` of the source `source` of a run of several; never waits.
    pub fn publish_from(&self, frame: &Arc<FrameResult>, source: &SourceTag) {
        self.queue
            .push(Published::Frame(frame.clone(), Some(source.clone())));
    }

    /// Queues a frame set's merged world view; never waits.
    pub fn publish_world(&self, view: &Arc<tuio::WorldView>) {
        self.queue.push(Published::World(view.clone()));
    }

    /// The address a WebSocket stream listens on.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.server.as_ref().map(|s| s.local_addr())
    }

    pub fn status(&self) -> StreamStatus {
        StreamStatus {
            url: self.spec.url.clone(),
            sent: self.shared.sent.load(Ordering::Relaxed),
            dropped: self.queue.dropped(),
            failed: self.shared.failed.load(Ordering::Relaxed),
            error: self
                .shared
                .error
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .map(|(why, _)| why.clone()),
            clients: self.server.as_ref().map(|s| s.clients()),
        }
    }
}

impl Stream {
    /// Sends what is queued, ends the thread, and says what the stream did.
    pub fn close(mut self) -> StreamStatus {
        self.finish();
        self.status()
    }

    fn finish(&mut self) {
        self.queue.close();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Counts a sent or failed frame and keeps the last error; says so when an error starts or
/// changes, and when the stream has recovered.
fn report(shared: &Shared, url: &str, outcome: std::io::Result<()>, notices: &Sender<String>) {
    let mut error = shared.error.lock().unwrap_or_else(|e| e.into_inner());
    match outcome {
        Ok(()) => {
            shared.sent.fetch_add(1, Ordering::Relaxed);
            if error
                .as_ref()
                .is_some_and(|(_, at)| at.elapsed() >= RECOVERED_AFTER)
            {
                *error = None;
                let _ = notices.send(format!("stream '{url}': sending again"));
            }
        }
        Err(e) => {
            shared.failed.fetch_add(1, Ordering::Relaxed);
            let why = e.to_string();
            if error.as_ref().is_none_or(|(last, _)| *last != why) {
                let _ = notices.send(format!(
                    "stream '{url}': cannot send: {why}; the rest goes on, and the stream \
                     tries again with every frame"
                ));
            }
            *error = Some((why, Instant::now()));
        }
    }
}

/// The streams of one run: opened together, fed together, their notices in one place.
pub struct Streams {
    streams: Vec<Stream>,
    notices_tx: Sender<String>,
    notices_rx: Receiver<String>,
}

impl Default for Streams {
    fn default() -> Self {
        let (notices_tx, notices_rx) = crossbeam_channel::unbounded();
        Self {
            streams: Vec::new(),
            notices_tx,
            notices_rx,
        }
    }
}

impl Streams {
    /// Opens every address; the first that fails is the error (those opened are closed).
    pub fn open_all(urls: &[String]) -> Result<Streams> {
        let mut streams = Streams::default();
        for url in urls {
            streams.add(url)?;
        }
        Ok(streams)
    }

    /// Opens one more stream. An address (host, as it resolves, and port) that another stream
    /// has is refused, whatever their kinds: two streams would mix on one port.
    pub fn add(&mut self, url: &str) -> Result<()> {
        let spec = StreamSpec::parse(url)?;
        let same_place = |other: &StreamSpec| {
            other.port == spec.port
                && (other.host == spec.host
                    || matches!((other.resolve(), spec.resolve()), (Ok(a), Ok(b)) if a == b))
        };
        if let Some(other) = self.streams.iter().find(|s| same_place(&s.spec)) {
            let why = if other.spec.kind == spec.kind {
                "this stream is already open".to_string()
            } else {
                format!(
                    "{} uses this port already; give each stream its own port",
                    other.spec
                )
            };
            return Err(stream_error(url, why));
        }
        self.streams
            .push(Stream::open(url, self.notices_tx.clone())?);
        Ok(())
    }

    /// Closes the stream at `index` (after sending what it has queued).
    pub fn remove(&mut self, index: usize) {
        if index < self.streams.len() {
            self.streams.remove(index);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.streams.is_empty()
    }

    pub fn streams(&self) -> &[Stream] {
        &self.streams
    }

    /// Queues `frame` on every stream.
    pub fn publish(&self, frame: &Arc<FrameResult>) {
        for s in &self.streams {
            s.publish(frame);
        }
    }

    /// Queues `frame` of `source` (a run of several sources) on every stream.
    pub fn publish_from(&self, frame: &Arc<FrameResult>, source: &SourceTag) {
        for s in &self.streams {
            s.publish_from(frame, source);
        }
    }

    /// Queues a frame set's merged world view on the TUIO streams (the JSON ones carry it in
    /// their frames' components; it takes no room in their queues).
    pub fn publish_world(&self, view: &Arc<tuio::WorldView>) {
        for s in self
            .streams
            .iter()
            .filter(|s| s.spec.kind == StreamKind::Tuio)
        {
            s.publish_world(view);
        }
    }

    /// Messages for the user since the last call (sending errors and recoveries).
    pub fn notices(&self) -> Vec<String> {
        self.notices_rx.try_iter().collect()
    }

    pub fn statuses(&self) -> Vec<StreamStatus> {
        self.streams.iter().map(Stream::status).collect()
    }

    /// Closes every stream once it has sent what it holds; what each did.
    pub fn close(self) -> Vec<StreamStatus> {
        self.streams.into_iter().map(Stream::close).collect()
    }

    /// The addresses, in the order they were opened.
    pub fn urls(&self) -> Vec<String> {
        self.streams.iter().map(|s| s.spec.url.clone()).collect()
    }
}
