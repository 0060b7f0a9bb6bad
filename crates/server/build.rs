//! Records the target triple for the `aesd_build_info` metric.

fn main() {
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".to_owned());
    println!("cargo:rustc-env=AESD_TARGET={target}");
}
