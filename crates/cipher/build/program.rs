//! The kernel as straight-line regions of instructions on virtual
//! registers ([`Val`]), recorded by running code on `Val`s.
//!
//! A [`Region`] is being recorded while [`Region::record`] runs its
//! closure: the operators on `Val` (`^`, `&`, `<<`, `>>` by a constant)
//! and the functions below append instructions to it. That is how the
//! crate's own circuits (`src/fixslice/circuit.rs`, generic over the plane
//! type) become instructions. A region's inputs and outputs are tied to
//! physical registers; everything else is allocated by `schedule.rs`.

use std::cell::RefCell;
use std::ops::{BitAnd, BitXor, Shl, Shr};

/// A virtual register: one value, written once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Val(pub usize);

/// What an instruction does.
#[derive(Clone, Debug)]
pub enum Kind {
    /// `name rd, rs1, rs2` (xor, and, or, srl, sll).
    Reg(&'static str),
    /// `name rd, rs1, immediate` (srli, slli, addi).
    Imm(&'static str, i32),
    /// `lw rd, offset(base)`; the base is the only source.
    Load(i32),
    /// `sw value, offset(base)`; sources: value, base.
    Store(i32),
    /// `name sources..., label`: ends the region (after everything else).
    Branch(&'static str, &'static str),
}

/// One instruction.
#[derive(Clone, Debug)]
pub struct Op {
    /// What it does.
    pub kind: Kind,
    /// The value it writes, if any.
    pub dst: Option<Val>,
    /// The values it reads.
    pub srcs: Vec<Val>,
    /// Instructions (indices in the region) that must come before it
    /// although it does not read their values.
    pub after: Vec<usize>,
}

impl Op {
    /// Cycles until its result can be used without a stall on VexRiscv:
    /// loads write back from the last stage, shifts (the full barrel
    /// shifter without early injection) from the memory stage.
    pub fn latency(&self) -> usize {
        match self.kind {
            Kind::Load(_) => 3,
            Kind::Imm("srli" | "slli", _) | Kind::Reg("srl" | "sll") => 2,
            _ => 1,
        }
    }
}

/// A piece of straight-line code with its inputs and outputs in fixed
/// registers.
#[derive(Debug)]
pub struct Region {
    /// For error messages.
    pub name: &'static str,
    /// The instructions, in the order they were recorded.
    pub ops: Vec<Op>,
    /// Values created so far.
    values: usize,
    /// Values live on entry, and their registers.
    pub inputs: Vec<(Val, &'static str)>,
    /// Values that must be in these registers at the end.
    pub outputs: Vec<(Val, &'static str)>,
}

thread_local! {
    /// The region being recorded.
    static CURRENT: RefCell<Option<Region>> = const { RefCell::new(None) };
}

impl Region {
    /// Records a region: `body` runs with it as the current region.
    pub fn record(name: &'static str, body: impl FnOnce()) -> Region {
        CURRENT.with(|current| {
            let previous = current.borrow_mut().replace(Region {
                name,
                ops: Vec::new(),
                values: 0,
                inputs: Vec::new(),
                outputs: Vec::new(),
            });
            assert!(previous.is_none(), "regions are recorded one at a time");
        });
        body();
        CURRENT.with(|current| {
            current
                .borrow_mut()
                .take()
                .expect("the region being recorded")
        })
    }

    /// The index of the instruction that writes `value`.
    pub fn producer(&self, value: Val) -> Option<usize> {
        self.ops.iter().position(|op| op.dst == Some(value))
    }
}

/// Runs `f` on the region being recorded.
fn with<R>(f: impl FnOnce(&mut Region) -> R) -> R {
    CURRENT.with(|current| {
        f(current
            .borrow_mut()
            .as_mut()
            .expect("an instruction outside Region::record"))
    })
}

/// Appends an instruction; returns the value it writes.
fn push(kind: Kind, srcs: Vec<Val>, writes: bool) -> Val {
    with(|region| {
        let dst = writes.then(|| {
            region.values += 1;
            Val(region.values)
        });
        region.ops.push(Op {
            kind,
            dst,
            srcs,
            after: Vec::new(),
        });
        dst.unwrap_or(Val(0))
    })
}

/// A value live on entry, in `register`.
pub fn input(register: &'static str) -> Val {
    with(|region| {
        region.values += 1;
        let value = Val(region.values);
        region.inputs.push((value, register));
        value
    })
}

/// `value` must be in `register` at the end of the region.
pub fn output(value: Val, register: &'static str) {
    with(|region| region.outputs.push((value, register)));
}

/// An input that is also an output: a register the region only reads.
pub fn kept(register: &'static str) -> Val {
    let value = input(register);
    output(value, register);
    value
}

/// `lw`.
pub fn load(base: Val, offset: i32) -> Val {
    push(Kind::Load(offset), vec![base], true)
}

/// `sw`.
pub fn store(value: Val, base: Val, offset: i32) {
    push(Kind::Store(offset), vec![value, base], false);
}

/// `addi`.
pub fn add_immediate(a: Val, immediate: i32) -> Val {
    push(Kind::Imm("addi", immediate), vec![a], true)
}

/// `or`.
pub fn or(a: Val, b: Val) -> Val {
    push(Kind::Reg("or"), vec![a, b], true)
}

/// `srl` (by a register).
pub fn shift_right(a: Val, amount: Val) -> Val {
    push(Kind::Reg("srl"), vec![a, amount], true)
}

/// `sll` (by a register).
pub fn shift_left(a: Val, amount: Val) -> Val {
    push(Kind::Reg("sll"), vec![a, amount], true)
}

/// A rotation right by a constant: `srli`, `slli`, `or`.
pub fn rotate_right(x: Val, amount: u32) -> Val {
    let right = x >> amount;
    let left = x << (32 - amount);
    or(left, right)
}

/// `b<condition> sources, label`: the region's last instruction.
pub fn branch(condition: &'static str, sources: &[Val], label: &'static str) {
    push(Kind::Branch(condition, label), sources.to_vec(), false);
}

/// `new` takes the register of `old`: every other reader of `old`
/// recorded so far must come before the instruction that writes `new`.
pub fn replaces(new: Val, old: Val) {
    with(|region| {
        let producer = region.producer(new).expect("a written value");
        let readers: Vec<usize> = (0..region.ops.len())
            .filter(|&i| i != producer && region.ops[i].srcs.contains(&old))
            .collect();
        region.ops[producer].after.extend(readers);
    });
}

/// The instruction that writes `later` must come after those that write
/// `earlier`.
pub fn order(earlier: &[Val], later: Val) {
    with(|region| {
        let before: Vec<usize> = earlier
            .iter()
            .map(|&value| region.producer(value).expect("a written value"))
            .collect();
        let producer = region.producer(later).expect("a written value");
        region.ops[producer].after.extend(before);
    });
}

impl BitXor for Val {
    type Output = Val;
    fn bitxor(self, other: Val) -> Val {
        push(Kind::Reg("xor"), vec![self, other], true)
    }
}

impl BitAnd for Val {
    type Output = Val;
    fn bitand(self, other: Val) -> Val {
        push(Kind::Reg("and"), vec![self, other], true)
    }
}

impl Shr<u32> for Val {
    type Output = Val;
    fn shr(self, amount: u32) -> Val {
        push(Kind::Imm("srli", amount as i32), vec![self], true)
    }
}

impl Shl<u32> for Val {
    type Output = Val;
    fn shl(self, amount: u32) -> Val {
        push(Kind::Imm("slli", amount as i32), vec![self], true)
    }
}
