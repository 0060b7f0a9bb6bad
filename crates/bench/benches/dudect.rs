//! `dudect`: a timing-leak test in the manner of dudect (Reparaz, Balasch
//! and Verbauwhede, "Dude, is my code constant time?", 2017) for the
//! hand-written primitives that handle secrets: two classes of inputs, a
//! fixed secret and random secrets, measured interleaved in random order,
//! compared with Welch's t-test. |t| above 4.5 says the running time
//! depends on the secret. A control that branches on its secret must
//! show a large |t|, or the measurement sees nothing.
//!
//! ```text
//! cargo bench -p aesd-bench --bench dudect -- --samples 1000000 [PRIMITIVE...]
//! ```
//!
//! A bench target (`harness = false`), not a timed test. Without any
//! argument (as `cargo test --benches` runs it in scripts/test.sh) or with
//! `--quick` it measures only the control (20 000 samples, about a second)
//! and fails if the control's |t| is not large: the method works on this
//! machine. The figures of the primitives are in docs/hardening.md
//! ("Constant time").

use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

const USAGE: &str = "\
usage: dudect [--samples N] [--quick] [PRIMITIVE...]

Times each primitive on two classes of secret inputs, a fixed one and
random ones, interleaved at random, and prints Welch's t between the
classes: |t| > 4.5 means the time depends on the secret.

