//! From a recorded region to assembly: list scheduling for VexRiscv's
//! pipeline, then register allocation.
//!
//! VexRiscv (the `imac` configuration) issues one instruction per cycle
//! and stalls an instruction whose source is not ready: a load's result is
//! ready 3 cycles after it issues, a shift's 2 (the full barrel shifter
//! writes back from the memory stage), everything else's 1. The scheduler
//! orders a region so that no instruction waits (greedy list scheduling by
//! critical path, in a cycle-by-cycle model), while keeping the number of
//! live values under a limit; the allocator then gives every value a
//! register (interval colouring in that order, inputs and outputs in their
//! fixed registers). Limits are tried from loose to tight until the
//! allocation succeeds with the fewest stalls.

use std::collections::{BTreeMap, BTreeSet};

use crate::program::{Kind, Region, Val};

/// A region as assembly: its instructions, and the cycles it would stall
/// on VexRiscv (0 in every region of the kernel).
pub struct Compiled {
    /// One instruction per line, without indentation.
    pub lines: Vec<String>,
    /// Stall cycles in the cycle model.
    pub stalls: usize,
}

/// Schedules and allocates `region` with `registers` free for its values.
pub fn compile(region: &Region, registers: &[&'static str]) -> Compiled {
    let mut best: Option<Compiled> = None;
    let mut failure = String::new();
    for limit in (9..=registers.len() + 6).rev() {
        let order = schedule(region, limit);
        match allocate(region, &order, registers) {
            Ok(assignment) => {
                let stalls = stalls(region, &order);
                if best.as_ref().is_none_or(|best| stalls < best.stalls) {
                    best = Some(Compiled {
                        lines: emit(region, &order, &assignment),
                        stalls,
                    });
                }
                if stalls == 0 {
                    break;
                }
            }
            Err(why) => failure = why,
        }
    }
    best.unwrap_or_else(|| panic!("region {}: no allocation ({failure})", region.name))
}

/// The instructions each instruction must follow: the writers of its
/// sources, its `after` list, memory order (a store after every earlier
/// load and store, a load after every earlier store) and branches last,
/// in order.
fn predecessors(region: &Region) -> Vec<BTreeSet<usize>> {
    let ops = &region.ops;
    let mut preds: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); ops.len()];
    let mut writer: BTreeMap<Val, usize> = BTreeMap::new();
    let mut last_store: Option<usize> = None;
    let mut loads_since_store: Vec<usize> = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        for src in &op.srcs {
            if let Some(&w) = writer.get(src) {
                preds[i].insert(w);
            }
        }
        preds[i].extend(op.after.iter().copied());
        match op.kind {
            Kind::Store(_) => {
                preds[i].extend(last_store);
                preds[i].extend(loads_since_store.drain(..));
                last_store = Some(i);
            }
            Kind::Load(_) => {
                preds[i].extend(last_store);
                loads_since_store.push(i);
            }
            _ => {}
        }
        if let Some(dst) = op.dst {
            writer.insert(dst, i);
        }
    }
    let branches: Vec<usize> = (0..ops.len())
        .filter(|&i| matches!(ops[i].kind, Kind::Branch(..)))
        .collect();
    for &b in &branches {
        let others = (0..ops.len()).filter(|&i| !matches!(ops[i].kind, Kind::Branch(..)));
        preds[b].extend(others);
    }
    for pair in branches.windows(2) {
        preds[pair[1]].insert(pair[0]);
    }
    preds
}

