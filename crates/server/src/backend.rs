//! Which AES backend aesd uses: the `aes-backend` setting, decided once at
//! start-up.
//!
//! * `software`: the CPU's AES instructions if it has them (AES-NI, ARMv8),
//!   else aesd's fixsliced AES (several jobs per call).
//! * `vexriscv`: VexRiscv's AES instruction. It must pass a known-answer
//!   self-test run under a SIGILL guard ([`aesd_vexriscv::sigill::probe`]):
//!   on a CPU without it aesd exits with a clear error, never dies of SIGILL.
//! * `auto` (default): the instruction only when the device tree marks the
//!   CPUs as having it ([`DEVICE_TREE_PROPERTY`] on a `cpus/cpu@*` node, as
//!   `soc/aesd_soc.py` generates it) **and** the self-test passes;
//!   otherwise `software`, with the reason in the start-up log line.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::cipher::engine::Engine;

/// Where the running kernel exposes the device tree.
pub const DEFAULT_DEVICE_TREE: &str = "/proc/device-tree";

/// The property that marks a CPU node as having VexRiscv's AES instruction
/// (an empty, boolean property; see soc/README.md).
pub const DEVICE_TREE_PROPERTY: &str = "litex,aes-instruction";

/// The `aes-backend` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AesBackend {
    /// The instruction when the device tree and the self-test agree, else
    /// software.
    #[default]
    Auto,
    /// Never the instruction.
    Software,
    /// The instruction, or refuse to start.
    VexRiscv,
}

impl AesBackend {
    /// The setting's value as written in flags and TOML.
    pub fn name(self) -> &'static str {
        match self {
            AesBackend::Auto => "auto",
            AesBackend::Software => "software",
            AesBackend::VexRiscv => "vexriscv",
        }
    }
}

impl fmt::Display for AesBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for AesBackend {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "auto" => Ok(AesBackend::Auto),
            "software" => Ok(AesBackend::Software),
            "vexriscv" => Ok(AesBackend::VexRiscv),
            other => Err(format!(
                "expected auto, software or vexriscv, got `{other}`"
            )),
        }
    }
}

/// The backend in use and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selected {
    /// The engine jobs run on.
    pub engine: Engine,
    /// Why, for the start-up log line.
    pub reason: String,
}

/// `aes-backend = "vexriscv"` on a CPU that cannot run the instruction.
#[derive(Debug, thiserror::Error)]
#[error(
    "--aes-backend vexriscv: this CPU cannot run VexRiscv's AES instruction ({reason}); \
     use --aes-backend auto or software, or a SoC built with --aes-instruction"
)]
pub struct BackendUnavailable {
    /// What the probe found.
    pub reason: String,
}

/// Decides the backend for `setting`, reading the device tree under
/// `device_tree`, and makes it the process's engine.
pub fn select(setting: AesBackend, device_tree: &Path) -> Result<Selected, BackendUnavailable> {
    let selected = decide(setting, device_tree, probe_instruction)?;
    let engine = Engine::select(selected.engine);
    Ok(Selected { engine, ..selected })
}

/// The decision, with the probe passed in (tests use a stand-in).
pub fn decide(
    setting: AesBackend,
    device_tree: &Path,
    probe: impl FnOnce() -> Result<(), String>,
) -> Result<Selected, BackendUnavailable> {
    let software = |reason: String| Selected {
        engine: Engine::software(),
        reason,
    };
    match setting {
        AesBackend::Software => Ok(software("aes-backend = software".into())),
        AesBackend::VexRiscv => match probe() {
            Ok(()) => Ok(Selected {
                engine: Engine::VexRiscv,
                reason: "aes-backend = vexriscv and the instruction's self-test passed".into(),
            }),
            Err(reason) => Err(BackendUnavailable { reason }),
        },
        AesBackend::Auto => match cpus_with_instruction(device_tree) {
            Ok(true) => match probe() {
                Ok(()) => Ok(Selected {
                    engine: Engine::VexRiscv,
                    reason: format!(
                        "the device tree marks the CPUs `{DEVICE_TREE_PROPERTY}` and the \
                         instruction's self-test passed"
                    ),
                }),
                Err(reason) => Ok(software(format!(
                    "the device tree marks the CPUs `{DEVICE_TREE_PROPERTY}`, but the \
                     instruction's self-test failed ({reason})"
                ))),
            },
            Ok(false) => Ok(software(format!(
                "no CPU in {} has `{DEVICE_TREE_PROPERTY}`",
                device_tree.display()
            ))),
            Err(reason) => Ok(software(reason)),
        },
    }
}

