//! Which AES backend aesd uses: the `aes-backend` setting, decided once at
//! start-up.
//!
//! * `software`: the CPU's AES instructions if it has them (AES-NI, ARMv8),
//!   else aesd's fixsliced AES (several jobs per call).
//! * `vexriscv`: VexRiscv's AES instruction (the AesPlugin as real cores
//!   have it: custom-0). It must pass a known-answer self-test run under a
//!   SIGILL guard ([`aesd_vexriscv::sigill::probe`]): on a CPU without it
//!   aesd exits with a clear error, never dies of SIGILL.
//! * `zkne`: the ratified scalar AES instructions (Zkne and Zknd), with the
//!   same self-test under the same guard.
//! * `auto` (default): VexRiscv's instruction when the device tree marks
//!   the CPUs as having it ([`DEVICE_TREE_PROPERTY`] on a `cpus/cpu@*` node,
//!   as `soc/aesd_soc.py` generates it) **and** its self-test passes; else
//!   Zkne when every CPU's ISA in the device tree (`riscv,isa`,
//!   `riscv,isa-extensions`) or the kernel's `riscv_hwprobe` lists Zkne and
//!   Zknd **and** its self-test passes; otherwise `software`, with the
//!   reasons in the start-up log line.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use aesd_core::engine::{Engine, InsnSet};

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
    /// Never a board's AES instruction (VexRiscv's, Zkne/Zknd): the CPU's
    /// own AES instructions where it has them (AES-NI, ARMv8 AES), else
    /// aesd's fixsliced AES in software. Its setting value is `software`
    /// (as written in existing configurations), which is exact on the
    /// boards.
    NoBoardInstruction,
    /// VexRiscv's instruction, or refuse to start.
    VexRiscv,
    /// Zkne/Zknd, or refuse to start.
    Zkne,
}