/// A schedule: the instructions' indices in issue order. Each cycle it
/// issues, among the instructions whose sources are ready, the one with
/// the longest path to the end (loads count 2 more, to start early),
/// preferring those that free registers when more than `limit` values are
/// live (or nearly).
fn schedule(region: &Region, limit: usize) -> Vec<usize> {
    let ops = &region.ops;
    let n = ops.len();
    let preds = predecessors(region);
    let mut succs: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, p) in preds.iter().enumerate() {
        for &q in p {
            succs[q].push(i);
        }
    }
    let mut height = vec![0usize; n];
    for i in (0..n).rev() {
        let latency = ops[i].latency();
        height[i] = succs[i]
            .iter()
            .map(|&s| latency + height[s])
            .max()
            .unwrap_or(latency);
        if matches!(ops[i].kind, Kind::Load(_)) {
            height[i] += 2;
        }
    }
    let outputs: BTreeSet<Val> = region.outputs.iter().map(|&(v, _)| v).collect();
    let mut remaining: BTreeMap<Val, usize> = BTreeMap::new();
    for op in ops {
        for &src in &op.srcs {
            *remaining.entry(src).or_default() += 1;
        }
    }
    let mut live: BTreeSet<Val> = region
        .inputs
        .iter()
        .map(|&(v, _)| v)
        .filter(|v| remaining.get(v).is_some_and(|&uses| uses > 0) || outputs.contains(v))
        .collect();
    let mut issued: Vec<Option<usize>> = vec![None; n];
    let mut waiting: Vec<usize> = preds.iter().map(BTreeSet::len).collect();
    let mut ready: Vec<usize> = (0..n).filter(|&i| waiting[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    let mut cycle = 0;
    while order.len() < n {
        // (instruction, change in live values if issued)
        let mut candidates: Vec<(usize, isize)> = Vec::new();
        for &i in &ready {
            let available = preds[i]
                .iter()
                .map(|&p| issued[p].expect("predecessors issue first") + ops[p].latency())
                .max()
                .unwrap_or(0);
            if available <= cycle {
                let op = &ops[i];
                let distinct: BTreeSet<Val> = op.srcs.iter().copied().collect();
                let freed = distinct
                    .iter()
                    .filter(|src| {
                        let uses = op.srcs.iter().filter(|s| s == src).count();
                        remaining.get(src) == Some(&uses) && !outputs.contains(src)
                    })
                    .count();
                candidates.push((i, isize::from(op.dst.is_some()) - freed as isize));
            }
        }
        if candidates.is_empty() {
            cycle += 1;
            continue;
        }
        if live.len() >= limit && candidates.iter().any(|&(_, delta)| delta <= 0) {
            candidates.retain(|&(_, delta)| delta <= 0);
        }
        let tight = live.len() + 2 >= limit;
        candidates.sort_by_key(|&(i, delta)| {
            (
                if tight { delta } else { 0 },
                std::cmp::Reverse(height[i]),
                i,
            )
        });
        let i = candidates[0].0;
        ready.retain(|&r| r != i);
        issued[i] = Some(cycle);
        order.push(i);
        let op = &ops[i];
        for src in &op.srcs {
            let uses = remaining.get_mut(src).expect("counted above");
            *uses -= 1;
            if *uses == 0 && !outputs.contains(src) {
                live.remove(src);
            }
        }
        if let Some(dst) = op.dst {
            live.insert(dst);
        }
        for &s in &succs[i] {
            waiting[s] -= 1;
            if waiting[s] == 0 {
                ready.push(s);
            }
        }
        cycle += 1;
    }
    order
}

/// Registers for every value of `region`, scheduled as `order`: a value
/// occupies its register from the instruction that writes it (inputs:
/// from the start) to its last reader (outputs: to the end); inputs and
/// outputs get their fixed registers, the others the first of `registers`
/// free for their whole interval, in order of their start.
fn allocate(
    region: &Region,
    order: &[usize],
    registers: &[&'static str],
) -> Result<BTreeMap<Val, &'static str>, String> {
    // Positions: -1 before the first instruction, len after the last.
    let mut start: BTreeMap<Val, isize> = BTreeMap::new();
    let mut end: BTreeMap<Val, isize> = BTreeMap::new();
    for &(v, _) in &region.inputs {
        start.insert(v, -1);
    }
    for (position, &i) in order.iter().enumerate() {
        let op = &region.ops[i];
        for &src in &op.srcs {
            end.insert(src, position as isize);
        }
        if let Some(dst) = op.dst {
            start.insert(dst, position as isize);
        }
    }
    for &(v, _) in &region.outputs {
        end.insert(v, order.len() as isize);
    }
    let interval = |v: Val| (start[&v], end.get(&v).copied().unwrap_or(start[&v]));
    let mut busy: BTreeMap<&'static str, Vec<(isize, isize)>> = BTreeMap::new();
    let free =
        |busy: &BTreeMap<&'static str, Vec<(isize, isize)>>, reg: &str, (a, b): (isize, isize)| {
            busy.get(reg)
                .is_none_or(|taken| taken.iter().all(|&(c, d)| b <= c || d <= a))
        };
    let mut assignment: BTreeMap<Val, &'static str> = BTreeMap::new();
    for &(v, reg) in region.inputs.iter().chain(&region.outputs) {
        if let Some(&assigned) = assignment.get(&v) {
            if assigned != reg {
                return Err(format!("{v:?} is both in {assigned} and {reg}"));
            }
            continue;
        }
        if !free(&busy, reg, interval(v)) {
            return Err(format!("{reg} is taken when {v:?} needs it"));
        }
        busy.entry(reg).or_default().push(interval(v));
        assignment.insert(v, reg);
    }
    let mut values: Vec<Val> = start
        .keys()
        .copied()
        .filter(|v| !assignment.contains_key(v))
        .collect();
    values.sort_by_key(|&v| interval(v));
    for v in values {
        let span = interval(v);
        let reg = registers
            .iter()
            .find(|reg| free(&busy, reg, span))
            .ok_or_else(|| format!("no register free at {}", span.0))?;
        busy.entry(reg).or_default().push(span);
        assignment.insert(v, reg);
    }
    Ok(assignment)
}

/// The cycles `order` stalls in the model (the same as the scheduler's).
fn stalls(region: &Region, order: &[usize]) -> usize {
    let mut ready_at: BTreeMap<Val, usize> = BTreeMap::new();
    let (mut cycle, mut stalls) = (0, 0);
    for &i in order {
        let op = &region.ops[i];
        let wait = op
            .srcs
            .iter()
            .filter_map(|src| ready_at.get(src))
            .copied()
            .max()
            .unwrap_or(0);
        if wait > cycle {
            stalls += wait - cycle;
            cycle = wait;
        }
        if let Some(dst) = op.dst {
            ready_at.insert(dst, cycle + op.latency());
        }
        cycle += 1;
    }
    stalls
}

/// The instructions of `order` with their registers.
fn emit(region: &Region, order: &[usize], reg: &BTreeMap<Val, &'static str>) -> Vec<String> {
    order
        .iter()
        .map(|&i| {
            let op = &region.ops[i];
            let r = |n: usize| reg[&op.srcs[n]];
            let d = || reg[&op.dst.expect("an instruction that writes")];
            match op.kind {
                Kind::Reg(name) => format!("{name} {}, {}, {}", d(), r(0), r(1)),
                Kind::Imm(name, immediate) => format!("{name} {}, {}, {immediate}", d(), r(0)),
                Kind::Load(offset) => format!("lw {}, {offset}({})", d(), r(0)),
                Kind::Store(offset) => format!("sw {}, {offset}({})", r(0), r(1)),
                Kind::Branch(condition, label) => {
                    let sources: Vec<&str> = (0..op.srcs.len()).map(r).collect();
                    format!("{condition} {}, {label}", sources.join(", "))
                }
            }
        })
        .collect()
}