primitives (default: all):
  x25519        the riscv32 X25519 ladder (aesd-age), secret scalar, fixed u
  x25519-base   the riscv32 fixed-base X25519 (the table), secret scalar
  poly1305-32   Poly1305 radix 2^32 (riscv32's), secret key and message, 1 KiB
  poly1305-64   Poly1305 radix 2^64 (aarch64's), secret key and message, 1 KiB
  chacha20      the scalar ChaCha20 (riscv32's), secret key, 1 KiB
  aes-fixslice  AES-256-CBC through the fixsliced AES (aesd-cipher), secret key and data, 1 KiB
  control       branches on its secret's low bit (must give a large |t|)

options:
  --samples N   measurements per primitive, both classes together (default 1000000)
  --quick       the control alone, 20000 samples; exit 1 unless its |t| > 20
  --bench       ignored (cargo bench passes it)
  -h, --help    this help";

/// xorshift64*: inputs and the class order (not a secret's generator: the
/// test only needs them to differ).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn fill(&mut self, bytes: &mut [u8]) {
        for chunk in bytes.chunks_mut(8) {
            let word = self.next().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
}

/// One measured call's input: the secret (and data) of its class.
struct Input {
    key: [u8; 32],
    data: Vec<u8>,
}

/// Bytes of data for the primitives that take some.
const DATA_LEN: usize = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Primitive {
    X25519,
    X25519Base,
    Poly1305Radix32,
    Poly1305Radix64,
    ChaCha20,
    AesFixslice,
    Control,
}

const ALL: [(Primitive, &str); 7] = [
    (Primitive::X25519, "x25519"),
    (Primitive::X25519Base, "x25519-base"),
    (Primitive::Poly1305Radix32, "poly1305-32"),
    (Primitive::Poly1305Radix64, "poly1305-64"),
    (Primitive::ChaCha20, "chacha20"),
    (Primitive::AesFixslice, "aes-fixslice"),
    (Primitive::Control, "control"),
];

/// Work the control does only for a secret whose low bit is 1.
#[inline(never)]
fn control_work(key: &[u8; 32]) -> u64 {
    let mut acc = 0u64;
    for round in 0..2000u64 {
        acc = acc.rotate_left(5) ^ u64::from(key[(round % 32) as usize]) ^ round;
    }
    acc
}

/// The input of one measurement of `class` (0: fixed, 1: random).
fn input(primitive: Primitive, class: usize, rng: &mut Rng) -> Input {
    let data_len = match primitive {
        Primitive::X25519 | Primitive::X25519Base | Primitive::Control => 0,
        _ => DATA_LEN,
    };
    let mut input = Input {
        key: [0u8; 32],
        data: vec![0u8; data_len],
    };
    if class == 1 {
        rng.fill(&mut input.key);
        rng.fill(&mut input.data);
    }
    input
}

/// Runs `primitive` once on `input`.
#[inline(never)]
fn run(primitive: Primitive, input: &mut Input, aes: Option<&aesd_cipher::KeySchedule>) -> u8 {
    /// A fixed public u-coordinate (the RFC 7748 vector's).
    const U: [u8; 32] = [
        0xe6, 0xdb, 0x68, 0x67, 0x58, 0x30, 0x30, 0xdb, 0x35, 0x94, 0xc1, 0xa4, 0x24, 0xb1, 0x5f,
        0x7c, 0x72, 0x66, 0x24, 0xec, 0x26, 0xb3, 0x35, 0x3b, 0x10, 0xa9, 0x03, 0xa6, 0xd0, 0xab,
        0x1c, 0x4c,
    ];
    let key = black_box(&input.key);
    match primitive {
        Primitive::X25519 => aesd_age::timing::x25519(key, &U)[0],
        Primitive::X25519Base => aesd_age::timing::x25519_base(key)[0],
        Primitive::Poly1305Radix32 => aesd_age::timing::poly1305_radix32(key, &input.data)[0],
        Primitive::Poly1305Radix64 => aesd_age::timing::poly1305_radix64(key, &input.data)[0],
        Primitive::ChaCha20 => {
            aesd_age::timing::chacha20_scalar(key, &[7; 12], &mut input.data);
            input.data[0]
        }
        Primitive::AesFixslice => {
            let mut iv = [0u8; 16];
            aesd_cipher::cbc::encrypt(aes.expect("a key schedule"), &mut iv, &mut input.data);
            iv[0]
        }
        Primitive::Control => {
            if key[0] & 1 == 1 {
                control_work(key) as u8
            } else {
                0
            }
        }
    }
}

/// Running mean and variance of one class (Welford).
#[derive(Default, Clone, Copy)]
struct Moments {
    n: f64,
    mean: f64,
    m2: f64,
}

impl Moments {
    fn push(&mut self, x: f64) {
        self.n += 1.0;
        let delta = x - self.mean;
        self.mean += delta / self.n;
        self.m2 += delta * (x - self.mean);
    }

    fn variance(&self) -> f64 {
        if self.n < 2.0 {
            0.0
        } else {
            self.m2 / (self.n - 1.0)
        }
    }
}

/// Welch's t between the two classes.
fn welch(classes: &[Moments; 2]) -> f64 {
    let [a, b] = classes;
    let se = (a.variance() / a.n + b.variance() / b.n).sqrt();
    if se == 0.0 {
        0.0
    } else {
        (a.mean - b.mean) / se
    }
}

/// What one primitive's measurement found.
struct Outcome {
    /// t over every sample.
    t_all: f64,
    /// t over the samples below the 90th percentile of a first batch
    /// (dudect's cropping: interrupts and migrations make long tails).
    t_cropped: f64,
    /// Median time of one call, in ns.
    median_ns: u64,
}

impl Outcome {
    fn t_max(&self) -> f64 {
        self.t_all.abs().max(self.t_cropped.abs())
    }
}

/// Measures `primitive` `samples` times, the classes interleaved at random.
fn measure(primitive: Primitive, samples: usize, rng: &mut Rng) -> Outcome {
    const BATCH: usize = 10_000;
    let mut all = [Moments::default(); 2];
    let mut cropped = [Moments::default(); 2];
    let mut threshold = u64::MAX;
    let mut median_ns = 0;
    let mut done = 0;
    let mut first = true;
    while done < samples {
        let n = BATCH.min(samples - done);
        let classes: Vec<usize> = (0..n).map(|_| (rng.next() >> 63) as usize).collect();
        let mut inputs: Vec<Input> = classes.iter().map(|&c| input(primitive, c, rng)).collect();
        let schedules: Vec<Option<aesd_cipher::KeySchedule>> = inputs
            .iter()
            .map(|i| {
                (primitive == Primitive::AesFixslice).then(|| aesd_cipher::KeySchedule::new(&i.key))
            })
            .collect();
        let mut times = Vec::with_capacity(n);
        for (input, schedule) in inputs.iter_mut().zip(&schedules) {
            let start = Instant::now();
            black_box(run(primitive, input, schedule.as_ref()));
            times.push(start.elapsed().as_nanos() as u64);
        }
        if first {
            // The first batch warms up and sets the crop; it is not counted.
            let mut sorted = times.clone();
            sorted.sort_unstable();
            threshold = sorted[sorted.len() * 9 / 10];
            median_ns = sorted[sorted.len() / 2];
            first = false;
            continue;
        }
        for (&class, &time) in classes.iter().zip(&times) {
            all[class].push(time as f64);
            if time < threshold {
                cropped[class].push(time as f64);
            }
        }
        done += n;
    }
    Outcome {
        t_all: welch(&all),
        t_cropped: welch(&cropped),
        median_ns,
    }
}

fn main() -> ExitCode {
    let mut samples = 1_000_000usize;
    let mut quick = false;
    let mut chosen = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--samples" => match args.next().and_then(|n| n.parse().ok()) {
                Some(n) if n > 0 => samples = n,
                _ => {
                    eprintln!("dudect: --samples needs a number above 0\n\n{USAGE}");
                    return ExitCode::from(2);
                }
            },
            "--quick" => quick = true,
            "--bench" => {}
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            name => match ALL.iter().find(|(_, n)| *n == name) {
                Some((primitive, _)) => chosen.push(*primitive),
                None => {
                    eprintln!("dudect: unknown primitive or option {name}\n\n{USAGE}");
                    return ExitCode::from(2);
                }
            },
        }
    }
    // No argument at all: `cargo test --benches` (cargo bench passes
    // --bench), the quick check of the method.
    if std::env::args().len() == 1 {
        quick = true;
    }
    if quick {
        chosen = vec![Primitive::Control];
        samples = 20_000;
    } else if chosen.is_empty() {
        chosen = ALL.iter().map(|(p, _)| *p).collect();
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1));
    println!("| primitive | samples | median ns | t (all) | t (< p90) | max abs t | verdict |");
    println!("|---|---|---|---|---|---|---|");
    let mut status = ExitCode::SUCCESS;
    for primitive in chosen {
        let name = ALL
            .iter()
            .find(|(p, _)| *p == primitive)
            .map_or("?", |(_, n)| n);
        let outcome = measure(primitive, samples, &mut rng);
        let leaks = outcome.t_max() > 4.5;
        let verdict = match (primitive == Primitive::Control, leaks) {
            (true, true) => "leak seen (as it must)",
            (true, false) => "CONTROL NOT DETECTED",
            (false, true) => "LEAK?",
            (false, false) => "no leak seen",
        };
        println!(
            "| {name} | {samples} | {} | {:.2} | {:.2} | {:.2} | {verdict} |",
            outcome.median_ns,
            outcome.t_all,
            outcome.t_cropped,
            outcome.t_max()
        );
        if quick && primitive == Primitive::Control && outcome.t_max() <= 20.0 {
            eprintln!(
                "dudect: the control (a branch on the secret) gave |t| = {:.2}, not above 20: \
                 the measurement cannot see a leak on this machine",
                outcome.t_max()
            );
            status = ExitCode::FAILURE;
        }
    }
    status
}
