//! Small pieces the panels share: the sort mark of a table heading, a labelled path box, and
//! the notice a file action leaves.

/// " ^" or " v" after the heading the rows are sorted by (ascending or not), else nothing.
pub fn sort_arrow<K: PartialEq>((by, ascending): (K, bool), heading: K) -> &'static str {
    match (by == heading, ascending) {
        (true, true) => " ^",
        (true, false) => " v",
        _ => "",
    }
}

/// The sort after a click on `heading`: by it, ascending; the other way if it was already.
pub fn sort_clicked<K: PartialEq + Copy>((by, ascending): (K, bool), heading: K) -> (K, bool) {
    (heading, if by == heading { !ascending } else { true })
}

/// A path box labelled "file", with `hint` while it is empty.
pub fn path_box(ui: &mut egui::Ui, text: &mut String, hint: &str) {
    ui.horizontal(|ui| {
        let name = ui.label("file");
        ui.add(
            egui::TextEdit::singleline(text)
                .hint_text(hint)
                .desired_width(120.0),
        )
        .labelled_by(name.id);
    });
}

/// The notice of a file action: `done` when it worked, else why it did not.
pub fn outcome(result: Result<(), String>, done: String) -> String {
    match result {
        Ok(()) => done,
        Err(e) => e,
    }
}

/// What a Load / Save / Clear row was asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileAction {
    Load,
    Save,
    Clear,
}

/// A Load / Save / Clear row for the path typed in the box above it.
pub struct FileButtons<'a> {
    /// The buttons' names, in the order load, save, clear.
    pub names: [&'a str; 3],
    /// Whether there is something to save and to clear.
    pub can_save: bool,
    pub can_clear: bool,
    /// The save button's tip.
    pub save_hover: Option<&'a str>,
}

impl FileButtons<'_> {
    /// Shows the row; the action clicked, with the path (trimmed) it is for. Load and save need
    /// a path.
    pub fn ui(&self, ui: &mut egui::Ui, path_text: &str) -> Option<(FileAction, String)> {
        let path = path_text.trim().to_string();
        let has_path = !path.is_empty();
        let [load, save, clear] = self.names;
        let mut action = None;
        ui.horizontal(|ui| {
            if ui.add_enabled(has_path, egui::Button::new(load)).clicked() {
                action = Some(FileAction::Load);
            }
            let mut save = ui.add_enabled(has_path && self.can_save, egui::Button::new(save));
            if let Some(hover) = self.save_hover {
                save = save.on_hover_text(hover);
            }
            if save.clicked() {
                action = Some(FileAction::Save);
            }
            if ui
                .add_enabled(self.can_clear, egui::Button::new(clear))
                .clicked()
            {
                action = Some(FileAction::Clear);
            }
        });
        action.map(|a| (a, path))
    }
}
