//! Find 2.0 (`miopen_find2.h`): problems, find options, solutions, run, save and load, over
//! `conflux::find2`.

use crate::activation::MiopenActivation;
use crate::conv::MiopenConv;
use crate::guard::{create, destroy, dev, enum_arg, guard, obj, obj_mut, slice, write_opt, CStatus};
use crate::handle::{handle, MiopenHandle};
use crate::tensor::{desc, MiopenTensor};
use conflux::bail;
use conflux::conv::Workspace;
use conflux::find2::{self, arg, FindOptions, Operator, Problem, ProblemDirection, RunTensors, Solution};
use conflux::softmax::{SoftmaxAlgorithm, SoftmaxMode};
use conflux::{BnMode, Error, Status};
use std::ffi::{c_char, c_void};

pub type MiopenProblem = *mut Problem;
pub type MiopenFindOptions = *mut FindOptions;
pub type MiopenSolution = *mut Solution;

/// `miopenTensorArgument_t`.
#[repr(C)]
pub struct TensorArgument {
    pub id: u32,
    /// Optional: a descriptor that must equal the problem's.
    pub descriptor: *const MiopenTensor,
    pub buffer: *mut c_void,
}

unsafe fn new_problem(out: *mut MiopenProblem, op: Operator, direction: i32) -> conflux::Result<()> {
    let direction = ProblemDirection::from_i32(direction)?;
    create(out, "problem", || Problem::new(op, direction))
}

#[no_mangle]
pub unsafe extern "C" fn miopenCreateConvProblem(problem: *mut MiopenProblem, conv: MiopenConv, direction: i32) -> CStatus {
    guard("miopenCreateConvProblem", || new_problem(problem, Operator::Conv(obj(conv, "operatorDesc")?.clone()), direction))
}

#[no_mangle]
pub unsafe extern "C" fn miopenCreateActivationProblem(problem: *mut MiopenProblem, act: MiopenActivation, direction: i32) -> CStatus {
    guard("miopenCreateActivationProblem", || new_problem(problem, Operator::Activation(*obj(act, "operatorDesc")?), direction))
}

#[no_mangle]
pub unsafe extern "C" fn miopenCreateBiasProblem(problem: *mut MiopenProblem, direction: i32) -> CStatus {
    guard("miopenCreateBiasProblem", || new_problem(problem, Operator::Bias, direction))
}

#[no_mangle]
pub unsafe extern "C" fn miopenCreateBatchnormProblem(problem: *mut MiopenProblem, mode: i32, running: bool, direction: i32) -> CStatus {
    guard("miopenCreateBatchnormProblem", || new_problem(problem, Operator::BatchNorm { mode: enum_arg::<BnMode>(mode)?, running }, direction))
}