impl AesBackend {
    /// The setting's value as written in flags and TOML.
    pub fn name(self) -> &'static str {
        match self {
            AesBackend::Auto => "auto",
            AesBackend::NoBoardInstruction => "software",
            AesBackend::VexRiscv => "vexriscv",
            AesBackend::Zkne => "zkne",
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
            "software" => Ok(AesBackend::NoBoardInstruction),
            "vexriscv" => Ok(AesBackend::VexRiscv),
            "zkne" => Ok(AesBackend::Zkne),
            other => Err(format!(
                "expected auto, software, vexriscv or zkne, got `{other}`"
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

/// `aes-backend = "vexriscv"` or `"zkne"` on a CPU that cannot run those
/// instructions.
#[derive(Debug, thiserror::Error)]
#[error(
    "--aes-backend {backend}: this CPU cannot run {what} ({reason}); \
     use --aes-backend auto or software{hint}",
    what = insn_set_name(*.set),
    backend = AesBackend::from(*.set),
    hint = match .set {
        InsnSet::VexRiscv => ", or a SoC built with --aes-instruction",
        InsnSet::Zkne => "",
    }
)]
pub struct BackendUnavailable {
    /// The instructions that were asked for.
    pub set: InsnSet,
    /// What the probe found.
    pub reason: String,
}

impl From<InsnSet> for AesBackend {
    fn from(set: InsnSet) -> AesBackend {
        match set {
            InsnSet::VexRiscv => AesBackend::VexRiscv,
            InsnSet::Zkne => AesBackend::Zkne,
        }
    }
}

/// What a set of instructions is called in messages.
fn insn_set_name(set: InsnSet) -> &'static str {
    match set {
        InsnSet::VexRiscv => "VexRiscv's AES instruction",
        InsnSet::Zkne => "the Zkne/Zknd AES instructions",
    }
}

/// The engine of a set of instructions.
fn engine_of(set: InsnSet) -> Engine {
    match set {
        InsnSet::VexRiscv => Engine::VexRiscv,
        InsnSet::Zkne => Engine::Zkne,
    }
}

/// Decides the backend for `setting`, reading the device tree under
/// `device_tree` (and the kernel's `riscv_hwprobe`), and makes it the
/// process's engine.
pub fn select(setting: AesBackend, device_tree: &Path) -> Result<Selected, BackendUnavailable> {
    let selected = decide(setting, device_tree, hwprobe_zkne(), probe_instruction)?;
    let engine = Engine::select(selected.engine);
    Ok(Selected { engine, ..selected })
}

/// The decision, with what `riscv_hwprobe` said of Zkne/Zknd (`None`: not
/// asked or not answered) and the probe passed in (tests use stand-ins).
pub fn decide(
    setting: AesBackend,
    device_tree: &Path,
    hwprobe_zkne: Option<bool>,
    probe: impl Fn(InsnSet) -> Result<(), String>,
) -> Result<Selected, BackendUnavailable> {
    let software = |reason: String| Selected {
        engine: Engine::software(),
        reason,
    };
    let forced = |set: InsnSet| match probe(set) {
        Ok(()) => Ok(Selected {
            engine: engine_of(set),
            reason: format!(
                "aes-backend = {} and the instructions' self-test passed",
                AesBackend::from(set)
            ),
        }),
        Err(reason) => Err(BackendUnavailable { set, reason }),
    };
    match setting {
        AesBackend::NoBoardInstruction => Ok(software("aes-backend = software".into())),
        AesBackend::VexRiscv => forced(InsnSet::VexRiscv),
        AesBackend::Zkne => forced(InsnSet::Zkne),
        AesBackend::Auto => {
            let vexriscv = match cpus_with_instruction(device_tree) {
                Ok(true) => match probe(InsnSet::VexRiscv) {
                    Ok(()) => {
                        return Ok(Selected {
                            engine: Engine::VexRiscv,
                            reason: format!(
                                "the device tree marks the CPUs `{DEVICE_TREE_PROPERTY}` and the \
                                 instruction's self-test passed"
                            ),
                        });
                    }
                    Err(reason) => format!(
                        "the device tree marks the CPUs `{DEVICE_TREE_PROPERTY}`, but the \
                         instruction's self-test failed ({reason})"
                    ),
                },
                Ok(false) => format!(
                    "no CPU in {} has `{DEVICE_TREE_PROPERTY}`",
                    device_tree.display()
                ),
                Err(reason) => reason,
            };
            let listed = match cpus_with_zkne(device_tree) {
                Ok(true) => Some("the device tree's ISA"),
                _ if hwprobe_zkne == Some(true) => Some("riscv_hwprobe"),
                _ => None,
            };
            let zkne = match listed {
                Some(source) => match probe(InsnSet::Zkne) {
                    Ok(()) => {
                        return Ok(Selected {
                            engine: Engine::Zkne,
                            reason: format!(
                                "{vexriscv}; {source} lists Zkne and Zknd and their self-test \
                                 passed"
                            ),
                        });
                    }
                    Err(reason) => format!(
                        "{source} lists Zkne and Zknd, but their self-test failed ({reason})"
                    ),
                },
                None => "no Zkne and Zknd in the device tree's ISA or riscv_hwprobe".to_owned(),
            };
            Ok(software(format!("{vexriscv}; {zkne}")))
        }
    }
}

/// Whether a `cpus/cpu@*` node under `root` has [`DEVICE_TREE_PROPERTY`].
fn cpus_with_instruction(root: &Path) -> Result<bool, String> {
    Ok(cpu_nodes(root)?
        .iter()
        .any(|cpu| cpu.join(DEVICE_TREE_PROPERTY).exists()))
}

/// The `cpus/cpu@*` nodes under `root`.
fn cpu_nodes(root: &Path) -> Result<Vec<PathBuf>, String> {
    let cpus: PathBuf = root.join("cpus");
    let entries = std::fs::read_dir(&cpus)
        .map_err(|err| format!("no device tree CPU nodes at {}: {err}", cpus.display()))?;
    Ok(entries
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().starts_with("cpu@"))
        .map(|entry| entry.path())
        .collect())
}

