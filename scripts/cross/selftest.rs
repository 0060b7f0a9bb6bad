//! Toolchain self-test for the board targets (std only, no crates).
//!
//! Built by scripts/cross/selftest.sh for every board target and run under
//! qemu-user. It fails (non-zero exit, or a crash) when the std/libc/musl
//! combination is broken, e.g. a std whose `libc` predates 64-bit time_t on
//! riscv32 musl: there `Instant` returns garbage and the process crashes at
//! exit. Prints one line per check and `selftest ok` at the end.
use std::cell::RefCell;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

static DTOR_RAN: AtomicBool = AtomicBool::new(false);
struct Dtor;
impl Drop for Dtor {
    fn drop(&mut self) {
        // Runs at thread exit: exercises TLS destructors.
        DTOR_RAN.store(true, Ordering::SeqCst);
    }
}
thread_local!(static TLS: RefCell<Option<Dtor>> = const { RefCell::new(None) });

fn check(ok: bool, what: &str, detail: String) -> bool {
    println!("{} {what}: {detail}", if ok { "ok  " } else { "FAIL" });
    ok
}

fn main() -> ExitCode {
    let mut ok = true;

    // Monotonic clock, before any sleep (a broken nanosleep may hang): it
    // must advance within a million readings, by less than a second.
    let a = Instant::now();
    let mut b = a;
    for _ in 0..1_000_000 {
        b = Instant::now();
        if b != a {
            break;
        }
    }
    let d = b.checked_duration_since(a);
    ok &= check(
        matches!(d, Some(d) if d > Duration::ZERO && d < Duration::from_secs(1)),
        "Instant advances",
        format!("{a:?} -> {b:?}: {d:?}"),
    );

    // A 50 ms sleep must measure as 50 ms .. 5 s.
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_millis(50));
    let slept = t0.elapsed();
    ok &= check(
        slept >= Duration::from_millis(50) && slept < Duration::from_secs(5),
        "Instant around sleep(50ms)",
        format!("{slept:?}"),
    );

    // Wall clock: after 2020-01-01 and before 2200.
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    ok &= check(
        (1_577_836_800..7_258_118_400).contains(&now),
        "SystemTime::now",
        format!("{now} s since epoch"),
    );

    // 64-bit time_t through the kernel: set and read back an mtime after 2038.
    let path = std::env::temp_dir().join(format!("aesd-selftest-{}", std::process::id()));
    let y2040 = UNIX_EPOCH + Duration::from_secs(2_208_988_800);
    let mtime = std::fs::write(&path, b"x")
        .and_then(|()| std::fs::File::options().write(true).open(&path))
        .and_then(|f| f.set_modified(y2040).and_then(|()| f.metadata()))
        .and_then(|m| m.modified());
    let _ = std::fs::remove_file(&path);
    ok &= check(
        matches!(mtime, Ok(t) if t == y2040),
        "file mtime after 2038",
        format!("{mtime:?}"),
    );

    // Threads, TLS destructors, 32-bit atomics, and unwinding across a thread.
    let h = std::thread::spawn(|| {
        TLS.with(|t| *t.borrow_mut() = Some(Dtor));
        let c = AtomicU32::new(1);
        c.fetch_add(41, Ordering::SeqCst) + c.load(Ordering::SeqCst)
    });
    let v = h.join();
    let dtor = DTOR_RAN.load(Ordering::SeqCst);
    ok &= check(
        matches!(v, Ok(43)) && dtor,
        "thread + TLS dtor + atomics",
        format!("{v:?}, dtor ran: {dtor}"),
    );

    std::panic::set_hook(Box::new(|_| {}));
    let caught = std::panic::catch_unwind(|| panic!("expected"));
    let _ = std::panic::take_hook();
    ok &= check(
        caught.is_err(),
        "catch_unwind",
        format!("{}", caught.is_err()),
    );

    let total = t0.elapsed();
    ok &= check(
        total < Duration::from_secs(30),
        "total elapsed",
        format!("{total:?}"),
    );
    if ok {
        println!("selftest ok");
        ExitCode::SUCCESS
    } else {
        println!("selftest FAILED");
        ExitCode::FAILURE
    }
}
