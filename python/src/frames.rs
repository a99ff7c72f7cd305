//! Frames from Python: an iterable of 2-D uint8 grey images (numpy arrays, as the Python layer
//! makes them from what the caller gave) as a source that the analysis pipeline pulls from on
//! its capture thread, taking the GIL for each frame.

use crate::errors::try_vec;
use markerscope::frame::image::GrayImage;
use markerscope::source::{Frame, FrameSource};
use markerscope::Error;
use numpy::{PyArray2, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyIterator;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The exception the iterable raised (or a frame's conversion), kept for the caller to raise
/// again as it was.
pub type Raised = Arc<Mutex<Option<PyErr>>>;

pub struct PythonFrames {
    iterator: Py<PyIterator>,
    index: u64,
    raised: Raised,
}

impl PythonFrames {
    pub fn new(iterable: &Bound<'_, PyAny>, raised: Raised) -> PyResult<Self> {
        Ok(Self {
            iterator: iterable.try_iter()?.unbind(),
            index: 0,
            raised,
        })
    }

    /// The next frame's pixels, None at the end of the iterable.
    fn next_image(&self, py: Python<'_>) -> PyResult<Option<GrayImage>> {
        let mut iterator = self.iterator.bind(py).clone();
        let Some(item) = iterator.next() else {
            return Ok(None);
        };
        let item = item?;
        let name = format!("frame {}", self.index);
        let array = item.cast::<PyArray2<u8>>().map_err(|_| {
            PyTypeError::new_err(format!("{name}: expected a 2-D uint8 grey image"))
        })?;
        let array = array.readonly();
        let view = array.as_array();
        let shape = array.shape();
        let (Ok(height), Ok(width)) = (u32::try_from(shape[0]), u32::try_from(shape[1])) else {
            return Err(PyValueError::new_err(format!(
                "{name}: shape {shape:?} is too large"
            )));
        };
        let mut data = try_vec::<u8>(&name, view.len())?;
        for (o, v) in data.iter_mut().zip(view.iter()) {
            *o = *v;
        }
        GrayImage::new(width, height, data)
            .map(Some)
            .map_err(|e| PyValueError::new_err(format!("{name}: {e}")))
    }
}

impl FrameSource for PythonFrames {
    fn describe(&self) -> String {
        "frames from Python".into()
    }

    fn is_live(&self) -> bool {
        false
    }

    fn next_frame(&mut self) -> markerscope::Result<Option<Frame>> {
        let started = Instant::now();
        match Python::attach(|py| self.next_image(py)) {
            Ok(Some(grey)) => {
                let index = self.index;
                self.index += 1;
                Ok(Some(Frame {
                    index,
                    time_s: 0.0,
                    grey: grey.into(),
                    captured_at: Instant::now(),
                    decode_ms: started.elapsed().as_secs_f64() * 1e3,
                    name: String::new(),
                }))
            }
            Ok(None) => Ok(None),
            Err(e) => {
                let why = format!("frame {}: {e}", self.index);
                *self.raised.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                Err(Error::Invalid(why))
            }
        }
    }
}
