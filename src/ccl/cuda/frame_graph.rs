//! One submission per frame: the upload, the kernels and the download of a frame captured once
//! into a CUDA graph and launched again for every frame of the same shape and settings.
//!
//! A 1080p frame cannot fill the GPU, so each kernel launch costs more than its work; a graph
//! launches the whole sequence at once. What changes from frame to frame lives in memory the
//! graph reads at each launch (the page-locked upload buffer, the device buffers), never in a
//! kernel argument: the look-back numbering, whose epoch is an argument, starts each graph
//! launch from a cleared status array instead (`common::Lookback::restart`). A graph is
//! captured again when its key changes (frame size, connectivity, what is computed, input form,
//! rows of the download, whether it filters them: the filter's limits are read from device
//! memory) and after any buffer it holds is reallocated (`FrameGraphs::invalidate`).
//!
//! Events inside a graph do not time its steps, so a graph run reports one step; the plain
//! path, with an event after every step, runs when graphs are off (`MARKERSCOPE_CUDA_GRAPHS=0`,
//! `Labeler::set_cuda_graphs`).

use super::mask_input::MaskInput;
use crate::ccl::{Connectivity, Want};
use crate::error::{Error, Result};
use crate::gpu::events::StepEvents;
use crate::gpu::{cuda_err, Gpu};
use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaGraph, CudaStream};
use std::sync::Arc;

/// The name of the one step a graph run reports.
pub use crate::ccl::CUDA_GRAPH_STEP as GRAPH_STEP;
/// Graphs kept per labeler; the oldest goes first. Room for the download prefixes of one frame
/// size (256 to 2^17 rows: 10) beside a few other shapes.
const GRAPHS_MAX: usize = 16;

/// What a frame graph is captured for: launching it for a frame with another key would run the
/// wrong kernels or copy the wrong sizes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct GraphKey {
    pub width: u32,
    pub height: u32,
    pub connectivity: Connectivity,
    pub want: Want,
    pub input: MaskInput,
    /// Statistics rows of the download (`results::ResultDownload::prepare`).
    pub rows: usize,
    /// Whether the download filters the rows (its limits are read from device memory, so
    /// their values are not part of the key).
    pub filtered: bool,
    /// A labeler setting that changes the launches (HA4's strip rows; 0 where none).
    pub setting: u32,
    /// Whether the mask's upload is in the graph (from the labeler's staging buffer), or
    /// queued before it (from a page-locked frame, whose address changes from frame to frame).
    pub upload: bool,
}

/// The captured graphs of one labeler, by key (generic over the graph for the tests).
pub struct GraphCache<G> {
    entries: Vec<(GraphKey, G)>,
    captures: u64,
}

impl<G> Default for GraphCache<G> {
    fn default() -> Self {
        GraphCache {
            entries: Vec::new(),
            captures: 0,
        }
    }
}

impl<G> GraphCache<G> {
    /// The graph for `key`, captured with `capture` when there is none; a failed capture
    /// keeps nothing.
    pub fn get_or_capture(
        &mut self,
        key: &GraphKey,
        capture: impl FnOnce() -> Result<G>,
    ) -> Result<&G> {
        let at = match self.entries.iter().position(|(k, _)| k == key) {
            Some(at) => at,
            None => {
                let graph = capture()?;
                self.captures += 1;
                if self.entries.len() == GRAPHS_MAX {
                    self.entries.remove(0);
                }
                self.entries.push((*key, graph));
                self.entries.len() - 1
            }
        };
        Ok(&self.entries[at].1)
    }

    /// Forgets every graph (the buffers they hold were reallocated).
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// Graphs captured so far.
    pub fn captures(&self) -> u64 {
        self.captures
    }
}

/// A captured graph, owned by one labeler.
struct FrameGraph(CudaGraph);

// SAFETY: CUDA graph objects must not be used from two threads at once; a FrameGraph is only
// reached through its labeler's `&mut self`, so moving it to another thread is safe (it is not
// Sync).
unsafe impl Send for FrameGraph {}

