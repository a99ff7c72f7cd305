//! The egui window: live view with overlays (components, trajectory tails, square markers),
//! controls, per-step timings, algorithm comparison, the component and marker tables and the
//! selected track's plot.
//!
//! `startup` holds what the binary asks of the window when it opens (`StartupOptions`, plain
//! data: the window knows nothing of the command line); `state` holds what the window knows;
//! each panel is a small struct with `fn ui` that reads and changes that state; `app` wires
//! them together and talks to the pipeline through `FrameFeed`.

pub mod app;
pub mod camera;
pub mod compare;
pub mod components;
pub mod config;
pub mod controls;
pub mod grid;
pub mod live;
pub mod markers;
pub mod masks;
pub mod screenshots;
pub mod software_render;
pub mod startup;
pub mod state;
pub mod still;
pub mod streams;
pub mod timings;
pub mod track_plot;
pub mod tracks;
pub mod view;
pub mod widgets;
pub mod world;

// The window driven headless (egui_kittest); run under a virtual X display.
#[cfg(test)]
mod tests;

pub use app::{run, MarkerscopeApp};
pub use config::UiSettings;
pub use startup::{RendererChoice, ScriptOptions, ShapeLimits, StartupOptions};
pub use state::Tab;
