//! The lane engine: CBC encryption of several jobs at once on one thread.
//!
//! CBC encryption is serial within a file (each block needs the previous
//! ciphertext), but the software AES works on several blocks per call (2 on
//! 32-bit targets, 4 on 64-bit) and an AES instruction has a result latency
//! that a second, independent chain hides. So chunks of *different* jobs
//! are encrypted together, one job per lane, in the submit/flush style of
//! multi-buffer crypto libraries:
//!
//! * a job's chunk joins a free lane (the server's worker pool hands the
//!   first one to [`run`]; the benches hand theirs directly);
//! * the engine encrypts all busy lanes together, [`SLICE_BYTES`] at a
//!   time (or less, for the shortest remaining chunk), and between slices
//!   fills free lanes with chunks that were submitted meanwhile;
//! * a lane whose chunk is done hands it back at once (its job then
//!   submits its next chunk, which rejoins at the next slice);
//! * a lone job runs alone: nothing ever waits for a partner, so no job
//!   waits longer than one slice to join, and a job that arrives when all
//!   lanes are busy waits at most until a lane's chunk is done.
//!
//! The engine knows chunks only through [`LaneWork`]: a CBC chain and the
//! bytes to continue it over. What a chunk belongs to is its owner's.

use std::ops::Range;

use crate::engine::{Chain, encrypt_chains};

/// Bytes each lane encrypts between two looks for more chunks: small
/// enough that a new job joins quickly (about 2.6 ms of a 100 MHz core for
/// two lanes in software), large enough that looking costs nothing
/// measurable.
pub const SLICE_BYTES: usize = 2048;

/// One chunk of CBC encryption, as the lane engine sees it.
pub trait LaneWork {
    /// Readies the chunk (the bytes carried from the chunk before in
    /// front, a partial last block carried to the next): afterwards it is
    /// whole blocks of plaintext, their length returned. Called once,
    /// when the chunk takes a lane.
    fn begin(&mut self) -> usize;

    /// The chain, and the readied bytes in `range` to continue it over in
    /// place (`None`: nothing to encrypt; never for a range within what
    /// [`LaneWork::begin`] returned).
    fn lane(&mut self, range: Range<usize>) -> Option<(&mut Chain, &mut [u8])>;
}

/// How full the lanes were, for the metrics (`used / offered`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LaneCounts {
    /// Blocks encrypted.
    pub used_blocks: u64,
    /// Blocks that could have been encrypted in the same calls had every
    /// lane been busy (calls × lanes × blocks per lane).
    pub offered_blocks: u64,
}

/// One occupied lane.
struct Lane<W> {
    work: W,
    /// Bytes to encrypt.
    len: usize,
    /// Bytes encrypted so far.
    done: usize,
}

impl<W: LaneWork> Lane<W> {
    fn new(mut work: W) -> Self {
        let len = work.begin();
        Lane { work, len, done: 0 }
    }

    fn remaining(&self) -> usize {
        self.len - self.done
    }
}