/// A labeler's frame graphs: the switch, the capture stream and the captured graphs (off by
/// default; `new` sets the switch).
#[derive(Default)]
pub struct FrameGraphs {
    enabled: bool,
    /// The device with a capturable stream (`Gpu::with_own_stream`), made on the first capture.
    twin: Option<Arc<Gpu>>,
    cache: GraphCache<FrameGraph>,
}

impl FrameGraphs {
    /// On or off (`GpuTuning::cuda_graphs`).
    pub fn new(enabled: bool) -> FrameGraphs {
        FrameGraphs {
            enabled,
            twin: None,
            cache: GraphCache::default(),
        }
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    pub fn set_enabled(&mut self, enabled: bool) {
        self.enabled = enabled;
        if !enabled {
            self.cache.clear();
        }
    }

    /// Forgets the graphs: a buffer they hold was reallocated.
    pub fn invalidate(&mut self) {
        self.cache.clear();
    }

    /// Forgets the graphs unless the frame buffers were of `size` already (`before`): another
    /// size reallocates them.
    pub fn forget_unless_same(&mut self, before: Option<(u32, u32)>, size: (u32, u32)) {
        if before != Some(size) {
            self.invalidate();
        }
    }

    /// Launches the graph for `key` on `gpu`'s stream, capturing it first when there is none:
    /// `queue` then queues the frame's work on the device it is given (whose stream is being
    /// captured) and must make no call that waits for the GPU.
    pub fn launch(
        &mut self,
        gpu: &Gpu,
        key: &GraphKey,
        queue: impl FnOnce(&Arc<Gpu>) -> Result<()>,
    ) -> Result<()> {
        if self.twin.is_none() {
            self.twin = Some(Arc::new(gpu.with_own_stream()?));
        }
        let twin = self.twin.as_ref().expect("made above");
        let graph = &self.cache.get_or_capture(key, || capture(twin, queue))?.0;
        // SAFETY: the graph and the stream belong to this context; a graph may be launched on
        // any stream of it, and the legacy stream orders it after the frame's earlier work.
        unsafe { cudarc::driver::result::graph::launch(graph.cu_graph_exec(), stream_of(gpu)) }
            .map_err(|e| cuda_err("launching the frame graph", e))
    }

    /// Graphs captured so far.
    pub fn captures(&self) -> u64 {
        self.cache.captures()
    }
}

/// A labeling engine that launches its frames as CUDA graphs (FLSL and the HA family).
pub trait GraphFrames: Sized {
    /// The engine's device, step events and frame graphs.
    fn graph_parts(&mut self) -> (&mut Arc<Gpu>, &mut StepEvents, &mut FrameGraphs);

    /// Queues the upload of the staged mask for `input` on the engine's stream.
    fn queue_upload(&mut self, input: MaskInput) -> Result<()>;

