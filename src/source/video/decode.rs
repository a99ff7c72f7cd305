//! The decoding loop: `FrameSource` for `VideoSource`. Packets go in and frames come out; a
//! damaged frame and the frames predicted from it are flagged (or left out, `skip_damaged`),
//! undecodable data is said (`damage`), and an NVDEC decoder that fails hands over to the
//! CPU's.
//!
//! The CPU decoder starts with frame threads; at the first sign of damage (a frame flagged,
//! an error returned, or an error FFmpeg logged on any thread) before a frame is delivered,
//! decoding goes on from that frame on one thread (`VideoSource::leave_frame_threads`): frame
//! threads conceal damage in ways that depend on their number and timing, and log it on their
//! own threads at times that vary, so one thread alone gives the same frames and flags for
//! the same file on every run.

use super::damage::{LeftOut, Why};
use super::decoders::grey_frame;
use super::file::{packet_end_s, VideoSource, KEEP_BUFFERS};
use super::log::errors_during;
use crate::error::Result;
use crate::frame::page_lock::PageLocker;
use crate::source::frame_pool::FramePool;
use crate::source::FrameGrey;
use crate::source::{ms_since, Frame, FrameSource, SkipAt, Skipped};
use ffmpeg_next as ff;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// What one look at the decoder gave.
enum Received {
    /// A frame to deliver.
    Frame(Frame),
    /// Look again: a frame was dropped or left out, the decoder handed over, or a looping file
    /// started again.
    Again,
    /// The decoder wants input.
    NeedsInput,
    /// No frame comes any more.
    End,
}

impl FrameSource for VideoSource {
    fn describe(&self) -> String {
        let mut s = format!(
            "{} ({} {}×{}",
            self.path.display(),
            self.codec_name,
            self.decoder.width(),
            self.decoder.height()
        );
        if let Some(fps) = self.fps {
            s += &format!(" @{fps:.3}");
        }
        if let Some(n) = self.announced {
            s += &format!(", {n} frames");
        }
        s + ")"
    }

    fn is_live(&self) -> bool {
        false
    }

    fn next_frame(&mut self) -> Result<Option<Frame>> {
        let started = Instant::now();
        self.untouched = false;
        // Decoder errors in a row while draining: a decoder that only fails is given up on.
        let mut drain_errors = 0u32;
        loop {
            match self.receive(started, &mut drain_errors)? {
                Received::Frame(frame) => return Ok(Some(frame)),
                Received::End => return Ok(None),
                Received::Again => continue,
                Received::NeedsInput => {}
            }
            // The decoder wants input: the packet it could not take, the next packet of our
            // stream, or end of file.
            if self.eof_sent {
                // Draining, and the decoder wants more: nothing more comes.
                if self.at_end()? {
                    continue;
                }
                return Ok(None);
            }
            if let Some(packet) = self.next_packet() {
                self.send(packet);
            }
        }
    }

    fn take_notices(&mut self) -> Vec<String> {
        let mut notices = std::mem::take(&mut self.notices);
        notices.extend(self.hand_overs.drain(..).map(|h| h.notice(0)));
        notices
    }

    fn take_skipped(&mut self) -> Vec<Skipped> {
        self.left_out.drain(..).map(|l| l.skipped(0)).collect()
    }

    fn set_skip_damaged(&mut self, skip: bool) {
        self.skip_damaged = skip;
    }

    fn frame_count(&self) -> Option<u64> {
        self.announced
    }

    fn fps(&self) -> Option<f64> {
        self.fps
    }

    fn seek(&mut self, index: u64) -> Result<()> {
        self.seek_to(index)
    }

    fn set_page_locker(&mut self, locker: Arc<dyn PageLocker>) {
        self.frames = FramePool::new(KEEP_BUFFERS, Some(locker));
    }

    fn keep_frames_on_gpu(&mut self, keep: bool) {
        self.on_gpu.store(keep, Ordering::Relaxed);
    }
}

