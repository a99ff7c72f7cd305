//! `--record FILE.mkv`: the grey frames being analysed, saved losslessly (FFV1 version 3 in
//! Matroska, in slices encoded on several threads, through FFmpeg; feature `video`), so that a run can be analysed again later with other
//! settings and give the same components.
//!
//! Frames are encoded on a thread of their own through a bounded queue that waits when full:
//! a recording never loses a frame the analysis saw. The file is written under a temporary
//! name beside the target (with the mode of the file it replaces; a symlink is written
//! through) and renamed into place by `finish`; a run that fails or is interrupted leaves none,
//! and an older recording stays as it was. Timestamps are the frames' `time_s` to the millisecond (Matroska's
//! resolution), made strictly increasing (still images, all at 0 s, get 1 ms apart). The frame
//! size is the first frame's: a later frame of another size ends the recording there (the file
//! keeps the frames before it), and the analysis goes on.

use crate::error::{Error, Result};
use crate::pipeline::FrameResult;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Frames waiting for the encoder before the analysis waits for it.
const RECORD_QUEUE: usize = 8;

/// What a finished recording holds.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordSummary {
    pub path: PathBuf,
    pub frames: u64,
    /// Why the recording ended before the analysis did (a frame of another size).
    pub ended_early: Option<String>,
}

pub struct Recorder {
    target: PathBuf,
    /// Why the encoder stopped part way (a full disk): the recording is lost, the analysis
    /// goes on and `finish` reports it.
    failed: Option<Error>,
    tx: Option<crossbeam_channel::Sender<Arc<FrameResult>>>,
    thread: Option<JoinHandle<Result<(u64, Option<String>)>>>,
    temp: Option<tempfile::TempPath>,
}

fn record_error(path: &Path, why: impl Into<String>) -> Error {
    Error::Output {
        path: path.to_path_buf(),
        why: why.into(),
    }
}

impl Recorder {
    /// Checks that `path` can be written (a temporary file beside it is created now) and starts
    /// the encoding thread; the encoder opens at the first frame, whose size it takes.
    pub fn create(path: &Path) -> Result<Recorder> {
        if !cfg!(feature = "video") {
            return Err(record_error(
                path,
                "this build has no video support (built without the `video` feature); \
                 rebuild with `--features video`",
            ));
        }
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        if ext.as_deref() != Some("mkv") {
            return Err(record_error(
                path,
                "a recording is FFV1 in Matroska: give a file name ending in .mkv",
            ));
        }
        if path.is_dir() {
            return Err(record_error(path, "it is a folder"));
        }
        // As `--out`: a symlink is written through (the link stays), the file keeps its mode;
        // a FIFO or a device is not replaced by a file, nor written (Matroska is seekable).
        let target = super::files::follow_symlinks(path);
        if std::fs::metadata(&target).is_ok_and(|m| !m.is_file()) {
            return Err(record_error(
                path,
                "it is not a regular file (a FIFO or a device); a recording is written to a file",
            ));
        }
        let temp = super::files::temp_file_beside(path, &target)?.into_temp_path();
        let (tx, rx) = crossbeam_channel::bounded::<Arc<FrameResult>>(RECORD_QUEUE);
        let (temp_path, named) = (temp.to_path_buf(), path.to_path_buf());
        let thread = std::thread::Builder::new()
            .name("markerscope-record".into())
            .spawn(move || imp::encode_all(&temp_path, &named, &rx))
            .map_err(|e| record_error(path, format!("cannot start a thread: {e}")))?;
        Ok(Recorder {
            target,
            failed: None,
            tx: Some(tx),
            thread: Some(thread),
            temp: Some(temp),
        })
    }

    /// The temporary file the recording is written to until `finish`.
    pub fn temp_path(&self) -> Option<&Path> {
        self.temp.as_deref()
    }

    /// Queues `frame` (waits while the encoder is `RECORD_QUEUE` frames behind). When the
    /// encoder has stopped on an error, the frames that follow are not recorded and `finish`
    /// gives the error: the rows of the analysis must not be lost with the recording.
    pub fn record(&mut self, frame: &Arc<FrameResult>) {
        let Some(tx) = &self.tx else {
            return;
        };
        if tx.send(frame.clone()).is_ok() {
            return;
        }
        drop(self.tx.take());
        self.failed = Some(match self.thread.take().map(|t| t.join()) {
            Some(Ok(Err(e))) => e,
            _ => record_error(&self.target, "the encoding thread failed"),
        });
    }

    /// Encodes what is queued, closes the file and renames it into place; an encoder that
    /// stopped on an error gives it, and leaves no file.
    pub fn finish(mut self) -> Result<RecordSummary> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        drop(self.tx.take());
        let outcome = match self.thread.take().map(|t| t.join()) {
            Some(Ok(outcome)) => outcome,
            _ => Err(record_error(&self.target, "the encoding thread failed")),
        };
        let (frames, ended_early) = outcome?;
        if let Some(temp) = self.temp.take() {
            temp.persist(&self.target)
                .map_err(|e| record_error(&self.target, e.error.to_string()))?;
        }
        Ok(RecordSummary {
            path: self.target.clone(),
            frames,
            ended_early,
        })
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        // Unfinished: stop the thread; the temporary file is removed with `temp`.
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(not(feature = "video"))]
mod imp {
    use super::*;