#[no_mangle]
pub unsafe extern "C" fn miopenDestroyProblem(problem: MiopenProblem) -> CStatus {
    guard("miopenDestroyProblem", || {
        destroy(problem);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenSetProblemTensorDescriptor(problem: MiopenProblem, id: u32, descriptor: MiopenTensor) -> CStatus {
    guard("miopenSetProblemTensorDescriptor", || obj_mut(problem, "problem")?.set_tensor(id, desc(descriptor, "descriptor")?.clone()))
}

/// `problem1` becomes the fused problem (its steps, then `problem2`'s); `problem2` stays valid.
#[no_mangle]
pub unsafe extern "C" fn miopenFuseProblems(problem1: MiopenProblem, problem2: MiopenProblem) -> CStatus {
    guard("miopenFuseProblems", || {
        if std::ptr::eq(problem1, problem2) {
            bail!(BadParm, "miopenFuseProblems: a problem cannot be fused with itself");
        }
        let second = obj(problem2, "problem2")?.clone();
        obj_mut(problem1, "problem1")?.fuse(&second);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenCreateFindOptions(options: *mut MiopenFindOptions) -> CStatus {
    guard("miopenCreateFindOptions", || create(options, "options", || Ok(FindOptions::default())))
}

#[no_mangle]
pub unsafe extern "C" fn miopenDestroyFindOptions(options: MiopenFindOptions) -> CStatus {
    guard("miopenDestroyFindOptions", || {
        destroy(options);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenSetFindOptionTuning(options: MiopenFindOptions, value: i32) -> CStatus {
    guard("miopenSetFindOptionTuning", || {
        obj_mut(options, "options")?.tuning = value != 0;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenSetFindOptionResultsOrder(options: MiopenFindOptions, value: i32) -> CStatus {
    guard("miopenSetFindOptionResultsOrder", || {
        let o = obj_mut(options, "options")?;
        o.order_by_workspace = match value {
            0 => false,
            1 => true,
            v => bail!(BadParm, "results order {v} is not defined"),
        };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenSetFindOptionWorkspaceLimit(options: MiopenFindOptions, value: usize) -> CStatus {
    guard("miopenSetFindOptionWorkspaceLimit", || {
        obj_mut(options, "options")?.workspace_limit = value;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenSetFindOptionPreallocatedWorkspace(options: MiopenFindOptions, buffer: *mut c_void, size: usize) -> CStatus {
    guard("miopenSetFindOptionPreallocatedWorkspace", || {
        if buffer.is_null() && size > 0 {
            bail!(BadParm, "preallocated workspace: buffer is NULL but {size} bytes are given");
        }
        obj_mut(options, "options")?.workspace = Some((dev(buffer), size));
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenSetFindOptionPreallocatedTensor(options: MiopenFindOptions, id: u32, buffer: *mut c_void) -> CStatus {
    guard("miopenSetFindOptionPreallocatedTensor", || {
        if buffer.is_null() {
            bail!(BadParm, "preallocated tensor {id}: buffer is NULL");
        }
        obj_mut(options, "options")?.tensors.insert(id, dev(buffer));
        Ok(())
    })
}

/// Accepted; a saved solution never embeds kernels (see miopen_find2.h).
#[no_mangle]
pub unsafe extern "C" fn miopenSetFindOptionAttachBinaries(options: MiopenFindOptions, _attach: u32) -> CStatus {
    guard("miopenSetFindOptionAttachBinaries", || obj(options, "options").map(|_| ()))
}

#[no_mangle]
pub unsafe extern "C" fn miopenFindSolutions(
    handle_: MiopenHandle,
    problem: MiopenProblem,
    options: MiopenFindOptions,
    solutions: *mut MiopenSolution,
    num_solutions: *mut usize,
    max_solutions: usize,
) -> CStatus {
    guard("miopenFindSolutions", || {
        let h = handle(handle_)?;
        let p = obj(problem, "problem")?;
        if solutions.is_null() {
            bail!(BadParm, "miopenFindSolutions: solutions is NULL");
        }
        let defaults = FindOptions::default();
        let o = if options.is_null() { &defaults } else { obj(options, "options")? };
        let found = find2::find_solutions(h, p, o, max_solutions)?;
        write_opt(num_solutions, found.len());
        for (i, s) in found.into_iter().enumerate() {
            *solutions.add(i) = Box::into_raw(Box::new(s));
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenRunSolution(
    handle_: MiopenHandle,
    solution: MiopenSolution,
    n_inputs: usize,
    tensors: *const TensorArgument,
    workspace: *mut c_void,
    workspace_size: usize,
) -> CStatus {
    guard("miopenRunSolution", || {
        let h = handle(handle_)?;
        let s = obj(solution, "solution")?;
        let mut args = RunTensors::default();
        for t in slice(tensors, n_inputs, "tensors", Status::BadParm)? {
            if t.id & arg::SCALAR != 0 {
                // Scalars arrive as a pointer to a host double (MIOpen's convention).
                if t.buffer.is_null() {
                    bail!(BadParm, "miopenRunSolution: scalar argument {:#x} points to NULL", t.id);
                }
                args.scalars.insert(t.id, *(t.buffer as *const f64));
                continue;
            }
            let d = match t.descriptor.as_ref() {
                Some(d) => Some(desc(*d, "tensor argument descriptor")?.clone()),
                None => None,
            };
            args.tensors.insert(t.id, (d, dev(t.buffer)));
        }
        if workspace.is_null() && workspace_size > 0 {
            bail!(BadParm, "miopenRunSolution: workspace is NULL but {workspace_size} bytes are given");
        }
        find2::run(h, s, &args, Workspace { ptr: dev(workspace), bytes: workspace_size })
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenDestroySolution(solution: MiopenSolution) -> CStatus {
    guard("miopenDestroySolution", || {
        destroy(solution);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenGetSolutionSize(solution: MiopenSolution, size: *mut usize) -> CStatus {
    guard("miopenGetSolutionSize", || {
        let bytes = find2::save(obj(solution, "solution")?).len();
        *obj_mut(size, "size")? = bytes;
        Ok(())
    })
}

/// `data` must hold miopenGetSolutionSize bytes.
#[no_mangle]
pub unsafe extern "C" fn miopenSaveSolution(solution: MiopenSolution, data: *mut c_char) -> CStatus {
    guard("miopenSaveSolution", || {
        let blob = find2::save(obj(solution, "solution")?);
        if data.is_null() {
            bail!(BadParm, "miopenSaveSolution: data is NULL");
        }
        std::ptr::copy_nonoverlapping(blob.as_ptr(), data as *mut u8, blob.len());
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenLoadSolution(solution: *mut MiopenSolution, data: *const c_char, size: usize) -> CStatus {
    guard("miopenLoadSolution", || {
        let bytes = slice(data as *const u8, size, "data", Status::BadParm)?;
        create(solution, "solution", || find2::load(bytes))
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenGetSolutionWorkspaceSize(solution: MiopenSolution, workspace_size: *mut usize) -> CStatus {
    guard("miopenGetSolutionWorkspaceSize", || {
        *obj_mut(workspace_size, "workspaceSize")? = obj(solution, "solution")?.workspace_bytes;
        Ok(())
    })
}

/// Milliseconds Find measured; -1 for a problem only one solver computes (not timed).
#[no_mangle]
pub unsafe extern "C" fn miopenGetSolutionTime(solution: MiopenSolution, time: *mut f32) -> CStatus {
    guard("miopenGetSolutionTime", || {
        *obj_mut(time, "time")? = obj(solution, "solution")?.time_ms;
        Ok(())
    })
}

/// The conflux solution id (the same ids immediate mode uses).
#[no_mangle]
pub unsafe extern "C" fn miopenGetSolutionSolverId(solution: MiopenSolution, solver_id: *mut u64) -> CStatus {
    guard("miopenGetSolutionSolverId", || {
        *obj_mut(solver_id, "solverId")? = obj(solution, "solution")?.solution_id;
        Ok(())
    })
}

/// The algorithm a solver id belongs to; InvalidValue for an id no conflux solver has.
#[no_mangle]
pub unsafe extern "C" fn miopenGetSolverIdConvAlgorithm(solver_id: u64, result: *mut i32) -> CStatus {
    guard("miopenGetSolverIdConvAlgorithm", || {
        let s = conflux::solver::find_by_id(solver_id).ok_or_else(|| Error::new(Status::InvalidValue, format!("solver id {solver_id} is not a conflux solver")))?;
        *obj_mut(result, "result")? = s.algorithm() as i32;
        Ok(())
    })
}

/// `miopenSoftmaxDescriptor_t`: what a softmax problem computes.
pub struct SoftmaxDescObj {
    alpha: f32,
    beta: f32,
    algo: SoftmaxAlgorithm,
    mode: SoftmaxMode,
}

/// A fresh descriptor: y = softmax(x) (α 1, β 0), accurate, over channels.
#[no_mangle]
pub unsafe extern "C" fn miopenCreateSoftmaxDescriptor(out: *mut *mut SoftmaxDescObj) -> CStatus {
    guard("miopenCreateSoftmaxDescriptor", || {
        create(out, "softmaxDesc", || Ok(SoftmaxDescObj { alpha: 1.0, beta: 0.0, algo: SoftmaxAlgorithm::Accurate, mode: SoftmaxMode::Channel }))
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenSetSoftmaxDescriptor(d: *mut SoftmaxDescObj, alpha: f32, beta: f32, algorithm: i32, mode: i32) -> CStatus {
    guard("miopenSetSoftmaxDescriptor", || {
        let (algo, mode) = (enum_arg::<SoftmaxAlgorithm>(algorithm)?, enum_arg::<SoftmaxMode>(mode)?);
        *obj_mut(d, "softmaxDesc")? = SoftmaxDescObj { alpha, beta, algo, mode };
        Ok(())
    })
}

/// NULL outputs are skipped.
#[no_mangle]
pub unsafe extern "C" fn miopenGetSoftmaxDescriptor(d: *const SoftmaxDescObj, alpha: *mut f32, beta: *mut f32, algorithm: *mut i32, mode: *mut i32) -> CStatus {
    guard("miopenGetSoftmaxDescriptor", || {
        let s = obj(d, "softmaxDesc")?;
        write_opt(alpha, s.alpha);
        write_opt(beta, s.beta);
        write_opt(algorithm, s.algo as i32);
        write_opt(mode, s.mode as i32);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenCreateSoftmaxProblem(problem: *mut MiopenProblem, d: *const SoftmaxDescObj, direction: i32) -> CStatus {
    guard("miopenCreateSoftmaxProblem", || {
        let s = obj(d, "operatorDesc")?;
        let op = Operator::Softmax { algo: s.algo, mode: s.mode, alpha: s.alpha as f64, beta: s.beta as f64 };
        new_problem(problem, op, direction)
    })
}
