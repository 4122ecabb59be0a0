//! State of one driver run: the handle, the output, the random data source and the
//! verification outcome (which decides the exit code).

use crate::args::Common;
use crate::report::Report;
use crate::Res;
use conflux::element::{decode, encode, round_to};
use conflux::reference::fill::SplitMix64;
use conflux::types::ConvAttrib;
use conflux::{Buffer, ConvDesc, ConvMode, DataType, Handle, TensorDesc};
use std::cell::{Cell, RefCell};

/// MIOpenDriver's default seed (`MIOPEN_DEBUG_DRIVER_PRNG_SEED` overrides it; 0 = random).
const DEFAULT_SEED: u64 = 12345678;

pub struct Session {
    pub handle: Handle,
    pub out: Report,
    pub tolerance: Option<f64>,
    pub list_solvers: bool,
    /// `--tf32`: convolution descriptors allow TF32.
    pub tf32: bool,
    /// `--constant-weights`: convolution descriptors promise constant weights.
    pub constant_weights: bool,
    rng: RefCell<SplitMix64>,
    /// Bits of failed verifications (1 fwd, 2 bwd-data, 4 wrw, 8 bias / other).
    pub failed: Cell<u32>,
}

impl Session {
    pub fn new(common: &Common) -> Res<Session> {
        let handle = match common.device.as_deref().map(str::to_ascii_lowercase).as_deref() {
            None => Handle::new()?,
            Some("cpu") => Handle::cpu(),
            Some(d) if d.starts_with("cuda") => {
                let ord = d.trim_start_matches("cuda").trim_start_matches(':');
                let ord: usize = if ord.is_empty() { 0 } else { ord.parse().map_err(|_| format!("--device {d}: bad GPU ordinal"))? };
                Handle::cuda(ord).map_err(|e| format!("--device {d}: no usable GPU: {e}"))?
            }
            Some(d) => return Err(format!("--device {d}: expected cpu, cuda or cuda:N").into()),
        };
        crate::progress::install(&handle);
        let seed = match std::env::var("MIOPEN_DEBUG_DRIVER_PRNG_SEED").ok().and_then(|s| s.trim().parse::<u64>().ok()) {
            Some(0) => std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1),
            Some(s) => s,
            None => DEFAULT_SEED,
        };
        let out = Report::new(common.json);
        out.line(format!("PRNG seed: {seed}"));
        let s = Session {
            handle,
            out,
            tolerance: common.tolerance,
            list_solvers: common.list_solvers,
            tf32: common.tf32,
            constant_weights: common.constant_weights,
            rng: RefCell::new(SplitMix64::new(seed)),
            failed: Cell::new(0),
        };
        s.out.set("device", s.handle.device().name().into());
        s.out.set("seed", seed.into());
        Ok(s)
    }

    /// A convolution descriptor with the session's math mode (`--tf32`) and weight promise
    /// (`--constant-weights`).
    pub fn conv_desc(&self, mode: ConvMode, pads: &[i64], strides: &[i64], dils: &[i64]) -> Res<ConvDesc> {
        let mut d = ConvDesc::new(mode, pads, strides, dils)?;
        if self.tf32 {
            d.set_attribute(ConvAttrib::AllowTf32, 1)?;
        }
        if self.constant_weights {
            d.set_attribute(ConvAttrib::ConstantWeights, 1)?;
        }
        Ok(d)
    }

    /// f32 convolutions of this session may run on TF32 (`--tf32`, or the environment's
    /// default for descriptors that leave the attribute alone).
    pub fn tf32_math(&self) -> bool {
        self.tf32 || ConvDesc::default().allows_tf32()
    }

    pub fn is_gpu(&self) -> bool {
        self.handle.device().cuda().is_some()
    }

    /// "GPU" or "CPU", for MIOpen's timing lines.
    pub fn dev_label(&self) -> &'static str {
        if self.is_gpu() { "GPU" } else { "CPU" }
    }

    /// MIOpen's "on CPU and GPU" (reference and device); on the CPU backend, which the
    /// reference is checked against.
    pub fn verified_on(&self) -> &'static str {
        if self.is_gpu() { "CPU and GPU" } else { "CPU reference and CPU backend" }
    }

    /// Uniform values in [lo, hi) for every element of `desc`'s span, rounded to its type so
    /// the reference sees exactly what the device sees.
    pub fn uniform(&self, desc: &TensorDesc, lo: f64, hi: f64) -> Vec<f64> {
        let dt = desc.dtype();
        let mut rng = self.rng.borrow_mut();
        (0..desc.element_space()).map(|_| round_to(dt, lo + (hi - lo) * rng.next_f64())).collect()
    }

    pub fn upload(&self, desc: &TensorDesc, vals: &[f64]) -> Res<Buffer> {
        let mut b = self.handle.alloc(desc.num_bytes().max(1))?;
        self.handle.write(&mut b, &encode(desc.dtype(), vals))?;
        Ok(b)
    }

    pub fn zeros(&self, desc: &TensorDesc) -> Res<Buffer> {
        Ok(self.handle.alloc(desc.num_bytes().max(1))?)
    }

    /// Record a failed verification (exit-code bit).
    pub fn fail(&self, bit: u32) {
        self.failed.set(self.failed.get() | bit);
    }

    pub fn download(&self, buf: &Buffer, dtype: DataType, count: usize) -> Res<Vec<f64>> {
        self.handle.synchronize()?;
        let mut v = decode(dtype, &self.handle.read(buf)?);
        v.truncate(count);
        Ok(v)
    }
}
