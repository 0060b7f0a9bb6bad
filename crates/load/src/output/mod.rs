//! Machine-readable results of a load run: one JSON document
//! ([`json`]) and one CSV row per transfer ([`csv`]), both built from the
//! same [`Document`](json::Document) so they always agree. Their fields
//! are documented in the README ("aesload output schema"); a test holds
//! the README, [`json::FIELDS`] and the output to one another.

pub mod csv;
pub mod json;

use std::path::{Path, PathBuf};

/// Writing an output file failed.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The file could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The document could not be serialised.
    #[error("cannot serialise the results: {0}")]
    Json(#[from] serde_json::Error),
}

/// Writes `bytes` to `path` (through a temporary file renamed into place,
/// so a reader never sees half a file).
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), OutputError> {
    let error = |source| OutputError::Write {
        path: path.to_owned(),
        source,
    };
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    std::fs::write(&partial, bytes).map_err(error)?;
    std::fs::rename(&partial, path).map_err(error)
}