impl VideoSource {
    /// One look at the decoder: a frame, an error, or the end of its frames.
    fn receive(&mut self, started: Instant, drain_errors: &mut u32) -> Result<Received> {
        let (received, logged) = errors_during(|| self.decoder.receive_frame(&mut self.decoded));
        self.logged_errors += logged;
        match received {
            Ok(()) => {
                *drain_errors = 0;
                Ok(self.deliver(started))
            }
            Err(ff::Error::Other { errno }) if errno == ff::util::error::EAGAIN => {
                Ok(Received::NeedsInput)
            }
            Err(ff::Error::Eof) => {
                if let Some(why) = self.ended_early.take() {
                    self.skip(SkipAt::Before(self.next_index), Why::Said(why));
                }
                Ok(if self.at_end()? {
                    Received::Again
                } else {
                    Received::End
                })
            }
            Err(e) if self.leave_nvdec(self.next_index, &e) => Ok(Received::Again),
            Err(_) if self.leave_frame_threads(self.next_index) => Ok(Received::Again),
            Err(e) => {
                // A packet the decoder could not use (frame threads report it late); what it
                // logged is said with it.
                self.logged_errors = 0;
                self.skip(
                    SkipAt::Before(self.next_index),
                    Why::Said(format!("undecodable data: {e}")),
                );
                if !self.eof_sent {
                    return Ok(Received::NeedsInput);
                }
                *drain_errors += 1;
                Ok(if *drain_errors > 64 {
                    Received::End
                } else {
                    Received::Again
                })
            }
        }
    }

    /// The frame just decoded, indexed, as the caller gets it; `Again` when it is before a seek
    /// target, damaged or predicted from damage (with `skip_damaged`), or decoded again on the
    /// CPU.
    fn deliver(&mut self, started: Instant) -> Received {
        let ts = self.decoded.timestamp();
        let index = if std::mem::take(&mut self.rebase) {
            self.index_from_timestamp(ts).unwrap_or(self.next_index)
        } else {
            self.next_index
        };
        self.next_index = index + 1;
        if let Some(target) = self.skip_before {
            // What comes after the last frame dropped is recorded (data undecodable before
            // the target, after a decoding started again).
            if index + 1 >= target {
                self.skip_before = None;
            }
            if index < target {
                return Received::Again;
            }
        }
        // FFmpeg's CUVID decoder drops the frames it holds when the frame size changes: the
        // CPU decoder takes over at the first frame of the new size.
        let size = (self.decoded.width(), self.decoded.height());
        let changed = self.last_size.is_some_and(|last| last != size);
        if changed && self.leave_nvdec(index, &"the frame size changed") {
            return Received::Again;
        }
        self.last_size = Some(size);
        let logged = std::mem::take(&mut self.logged_errors) > 0;
        let flagged = self.decoded.is_corrupt() || self.decoded.has_decode_errors() || logged;
        if (flagged || self.errors_logged_anywhere()) && self.leave_frame_threads(index) {
            return Received::Again;
        }
        let damage = if flagged {
            let why = "the frame's data is damaged (it decodes only with errors)";
            Some(Why::Said(why.into()))
        } else if self.decoded.is_key() {
            self.tainted_by = None;
            None
        } else {
            self.tainted_by.map(Why::PredictedFrom)
        };
        if let Some(why) = damage {
            if self.skip_damaged {
                self.skip(SkipAt::Frame(index), why);
                return Received::Again;
            }
            // Kept, and flagged: the decoder's output is all the data there is.
            self.skip(SkipAt::Damaged(index), why);
        }
        let grey = match self.grey_frame() {
            Ok(grey) => grey,
            // The frame is decoded again on the CPU, not lost.
            Err(e) if self.leave_nvdec(index, &e) => return Received::Again,
            Err(e) => {
                self.skip(SkipAt::Frame(index), Why::Said(e.to_string()));
                return Received::Again;
            }
        };
        let time_s = match (ts, self.time_base > 0.0) {
            (Some(ts), true) => (ts - self.start_ts) as f64 * self.time_base,
            _ => index as f64 / self.fps.unwrap_or(1.0),
        };
        self.delivered_this_pass += 1;
        Received::Frame(Frame {
            index,
            time_s,
            grey,
            captured_at: Instant::now(),
            decode_ms: ms_since(started),
            name: String::new(),
        })
    }