/// Whether there are CPU nodes under `root` and each lists Zkne and Zknd
/// (or Zkn or Zk, which include them) in `riscv,isa-extensions` or
/// `riscv,isa` (the engine runs on whichever core the scheduler picks).
fn cpus_with_zkne(root: &Path) -> Result<bool, String> {
    let cpus = cpu_nodes(root)?;
    Ok(!cpus.is_empty()
        && cpus.iter().all(|cpu| {
            let read = |name: &str| std::fs::read(cpu.join(name)).unwrap_or_default();
            isa_has_zkne(&read("riscv,isa-extensions")) || isa_has_zkne(&read("riscv,isa"))
        }))
}

/// Whether a device tree ISA property (`rv32imac_zkne_zknd`, or the
/// NUL-separated `riscv,isa-extensions` list) names Zkne and Zknd.
fn isa_has_zkne(property: &[u8]) -> bool {
    let text = String::from_utf8_lossy(property).to_ascii_lowercase();
    let names: Vec<&str> = text
        .split(['\0', '_'])
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .collect();
    let has = |wanted: &str| names.contains(&wanted);
    has("zk") || has("zkn") || (has("zkne") && has("zknd"))
}

/// What the kernel's `riscv_hwprobe` says of Zkne and Zknd on every CPU
/// (`None`: no answer, or not riscv32 Linux).
fn hwprobe_zkne() -> Option<bool> {
    #[cfg(all(target_arch = "riscv32", target_os = "linux"))]
    {
        aesd_vexriscv::hwprobe::zkne_and_zknd()
    }
    #[cfg(not(all(target_arch = "riscv32", target_os = "linux")))]
    {
        None
    }
}