    pub fn encode_all(
        _temp: &Path,
        target: &Path,
        _rx: &crossbeam_channel::Receiver<Arc<FrameResult>>,
    ) -> Result<(u64, Option<String>)> {
        Err(record_error(target, "this build has no video support"))
    }
}

#[cfg(feature = "video")]
mod imp {
    use super::*;
    use crate::frame::image::GrayImage;
    use ff::format::Pixel;
    use ffmpeg_next as ff;

    /// Encoder time base: milliseconds (Matroska's own resolution).
    const TIME_BASE: ff::Rational = ff::Rational(1, 1000);

    struct Encoder {
        output: ff::format::context::Output,
        encoder: ff::encoder::Video,
        stream_time_base: ff::Rational,
        frame: ff::frame::Video,
        width: u32,
        height: u32,
        last_pts: Option<i64>,
    }

    impl Encoder {
        fn open(temp: &Path, first: &GrayImage) -> std::result::Result<Encoder, ff::Error> {
            let mut output = ff::format::output_as(temp, "matroska")?;
            let codec = ff::encoder::find(ff::codec::Id::FFV1).ok_or(ff::Error::EncoderNotFound)?;
            let global_header = output
                .format()
                .flags()
                .contains(ff::format::Flags::GLOBAL_HEADER);
            let mut stream = output.add_stream(codec)?;
            // FFV1 version 3 in slices, a thread each: one thread keeps up with a few dozen
            // 720p frames a second, not with the analysis.
            let mut context = ff::codec::context::Context::new_with_codec(codec);
            context.set_threading(ff::codec::threading::Config {
                kind: ff::codec::threading::Type::Slice,
                count: std::thread::available_parallelism().map_or(1, |n| n.get().min(8)),
                ..Default::default()
            });
            let mut encoder = context.encoder().video()?;
            encoder.set_width(first.width);
            encoder.set_height(first.height);
            encoder.set_format(Pixel::GRAY8);
            encoder.set_time_base(TIME_BASE);
            if global_header {
                encoder.set_flags(ff::codec::Flags::GLOBAL_HEADER);
            }
            let mut options = ff::Dictionary::new();
            options.set("level", "3");
            let encoder = encoder.open_as_with(codec, options)?;
            stream.set_parameters(&encoder);
            stream.set_time_base(TIME_BASE);
            output.write_header()?;
            let stream_time_base = output.stream(0).map_or(TIME_BASE, |s| s.time_base());
            Ok(Encoder {
                output,
                encoder,
                stream_time_base,
                frame: ff::frame::Video::new(Pixel::GRAY8, first.width, first.height),
                width: first.width,
                height: first.height,
                last_pts: None,
            })
        }

        fn add(&mut self, grey: &GrayImage, time_s: f64) -> std::result::Result<(), ff::Error> {
            let stride = self.frame.stride(0);
            let width = grey.width as usize;
            let plane = self.frame.data_mut(0);
            for (row, src) in grey.data.chunks_exact(width).enumerate() {
                plane[row * stride..row * stride + width].copy_from_slice(src);
            }
            let wanted = (time_s * 1000.0).round() as i64;
            let pts = match self.last_pts {
                Some(last) if wanted <= last => last + 1,
                _ => wanted,
            };
            self.last_pts = Some(pts);
            self.frame.set_pts(Some(pts));
            self.encoder.send_frame(&self.frame)?;
            self.write_packets()
        }

        fn write_packets(&mut self) -> std::result::Result<(), ff::Error> {
            let mut packet = ff::Packet::empty();
            while self.encoder.receive_packet(&mut packet).is_ok() {
                packet.set_stream(0);
                packet.rescale_ts(TIME_BASE, self.stream_time_base);
                packet.write_interleaved(&mut self.output)?;
            }
            Ok(())
        }

        fn finish(mut self) -> std::result::Result<(), ff::Error> {
            self.encoder.send_eof()?;
            self.write_packets()?;
            self.output.write_trailer()
        }
    }

    pub fn encode_all(
        temp: &Path,
        target: &Path,
        rx: &crossbeam_channel::Receiver<Arc<FrameResult>>,
    ) -> Result<(u64, Option<String>)> {
        crate::source::video::init();
        let failed = |e: ff::Error| record_error(target, format!("cannot encode: {e}"));
        let mut encoder: Option<Encoder> = None;
        let mut frames = 0u64;
        let mut ended_early = None;
        for frame in rx.iter() {
            if ended_early.is_some() {
                // Drain, so the analysis never waits on a recording that has ended.
                continue;
            }
            let grey = &frame.grey;
            let enc = match &mut encoder {
                Some(enc) => enc,
                None => encoder.insert(Encoder::open(temp, grey).map_err(failed)?),
            };
            if (grey.width, grey.height) != (enc.width, enc.height) {
                ended_early = Some(format!(
                    "{}: frame {} is {}x{}, the recording's frames {}x{}: the recording ends \
                     before it (a recording keeps one frame size)",
                    target.display(),
                    frame.index,
                    grey.width,
                    grey.height,
                    enc.width,
                    enc.height
                ));
                continue;
            }
            enc.add(grey, frame.time_s).map_err(failed)?;
            frames += 1;
        }
        match encoder {
            Some(enc) => enc.finish().map_err(failed)?,
            None => return Err(record_error(target, "no frame to record")),
        }
        Ok((frames, ended_early))
    }
}
