//! Several sources in one window. The selected source's state, view and pipeline are the app's
//! own `state`, `view` and `link` (what the panels edit and show); every other source waits
//! beside them (`Parked`) until it is selected, when the two change places. Each pass, every
//! source's events are taken and its settings handed to its pipeline; the keys one source
//! cannot keep of its own follow the selected source's.

use super::feed::Link;
use super::MarkerscopeApp;
use crate::ccl::Backends;
use crate::ui::config::UiSettings;
use crate::ui::live::LiveFeed;
use crate::ui::state::{AppState, FrameFeed, SourceInfo};
use crate::ui::timings::SourceLine;
use crate::ui::view::ViewPanel;
use std::sync::Arc;

/// A source the window opens at start: its settings, and what was opened or why not.
pub struct SourceStart {
    /// The defaults with the source's own keys (its `[[sources]]` section).
    pub settings: UiSettings,
    /// The spec it was opened from.
    pub spec: String,
    pub opened: Result<(Box<dyn FrameFeed>, SourceInfo), String>,
    /// Backends to start a live pipeline on when it is opened again after a failure.
    pub restart: Option<Arc<Backends>>,
}

impl SourceStart {
    /// The live pipeline on the source `settings` name ("auto": camera 0, else the demo).
    pub fn live(settings: UiSettings, backends: &Arc<Backends>) -> Self {
        let spec = crate::ui::startup::resolve_source(&settings.source);
        let opened = LiveFeed::start(&spec, &settings, backends.clone())
            .map(|(feed, info)| (Box::new(feed) as Box<dyn FrameFeed>, info))
            .map_err(|e| e.to_string());
        Self {
            settings,
            spec,
            opened,
            restart: Some(backends.clone()),
        }
    }

    /// Puts what was opened into `state` and `link` (a failure: into the state's error).
    fn install(self, state: &mut AppState, link: &mut Link) {
        state.source_spec = self.spec;
        link.restart = self.restart;
        match self.opened {
            Ok((feed, info)) => {
                state.source = info;
                link.feed = Some(feed);
            }
            Err(why) => {
                eprintln!("{why}");
                state.message(why.clone());
                state.source_error = Some(why);
            }
        }
    }
}

/// A source beside the selected one.
pub(super) struct Parked {
    state: AppState,
    view: ViewPanel,
    link: Link,
}

/// One source's parts, in the grid's order.
pub(super) struct Parts<'a> {
    pub state: &'a mut AppState,
    pub view: &'a mut ViewPanel,
    pub link: &'a mut Link,
    pub selected: bool,
}

/// Every source's parts in order: the selected one's are the app's own (`selected`), the
/// others' are parked (`None` marks the selected one's place).
pub(super) fn parts<'a>(
    selected: (&'a mut AppState, &'a mut ViewPanel, &'a mut Link),
    parked: &'a mut [Option<Parked>],
) -> Vec<Parts<'a>> {
    let mut own = Some(selected);
    let mut all = Vec::with_capacity(parked.len());
    for slot in parked {
        let part = match slot {
            Some(p) => Some(Parts {
                state: &mut p.state,
                view: &mut p.view,
                link: &mut p.link,
                selected: false,
            }),
            None => own.take().map(|(state, view, link)| Parts {
                state,
                view,
                link,
                selected: true,
            }),
        };
        all.extend(part);
    }
    all
}

impl MarkerscopeApp {
    /// A window over the sources `starts` (the first selected), `defaults` being the
    /// settings they came from (the top level and the `[[sources]]` sections), which the
    /// window saves with each source's own keys.
    pub fn with_sources(
        defaults: UiSettings,
        backends: Arc<Backends>,
        starts: Vec<SourceStart>,
    ) -> Self {
        let mut starts = starts.into_iter();
        let Some(first) = starts.next() else {
            return Self::new(defaults, backends, None);
        };
        let mut app = Self::new(first.settings.clone(), backends.clone(), None);
        first.install(&mut app.state, &mut app.link);
        for start in starts {
            let mut parked = Parked {
                state: AppState::beside(start.settings.clone(), &backends),
                view: ViewPanel::new(),
                link: Link::default(),
            };
            start.install(&mut parked.state, &mut parked.link);
            app.sources.push(Some(parked));
        }
        app.defaults = Some(defaults);
        app
    }

