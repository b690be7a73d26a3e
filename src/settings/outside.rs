//! What a config names outside itself: the variables that hold tokens, the token files and the
//! TLS files. Read whenever a config is loaded; left unread, and only named, by
//! `--config.check --config.syntax-only`, so that a file can be checked where its secrets are not.

use std::cell::RefCell;

/// The environment a config is validated in, and whether what it names outside itself is read.
pub struct Outside<'a> {
    env: &'a dyn Fn(&str) -> Option<String>,
    /// `None`: read. `Some`: left unread, with the field of each thing left, in the order met.
    unread: Option<RefCell<Vec<String>>>,
}

impl<'a> Outside<'a> {
    /// Variables read through `env`, files read from the disk.
    pub fn read(env: &'a dyn Fn(&str) -> Option<String>) -> Outside<'a> {
        Outside { env, unread: None }
    }

    /// Nothing read: no variable, no file; only the fields that name them are noted.
    pub fn syntax_only() -> Outside<'static> {
        Outside {
            // No variable is read.
            env: &|_| None,
            unread: Some(RefCell::default()),
        }
    }

    /// The value of the variable `name`.
    pub(crate) fn var(&self, name: &str) -> Option<String> {
        (self.env)(name)
    }

    /// Whether what `field` names (a file or a variable) is left unread; if so, `field` is
    /// noted among those left.
    pub(crate) fn leaves(&self, field: &str) -> bool {
        match &self.unread {
            None => false,
            Some(unread) => {
                unread.borrow_mut().push(field.to_owned());
                true
            }
        }
    }

    /// The fields whose files or variables were left unread, in the order met.
    pub fn into_unread(self) -> Vec<String> {
        self.unread.map(RefCell::into_inner).unwrap_or_default()
    }
}