    /// The next packet for the decoder: the one it could not take, or the next of our stream
    /// from the file. None when there is none now: another stream's packet was read, or the
    /// end of the data was reached (then the decoder is told to drain).
    fn next_packet(&mut self) -> Option<ff::Packet> {
        if let Some(packet) = self.pending.take() {
            return Some(packet);
        }
        let mut packet = ff::Packet::empty();
        match packet.read(&mut self.input) {
            // Another stream, or an empty packet (an AVI placeholder for a dropped frame:
            // sent, it would end the decoding).
            Ok(()) if packet.stream() != self.stream_index || packet.size() == 0 => {
                self.note_data_end(&packet);
                None
            }
            // The next segment's first packet: this segment's data ends here.
            Ok(()) if self.segment.and_then(|s| s.end) == Some(packet.position() as i64) => {
                self.eof_sent = true;
                let _ = self.decoder.send_eof();
                None
            }
            // A packet the demuxer flags as corrupt (a joined or damaged stream) is decoded
            // all the same: its frames say whether they are damaged.
            Ok(()) => {
                self.note_data_end(&packet);
                Some(packet)
            }
            Err(ff::Error::Other { errno }) if errno == ff::util::error::EAGAIN => None,
            Err(e) => {
                self.ended_early = if e != ff::Error::Eof {
                    Some(format!("cannot read the rest of the file: {e}"))
                } else {
                    self.cut_short()
                };
                // Drain the frames the decoder holds.
                self.eof_sent = true;
                let _ = self.decoder.send_eof();
                None
            }
        }
    }

    /// Sends `packet` to the decoder; kept for later when it has frames to give first.
    fn send(&mut self, packet: ff::Packet) {
        let (sent, logged) = errors_during(|| self.decoder.send_packet(&packet));
        self.logged_errors += logged;
        match sent {
            Ok(()) => {}
            Err(ff::Error::Other { errno }) if errno == ff::util::error::EAGAIN => {
                self.pending = Some(packet);
            }
            Err(e) if self.leave_nvdec(self.next_index, &e) => {}
            Err(_) if self.leave_frame_threads(self.next_index) => {}
            Err(e) => {
                self.logged_errors = 0;
                self.skip(
                    SkipAt::Before(self.next_index),
                    Why::Said(format!("undecodable data: {e}")),
                )
            }
        }
    }

    /// The grey image of the frame just decoded.
    fn grey_frame(&mut self) -> Result<FrameGrey> {
        grey_frame(
            &self.decoded,
            &mut self.scaler,
            &mut self.frames,
            &self.path,
            self.on_gpu.load(Ordering::Relaxed),
        )
    }

    /// Records a left-out frame (`SkipAt::Frame`), left-out data (`SkipAt::Before`) or a
    /// flagged frame (`SkipAt::Damaged`); the frames after it are predicted from damage until
    /// the next keyframe. Nothing is recorded while decoding up to a seek target.
    fn skip(&mut self, at: SkipAt, why: Why) {
        if self.tainted_by.is_none() {
            self.tainted_by = Some(at);
        }
        if self.skip_before.is_none() {
            self.left_out.push(LeftOut { at, why });
        }
    }

    /// Notes how far the file's data goes (any stream).
    fn note_data_end(&mut self, packet: &ff::Packet) {
        if let Some(end) = packet_end_s(packet, &self.stream_time_bases) {
            self.data_end_s = self.data_end_s.max(end);
        }
    }

    /// At the end of the packets: is the file shorter than its header says? The margin
    /// (three frames and 1 %) covers containers that round their duration.
    fn cut_short(&self) -> Option<String> {
        let header_end = self.header_end_s?;
        if !self.data_end_s.is_finite() || self.rebase || self.skip_before.is_some() {
            return None;
        }
        let margin = 3.0 / self.fps.unwrap_or(2.0) + 0.01 * header_end.abs();
        (self.data_end_s + margin < header_end).then(|| {
            format!(
                "the file is cut short: its data ends at {:.2} s, but its header says it lasts until {:.2} s",
                self.data_end_s, header_end
            )
        })
    }
}