    /// How many sources the window shows.
    #[cfg(test)]
    pub fn source_count(&self) -> usize {
        self.sources.len()
    }

    /// The index of the selected source (the one the panels edit and show): the place of
    /// `sources` that holds no parked source.
    pub fn selected_source(&self) -> usize {
        self.sources.iter().position(Option::is_none).unwrap_or(0)
    }

    /// Source `i`'s state (the app's own `state` for the selected source).
    pub fn source_state(&self, i: usize) -> Option<&AppState> {
        match self.sources.get(i)? {
            Some(parked) => Some(&parked.state),
            None => Some(&self.state),
        }
    }

    /// Every source's state, in order.
    pub fn source_states(&self) -> Vec<&AppState> {
        (0..self.sources.len())
            .filter_map(|i| self.source_state(i))
            .collect()
    }

    /// Selects source `i`: the panels edit and show it from now on.
    pub fn select_source(&mut self, i: usize) {
        let selected = self.selected_source();
        if i == selected {
            return;
        }
        let Some(mut next) = self.sources.get_mut(i).and_then(Option::take) else {
            return;
        };
        self.state.hand_window_to(&mut next.state);
        std::mem::swap(&mut self.state, &mut next.state);
        std::mem::swap(&mut self.view, &mut next.view);
        std::mem::swap(&mut self.link, &mut next.link);
        self.sources[selected] = Some(next);
    }

    /// Whether any source has a pipeline to poll.
    pub(super) fn any_feed(&self) -> bool {
        self.link.feed.is_some() || self.sources.iter().flatten().any(|p| p.link.feed.is_some())
    }

    pub(super) fn all_parts(&mut self) -> Vec<Parts<'_>> {
        parts(
            (&mut self.state, &mut self.view, &mut self.link),
            &mut self.sources,
        )
    }

    /// Takes every source's events; the notices of the sources beside the selected one go
    /// to the window's, named after their source.
    pub(super) fn take_all_events(&mut self) {
        let mut notices = Vec::new();
        for (i, p) in self.all_parts().into_iter().enumerate() {
            p.link.take_events(p.state);
            if !p.selected {
                let name = format!("source {} ({})", i + 1, p.state.source_name());
                notices.extend(
                    p.state
                        .messages
                        .drain(..)
                        .map(|(_, m)| format!("{name}: {m}")),
                );
            }
        }
        for m in notices {
            self.state.message(m);
        }
        for m in self.state.streams.open.notices() {
            eprintln!("{m}");
            self.state.message(m);
        }
    }

    /// Hands every source's settings and requests to its pipeline, the shared keys being
    /// the selected source's.
    pub(super) fn hand_over_all(&mut self) {
        let shared = self.state.settings.clone();
        for p in self.all_parts() {
            if !p.selected {
                let own = p.state.settings.with_shared(&shared);
                if own != p.state.settings {
                    p.state.settings = own;
                }
            }
            p.link.hand_over(p.state);
        }
    }

    /// A line per source for the timings panel (none for a window of one source).
    pub(super) fn source_lines(&self) -> Vec<SourceLine> {
        if self.sources.len() < 2 {
            return Vec::new();
        }
        let selected = self.selected_source();
        self.source_states()
            .into_iter()
            .enumerate()
            .map(|(i, s)| SourceLine::of(i, s, i == selected))
            .collect()
    }

    /// The settings the window saves: with several sources (or sections), the defaults it
    /// started from, the shared keys of the selected source, and a section per source.
    pub fn saved_settings(&self) -> UiSettings {
        let own = |s: &AppState| UiSettings {
            mask_file: s.masks.file.clone(),
            ..s.settings.clone()
        };
        match &self.defaults {
            None => own(&self.state),
            Some(defaults) => {
                let sources: Vec<UiSettings> = self.source_states().into_iter().map(own).collect();
                defaults.with_sections(&self.state.settings, &sources)
            }
        }
    }
}
