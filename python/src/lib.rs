//! `markerscope._markerscope`: the Rust side of the Python package. The Python layer
//! (`markerscope/__init__.py`) checks and converts arguments, dispatches numpy and CUDA arrays,
//! and builds the results; this module labels, thresholds, analyses, tracks and finds markers.

mod analysis;
mod device;
mod errors;
mod frames;
mod host;
mod markers;
mod source_frames;
mod tracker;

use pyo3::prelude::*;

#[pymodule]
fn _markerscope(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(host::label_host, m)?)?;
    m.add_function(wrap_pyfunction!(host::threshold, m)?)?;
    m.add_function(wrap_pyfunction!(host::algorithms, m)?)?;
    m.add_function(wrap_pyfunction!(host::devices, m)?)?;
    m.add_function(wrap_pyfunction!(tracker::link_frames, m)?)?;
    m.add_function(wrap_pyfunction!(analysis::analyze_to_file, m)?)?;
    m.add_function(wrap_pyfunction!(device::label_device, m)?)?;
    m.add_function(wrap_pyfunction!(markers::detect_markers, m)?)?;
    m.add_function(wrap_pyfunction!(markers::generate_marker, m)?)?;
    m.add_function(wrap_pyfunction!(markers::estimate_pose, m)?)?;
    m.add("DICTIONARIES", markers::dictionary_names())?;
    m.add("GpuUnavailableError", errors::gpu_unavailable_type(m.py())?)?;
    m.add("VERSION", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<host::RustCall>()?;
    m.add_class::<analysis::Analysis>()?;
    m.add_class::<tracker::Tracker>()?;
    m.add_class::<source_frames::SourceFrames>()?;
    m.add("CSV_COLUMNS", markerscope::output::export::CSV_HEADER)?;
    m.add(
        "TRACK_COLUMNS",
        markerscope::output::export::TRACKS_CSV_HEADER,
    )?;
    Ok(())
}