/// Whether a `cpus/cpu@*` node under `root` has [`DEVICE_TREE_PROPERTY`].
fn cpus_with_instruction(root: &Path) -> Result<bool, String> {
    let cpus: PathBuf = root.join("cpus");
    let entries = std::fs::read_dir(&cpus)
        .map_err(|err| format!("no device tree CPU nodes at {}: {err}", cpus.display()))?;
    Ok(entries.flatten().any(|entry| {
        entry.file_name().to_string_lossy().starts_with("cpu@")
            && entry.path().join(DEVICE_TREE_PROPERTY).exists()
    }))
}

/// Runs the known-answer self-test through the real instruction under a
/// SIGILL guard.
fn probe_instruction() -> Result<(), String> {
    #[cfg(all(target_arch = "riscv32", target_os = "linux"))]
    {
        use aesd_vexriscv::sigill::{Probe, probe};
        match probe(aesd_vexriscv::self_test::<aesd_vexriscv::hardware::Hardware>) {
            Probe::Works => Ok(()),
            Probe::Trapped => Err("the CPU raised an illegal-instruction trap".into()),
            Probe::WrongAnswer => Err("the instruction gave wrong known answers".into()),
            Probe::NoHandler => Err("cannot install the SIGILL guard for the self-test".into()),
        }
    }
    #[cfg(not(all(target_arch = "riscv32", target_os = "linux")))]
    {
        Err(format!(
            "the instruction exists only on riscv32 VexRiscv CPUs, this is {}",
            std::env::consts::ARCH
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake device tree, removed when the test is done with it.
    struct DeviceTree(PathBuf);

    impl std::ops::Deref for DeviceTree {
        type Target = Path;
        fn deref(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for DeviceTree {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn device_tree(marked: bool) -> DeviceTree {
        let root = std::env::temp_dir().join(format!(
            "aesd-dt-{}-{marked}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let cpu = root.join("cpus/cpu@0");
        std::fs::create_dir_all(&cpu).expect("mkdir");
        let property = cpu.join(DEVICE_TREE_PROPERTY);
        if marked {
            std::fs::write(&property, b"").expect("property");
        } else {
            let _ = std::fs::remove_file(&property);
        }
        DeviceTree(root)
    }

    #[test]
    fn auto_needs_both_the_device_tree_and_the_self_test() {
        let works = || Ok(());
        let traps = || Err("trap".to_owned());
        let marked = device_tree(true);
        let plain = device_tree(false);
        let chosen = decide(AesBackend::Auto, &marked, works).expect("auto never fails");
        assert_eq!(chosen.engine, Engine::VexRiscv);
        let chosen = decide(AesBackend::Auto, &marked, traps).expect("auto never fails");
        assert_eq!(chosen.engine, Engine::software());
        assert!(
            chosen.reason.contains("self-test failed (trap)"),
            "{}",
            chosen.reason
        );
        let chosen = decide(AesBackend::Auto, &plain, works).expect("auto never fails");
        assert_eq!(chosen.engine, Engine::software());
        assert!(chosen.reason.contains("no CPU"), "{}", chosen.reason);
        let missing = plain.join("nothing-here");
        let chosen = decide(AesBackend::Auto, &missing, works).expect("auto never fails");
        assert_eq!(chosen.engine, Engine::software());
        assert!(
            chosen.reason.contains("no device tree"),
            "{}",
            chosen.reason
        );
    }

    #[test]
    fn forced_vexriscv_fails_clearly_and_software_never_probes() {
        let err = decide(AesBackend::VexRiscv, Path::new("/nonexistent"), || {
            Err("the CPU raised an illegal-instruction trap".into())
        })
        .expect_err("refused");
        assert!(err.to_string().contains("illegal-instruction"), "{err}");
        let chosen = decide(AesBackend::Software, Path::new("/nonexistent"), || {
            panic!("software must not run the instruction")
        })
        .expect("software");
        assert_eq!(chosen.engine, Engine::software());
    }

    #[test]
    fn the_setting_parses_its_three_values_only() {
        for backend in [AesBackend::Auto, AesBackend::Software, AesBackend::VexRiscv] {
            assert_eq!(backend.name().parse::<AesBackend>(), Ok(backend));
        }
        assert!("aesni".parse::<AesBackend>().is_err());
    }
}
