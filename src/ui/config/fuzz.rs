//! Mutation fuzzing of the settings file: a mutated default.toml gives settings and a list of
//! problems, in a time limit, never a panic (the same mutations as the inputs' fuzzing).

#[path = "../../../tests/mutation.rs"]
mod mutation;

use mutation::{ends_without_panic, mutate, mutation};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, .. ProptestConfig::default() })]

    /// The configuration file: a mutated default.toml gives settings and a list of problems.
    #[test]
    fn mutated_config_is_read_or_reported(mutations in prop::collection::vec(mutation(), 1..8)) {
        let text = crate::ui::config::DEFAULT_CONFIG;
        let bytes = mutate(text.as_bytes(), &mutations);
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let result = ends_without_panic("config", move || {
            let mut settings = crate::ui::UiSettings::default();
            settings.apply_toml(&text, "fuzzed").len()
        });
        prop_assert!(result.is_ok(), "{mutations:?}: {}", result.unwrap_err());
    }
}