/// Runs the known-answer self-test through the real instructions under a
/// SIGILL guard.
fn probe_instruction(set: InsnSet) -> Result<(), String> {
    #[cfg(all(target_arch = "riscv32", target_os = "linux"))]
    {
        use aesd_vexriscv::hardware::{Hardware, Zkne};
        use aesd_vexriscv::sigill::{Probe, probe};
        let found = match set {
            InsnSet::VexRiscv => probe(aesd_vexriscv::self_test::<Hardware>),
            InsnSet::Zkne => probe(aesd_vexriscv::self_test::<Zkne>),
        };
        match found {
            Probe::Works => Ok(()),
            Probe::Trapped => Err("the CPU raised an illegal-instruction trap".into()),
            Probe::WrongAnswer => Err("the instruction gave wrong known answers".into()),
            Probe::NoHandler => Err("cannot install the SIGILL guard for the self-test".into()),
        }
    }
    #[cfg(not(all(target_arch = "riscv32", target_os = "linux")))]
    {
        Err(format!(
            "aesd runs {} only on riscv32 CPUs, this is {}",
            insn_set_name(set),
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

    /// A device tree whose CPU node has `riscv,isa` = `isa`.
    fn device_tree_with_isa(isa: &str, name: &str) -> DeviceTree {
        let root = std::env::temp_dir().join(format!(
            "aesd-dt-isa-{name}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let cpu = root.join("cpus/cpu@0");
        std::fs::create_dir_all(&cpu).expect("mkdir");
        std::fs::write(cpu.join("riscv,isa"), format!("{isa}\0")).expect("isa");
        DeviceTree(root)
    }

    #[test]
    fn auto_needs_both_the_device_tree_and_the_self_test() {
        let works = |_| Ok(());
        let traps = |_| Err("trap".to_owned());
        let marked = device_tree(true);
        let plain = device_tree(false);
        let chosen = decide(AesBackend::Auto, &marked, None, works).expect("auto never fails");
        assert_eq!(chosen.engine, Engine::VexRiscv);
        let chosen = decide(AesBackend::Auto, &marked, None, traps).expect("auto never fails");
        assert_eq!(chosen.engine, Engine::software());
        assert!(
            chosen.reason.contains("self-test failed (trap)"),
            "{}",
            chosen.reason
        );
        let chosen = decide(AesBackend::Auto, &plain, None, works).expect("auto never fails");
        assert_eq!(chosen.engine, Engine::software());
        assert!(chosen.reason.contains("no CPU"), "{}", chosen.reason);
        let missing = plain.join("nothing-here");
        let chosen = decide(AesBackend::Auto, &missing, None, works).expect("auto never fails");
        assert_eq!(chosen.engine, Engine::software());
        assert!(
            chosen.reason.contains("no device tree"),
            "{}",
            chosen.reason
        );
    }

    #[test]
    fn auto_picks_zkne_from_the_isa_or_hwprobe_after_the_self_test() {
        let works = |_| Ok(());
        let only_vexriscv_traps = |set| match set {
            InsnSet::VexRiscv => Err("trap".to_owned()),
            InsnSet::Zkne => Ok(()),
        };
        let traps = |_| Err("trap".to_owned());
        for isa in ["rv32imac_zkne_zknd", "rv32imac_zicsr_zkn", "rv64imafdc_zk"] {
            let tree = device_tree_with_isa(isa, isa);
            let chosen = decide(AesBackend::Auto, &tree, None, works).expect("auto");
            assert_eq!(chosen.engine, Engine::Zkne, "{isa}");
            let chosen = decide(AesBackend::Auto, &tree, None, traps).expect("auto");
            assert_eq!(chosen.engine, Engine::software(), "{isa}");
            assert!(
                chosen.reason.contains("their self-test failed (trap)"),
                "{}",
                chosen.reason
            );
        }
        // Zkne without Zknd is not enough (aesd decrypts too).
        let half = device_tree_with_isa("rv32imac_zkne", "half");
        let chosen = decide(AesBackend::Auto, &half, None, works).expect("auto");
        assert_eq!(chosen.engine, Engine::software());
        assert!(
            chosen.reason.contains("no Zkne and Zknd"),
            "{}",
            chosen.reason
        );
        // The kernel's word is enough without the ISA string.
        let chosen = decide(AesBackend::Auto, &half, Some(true), works).expect("auto");
        assert_eq!(chosen.engine, Engine::Zkne);
        assert!(chosen.reason.contains("riscv_hwprobe"), "{}", chosen.reason);
        // A marked VexRiscv whose instruction traps, on a Zkne CPU.
        let marked = device_tree(true);
        let chosen =
            decide(AesBackend::Auto, &marked, Some(true), only_vexriscv_traps).expect("auto");
        assert_eq!(chosen.engine, Engine::Zkne);
    }

    #[test]
    fn forced_instructions_fail_clearly_and_software_never_probes() {
        for (backend, set) in [
            (AesBackend::VexRiscv, InsnSet::VexRiscv),
            (AesBackend::Zkne, InsnSet::Zkne),
        ] {
            let err = decide(backend, Path::new("/nonexistent"), None, |asked| {
                assert_eq!(asked, set, "the probe runs the forced instructions");
                Err("the CPU raised an illegal-instruction trap".into())
            })
            .expect_err("refused");
            let text = err.to_string();
            assert!(text.contains("illegal-instruction"), "{text}");
            assert!(
                text.starts_with(&format!("--aes-backend {backend}: ")),
                "{text}"
            );
            let chosen = decide(backend, Path::new("/nonexistent"), None, |_| Ok(()))
                .expect("the self-test passed");
            assert_eq!(chosen.engine, engine_of(set));
        }
        let chosen = decide(
            AesBackend::NoBoardInstruction,
            Path::new("/nonexistent"),
            Some(true),
            |_| panic!("software must not run the instruction"),
        )
        .expect("software");
        assert_eq!(chosen.engine, Engine::software());
    }

    #[test]
    fn the_setting_parses_its_four_values_only() {
        for backend in [
            AesBackend::Auto,
            AesBackend::NoBoardInstruction,
            AesBackend::VexRiscv,
            AesBackend::Zkne,
        ] {
            assert_eq!(backend.name().parse::<AesBackend>(), Ok(backend));
        }
        assert!("aesni".parse::<AesBackend>().is_err());
    }
}
