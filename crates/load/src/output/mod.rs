//! Machine-readable results of a load run: one JSON document
//! ([`json`]) and one CSV row per transfer ([`csv`]), both built from the
//! same [`Document`](json::Document) so they always agree. Their fields
//! are documented in docs/aesload.md ("Output schema"); a test holds
//! docs/aesload.md, [`json::FIELDS`] and the output to one another.

pub mod csv;
pub mod json;

use aesd_cli::output::OutputPath;

/// Writing an output file failed.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The file could not be written.
    #[error(transparent)]
    Write(#[from] aesd_cli::output::OutputError),
    /// The document could not be serialised.
    #[error("cannot serialise the results: {0}")]
    Json(#[from] serde_json::Error),
}

/// Writes `bytes` to `output` by the client library's output rule (a file
/// through a temporary file renamed into place, so a reader never sees
/// half a file; a device or FIFO straight through; `-` to stdout).
pub fn write_file(output: &OutputPath, bytes: &[u8]) -> Result<(), OutputError> {
    Ok(output.write_all(bytes)?)
}
