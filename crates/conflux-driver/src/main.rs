//! conflux-driver: MIOpenDriver's command line on conflux. MIOpen users' scripts run by
//! changing the binary name; see `args.rs` for the flags and `../shared/reference/miopen_api.md`
//! §4 for the contract.
//!
//! Exit status: 0 when everything ran and verified; 1 on errors (bad problem, unsupported
//! plan, device failure); 2 on bad flags (clap); 16 + failed-verification bits (1 forward,
//! 2 backward-data, 4 backward-weights, 8 other) when a result does not match the reference.
//! MIOpenDriver ORs 0x100… bits into its status, which the OS truncates to 0; we shift them.

mod activ;
mod args;
mod bench;
mod bnorm;
mod conv;
mod fusion;
mod plot;
mod progress;
mod report;
mod session;
mod solvers;
mod timing;
mod verify;

use args::{Cli, Cmd};
use clap::Parser;
use conflux::DataType;
use session::Session;

pub type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn main() {
    let cli = Cli::parse();
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let common = match &cli.cmd {
        Cmd::Conv(a) | Cmd::ConvFp16(a) | Cmd::ConvBfp16(a) | Cmd::ConvInt8(a) => &a.common,
        Cmd::CbaInfer(a) | Cmd::CbaInferFp16(a) => &a.common,
        Cmd::Bnorm(a) | Cmd::BnormFp16(a) => &a.common,
        Cmd::Activ(a) | Cmd::ActivFp16(a) => &a.common,
        Cmd::Bench(a) => &a.common,
    };
    // MIOpenDriver echoes its command line first.
    let echo = format!("conflux-driver {}", argv.join(" "));
    if common.json { eprintln!("{echo}") } else { println!("{echo}") }
    let s = match Session::new(common) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("conflux-driver: {e}");
            std::process::exit(1);
        }
    };
    s.out.set("command", echo.into());
    let result = match &cli.cmd {
        Cmd::Conv(a) => conv::run(&s, a, DataType::Float),
        Cmd::ConvFp16(a) => conv::run(&s, a, DataType::Half),
        Cmd::ConvBfp16(a) => conv::run(&s, a, DataType::BFloat16),
        Cmd::ConvInt8(a) => conv::run(&s, a, DataType::Int8),
        Cmd::CbaInfer(a) => fusion::run(&s, a, DataType::Float),
        Cmd::CbaInferFp16(a) => fusion::run(&s, a, DataType::Half),
        Cmd::Bnorm(a) => bnorm::run(&s, a, DataType::Float),
        Cmd::BnormFp16(a) => bnorm::run(&s, a, DataType::Half),
        Cmd::Activ(a) => activ::run(&s, a, DataType::Float),
        Cmd::ActivFp16(a) => activ::run(&s, a, DataType::Half),
        Cmd::Bench(a) => bench::run(&s, a),
    };
    let code = match result {
        Err(e) => {
            eprintln!("conflux-driver: {e}");
            s.out.set("error", e.to_string().into());
            s.out.finish(false);
            1
        }
        Ok(()) => {
            let failed = s.failed.get();
            s.out.finish(failed == 0);
            if failed == 0 { 0 } else { 16 | failed as i32 }
        }
    };
    std::process::exit(code);
}
