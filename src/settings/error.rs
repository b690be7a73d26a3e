//! What a config that cannot be run with is told: an error that names the field and the fix.

use std::path::PathBuf;

use super::limits;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "config file {path} is larger than {} MiB; is it the right file?",
        limits::CONFIG_FILE_BYTES / 1024 / 1024
    )]
    TooLarge { path: PathBuf },
    #[error("{0}")]
    Syntax(String),
    #[error("{field}: {problem}")]
    Invalid { field: String, problem: String },
}

/// A value refused: `field` names where it is, `problem` what is wrong and how to fix it.
pub fn invalid(field: impl Into<String>, problem: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field: field.into(),
        problem: problem.into(),
    }
}
