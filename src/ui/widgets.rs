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