    /// Launches the frame of `key` as one graph, timed as one step (events 0 and 1). A mask
    /// staged in place (`key.upload` false) goes up before the graph, whose copies read fixed
    /// addresses. On the first frame of its key, `queue_frame` queues the frame with the
    /// capture stream in place of the engine's device and the step events off.
    fn launch_graph(
        &mut self,
        key: &GraphKey,
        queue_frame: impl FnOnce(&mut Self) -> Result<()>,
    ) -> Result<()> {
        let (gpu, _, graphs) = self.graph_parts();
        let mut graphs = std::mem::take(graphs);
        let gpu = gpu.clone();
        self.graph_parts().1.record(&gpu, 0)?;
        if !key.upload {
            self.queue_upload(key.input)?;
        }
        let launched = graphs.launch(&gpu, key, |twin| {
            let (device, events, _) = self.graph_parts();
            let plain = std::mem::replace(device, twin.clone());
            events.set_off(true);
            let queued = queue_frame(self);
            let (device, events, _) = self.graph_parts();
            events.set_off(false);
            *device = plain;
            queued
        });
        *self.graph_parts().2 = graphs;
        launched?;
        self.graph_parts().1.record(&gpu, 1)
    }
}

fn stream_of(gpu: &Gpu) -> cudarc::driver::sys::CUstream {
    CudaStream::cu_stream(&gpu.stream)
}

/// Captures what `queue` queues on `twin`'s stream into a graph. The capture is ended on error
/// too, so that the stream stays usable.
fn capture(twin: &Arc<Gpu>, queue: impl FnOnce(&Arc<Gpu>) -> Result<()>) -> Result<FrameGraph> {
    const STEP: &str = "capturing the frame graph (MARKERSCOPE_CUDA_GRAPHS=0 runs without graphs)";
    let err = |e| cuda_err(STEP, e);
    // Thread-local: other threads' labelers allocate and wait as they please meanwhile.
    twin.stream
        .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        .map_err(err)?;
    let queued = queue(twin);
    let graph = twin.stream.end_capture(CUgraphInstantiate_flags(0));
    queued?;
    graph
        .map_err(err)?
        .map(FrameGraph)
        .ok_or_else(|| Error::Cuda {
            step: STEP.into(),
            why: "the capture recorded no work".into(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(width: u32, connectivity: Connectivity) -> GraphKey {
        GraphKey {
            width,
            height: 1080,
            connectivity,
            want: Want::Stats,
            input: MaskInput::Packed,
            rows: 256,
            filtered: false,
            setting: 0,
            upload: true,
        }
    }

    /// Looks `key` up, capturing a graph numbered by the captures so far.
    fn get(cache: &mut GraphCache<u64>, key: &GraphKey) -> u64 {
        let next = cache.captures();
        *cache.get_or_capture(key, || Ok(next)).unwrap()
    }

    #[test]
    fn the_same_key_reuses_its_graph() {
        let mut cache = GraphCache::default();
        let a = key(1920, Connectivity::Eight);
        assert_eq!(get(&mut cache, &a), 0);
        assert_eq!(get(&mut cache, &a), 0);
        assert_eq!(cache.captures(), 1);
    }

    #[test]
    fn every_part_of_the_key_makes_a_new_graph() {
        let base = key(1920, Connectivity::Eight);
        let changed = [
            GraphKey {
                width: 1280,
                ..base
            },
            GraphKey {
                height: 720,
                ..base
            },
            GraphKey {
                connectivity: Connectivity::Four,
                ..base
            },
            GraphKey {
                want: Want::Both,
                ..base
            },
            GraphKey {
                input: MaskInput::Bytes,
                ..base
            },
            GraphKey { rows: 512, ..base },
            GraphKey {
                filtered: true,
                ..base
            },
            GraphKey { setting: 8, ..base },
        ];
        for other in changed {
            let mut cache = GraphCache::default();
            get(&mut cache, &base);
            assert_eq!(get(&mut cache, &other), 1);
            assert_eq!(cache.captures(), 2);
            // Switching back finds the first graph.
            assert_eq!(get(&mut cache, &base), 0);
            assert_eq!(cache.captures(), 2);
        }
    }

    #[test]
    fn the_oldest_graph_goes_when_the_cache_is_full() {
        let mut cache = GraphCache::default();
        for w in 0..GRAPHS_MAX as u32 + 1 {
            get(&mut cache, &key(64 + w, Connectivity::Four));
        }
        assert_eq!(cache.captures(), GRAPHS_MAX as u64 + 1);
        // The newest are kept, the first is captured again.
        let newest = GRAPHS_MAX as u64;
        let last = key(64 + GRAPHS_MAX as u32, Connectivity::Four);
        assert_eq!(get(&mut cache, &last), newest);
        assert_eq!(get(&mut cache, &key(64, Connectivity::Four)), newest + 1);
    }

    #[test]
    fn clearing_captures_again_and_a_failed_capture_keeps_nothing() {
        let mut cache = GraphCache::default();
        let a = key(1920, Connectivity::Four);
        get(&mut cache, &a);
        cache.clear();
        assert_eq!(get(&mut cache, &a), 1);
        let b = key(640, Connectivity::Four);
        let failed = cache.get_or_capture(&b, || Err(Error::Invalid("no".into())));
        assert!(failed.is_err());
        assert_eq!(cache.captures(), 2);
        assert_eq!(get(&mut cache, &b), 2);
    }
}
