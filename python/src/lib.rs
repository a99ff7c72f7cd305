//! `markerscope._markerscope`: the Rust side of the Python package. The Python layer
//! (`markerscope/__init__.py`) checks and converts arguments, dispatches numpy and CUDA arrays,
//! and builds the results; this module labels, thresholds, analyses and tracks.

mod analysis;
mod device;
mod errors;
mod host;
mod tracker;

use pyo3::prelude::*;

#[pymodule]
fn _markerscope(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(host::label_host, m)?)?;
    m.add_function(wrap_pyfunction!(host::threshold, m)?)?;
    m.add_function(wrap_pyfunction!(host::algorithms, m)?)?;
    m.add_function(wrap_pyfunction!(host::devices, m)?)?;
    m.add_function(wrap_pyfunction!(device::label_device, m)?)?;
    m.add_class::<host::RustCall>()?;
    m.add_class::<analysis::Analysis>()?;
    m.add_class::<tracker::Tracker>()?;
    m.add("CSV_COLUMNS", markerscope::output::export::CSV_HEADER)?;
    m.add(
        "TRACK_COLUMNS",
        markerscope::output::export::TRACKS_CSV_HEADER,
    )?;
    Ok(())
}
