//! The tracker's tests, by concern; the scenes they share are in `scenes`.

mod accuracy;
mod association;
mod lifecycle;
mod scenes;
mod scorer;
mod subnetwork;
