//! What reading one state file found, beside the data its caller takes back: when it was
//! written, what the caller dropped and why, whether it was refused. For the start line and
//! the series of each kind of state; words only, never a value from the file.

use std::collections::HashMap;
use std::time::SystemTime;

use jiff::Timestamp;
use serde::de::DeserializeOwned;

use super::{Bad, Dir, Older, Problem, ReadOutcome, Versioned};

/// What reading one state file found, beside what it restored: for the log and the series.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Found {
    /// When the state was written; `None` when there was none to use.
    pub written_at: Option<SystemTime>,
    /// Kept entries dropped, by why (as a phrase), with how many.
    pub dropped: Vec<(&'static str, usize)>,
    /// The state file was refused: its problem, and the reason naming the file.
    pub refused: Option<(Problem, String)>,
}

impl Found {
    /// Reads the state `name` of `dir` as `T`: its data, if the file is there and good (a
    /// refusal is recorded), for a caller that converts no older format: an older one is
    /// refused ([`super::Older::refuse`]).
    pub fn read<T: DeserializeOwned + Versioned>(dir: &Dir, name: &str) -> (Found, Option<T>) {
        Found::read_converting(dir, name, |older| Err(older.refuse()))
    }

    /// As [`Found::read`], for a caller that reads older formats too: `older` converts a file of
    /// an older format into `T`, or refuses it.
    pub fn read_converting<T: DeserializeOwned + Versioned>(
        dir: &Dir,
        name: &str,
        older: impl FnOnce(&Older) -> Result<T, Bad>,
    ) -> (Found, Option<T>) {
        let mut found = Found::default();
        let read = match dir.read::<T>(name) {
            ReadOutcome::Missing => Ok(None),
            ReadOutcome::Current(stored) => Ok(Some((stored.written_at, stored.data))),
            ReadOutcome::Older(file) => older(&file).map(|data| Some((file.written_at, data))),
            ReadOutcome::Bad(bad) => Err(bad),
        };
        match read {
            Ok(read) => {
                found.written_at = read.as_ref().map(|(written_at, _)| *written_at);
                (found, read.map(|(_, data)| data))
            }
            Err(bad) => {
                found.refused = Some((bad.problem, bad.to_string()));
                (found, None)
            }
        }
    }

    /// Takes the count of kept entries dropped, by why.
    pub fn dropped(&mut self, dropped: HashMap<&'static str, usize>) {
        self.dropped = dropped.into_iter().collect();
        self.dropped.sort_unstable();
    }

    /// What was dropped, in words for the start line: `none`, or `2 collector(s) of ...`.
    pub fn dropped_words(&self, unit: &str) -> String {
        let dropped: Vec<String> = self
            .dropped
            .iter()
            .map(|(why, n)| format!("{n} {unit}(s) {why}"))
            .collect();
        if dropped.is_empty() {
            "none".to_owned()
        } else {
            dropped.join(", ")
        }
    }

    /// When the file was written, as a time stamp: `None` when none was used.
    pub fn written_at_text(&self) -> Option<String> {
        self.written_at
            .map(|at| Timestamp::try_from(at).map_or_else(|_| "?".to_owned(), |t| t.to_string()))
    }
}
