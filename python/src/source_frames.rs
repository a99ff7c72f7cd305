//! `SourceFrames`: the grey frames of a source spec (a video, an image folder or glob,
//! `synthetic:KIND`) as numpy arrays, for the Python functions that measure pixels themselves
//! (`locate_frames`).

use crate::errors::to_py;
use markerscope::source::{FrameSource, OpenOptions, SourceSpec};
use numpy::{PyArray1, PyArray2, PyArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

#[pyclass(module = "markerscope._markerscope", unsendable)]
pub struct SourceFrames {
    source: Box<dyn FrameSource>,
    left: Option<u64>,
}

#[pymethods]
impl SourceFrames {
    /// `max_frames`: stop after this many (endless sources need it).
    #[new]
    #[pyo3(signature = (spec, max_frames=None))]
    fn new(py: Python<'_>, spec: &str, max_frames: Option<u64>) -> PyResult<Self> {
        let spec = SourceSpec::parse(spec).map_err(to_py)?;
        if spec.is_endless() && max_frames.is_none() {
            return Err(PyValueError::new_err(format!(
                "{spec} never ends: give max_frames=N"
            )));
        }
        let options = OpenOptions {
            realtime: false,
            ..OpenOptions::default()
        };
        let source = py.detach(|| spec.open_with(&options)).map_err(to_py)?;
        Ok(Self {
            source,
            left: max_frames,
        })
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next frame: an (h, w) uint8 array.
    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyArray2<u8>>>> {
        if self.left == Some(0) {
            return Ok(None);
        }
        let Some(frame) = self.source.next_frame().map_err(to_py)? else {
            return Ok(None);
        };
        self.left = self.left.map(|n| n - 1);
        let grey = &frame.grey;
        let (h, w) = (grey.height as usize, grey.width as usize);
        PyArray1::from_slice(py, &grey.data[..h * w])
            .reshape([h, w])
            .map(Some)
    }
}
