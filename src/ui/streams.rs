//! The window's live result streams (`crate::output::stream`): the open ones, the addresses
//! that could not be opened (kept, with the reason, so they can be retried or removed), and the
//! Streams section of the controls panel.

use crate::output::stream::Streams;

#[derive(Default)]
pub struct StreamList {
    pub open: Streams,
    /// Addresses that failed to open, with the reason.
    pub failed: Vec<(String, String)>,
}

impl StreamList {
    /// Opens every address; the failures are kept and returned as messages.
    pub fn open_all(urls: &[String]) -> (StreamList, Vec<String>) {
        let mut list = StreamList::default();
        let messages = urls.iter().filter_map(|u| list.add(u).err()).collect();
        (list, messages)
    }

    /// Opens `url`; on failure it is listed with the reason, which is also returned.
    pub fn add(&mut self, url: &str) -> Result<(), String> {
        let url = url.trim();
        self.failed.retain(|(u, _)| u != url);
        self.open.add(url).map_err(|e| {
            let why = e.to_string();
            // The same address already open is no failure to keep.
            if !self.open.urls().iter().any(|u| u == url) {
                self.failed.push((url.to_string(), why.clone()));
            }
            why
        })
    }

    /// Every address, open or not: what the settings keep.
    pub fn urls(&self) -> Vec<String> {
        let mut urls = self.open.urls();
        urls.extend(self.failed.iter().map(|(u, _)| u.clone()));
        urls
    }
}

/// The Streams section: one row per stream (what it sent and dropped, its clients, its last
/// error) with a remove button, then a box to add one. Returns messages for the notices, and
/// keeps `urls` (the settings) equal to the list.
pub fn streams_ui(
    ui: &mut egui::Ui,
    list: &mut StreamList,
    text: &mut String,
    urls: &mut Vec<String>,
) -> Vec<String> {
    let mut messages = Vec::new();
    ui.heading("Streams");
    open_rows(ui, list);
    if let Some(url) = failed_rows(ui, list) {
        if let Err(e) = list.add(&url) {
            messages.push(e);
        }
    }
    messages.extend(add_line(ui, list, text));
    let now = list.urls();
    if *urls != now {
        *urls = now;
    }
    messages
}

/// A small "remove" button with `hover` as its tip; whether it was clicked.
fn remove_button(ui: &mut egui::Ui, hover: &str) -> bool {
    ui.small_button("remove").on_hover_text(hover).clicked()
}

/// The open streams, each with what it sent and its last error.
fn open_rows(ui: &mut egui::Ui, list: &mut StreamList) {
    let mut remove = None;
    for (i, status) in list.open.statuses().into_iter().enumerate() {
        ui.horizontal(|ui| {
            if remove_button(ui, "stop this stream") {
                remove = Some(i);
            }
            ui.label(&status.url);
        });
        let mut line = format!(
            "{} sent, {} dropped, {} failed",
            status.sent, status.dropped, status.failed
        );
        if let Some(n) = status.clients {
            line.push_str(&format!(", {n} client(s)"));
        }
        ui.small(line);
        if let Some(e) = &status.error {
            ui.colored_label(ui.visuals().error_fg_color, e);
        }
    }
    if let Some(i) = remove {
        list.open.remove(i);
    }
}

/// The addresses that could not be opened, each with why. Returns the one to retry, if asked.
fn failed_rows(ui: &mut egui::Ui, list: &mut StreamList) -> Option<String> {
    let mut retry = None;
    let mut remove = None;
    for (i, (url, why)) in list.failed.iter().enumerate() {
        ui.horizontal(|ui| {
            if remove_button(ui, "forget this address") {
                remove = Some(i);
            }
            if ui
                .small_button("retry")
                .on_hover_text("try to open it again")
                .clicked()
            {
                retry = Some(url.clone());
            }
            ui.label(url);
        });
        ui.colored_label(ui.visuals().error_fg_color, why);
    }
    if let Some(i) = remove {
        list.failed.remove(i);
    }
    retry
}

/// The box to type an address in, and the button that adds it. Returns why it failed.
fn add_line(ui: &mut egui::Ui, list: &mut StreamList, text: &mut String) -> Option<String> {
    let mut failure = None;
    ui.horizontal(|ui| {
        let name = ui.label("add");
        let edit = ui
            .add(
                egui::TextEdit::singleline(text)
                    .hint_text("osc://127.0.0.1:3333")
                    .desired_width(150.0),
            )
            .labelled_by(name.id)
            .on_hover_text(
                "osc://HOST:PORT (TUIO over OSC/UDP), udp://HOST:PORT (JSON per frame) or \
                 ws://HOST:PORT (a WebSocket server on this machine)",
            );
        let enter = edit.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
        if (ui.button("Add stream").clicked() || enter) && !text.trim().is_empty() {
            match list.add(text) {
                Ok(()) => text.clear(),
                Err(e) => failure = Some(e),
            }
        }
    });
    failure
}
