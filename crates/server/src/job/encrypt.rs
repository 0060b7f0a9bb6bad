//! The cipher stage of an encryption in the openssl format: chunks go to
//! the lane engine as they arrive ([`crate::pool::EncryptLane`]), several
//! in flight, so that the job's lane can go on with its next chunk while
//! the last one travels back; encrypted chunks go on to the write stage in
//! order, and counted out of the job's backlog (the lane occupancy of the
//! jobs with data).

use std::time::Duration;

use tokio::sync::mpsc;

use super::core::{EncryptCore, JobCore};
use super::{Input, Output, finish};
use crate::error::JobError;
use crate::lanes::Backlog;
use crate::metrics::StreamLabels;
use crate::shared::JobContext;

/// The channels of the stage: the read stage's chunks in, the write
/// stage's output out.
pub(super) struct Stages<'a> {
    /// Chunks from the read stage.
    pub input: mpsc::Receiver<Input>,
    /// Output for the write stage.
    pub output: &'a mpsc::Sender<Output>,
    /// The labels the job's bytes are counted under.
    pub labels: &'a StreamLabels,
    /// The job's chunks read and not yet encrypted, for the lane statistics.
    pub backlog: Option<&'a Backlog<'a>>,
}

/// Encrypts the job's chunks on the lane engine until its end, then the
/// padding and the done figures. `processing` is the time already spent on
/// the pool (the header's key derivation).
pub(super) async fn run(
    stages: Stages<'_>,
    core: EncryptCore,
    processing: Duration,
    queue_us: u64,
    ctx: JobContext<'_>,
) -> Result<(), JobError> {
    let Stages {
        mut input,
        output,
        labels,
        backlog,
    } = stages;
    let (pool, shutdown, metrics) = (ctx.pool, ctx.shutdown, ctx.metrics);
    let pool_failed = |err: crate::pool::PoolError| JobError::Internal(err.to_string());
    let mut lane = pool.encryption(core);
    let mut input_over = false;
    while !input_over || lane.in_flight() > 0 {
        tokio::select! {
            biased;
            () = shutdown.aborting() => return Err(JobError::ShuttingDown),
            done = lane.next(), if lane.in_flight() > 0 => {
                let buf = done.map_err(pool_failed)?;
                if let Some(backlog) = backlog {
                    backlog.encrypted();
                }
                output
                    .send(Output::Bytes(buf))
                    .await
                    .map_err(|_| JobError::Aborted)?;
            }
            next = input.recv(), if !input_over => match next.ok_or(JobError::Aborted)? {
                Input::Chunk(buf) => {
                    metrics.add_input_bytes(labels, buf.len() as u64);
                    lane.submit(buf).map_err(pool_failed)?;
                }
                Input::End => input_over = true,
            },
        }
    }
    let (core, lanes_time) = lane.finish().map_err(pool_failed)?;
    finish(
        JobCore::Encrypt(core),
        output,
        processing + lanes_time,
        queue_us,
        pool,
    )
    .await
}