/// Runs lanes until none is left: starts with `first`, calls `refill`
/// between slices for up to the given number of further chunks, and hands
/// each chunk to `done` as soon as it is encrypted. Returns how full the
/// lanes were.
pub fn run<W: LaneWork>(
    first: W,
    max_lanes: usize,
    mut refill: impl FnMut(usize) -> Vec<W>,
    mut done: impl FnMut(W),
) -> LaneCounts {
    let max_lanes = max_lanes.max(1);
    let mut counts = LaneCounts::default();
    let mut lanes: Vec<Lane<W>> = Vec::with_capacity(max_lanes);
    lanes.push(Lane::new(first));
    loop {
        if lanes.len() < max_lanes {
            lanes.extend(refill(max_lanes - lanes.len()).into_iter().map(Lane::new));
        }
        // Hand back chunks that are done (or had no whole block at all).
        let mut index = 0;
        while index < lanes.len() {
            if lanes[index].remaining() == 0 {
                done(lanes.swap_remove(index).work);
            } else {
                index += 1;
            }
        }
        let Some(shortest) = lanes.iter().map(Lane::remaining).min() else {
            return counts;
        };
        let len = shortest.min(SLICE_BYTES);
        let mut slices: Vec<(&mut Chain, &mut [u8])> = lanes
            .iter_mut()
            .filter_map(|lane| {
                let range = lane.done..lane.done + len;
                lane.done += len;
                lane.work.lane(range)
            })
            .collect();
        encrypt_chains(&mut slices);
        let blocks = (len / crate::BLOCK) as u64;
        counts.used_blocks += blocks * slices.len() as u64;
        counts.offered_blocks += blocks * max_lanes as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk::ChunkBuf;
    use crate::openssl_enc::EncryptStream;

    /// A chunk of one chain, as a job would submit it.
    struct Chunk {
        stream: EncryptStream,
        buf: ChunkBuf,
    }

    impl LaneWork for Chunk {
        fn begin(&mut self) -> usize {
            self.stream.begin_chunk(&mut self.buf);
            self.buf.len()
        }

        fn lane(&mut self, range: Range<usize>) -> Option<(&mut Chain, &mut [u8])> {
            Some((self.stream.chain(), &mut self.buf.as_mut_slice()[range]))
        }
    }

    fn stream(seed: u8) -> EncryptStream {
        EncryptStream::with_key(&[seed; 32], &[seed ^ 0x55; 16], &[seed; 8]).0
    }

    fn chunk(len: usize, seed: u8) -> ChunkBuf {
        let mut buf = ChunkBuf::with_capacity(len.max(1));
        for (i, byte) in buf.payload_mut(len).iter_mut().enumerate() {
            *byte = (i as u8).wrapping_mul(31) ^ seed;
        }
        buf
    }

    /// What one job alone gets: `update` on the same chunks.
    fn alone(seed: u8, lens: &[usize]) -> Vec<u8> {
        let mut stream = stream(seed);
        let mut out = Vec::new();
        for &len in lens {
            let mut buf = chunk(len, seed);
            stream.update(&mut buf);
            out.extend_from_slice(buf.as_slice());
        }
        out
    }

    /// Three jobs with chunks of different lengths, two lanes: every job's
    /// ciphertext is what it gets alone, whichever lanes it shared.
    #[test]
    fn jobs_sharing_lanes_get_the_ciphertext_they_get_alone() {
        let plans: [(u8, &[usize]); 3] = [
            (1, &[4096, 100, 7000]),
            (2, &[16, 5000]),
            (3, &[33, 8192, 1]),
        ];
        let mut streams: Vec<Option<EncryptStream>> =
            plans.iter().map(|(seed, _)| Some(stream(*seed))).collect();
        let mut outputs = vec![Vec::new(); plans.len()];
        let rounds = plans.iter().map(|(_, lens)| lens.len()).max().unwrap_or(0);
        let mut counts = LaneCounts::default();
        for round in 0..rounds {
            let mut pending = Vec::new();
            for (index, (seed, lens)) in plans.iter().enumerate() {
                if let Some(&len) = lens.get(round) {
                    let stream = streams[index].take().expect("stream");
                    pending.push((
                        index,
                        Chunk {
                            stream,
                            buf: chunk(len, *seed),
                        },
                    ));
                }
            }
            let first = pending.remove(0);
            let mut finished = Vec::new();
            let round_counts = run(
                Indexed(first),
                2,
                |free| {
                    let take = free.min(pending.len());
                    pending.drain(..take).map(Indexed).collect()
                },
                |Indexed((index, chunk))| finished.push((index, chunk)),
            );
            counts.used_blocks += round_counts.used_blocks;
            counts.offered_blocks += round_counts.offered_blocks;
            for (index, chunk) in finished {
                outputs[index].extend_from_slice(chunk.buf.as_slice());
                streams[index] = Some(chunk.stream);
            }
        }
        for (index, (seed, lens)) in plans.iter().enumerate() {
            assert!(outputs[index] == alone(*seed, lens), "job {index}");
        }
        let (used, offered) = (counts.used_blocks, counts.offered_blocks);
        assert!(used > 0 && used <= offered, "{used} of {offered}");
        // Some slices ran two lanes at once (one lane alone is exactly half).
        assert!(used * 2 > offered, "{used} of {offered}");
    }

    /// A chunk with the index of its job.
    struct Indexed((usize, Chunk));

    impl LaneWork for Indexed {
        fn begin(&mut self) -> usize {
            self.0.1.begin()
        }

        fn lane(&mut self, range: Range<usize>) -> Option<(&mut Chain, &mut [u8])> {
            self.0.1.lane(range)
        }
    }

    #[test]
    fn a_lone_job_runs_without_waiting_for_a_partner() {
        let mut asked = 0;
        let mut finished = None;
        let counts = run(
            Chunk {
                stream: stream(9),
                buf: chunk(3000, 9),
            },
            2,
            |_| {
                asked += 1;
                Vec::new()
            },
            |chunk| finished = Some(chunk),
        );
        let chunk = finished.expect("handed back");
        assert_eq!(chunk.buf.as_slice(), &alone(9, &[3000])[..]);
        assert!(asked >= 2, "looked for partners between slices");
        assert_eq!(counts.used_blocks * 2, counts.offered_blocks);
    }
}
