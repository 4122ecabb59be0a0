//! Saved solutions (`miopenSaveSolution` / `miopenLoadSolution`): a versioned text blob with
//! the problem, the solver and its tuned configuration, so a solution reloads in another
//! process and runs without searching. Compiled kernels are not embedded: the GPU backend's
//! on-disk kernel cache serves them, or they are compiled once on first run.

use super::problem::{Operator, Problem, ProblemDirection, Step};
use super::solution::Solution;
use crate::activation::ActivationDesc;
use crate::conv::ConvDesc;
use crate::error::{Error, Result};
use crate::search::FindEntry;
use crate::softmax::{SoftmaxAlgorithm, SoftmaxMode};
use crate::solver::find_by_name;
use crate::tensor::TensorDesc;
use crate::types::{ActivationMode, BnMode, ConvAttrib, ConvMode, DataType, FindMode};
use crate::{bail, ensure};
use std::collections::BTreeMap;
use std::fmt::Write;

const MAGIC: &str = "conflux-solution 1";

fn list<T: std::fmt::Display>(v: &[T]) -> String {
    v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(",")
}

fn write_step(out: &mut String, step: &Step) {
    let dir = step.direction as i32;
    match &step.op {
        Operator::Conv(c) => {
            let attrs: Vec<String> = ConvAttrib::ALL.iter().map(|a| format!("{}={}", *a as i32, c.attribute(*a))).collect();
            let _ = writeln!(
                out,
                "step conv {dir} mode={} pads={} strides={} dilations={} out_pads={} groups={} find_mode={} attrs={}",
                c.mode() as i32,
                list(c.pads()),
                list(c.strides()),
                list(c.dilations()),
                list(c.out_pads()),
                c.groups(),
                c.find_mode() as i32,
                list(&attrs)
            );
        }
        Operator::Activation(a) => {
            let _ = writeln!(out, "step activation {dir} mode={} alpha={:?} beta={:?} gamma={:?}", a.mode as i32, a.alpha, a.beta, a.gamma);
        }
        Operator::Bias => {
            let _ = writeln!(out, "step bias {dir}");
        }
        Operator::BatchNorm { mode, running } => {
            let _ = writeln!(out, "step batchnorm {dir} mode={} running={}", *mode as i32, *running as i32);
        }
        Operator::Softmax { algo, mode, alpha, beta } => {
            let _ = writeln!(out, "step softmax {dir} algo={} mode={} alpha={alpha:?} beta={beta:?}", *algo as i32, *mode as i32);
        }
    }
    for (id, t) in &step.tensors {
        let _ = writeln!(out, "tensor {id} dtype={} lens={} strides={}", t.dtype() as i32, list(t.lens()), list(t.strides()));
    }
}

/// The blob of `s` (`miopenSaveSolution`; `miopenGetSolutionSize` is its length).
pub fn save(s: &Solution) -> Vec<u8> {
    let mut out = format!("{MAGIC}\nlibrary {}\ndevice {}\n", env!("CARGO_PKG_VERSION"), s.device);
    let _ = writeln!(out, "solver {} {} {} {:?} {}", s.solver, s.solution_id, s.algorithm as i32, s.time_ms, s.workspace_bytes);
    let _ = writeln!(out, "config {}", s.config.as_deref().unwrap_or("-"));
    for step in &s.problem.steps {
        write_step(&mut out, step);
    }
    out.into_bytes()
}

/// `key=value` fields of one line.
struct Fields<'a>(BTreeMap<&'a str, &'a str>);

impl<'a> Fields<'a> {
    fn parse(words: &[&'a str]) -> Fields<'a> {
        Fields(words.iter().filter_map(|w| w.split_once('=')).collect())
    }
    fn raw(&self, k: &str) -> Result<&'a str> {
        self.0.get(k).copied().ok_or_else(|| Error::bad_parm(format!("load solution: field {k} is missing")))
    }
    fn num<T: std::str::FromStr>(&self, k: &str) -> Result<T> {
        let v = self.raw(k)?;
        v.parse().map_err(|_| Error::bad_parm(format!("load solution: field {k} = {v:?} is not a number")))
    }
    fn nums<T: std::str::FromStr>(&self, k: &str) -> Result<Vec<T>> {
        let v = self.raw(k)?;
        if v.is_empty() {
            return Ok(Vec::new());
        }
        v.split(',').map(|x| x.parse().map_err(|_| Error::bad_parm(format!("load solution: field {k} = {v:?} is not a list of numbers")))).collect()
    }
}

fn read_conv(f: &Fields) -> Result<ConvDesc> {
    let mode = ConvMode::try_from(f.num::<i32>("mode")?)?;
    let mut c = ConvDesc::new(mode, &f.nums::<i64>("pads")?, &f.nums::<i64>("strides")?, &f.nums::<i64>("dilations")?)?;
    c.set_groups(f.num("groups")?)?;
    c.set_out_pads(&f.nums::<i64>("out_pads")?)?;
    c.set_find_mode(FindMode::try_from(f.num::<i32>("find_mode")?)?);
    for a in f.raw("attrs")?.split(',').filter(|a| !a.is_empty()) {
        let (k, v) = a.split_once('=').ok_or_else(|| Error::bad_parm(format!("load solution: attribute {a:?} is not id=value")))?;
        let parse = |s: &str| s.parse::<i64>().map_err(|_| Error::bad_parm(format!("load solution: attribute {a:?} is not numeric")));
        c.set_attribute(ConvAttrib::try_from(parse(k)? as i32)?, parse(v)?)?;
    }
    Ok(c)
}

fn read_step(words: &[&str]) -> Result<Step> {
    ensure!(words.len() >= 2, BadParm, "load solution: a step line lacks its operator or direction");
    let direction = ProblemDirection::from_i32(words[1].parse().map_err(|_| Error::bad_parm("load solution: the step direction is not a number"))?)?;
    let f = Fields::parse(&words[2..]);
    let op = match words[0] {
        "conv" => Operator::Conv(read_conv(&f)?),
        "activation" => Operator::Activation(ActivationDesc::new(ActivationMode::try_from(f.num::<i32>("mode")?)?, f.num("alpha")?, f.num("beta")?, f.num("gamma")?)),
        "bias" => Operator::Bias,
        "batchnorm" => Operator::BatchNorm { mode: BnMode::try_from(f.num::<i32>("mode")?)?, running: f.num::<i32>("running")? != 0 },
        "softmax" => Operator::Softmax {
            algo: SoftmaxAlgorithm::try_from(f.num::<i32>("algo")?)?,
            mode: SoftmaxMode::try_from(f.num::<i32>("mode")?)?,
            alpha: f.num("alpha")?,
            beta: f.num("beta")?,
        },
        other => bail!(BadParm, "load solution: unknown operator {other:?}"),
    };
    Ok(Step { op, direction, tensors: BTreeMap::new() })
}

/// `miopenLoadSolution`: BadParm naming the cause for a blob of another library version, a
/// solver this library does not have, or a damaged blob. The device is checked at run.
pub fn load(data: &[u8]) -> Result<Solution> {
    let text = std::str::from_utf8(data).map_err(|_| Error::bad_parm("load solution: the blob is not a conflux solution (not text)"))?;
    let mut lines = text.lines();
    ensure!(lines.next() == Some(MAGIC), BadParm, "load solution: the blob is not a conflux solution of this format");
    let mut device = None;
    let mut solver = None;
    let mut config = None;
    let mut steps: Vec<Step> = Vec::new();
    for line in lines {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["library", v] => ensure!(
                *v == env!("CARGO_PKG_VERSION"),
                BadParm,
                "load solution: saved by conflux {v}, this is conflux {}; find the solution again",
                env!("CARGO_PKG_VERSION")
            ),
            ["device", rest @ ..] => device = Some(rest.join(" ")),
            ["solver", name, id, algo, time, ws] => solver = Some((name.to_string(), *id, *algo, *time, *ws)),
            ["config", rest @ ..] => config = (rest != ["-"]).then(|| rest.join(" ")),
            ["step", rest @ ..] => steps.push(read_step(rest)?),
            ["tensor", id, rest @ ..] => {
                let step = steps.last_mut().ok_or_else(|| Error::bad_parm("load solution: a tensor before any step"))?;
                let f = Fields::parse(rest);
                let desc = TensorDesc::with_strides(DataType::try_from(f.num::<i32>("dtype")?)?, &f.nums("lens")?, &f.nums("strides")?)?;
                step.tensors.insert(id.parse().map_err(|_| Error::bad_parm("load solution: a tensor id is not a number"))?, desc);
            }
            [] => {}
            _ => bail!(BadParm, "load solution: unexpected line {line:?}"),
        }
    }
    let device = device.ok_or_else(|| Error::bad_parm("load solution: the device line is missing"))?;
    let (name, id, algo, time, ws) = solver.ok_or_else(|| Error::bad_parm("load solution: the solver line is missing"))?;
    ensure!(!steps.is_empty(), BadParm, "load solution: the blob holds no problem");
    let s = find_by_name(&name).ok_or_else(|| Error::bad_parm(format!("load solution: solver {name} does not exist in this build")))?;
    let bad = |what: &str| Error::bad_parm(format!("load solution: the solver's {what} is damaged"));
    ensure!(id.parse::<u64>().ok() == Some(s.solution_id()), BadParm, "load solution: solver {name} has id {}, the blob says {id}", s.solution_id());
    let algorithm = crate::types::ConvAlgorithm::try_from(algo.parse::<i32>().map_err(|_| bad("algorithm"))?)?;
    let entry = FindEntry {
        solver: s.name(),
        solution_id: s.solution_id(),
        algorithm,
        time_ms: time.parse().map_err(|_| bad("time"))?,
        workspace_bytes: ws.parse().map_err(|_| bad("workspace"))?,
    };
    // A blob whose problem no longer lowers is refused now, not at run.
    Solution::new(Problem { steps }, &entry, config, device)
}
