//! The fast CPU convolution solvers one by one (chosen by solution id), against the f64
//! reference: random geometries each solver accepts (stride, padding, dilation, groups,
//! depthwise, 2-D/3-D, NCHW/NHWC/gapped, f32/f16/bf16) in every direction it claims, with
//! α/β; exact small-integer f32 data bit for bit; a NaN-poisoned output and workspace; the
//! same invoker run twice; medium shapes that span several GEMM blocks; the fused bias+ReLU
//! epilogue through a fusion plan restricted to each algorithm; and the refusal reasons.
//! Every other random case promises constant weights (the solvers that keep a transformed
//! filter then serve the second run from it).

mod support;

use conflux::conv::api::{self, Workspace};
use conflux::fusion::FusedProblem;
use conflux::reference::{self as r, compare::tolerance, fill::Fill};
use conflux::{
    ActivationMode, ConvAlgorithm, ConvAttrib, ConvDesc, ConvMode, DataType, FusionDirection, FusionPlan, Handle, Layout, OpArg,
    OpArgs, TensorDesc,
};
use support::*;

// The solvers under test, by name (`support::solution_id` finds their ids).
const WINOGRAD: &str = "CpuConvWinogradF2x3";
const IMPLICIT_GEMM: &str = "CpuConvImplicitGemm";
const GEMM: &str = "CpuConvGemm";
const DIRECT: &str = "CpuConvDirect";
const WINOGRAD4: &str = "CpuConvWinogradF4x3";
const GEMM1X1: &str = "CpuConvGemm1x1";
const AMX1X1: &str = "CpuConvAmx1x1";
const FFT: &str = "CpuConvFft";
const DIRECT_TAPS: &str = "CpuConvDirectTaps";
const LIVE_TAPS: &str = "CpuConvLiveTaps";
const SUBSAMPLE_1X1: &str = "CpuConvSubsample1x1";
const STEM: &str = "CpuConvStem";

/// A normal convolution: x → y through w.
struct Geo {
    conv: ConvDesc,
    x: Vec<usize>,
    w: Vec<usize>,
    y: Vec<usize>,
}

impl Geo {
    /// The case of this geometry with descriptors (x, w, y).
    fn case(&self, (xd, wd, yd): (&TensorDesc, &TensorDesc, &TensorDesc)) -> ConvCase {
        ConvCase::new(&self.conv, xd, wd, yd)
    }
}

impl std::fmt::Debug for Geo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} x {:?} w {:?} y {:?}", self.conv.key(), self.x, self.w, self.y)
    }
}

fn make_geo(pads: &[i64], strides: &[i64], dils: &[i64], groups: usize, x: Vec<usize>, w: Vec<usize>) -> Option<Geo> {
    let mut conv = ConvDesc::new(ConvMode::Convolution, pads, strides, dils).unwrap();
    conv.set_groups(groups as i64).unwrap();
    let nd = pads.len();
    // Unclamped outputs only: every output element is a real window.
    let ok = (0..nd).all(|i| x[2 + i] as i64 + 2 * pads[i] - (dils[i] * (w[2 + i] as i64 - 1) + 1) >= 0);
    if !ok {
        return None;
    }
    let probe = |l: &[usize]| TensorDesc::new(DataType::Float, l).unwrap();
    let y = conv.output_lens(&probe(&x), &probe(&w)).ok()?;
    Some(Geo { conv, x, w, y })
}

/// Random geometry of the kind a solver is meant for.
fn random_geo(r: &mut SplitMix64, solution: &str) -> Geo {
    loop {
        let wino = solution == WINOGRAD || solution == WINOGRAD4;
        let nd = if wino || r.range(0, 2) > 0 { 2 } else { 3 };
        let (g, cg, kg) = match solution {
            DIRECT => {
                if r.range(0, 1) == 0 { (r.range(2, 5), 1, r.range(1, 2)) } else { (r.pick(&[1, 2]), r.range(1, 3), r.range(1, 4)) }
            }
            WINOGRAD | WINOGRAD4 => (r.pick(&[1, 1, 2]), r.range(4, 9), r.range(4, 13)),
            _ => (r.pick(&[1, 1, 2, 3]), r.range(1, 6), r.range(1, 14)),
        };
        let n = r.range(1, 3);
        let (mut pads, mut strides, mut dils, mut ks, mut ins) = (vec![], vec![], vec![], vec![], vec![]);
        for _ in 0..nd {
            pads.push(r.range(0, 2) as i64);
            strides.push(if wino { 1 } else { r.range(1, 3) as i64 });
            dils.push(if wino { 1 } else { r.range(1, 2) as i64 });
            ks.push(if wino { 3 } else { r.range(1, 3) });
            // Winograd F(4×4): sizes that leave 1, 2 or 3 rows/columns in the last tile too.
            ins.push(if nd == 3 { r.range(2, 5) } else if solution == WINOGRAD4 { r.range(3, 19) } else { r.range(3, 11) });
        }
        let mut x = vec![n, g * cg];
        x.extend(&ins);
        let mut w = vec![g * kg, cg];
        w.extend(&ks);
        if let Some(geo) = make_geo(&pads, &strides, &dils, g, x, w) {
            return geo;
        }
    }
}

fn problem(geo: &Geo, descs: (&TensorDesc, &TensorDesc, &TensorDesc), dir: Dir) -> FusedProblem {
    geo.case(descs).fused(dir)
}

const LAYS: [Lay; 4] = [Lay::Packed, Lay::ChannelsLast, Lay::Gapped, Lay::GappedChannelsLast];
const AB: [(f64, f64); 4] = [(1.0, 0.0), (0.5, 0.0), (1.0, 0.5), (-1.5, 2.0)];
const AB_INT: [(f64, f64); 4] = [(1.0, 0.0), (2.0, 0.0), (1.0, -1.0), (-1.0, 3.0)];

/// `cases` random geometries per type for `solution` in `dirs`, plus as many exact ones.
fn random_cases(solution: &str, dirs: &[Dir], cases: usize, seed: u64) {
    random_cases_of(solution, dirs, cases, seed, &|r| random_geo(r, solution), 0.0, cases * dirs.len() * 3)
}

/// `random_cases` on geometries from `gen`; the small-integer cases are held to `exact_tol`
/// (0: bit for bit); at least `min_ran` cases must apply.
fn random_cases_of(solution: &str, dirs: &[Dir], cases: usize, seed: u64, gen: &dyn Fn(&mut SplitMix64) -> Geo, exact_tol: f64, min_ran: usize) {
    let h = Handle::cpu();
    let mut rng = SplitMix64::new(seed);
    let mut ran = 0;
    for (ti, dt) in [DataType::Float, DataType::Half, DataType::BFloat16, DataType::Float].into_iter().enumerate() {
        let exact = ti == 3;
        for case in 0..cases {
            let mut geo = gen(&mut rng);
            geo.conv.set_attribute(ConvAttrib::ConstantWeights, (case % 2) as i64).unwrap();
            let lay = if case % 3 == 2 { rng.pick(&LAYS) } else { [Lay::Packed, Lay::ChannelsLast][case % 2] };
            let (xd, wd, yd) = (desc(dt, &geo.x, lay), desc(dt, &geo.w, lay), desc(dt, &geo.y, lay));
            for (di, &dir) in dirs.iter().enumerate() {
                let s = seed * 1000 + (ti * 100 + case * 3 + di) as u64 * 10;
                let ok = if exact {
                    check_solver(&h, &geo.case((&xd, &wd, &yd)), dir, solution_id(solution), AB_INT[(case + di) % 4], Fill::SmallInt(-2, 2), exact_tol, s)
                } else {
                    check_solver(&h, &geo.case((&xd, &wd, &yd)), dir, solution_id(solution), AB[(case + di) % 4], Fill::Normal, tolerance(dt), s)
                };
                ran += ok as usize;
            }
        }
    }
    assert!(ran >= min_ran, "solution {solution}: only {ran} cases applied");
}

const ALL: [Dir; 3] = [Dir::Forward, Dir::BackwardData, Dir::BackwardWeights];

#[test]
fn gemm_random_all_directions() { random_cases(GEMM, &ALL, 10, 1); }

/// 1×1 unpadded layers, stride 1 or 2, up to 3 images and 3 groups, up to 40 channels, maps of
/// 1–121 positions or over 1024 (backward-weights then reads x in place as its im2col): the
/// GEMM backward paths over image positions (stride-1 backward-data written from the GEMM,
/// strided through col2im; backward-weights reading x at the subsampled positions), every layout.
fn pointwise_geo(r: &mut SplitMix64) -> Geo {
    loop {
        let (g, cg, kg, n) = (r.pick(&[1, 1, 2, 3]), r.range(1, 40), r.range(1, 40), r.range(1, 3));
        let s = r.pick(&[1, 1, 2]) as i64;
        let (h, w) = if r.range(0, 2) == 0 { (r.range(32, 36), r.range(32, 36)) } else { (r.range(1, 11), r.range(1, 11)) };
        if let Some(geo) = make_geo(&[0, 0], &[s, s], &[1, 1], g, vec![n, g * cg, h, w], vec![g * kg, cg, 1, 1]) {
            return geo;
        }
    }
}

#[test]
fn gemm_backward_1x1() { random_cases_of(GEMM, &[Dir::BackwardData, Dir::BackwardWeights], 10, 14, &pointwise_geo, 0.0, 80); }

#[test]
fn implicit_gemm_random_forward() { random_cases(IMPLICIT_GEMM, &[Dir::Forward], 12, 2); }

/// Forward on few-channel and depthwise layers, backward on the depthwise ones (it refuses the
/// others' backward directions): of 120 runs, the forward 40 and about half the backward 80.
#[test]
fn direct_random_all_directions() { random_cases_of(DIRECT, &ALL, 10, 3, &|r| random_geo(r, DIRECT), 0.0, 70); }

/// Depthwise layers with long filters (7×7 and 5×5 with a channel multiplier of 2, stride 1 and
/// 2) run on the direct solver in every direction, NCHW and NHWC, exact and with α/β, and are
/// chosen for it unless the depthwise solver takes them.
#[test]
fn direct_takes_long_depthwise_filters() {
    let h = Handle::cpu();
    let id = solution_id(DIRECT);
    let cases = [
        make_geo(&[3, 3], &[1, 1], &[1, 1], 6, vec![2, 6, 11, 10], vec![6, 1, 7, 7]).unwrap(),
        make_geo(&[2, 2], &[2, 2], &[1, 1], 4, vec![1, 4, 12, 13], vec![8, 1, 5, 5]).unwrap(),
    ];
    for (i, geo) in cases.iter().enumerate() {
        for lay in [Lay::Packed, Lay::ChannelsLast] {
            let ds = (desc(DataType::Float, &geo.x, lay), desc(DataType::Float, &geo.w, lay), desc(DataType::Float, &geo.y, lay));
            let c = geo.case((&ds.0, &ds.1, &ds.2));
            for d in ALL {
                let chosen = conflux::search::choose(&h, &c.fused(d), conflux::conv::Choice::Auto, 0).unwrap();
                // Depthwise goes to its own solvers first: channels-first forward to the plane
                // solver (any channel multiplier), stride-1 backward-data to the forward
                // rewrite, the rest with one output per group channels-last (channels-first
                // tensors too, on planes this small).
                let want = match (geo.w[0] == geo.x[1], lay, d) {
                    (_, Lay::Packed, Dir::Forward) => "CpuConvDepthwisePlanes",
                    // Stride-1 backward-data is the forward with reversed taps.
                    (_, _, Dir::BackwardData) if i == 0 => "CpuConvDepthwiseBwdData",
                    (true, _, _) => "CpuConvDepthwiseNhwc",
                    _ => DIRECT,
                };
                // On AVX-512 the 16-channel-block solver takes one-output-per-group forwards
                // of small planes ahead of both.
                let blocks = d == Dir::Forward && geo.w[0] == geo.x[1] && chosen.name() == "CpuConvDepthwiseBlocks";
                assert!(chosen.name() == want || blocks, "{} for {d:?} {c:?}", chosen.name());
                check_exact_and_scaled(&h, &c, d, id, 4000 + 10 * i as u64);
            }
        }
    }
}

#[test]
fn winograd_random_forward() { random_cases(WINOGRAD, &[Dir::Forward], 12, 4); }

#[test]
fn winograd4_random_forward() { random_cases(WINOGRAD4, &[Dir::Forward], 16, 5); }

/// Backward-data as the forward convolution of dy with the flipped filter.
#[test]
fn winograd4_random_backward_data() { random_cases(WINOGRAD4, &[Dir::BackwardData], 16, 6); }

/// A geometry the FFT solver is for: a large, possibly non-square filter on an image with
/// enough channels for it to pay off (with constant weights; without, it declines about
/// half of them).
fn fft_geo(r: &mut SplitMix64) -> Geo {
    loop {
        let g = r.pick(&[1, 1, 2]);
        let (cg, kg) = (r.range(32, 40), r.range(28, 40));
        let (fh, fw) = (r.range(8, 9), r.range(7, 9));
        let pads = [r.range(3, 4) as i64, r.range(3, 4) as i64];
        let (ih, iw) = (r.range(30, 36), r.range(30, 36));
        if let Some(geo) = make_geo(&pads, &[1, 1], &[1, 1], g, vec![2, g * cg, ih, iw], vec![g * kg, cg, fh, fw]) {
            return geo;
        }
    }
}

/// The FFT solver on random geometries, types and layouts, with α/β, constant weights or
/// not. The FFT is not exact on integers (irrational twiddles), so the small-integer cases
/// are held to 1e-6 instead of bit equality. (Dilation and smaller problems run through the
/// driver in `fft_every_side_and_kernel`: the solver declines them as slower.)
#[test]
fn fft_random_forward() { random_cases_of(FFT, &[Dir::Forward], 5, 7, &fft_geo, 1e-6, 6) }

/// A geometry for the taps-direct solver: 2-D, stride 1, at least four taps, any dilation,
/// padding and groups, filter blocks full and partial.
fn taps_geo(r: &mut SplitMix64) -> Geo {
    loop {
        let g = r.pick(&[1, 1, 2, 3]);
        let (cg, kg, n) = (r.range(1, 10), r.range(8, 40), r.range(1, 2));
        let (fh, fw) = (r.range(2, 6), r.range(2, 6));
        let dils = [r.pick(&[1, 1, 2]) as i64, r.pick(&[1, 1, 2]) as i64];
        let pads = [r.range(0, 3) as i64, r.range(0, 3) as i64];
        let (ih, iw) = (r.range(5, 20), r.range(5, 33));
        if let Some(geo) = make_geo(&pads, &[1, 1], &dils, g, vec![n, g * cg, ih, iw], vec![g * kg, cg, fh, fw]) {
            return geo;
        }
    }
}

/// The taps-direct solver on random geometries and layouts (KCRS and KRSC filters: both W
/// packings), f32 random and exact small integers (bit for bit), constant weights or not.
/// Three cases in four run α = 1, β = 0 (the solver's own path); the others go through the
/// implicit GEMM, which it hands other α/β to.
#[test]
fn direct_taps_random_forward() {
    let h = Handle::cpu();
    let mut rng = SplitMix64::new(9);
    let mut ran = 0;
    for case in 0..40usize {
        let mut geo = taps_geo(&mut rng);
        geo.conv.set_attribute(ConvAttrib::ConstantWeights, (case % 2) as i64).unwrap();
        let lay = if case % 3 == 2 { rng.pick(&LAYS) } else { [Lay::Packed, Lay::ChannelsLast][case / 2 % 2] };
        let dt = DataType::Float;
        let (xd, wd, yd) = (desc(dt, &geo.x, lay), desc(dt, &geo.w, lay), desc(dt, &geo.y, lay));
        let exact = case % 5 < 2;
        let ab = if case % 4 == 3 { AB[1 + case % 3] } else { (1.0, 0.0) };
        let (fill, tol) = if exact { (Fill::SmallInt(-2, 2), 0.0) } else { (Fill::Normal, tolerance(dt)) };
        ran += check_solver(&h, &geo.case((&xd, &wd, &yd)), Dir::Forward, solution_id(DIRECT_TAPS), ab, fill, tol, 9000 + case as u64 * 10) as usize;
    }
    // KCRS W through the 16 × 32 transposes with a remainder (45 taps-and-channels), a full
    // and a partial block of filters, each filter layout, with and without the promise.
    let geo = make_geo(&[2, 1], &[1, 1], &[1, 2], 1, vec![2, 3, 11, 23], vec![40, 3, 5, 3]).unwrap();
    for (i, lay) in [Lay::Packed, Lay::ChannelsLast].into_iter().enumerate() {
        for constant in [false, true] {
            let mut geo = make_geo(&[2, 1], &[1, 1], &[1, 2], 1, geo.x.clone(), geo.w.clone()).unwrap();
            geo.conv.set_attribute(ConvAttrib::ConstantWeights, constant as i64).unwrap();
            let dt = DataType::Float;
            let (xd, wd, yd) = (desc(dt, &geo.x, Lay::Packed), desc(dt, &geo.w, lay), desc(dt, &geo.y, Lay::Packed));
            ran += check_solver(&h, &geo.case((&xd, &wd, &yd)), Dir::Forward, solution_id(DIRECT_TAPS), (1.0, 0.0), Fill::Normal, tolerance(dt), 9900 + i as u64 * 10 + constant as u64) as usize;
        }
    }
    let avx512 = conflux::backend::cpu::conv1x1::channels_kernel::best().is_some();
    assert!(ran == 44 || !avx512, "taps-direct: only {ran} of 44 cases applied");
}

/// A geometry most of whose products fall in the padding: small maps (1–9 positions), 3×3 /
/// 5×5 / 3×1 filters with dilations around the map's size and "same" padding (atrous layers,
/// 3×3 on 1×1 maps), stride 1 or 2, groups of 16–24 input channels (fewer are refused).
fn live_taps_geo(r: &mut SplitMix64) -> Geo {
    loop {
        let g = r.pick(&[1, 1, 2]);
        let (cg, kg, n) = (r.range(16, 24), r.range(16, 40), r.range(1, 2));
        let (fh, fw) = r.pick(&[(3, 3), (5, 5), (3, 1), (3, 3)]);
        let (ih, iw) = (r.range(1, 9), r.range(1, 9));
        let dils = [r.range(ih.div_ceil(2), ih + 3) as i64, r.range(iw.div_ceil(2), iw + 3) as i64];
        let pads = [dils[0] * (fh as i64 - 1) / 2, dils[1] * (fw as i64 - 1) / 2];
        let strides = [r.pick(&[1, 1, 2]) as i64, r.pick(&[1, 1, 2]) as i64];
        let Some(geo) = make_geo(&pads, &strides, &dils, g, vec![n, g * cg, ih, iw], vec![g * kg, cg, fh, fw]) else { continue };
        let reach = |t: usize, i: usize| conflux::problem::reach(t, geo.y[2 + i], geo.x[2 + i], strides[i] as usize, pads[i] as usize, dils[i] as usize).len();
        let live: usize = (0..fh).map(|t| reach(t, 0)).sum::<usize>() * (0..fw).map(|t| reach(t, 1)).sum::<usize>();
        if live * 2 <= geo.y[2] * geo.y[3] * fh * fw {
            return geo;
        }
    }
}

/// Convolutions as one 1×1 convolution per tap over the outputs it reaches: random atrous
/// geometries in every layout (f32; exact small integers bit for bit), α/β, constant weights
/// or not; each tap runs on the first solver taking it. 16-bit problems are refused (y holds
/// the partial sums), so only the two f32 passes of `random_cases_of` count.
#[test]
fn live_taps_random_forward() {
    random_cases_of(LIVE_TAPS, &[Dir::Forward], 12, 11, &live_taps_geo, 0.0, 24);
}

/// DeepLab's atrous rates on a 28×28 map at reduced channel counts: dilation 36 reads the
/// centre tap only, at 24 and 12 the outer taps reach 4 and 16 rows / columns; a dense 3×3 of
/// padding 1 is refused with the share of products it would compute.
#[test]
fn live_taps_atrous_rates() {
    let h = Handle::cpu();
    // A rate of 2²⁰ (padding as large): the centre tap only, the rest never computed.
    for (i, rate) in [12i64, 24, 36, 1 << 20].into_iter().enumerate() {
        let geo = make_geo(&[rate, rate], &[1, 1], &[rate, rate], 1, vec![1, 16, 28, 28], vec![16, 16, 3, 3]).unwrap();
        let dt = DataType::Float;
        let (xd, wd, yd) = (desc(dt, &geo.x, Lay::Packed), desc(dt, &geo.w, Lay::Packed), desc(dt, &geo.y, Lay::Packed));
        assert!(check_solver(&h, &geo.case((&xd, &wd, &yd)), Dir::Forward, solution_id(LIVE_TAPS), (1.0, 0.0), Fill::SmallInt(-2, 2), 0.0, 9500 + i as u64));
        let chosen = conflux::search::choose(&h, &geo.case((&xd, &wd, &yd)).fused(Dir::Forward), conflux::conv::Choice::Auto, 0).unwrap();
        assert_eq!(chosen.name(), LIVE_TAPS, "immediate mode, rate {rate}");
    }
    // Depthwise 7×7 on a 7×7 map computes 57% of the dense products but is the depthwise
    // kernels' (one tap at a time would be 49 one-channel products).
    let dw = make_geo(&[3, 3], &[1, 1], &[1, 1], 32, vec![1, 32, 7, 7], vec![32, 1, 7, 7]).unwrap();
    let d = desc(DataType::Float, &dw.x, Lay::Packed);
    let fp = dw.case((&d, &desc(DataType::Float, &dw.w, Lay::Packed), &desc(DataType::Float, &dw.y, Lay::Packed))).fused(Dir::Forward);
    let why = solver(LIVE_TAPS).check(&fp, h.device().info()).unwrap_err();
    assert!(why.contains("channels per group"), "{why}");
    let dense = make_geo(&[1, 1], &[1, 1], &[1, 1], 1, vec![1, 16, 28, 28], vec![16, 16, 3, 3]).unwrap();
    let d = desc(DataType::Float, &dense.x, Lay::Packed);
    let fp = dense.case((&d, &desc(DataType::Float, &dense.w, Lay::Packed), &desc(DataType::Float, &dense.y, Lay::Packed))).fused(Dir::Forward);
    let why = solver(LIVE_TAPS).check(&fp, h.device().info()).unwrap_err();
    assert!(why.contains("% of the dense products"), "{why}");
}

/// One f32 forward case of a random-geometry test, varied by its index: constant weights on
/// odd cases, a layout (packed, channels-last, or any of `LAYS` on every third), exact small
/// integers (bit for bit) on half, α/β on a quarter. Whether the solver took it.
fn check_varied_f32_forward(h: &Handle, rng: &mut SplitMix64, geo: &mut Geo, case: usize, solver_name: &str, seed: u64) -> bool {
    geo.conv.set_attribute(ConvAttrib::ConstantWeights, (case % 2) as i64).unwrap();
    let lay = if case % 3 == 2 { rng.pick(&LAYS) } else { [Lay::Packed, Lay::ChannelsLast][case / 2 % 2] };
    let dt = DataType::Float;
    let (xd, wd, yd) = (desc(dt, &geo.x, lay), desc(dt, &geo.w, lay), desc(dt, &geo.y, lay));
    let exact = case % 4 < 2;
    let ab = if case % 4 == 3 { AB[1 + case % 3] } else { (1.0, 0.0) };
    let (fill, tol) = if exact { (Fill::SmallInt(-2, 2), 0.0) } else { (Fill::Normal, tolerance(dt)) };
    check_solver(h, &geo.case((&xd, &wd, &yd)), Dir::Forward, solution_id(solver_name), ab, fill, tol, seed)
}

/// Strided 1×1 layers and patch layers (stride ≥ filter: windows that do not overlap) on the
/// 1×1 solvers over a packed copy of the input they read: random strides (2–3, each axis),
/// filters of 1–4 taps per axis, sizes, groups of 16–40 input channels and layouts (the
/// filter's layout orders the packed channels), f32 random and exact small integers (bit for
/// bit), α/β, constant weights or not. The 1×1 solvers it hands the packed problem to need
/// AVX-512 (or AMX); elsewhere it refuses. Ungrouped 3×3 stride-2 layers of ≥ 256 channels in
/// and out, padded or not, are taken too; other overlapping windows (5×5 s2, grouped, fewer
/// channels) are refused with a reason.
#[test]
fn subsample_and_patch_random_forward() {
    let h = Handle::cpu();
    let mut rng = SplitMix64::new(13);
    let mut ran = 0;
    for case in 0..36usize {
        let g = rng.pick(&[1, 1, 2]);
        let patch = case % 3 != 0;
        let f = if patch { [rng.range(1, 4), rng.range(2, 4)] } else { [1, 1] };
        let cg = if patch { rng.range(16, 24) } else { rng.range(16, 40) };
        let (kg, n) = (rng.range(1, 40), rng.range(1, 2));
        let strides = [(f[0] + rng.range(0, 1)).max(2) as i64, (f[1] + rng.range(0, 1)) as i64];
        let (ih, iw) = (rng.range(f[0], 15), rng.range(f[1], 15));
        let mut geo = make_geo(&[0, 0], &strides, &[1, 1], g, vec![n, g * cg, ih, iw], vec![g * kg, cg, f[0], f[1]]).unwrap();
        ran += check_varied_f32_forward(&h, &mut rng, &mut geo, case, SUBSAMPLE_1X1, 9700 + case as u64 * 10) as usize;
    }
    let avx512 = conflux::backend::cpu::conv1x1::channels_kernel::best().is_some();
    assert!(ran >= 24 || !avx512, "subsample 1×1 / patches: only {ran} of 36 cases applied");
    // Ungrouped 3×3 stride-2 layers of ≥ 256 channels in and out (overlapping windows, copy
    // 2.25 x), padded or not: the packed copy reads the padding as zeros (odd sizes leave
    // partial last windows; padding 2 puts whole window rows in it).
    let mut ran3 = 0;
    for (case, &(pad, c, hw, k, n)) in [(1, 256, 7, 256, 1), (1, 264, 6, 260, 2), (0, 300, 9, 256, 1), (1, 256, 5, 300, 1), (2, 257, 6, 256, 1)].iter().enumerate() {
        let mut geo = make_geo(&[pad, pad], &[2, 2], &[1, 1], 1, vec![n, c, hw, hw + 3], vec![k, c, 3, 3]).unwrap();
        ran3 += check_varied_f32_forward(&h, &mut rng, &mut geo, 40 + case, SUBSAMPLE_1X1, 9900 + case as u64 * 10) as usize;
    }
    // (A random layout may give a filter that is not one dense block per output: refused.)
    assert!(ran3 >= 4 || !avx512, "strided 3×3: only {ran3} of 5 cases applied");
    let d = |l: &[usize]| desc(DataType::Float, l, Lay::Packed);
    for (f, groups, c, k) in [(5, 1, 256, 256), (3, 2, 512, 256), (3, 1, 256, 128), (3, 1, 128, 256)] {
        let overlap = make_geo(&[1, 1], &[2, 2], &[1, 1], groups, vec![1, c, 9, 9], vec![k, c / groups, f, f]).unwrap();
        let fp = overlap.case((&d(&overlap.x), &d(&overlap.w), &d(&overlap.y))).fused(Dir::Forward);
        let why = solver(SUBSAMPLE_1X1).check(&fp, h.device().info()).unwrap_err();
        assert!(why.contains("overlap"), "{why}");
    }
}

/// Few-channel stems on the direct band kernel: random 1–4 input channels, 8–40 outputs
/// (partial channel blocks), filters of 2–7 taps per axis, strides 1–4, padding, sizes (partial
/// column chunks), four layouts, f32 random and exact small integers (bit for bit), α/β,
/// constant weights or not; the real stems' shapes; refusals with reasons.
#[test]
fn stem_random_forward() {
    let h = Handle::cpu();
    let mut rng = SplitMix64::new(29);
    let mut ran = 0;
    for case in 0..30usize {
        let (c, k, n) = (rng.range(1, 4), rng.range(8, 40), rng.range(1, 2));
        let f = [rng.range(2, 7), rng.range(2, 7)];
        // Overlapping windows on at least the first axis (patches go to the GEMM).
        let strides = [rng.range(1, f[0] - 1) as i64, rng.range(1, 4) as i64];
        let pads = [rng.range(0, f[0] / 2) as i64, rng.range(0, f[1] / 2) as i64];
        let (ih, iw) = (rng.range(f[0], 40), rng.range(f[1], 70));
        let Some(mut geo) = make_geo(&pads, &strides, &[1, 1], 1, vec![n, c, ih, iw], vec![k, c, f[0], f[1]]) else { continue };
        ran += check_varied_f32_forward(&h, &mut rng, &mut geo, case, STEM, 9900 + case as u64 * 10) as usize;
    }
    assert!(ran >= 25, "stem: only {ran} of 30 cases applied");
    // The stems of the zoo's networks (7×7 s2, 3×3 s2 with and without padding), on a smaller
    // image.
    for (i, (f, s, p, k)) in [(7, 2, 3, 64), (3, 2, 1, 32), (3, 2, 0, 32)].into_iter().enumerate() {
        let geo = make_geo(&[p, p], &[s, s], &[1, 1], 1, vec![1, 3, 45, 61], vec![k, 3, f, f]).unwrap();
        let d = |l: &[usize]| desc(DataType::Float, l, Lay::Packed);
        assert!(check_solver(&h, &geo.case((&d(&geo.x), &d(&geo.w), &d(&geo.y))), Dir::Forward, solution_id(STEM), (1.0, 0.0), Fill::SmallInt(-2, 2), 0.0, 9990 + i as u64), "stem {i} refused");
    }
    let d = |l: &[usize]| desc(DataType::Float, l, Lay::Packed);
    let refused = |geo: &Geo| solver(STEM).check(&geo.case((&d(&geo.x), &d(&geo.w), &d(&geo.y))).fused(Dir::Forward), h.device().info()).unwrap_err();
    let wide = make_geo(&[1, 1], &[1, 1], &[1, 1], 1, vec![1, 8, 9, 9], vec![16, 8, 3, 3]).unwrap();
    assert!(refused(&wide).contains("at most 4 input channels"), "{}", refused(&wide));
    let dilated = make_geo(&[2, 2], &[1, 1], &[2, 2], 1, vec![1, 3, 9, 9], vec![16, 3, 3, 3]).unwrap();
    assert!(refused(&dilated).contains("dilation"), "{}", refused(&dilated));
    let patches = make_geo(&[0, 0], &[4, 4], &[1, 1], 1, vec![1, 3, 16, 16], vec![16, 3, 4, 4]).unwrap();
    assert!(refused(&patches).contains("do not overlap"), "{}", refused(&patches));
}

/// The FFT driver on every side (8, 16, 32, 64) and every GEMM micro-kernel this CPU has,
/// f32 and bf16, NCHW and NHWC, more than 16 filters (two lane groups, the last partial),
/// more than 256 channels (several K blocks of the GEMM), V or U doubled.
#[test]
fn fft_every_side_and_kernel() {
    use conflux::backend::cpu::{direct::naive::ConvPtrs, pointwise::epilogue::CpuEpilogue, fft as fft_conv, gemm};
    let h = Handle::cpu();
    let geos = [
        make_geo(&[2, 1], &[1, 1], &[1, 2], 1, vec![2, 6, 21, 19], vec![21, 6, 5, 3]).unwrap(),
        make_geo(&[0, 0], &[1, 1], &[1, 1], 2, vec![1, 600, 9, 10], vec![8, 300, 3, 3]).unwrap(),
    ];
    let mut orientations = [false; 2];
    for geo in &geos {
        for dt in [DataType::Float, DataType::BFloat16] {
            for lay in [Lay::Packed, Lay::ChannelsLast] {
                let (xd, wd, yd) = (desc(dt, &geo.x, lay), desc(dt, &geo.w, lay), desc(dt, &geo.y, lay));
                let x = random(&h, &xd, Fill::Normal, 21);
                let w = random(&h, &wd, Fill::Normal, 22);
                let mut want = vec![0.0; yd.element_space()];
                r::conv_forward_alpha_beta(1.0, 0.0, &geo.conv, &xd, &x.host, &wd, &w.host, &yd, &mut want).unwrap();
                let fp = problem(geo, (&xd, &wd, &yd), Dir::Forward);
                let g = conflux::conv::Geom::of(fp.conv_problem().unwrap());
                for kern in gemm::available() {
                    for side in [8, 16, 32, 64] {
                        let plan = fft_conv::Plan::with_side(&g, &kern, side).unwrap();
                        orientations[plan.double_u as usize] = true;
                        let y = poisoned(&h, &yd);
                        let epi = CpuEpilogue::new(&[], &[], &yd, 1).unwrap();
                        let p = ConvPtrs { x: x.ptr().0, w: w.ptr().0, y: y.ptr().0, dt };
                        fft_conv::forward_on(kern, plan, &g, p, 1.0, 0.0, &epi, None);
                        let got = logical(&yd, &download(&h, &y));
                        assert_close(&format!("{geo:?} {} side {side} {dt:?} {lay:?}", kern.name), &got, &logical(&yd, &want), tolerance(dt));
                    }
                }
            }
        }
    }
    assert_eq!(orientations, [true, true], "both operands doubled in some case (V for few tiles, U for few filters)");
}

/// F(4×4,3×3)'s f32 error against the f64 reference on a deep reduction (C = 512), printed
/// (`--nocapture`) and held to the f32 tolerance.
#[test]
fn winograd4_f32_error_on_512_channels() {
    let h = Handle::cpu();
    let geo = make_geo(&[1, 1], &[1, 1], &[1, 1], 1, vec![2, 512, 16, 16], vec![64, 512, 3, 3]).unwrap();
    let dt = DataType::Float;
    let (xd, wd, yd) = (desc(dt, &geo.x, Lay::Packed), desc(dt, &geo.w, Lay::Packed), desc(dt, &geo.y, Lay::Packed));
    let x = random(&h, &xd, Fill::Normal, 1);
    let w = random(&h, &wd, Fill::Normal, 2);
    let mut want = vec![0.0; yd.element_space()];
    r::conv_forward_alpha_beta(1.0, 0.0, &geo.conv, &xd, &x.host, &wd, &w.host, &yd, &mut want).unwrap();
    for sol in [WINOGRAD4, WINOGRAD, IMPLICIT_GEMM] {
        let y = poisoned(&h, &yd);
        let ws = Workspace::default();
        api::forward(&h, &geo.conv, &xd, x.ptr(), &wd, w.ptr(), &yd, y.ptr(), 1.0, 0.0, conflux::conv::Choice::Solution(solution_id(sol)), ws).unwrap();
        let got = logical(&yd, &download(&h, &y));
        let c = conflux::reference::compare::Comparison::new(&got, &logical(&yd, &want));
        println!("solution {sol}: relative L2 error {:.2e}, max abs {:.2e}", c.rel_l2, c.max_abs);
        assert!(c.rel_l2 <= tolerance(dt), "solution {sol}: {:.3e}", c.rel_l2);
    }
}

/// F(4×4) paths the small random geometries miss: 16+ filters per block (vector output
/// transform), several channel chunks when the tasks transform the filters themselves, partial
/// tile panels, groups; exact small integers (few channels, so the scaled transforms stay
/// below 2^24) and random data.
#[test]
fn winograd4_wide_and_deep() {
    let h = Handle::cpu();
    let exact = [
        make_geo(&[1, 1], &[1, 1], &[1, 1], 1, vec![1, 8, 9, 10], vec![40, 8, 3, 3]).unwrap(),
        make_geo(&[0, 0], &[1, 1], &[1, 1], 2, vec![2, 12, 13, 11], vec![66, 6, 3, 3]).unwrap(),
    ];
    let deep = [
        make_geo(&[1, 1], &[1, 1], &[1, 1], 1, vec![1, 150, 8, 12], vec![40, 150, 3, 3]).unwrap(),
        make_geo(&[1, 1], &[1, 1], &[1, 1], 1, vec![3, 70, 15, 17], vec![33, 70, 3, 3]).unwrap(),
    ];
    for (gi, geo) in exact.iter().chain(&deep).enumerate() {
        for lay in LAYS {
            for dt in [DataType::Float, DataType::Half] {
                let (xd, wd, yd) = (desc(dt, &geo.x, lay), desc(dt, &geo.w, lay), desc(dt, &geo.y, lay));
                let s = 700 + gi as u64 * 10;
                assert!(check_solver(&h, &geo.case((&xd, &wd, &yd)), Dir::Forward, solution_id(WINOGRAD4), AB[gi % 4], Fill::Normal, tolerance(dt), s));
                if gi < exact.len() && dt == DataType::Float {
                    assert!(check_solver(&h, &geo.case((&xd, &wd, &yd)), Dir::Forward, solution_id(WINOGRAD4), AB_INT[gi % 4], Fill::SmallInt(-2, 2), 0.0, s + 5));
                }
            }
        }
    }
}

/// Task blocks of the F(4×4) driver on layers with many tiles: two tile blocks (each task
/// transforms its own filters) and five uneven ones (17 tile panels; a materialized U), with
/// and without constant weights (the kept U), NCHW and NHWC (y stored from the transform's
/// lanes; 75 filters: the last 16-lane group holds 11), exact data bit for bit.
#[test]
fn winograd4_tile_blocks() {
    let h = Handle::cpu();
    for (i, side) in [28usize, 56].into_iter().enumerate() {
        for constant in [false, true] {
            let mut geo = make_geo(&[1, 1], &[1, 1], &[1, 1], 1, vec![1, 8, side, side], vec![75, 8, 3, 3]).unwrap();
            geo.conv.set_attribute(ConvAttrib::ConstantWeights, constant as i64).unwrap();
            let dt = DataType::Float;
            for lay in [Lay::Packed, Lay::ChannelsLast, Lay::GappedChannelsLast] {
                let (xd, wd, yd) = (desc(dt, &geo.x, lay), desc(dt, &geo.w, lay), desc(dt, &geo.y, lay));
                assert!(check_solver(&h, &geo.case((&xd, &wd, &yd)), Dir::Forward, solution_id(WINOGRAD4), (1.0, 0.0), Fill::SmallInt(-2, 2), 0.0, 900 + i as u64));
            }
        }
    }
}

/// Layers of 16 tiles — F(4×4) on a 14×14 output, F(2×2) on 7×7 — whose GEMMs take the 8-row
/// tile panels (8 + 8, `wino4::panel_kernel`) where the CPU has AVX-512: through both solvers,
/// with and without constant weights, NCHW and NHWC, exact data bit for bit. 200 filters: with
/// two threads each task takes both tile panels, so the plain and the prefetching kernel run.
#[test]
fn winograd_sixteen_tiles() {
    use conflux::backend::cpu::winograd::{self as wino4, Variant};
    let h = Handle::cpu();
    for (sol, v, side) in [(WINOGRAD4, Variant::F4, 14usize), (WINOGRAD, Variant::F2, 7)] {
        for constant in [false, true] {
            let mut geo = make_geo(&[1, 1], &[1, 1], &[1, 1], 1, vec![1, 8, side, side], vec![200, 8, 3, 3]).unwrap();
            geo.conv.set_attribute(ConvAttrib::ConstantWeights, constant as i64).unwrap();
            let dt = DataType::Float;
            for lay in [Lay::Packed, Lay::ChannelsLast] {
                let (xd, wd, yd) = (desc(dt, &geo.x, lay), desc(dt, &geo.w, lay), desc(dt, &geo.y, lay));
                if lay == Lay::Packed && conflux::backend::cpu::gemm::kernel::avx512_8().is_some() {
                    let fp = problem(&geo, (&xd, &wd, &yd), Dir::Forward);
                    let g = conflux::conv::Geom::of(fp.conv_problem().unwrap());
                    assert_eq!(wino4::panel_kernel(&g, v).mr, 8, "{v:?} on {side}×{side}");
                }
                assert!(check_solver(&h, &geo.case((&xd, &wd, &yd)), Dir::Forward, solution_id(sol), (1.0, 0.0), Fill::SmallInt(-2, 2), 0.0, 950 + side as u64));
            }
        }
    }
}

/// The Winograd driver, F(4×4) and F(2×2), with every GEMM micro-kernel this CPU has, with
/// and without the AVX-512 intrinsic transforms (F(4×4) only; on other CPUs the lane-array
/// transforms run), forward and backward-data (the filter read flipped in place). The second
/// layer has enough tile panels for the tasks to transform their own input
/// (`Blocks::input_in_tasks`), the first does not.
#[test]
fn winograd4_every_kernel_and_transform_path() {
    use conflux::backend::cpu::{direct::naive::ConvPtrs, pointwise::epilogue::CpuEpilogue, gemm, winograd as wino4, winograd::Variant};
    let h = Handle::cpu();
    let geos = [
        make_geo(&[1, 1], &[1, 1], &[1, 1], 2, vec![2, 24, 11, 13], vec![42, 12, 3, 3]).unwrap(),
        make_geo(&[1, 1], &[1, 1], &[1, 1], 1, vec![1, 8, 38, 42], vec![20, 8, 3, 3]).unwrap(),
    ];
    for (geo, dt) in geos.iter().flat_map(|g| [(g, DataType::Float), (g, DataType::BFloat16)]) {
        for lay in [Lay::Packed, Lay::ChannelsLast] {
            let (xd, wd, yd) = (desc(dt, &geo.x, lay), desc(dt, &geo.w, lay), desc(dt, &geo.y, lay));
            let x = random(&h, &xd, Fill::Normal, 11);
            let w = random(&h, &wd, Fill::Normal, 12);
            let mut want = vec![0.0; yd.element_space()];
            r::conv_forward_alpha_beta(1.0, 0.0, &geo.conv, &xd, &x.host, &wd, &w.host, &yd, &mut want).unwrap();
            let fp = problem(&geo, (&xd, &wd, &yd), Dir::Forward);
            let g = conflux::conv::Geom::of(fp.conv_problem().unwrap());
            for (kern, v) in gemm::available().into_iter().flat_map(|k| [(k, Variant::F4), (k, Variant::F2)]) {
                for intrinsics in [false, true] {
                    let y = poisoned(&h, &yd);
                    let epi = CpuEpilogue::new(&[], &[], &yd, 1).unwrap();
                    let p = ConvPtrs { x: x.ptr().0, w: w.ptr().0, y: y.ptr().0, dt };
                    wino4::forward_with(kern, v, intrinsics, &g, wino4::FilterView::of(&g), p, 1.0, 0.0, &epi, None);
                    let got = logical(&yd, &download(&h, &y));
                    assert_close(&format!("{} {v:?} intrinsics={intrinsics} {dt:?} {lay:?}", kern.name), &got, &logical(&yd, &want), tolerance(dt));
                }
            }
            // Backward-data: dx = conv(dy, flipped w) with the filter read flipped in place.
            let dy = random(&h, &yd, Fill::Normal, 13);
            let mut want = vec![0.0; xd.element_space()];
            r::conv_backward_data_alpha_beta(1.0, 0.0, &geo.conv, &yd, &dy.host, &wd, &w.host, &xd, &mut want).unwrap();
            let bwd = problem(&geo, (&xd, &wd, &yd), Dir::BackwardData);
            let fwd = bwd.conv_problem().unwrap().backward_data_as_forward(Layout::NCHW).unwrap();
            let g = conflux::conv::Geom::of(&fwd);
            let fv = wino4::FilterView::flipped(&wd, geo.conv.groups());
            for (kern, v) in gemm::available().into_iter().flat_map(|k| [(k, Variant::F4), (k, Variant::F2)]) {
                for intrinsics in [false, true] {
                    let dx = poisoned(&h, &xd);
                    let epi = CpuEpilogue::new(&[], &[], &xd, 1).unwrap();
                    let p = ConvPtrs { x: dy.ptr().0, w: w.ptr().0, y: dx.ptr().0, dt };
                    wino4::forward_with(kern, v, intrinsics, &g, fv, p, 1.0, 0.0, &epi, None);
                    let got = logical(&xd, &download(&h, &dx));
                    assert_close(&format!("bwd-data {} {v:?} intrinsics={intrinsics} {dt:?} {lay:?}", kern.name), &got, &logical(&xd, &want), tolerance(dt));
                }
            }
        }
    }
}

#[test]
fn medium_shapes_span_gemm_blocks() {
    // K > 256 (several K blocks), n·P above one N block, M not a multiple of any MR.
    let h = Handle::cpu();
    let geos = [
        make_geo(&[1, 1], &[1, 1], &[1, 1], 1, vec![2, 40, 17, 19], vec![70, 40, 3, 3]).unwrap(),
        make_geo(&[0, 0], &[1, 1], &[1, 1], 1, vec![2, 300, 9, 7], vec![29, 300, 1, 1]).unwrap(),
        make_geo(&[1, 0], &[2, 1], &[1, 2], 2, vec![1, 36, 15, 13], vec![50, 18, 3, 2]).unwrap(),
        make_geo(&[1, 1], &[1, 1], &[1, 1], 64, vec![2, 64, 12, 12], vec![64, 1, 3, 3]).unwrap(),
    ];
    let solvers = [WINOGRAD4, WINOGRAD, IMPLICIT_GEMM, GEMM, DIRECT];
    let mut ran = [0usize; 5];
    for (gi, geo) in geos.iter().enumerate() {
        for lay in [Lay::Packed, Lay::ChannelsLast] {
            let dt = DataType::Float;
            let (xd, wd, yd) = (desc(dt, &geo.x, lay), desc(dt, &geo.w, lay), desc(dt, &geo.y, lay));
            for (si, sol) in solvers.into_iter().enumerate() {
                for (di, dir) in ALL.into_iter().enumerate() {
                    let ab = AB[(gi + di) % 4];
                    ran[si] += check_solver(&h, &geo.case((&xd, &wd, &yd)), dir, solution_id(sol), ab, Fill::Normal, tolerance(dt), 50 + gi as u64) as usize;
                }
            }
        }
    }
    // Each solver took some of these shapes (the others it must refuse by id too).
    for (sol, n) in solvers.iter().zip(ran) {
        assert!(n > 0, "{sol} took none of the medium shapes");
    }
}

/// NCHW strides with `gap` unused elements after each channel's (packed) positions and after
/// each image: the layouts the 1×1 solver takes besides packed ones.
fn nchw_gap(dt: DataType, lens: &[usize], gap: usize) -> TensorDesc {
    let mut s = vec![1; lens.len()];
    for d in (2..lens.len() - 1).rev() {
        s[d] = s[d + 1] * lens[d + 1];
    }
    s[1] = lens[2..].iter().product::<usize>() + gap;
    s[0] = lens[1] * s[1] + gap;
    TensorDesc::with_strides(dt, lens, &s).unwrap()
}

/// NHWC order (channels consecutive) with `gap` unused elements after every position and image.
fn nhwc_gap(dt: DataType, lens: &[usize], gap: usize) -> TensorDesc {
    let mut s = vec![0; lens.len()];
    s[1] = 1;
    let mut acc = lens[1] + gap;
    for d in (2..lens.len()).rev() {
        s[d] = acc;
        acc *= lens[d];
    }
    s[0] = acc + gap;
    TensorDesc::with_strides(dt, lens, &s).unwrap()
}

#[test]
fn gemm1x1_random_forward() {
    // 1×1 stride-1 unpadded f32 NCHW and NHWC layers (gaps too), 2-D and 3-D,
    // groups, several K blocks, every α/β (other than 1, 0 they go through the generic GEMM),
    // exact and random data. The solver needs AVX-512, and must say so elsewhere.
    let h = Handle::cpu();
    let avx512 = conflux::backend::cpu::conv1x1::channels_kernel::best().is_some();
    let amx = conflux::backend::cpu::x86::amx::available();
    let mut rng = SplitMix64::new(8);
    for case in 0..24usize {
        let nd = if case % 5 == 4 { 3 } else { 2 };
        let g = rng.pick(&[1, 1, 2]);
        // Contracting and expanding layers (K up to 70 for C from 1).
        // Cases 2 and 3 mod 4 (NCHW, NHWC) have C·K ≥ 4096 and mid-sized images for the AMX
        // solver.
        let big = case % 4 >= 2;
        let cg = if case % 6 == 5 { 300 } else if big { rng.range(64, 100) } else { rng.range(1, 40) };
        let kg = if big { rng.range(64, 90) } else { rng.range(1, 70) };
        let mut x = vec![rng.range(1, 3), g * cg];
        // 2-D cases 2 and 3 mod 4: images of 256..1023 positions, which the positions-in-lanes
        // driver takes where NCHW (`conv1x1_pos::suits`), and enough tiles for the AMX solver.
        let mid = nd == 2 && case % 4 >= 2;
        for _ in 0..nd {
            x.push(if mid { rng.range(16, 31) } else { rng.range(1, if nd == 3 { 5 } else { 16 }) });
        }
        let w = [vec![g * kg, cg], vec![1; nd]].concat();
        let mut geo = make_geo(&vec![0; nd], &vec![1; nd], &vec![1; nd], g, x, w).unwrap();
        // Constant weights on half the cases, flipped from case 12 on so that every layout and
        // size class meets both.
        let constant = (case / 2 % 2 == 1) != (case >= 12);
        geo.conv.set_attribute(ConvAttrib::ConstantWeights, constant as i64).unwrap();
        let dt = DataType::Float;
        let gap = (case % 3) * 2;
        // NCHW with gaps after channels and images, or NHWC (packed, or with gaps after
        // positions and images) with a KRSC filter.
        let (xd, wd, yd) = match case % 4 {
            1 => (nhwc_gap(dt, &geo.x, gap), desc(dt, &geo.w, Lay::ChannelsLast), nhwc_gap(dt, &geo.y, gap)),
            3 => (desc(dt, &geo.x, Lay::ChannelsLast), desc(dt, &geo.w, Lay::ChannelsLast), desc(dt, &geo.y, Lay::ChannelsLast)),
            _ => (nchw_gap(dt, &geo.x, gap), desc(dt, &geo.w, Lay::Packed), nchw_gap(dt, &geo.y, gap)),
        };
        let exact = case % 2 == 0;
        let ab = if case % 4 == 3 { (if exact { AB_INT } else { AB })[1 + case % 3] } else { (1.0, 0.0) };
        let (fill, tol) = if exact { (Fill::SmallInt(-2, 2), 0.0) } else { (Fill::Normal, tolerance(dt)) };
        let ran = check_solver(&h, &geo.case((&xd, &wd, &yd)), Dir::Forward, solution_id(GEMM1X1), ab, fill, tol, 800 + case as u64 * 10);
        assert_eq!(ran, avx512, "{geo:?}: the 1×1 solver applies exactly when AVX-512 is there");
        // The AMX solver, NCHW and NHWC (bf16×6 keeps f32's tolerance; small integers exact).
        let ran = check_solver(&h, &geo.case((&xd, &wd, &yd)), Dir::Forward, solution_id(AMX1X1), ab, fill, tol, 805 + case as u64 * 10);
        {
            use conflux::solver::cpu::amx1x1::{MIN_MACS_PER_POSITION, MIN_TILES, MIN_TILES_SPLITTING_W};
            let tiles = geo.y[0] * geo.y[2..].iter().product::<usize>().div_ceil(32);
            let few = conflux::backend::cpu::conv1x1::amx::few_tiles_split(tiles, kg.div_ceil(32), cg, case % 2 == 1, rayon::current_num_threads());
            let enough = (tiles >= MIN_TILES || kg.div_ceil(32) >= 2 * tiles || few) && (constant || tiles >= MIN_TILES_SPLITTING_W) && cg * kg >= MIN_MACS_PER_POSITION;
            assert_eq!(ran, amx && enough, "{geo:?}: the AMX solver applies with {tiles} tiles exactly where AMX is there and {MIN_TILES} tiles and C·K ≥ {MIN_MACS_PER_POSITION} are");
        }
        if !avx512 {
            let fp = problem(&geo, (&xd, &wd, &yd), Dir::Forward);
            let why = solver(GEMM1X1).check(&fp, h.device().info()).unwrap_err();
            assert!(why.contains("AVX-512"), "{why}");
        }
    }
}

/// NCHW images with channel rows of 4 KiB and more (≥ 1024 positions) at batch 1: the
/// positions-in-lanes driver takes them while x and y stay small (`conv1x1_pos::suits`), with
/// a masked last tile, K blocks over many channels, gaps, constant weights or not, α/β.
#[test]
fn gemm1x1_large_rows_at_batch_one() {
    let h = Handle::cpu();
    let avx512 = conflux::backend::cpu::conv1x1::channels_kernel::best().is_some();
    let specs: [(usize, usize, usize, usize); 4] = [(24, 40, 40, 20), (32, 37, 41, 16), (300, 33, 33, 24), (16, 64, 48, 96)];
    for (case, &(c, hh, ww, k)) in specs.iter().enumerate() {
        let mut geo = make_geo(&[0, 0], &[1, 1], &[1, 1], 1, vec![1, c, hh, ww], vec![k, c, 1, 1]).unwrap();
        geo.conv.set_attribute(ConvAttrib::ConstantWeights, (case % 2) as i64).unwrap();
        let dt = DataType::Float;
        let (xd, wd, yd) = (nchw_gap(dt, &geo.x, 2 * case), desc(dt, &geo.w, Lay::Packed), nchw_gap(dt, &geo.y, case));
        for (i, ab) in [(1.0, 0.0), AB_INT[1 + case % 3]].into_iter().enumerate() {
            let ran = check_solver(&h, &geo.case((&xd, &wd, &yd)), Dir::Forward, solution_id(GEMM1X1), ab, Fill::SmallInt(-2, 2), 0.0, 900 + 10 * case as u64 + i as u64);
            assert_eq!(ran, avx512, "{geo:?}: the 1×1 solver applies exactly when AVX-512 is there");
        }
    }
}

#[test]
fn fused_bias_relu_per_algorithm() {
    // conv + bias + ReLU, and + ReLU6-like CLIPPEDRELU, through a fusion plan restricted to
    // each algorithm; the plan must pick the new solver (the same for both: the clamp takes
    // ReLU's fast stores), and the epilogue runs on its tiles.
    let h = Handle::cpu();
    type Case = (ConvAlgorithm, &'static str, [usize; 4], [usize; 4], i64);
    let cases: [Case; 8] = [
        (ConvAlgorithm::Winograd, "CpuConvWinogradF4x3", [2, 8, 9, 10], [12, 8, 3, 3], 1),
        // 2 × 2 F(4×4) tiles: F(2×2), its 4 × 3 tiles partial in the last row, 16 + 4 filters.
        (ConvAlgorithm::Winograd, "CpuConvWinogradF2x3", [1, 8, 7, 6], [20, 8, 3, 3], 1),
        (ConvAlgorithm::Fft, "CpuConvFft", [1, 32, 24, 24], [32, 32, 9, 9], 4),
        (ConvAlgorithm::ImplicitGemm, "CpuConvImplicitGemm", [2, 8, 9, 10], [12, 8, 3, 3], 1),
        (ConvAlgorithm::Gemm, "CpuConvGemm", [2, 8, 9, 10], [12, 8, 3, 3], 0),
        (ConvAlgorithm::Gemm, "CpuConvGemm1x1", [2, 40, 9, 10], [70, 40, 1, 1], 0),
        (ConvAlgorithm::Direct, "CpuConvDirect", [2, 6, 9, 10], [6, 2, 3, 3], 1),
        (ConvAlgorithm::Direct, "CpuConvDirectTaps", [2, 8, 12, 31], [40, 8, 5, 5], 2),
    ];
    let avx512 = conflux::backend::cpu::conv1x1::channels_kernel::best().is_some();
    let amx = conflux::backend::cpu::x86::amx::available();
    for (algo, name, xl, wl, pad) in cases {
        for (dt, layout) in [(DataType::Float, Layout::NCHW), (DataType::Float, Layout::NHWC), (DataType::Half, Layout::NHWC), (DataType::BFloat16, Layout::NCHW)] {
            for (exact, act) in [(false, ActivationMode::Relu), (true, ActivationMode::Relu), (false, ActivationMode::ClippedRelu), (true, ActivationMode::ClippedRelu)] {
                if exact && dt != DataType::Float {
                    continue;
                }
                // α inside the data's range, so the clamp bites: 6 (ReLU6) on small-integer
                // sums, 0.75 on normal data.
                let cap = if exact { 6.0 } else { 0.75 };
                let groups = xl[1] / wl[1];
                let mut conv = ConvDesc::new(ConvMode::Convolution, &[pad, pad], &[1, 1], &[1, 1]).unwrap();
                conv.set_groups(groups as i64).unwrap();
                // The FFT solver takes this small a layer only with its filter transform kept.
                conv.set_attribute(ConvAttrib::ConstantWeights, i64::from(algo == ConvAlgorithm::Fft)).unwrap();
                let xd = TensorDesc::with_layout(dt, layout, &xl).unwrap();
                let wd = TensorDesc::with_layout(dt, layout, &wl).unwrap();
                let bd = TensorDesc::new(dt, &[1, wl[0], 1, 1]).unwrap();
                let mut plan = FusionPlan::new(FusionDirection::Vertical, xd.clone());
                plan.set_algo(algo);
                plan.add_conv_forward(&conv, &wd).unwrap();
                plan.add_bias(&bd).unwrap();
                plan.add_activation(act).unwrap();
                plan.compile(&h).unwrap_or_else(|e| panic!("{name}: {e}"));
                // The 1×1 solver takes f32 NCHW and NHWC on AVX-512 machines; the generic GEMM the rest.
                // and the AMX solver precedes it on f32 with enough 32-position tiles (or
                // twice as many 32-filter blocks) where the CPU has AMX (not here: 6 tiles, 3
                // blocks).
                let (tiles, fblocks) = (xl[0] * (xl[2] * xl[3]).div_ceil(32), wl[0].div_ceil(32));
                let few = conflux::backend::cpu::conv1x1::amx::few_tiles_split(tiles, fblocks, wl[1], layout == Layout::NHWC, rayon::current_num_threads());
                let enough = tiles >= conflux::solver::cpu::amx1x1::MIN_TILES || fblocks >= 2 * tiles || few;
                let name = match name {
                    "CpuConvGemm1x1" if dt == DataType::Float && amx && enough => "CpuConvAmx1x1",
                    "CpuConvGemm1x1" if !(avx512 && dt == DataType::Float) => "CpuConvGemm",
                    // f32 on AVX-512 only; the naive solver is the Direct algorithm's last.
                    "CpuConvDirectTaps" if !(avx512 && dt == DataType::Float) => "CpuConvNaive",
                    _ => name,
                };
                assert_eq!(plan.solver_name(), Some(name), "{algo:?} {dt:?} {layout:?} {act:?}");
                let fill = if exact { Fill::SmallInt(-2, 2) } else { Fill::Normal };
                let (got, want) = run_bias_act_plan(&h, &plan, &conv, (&xd, &wd, &bd), act, cap, fill, 1);
                // The FFT rounds integer data (irrational twiddles); the others keep it exact.
                let tol = if !exact { tolerance(dt) } else if algo == ConvAlgorithm::Fft { 1e-6 } else { 0.0 };
                assert_close(&format!("{name} {dt:?} {layout:?} exact={exact} {act:?}"), &got, &want, tol);
            }
        }
    }
}

/// Runs a compiled conv + bias + activation (ReLU, or CLIPPEDRELU at α = `cap`) plan on
/// random x, w and b (`fill`, seeds `seed`..`seed + 2`) into a poisoned y: (y as the plan wrote
/// it, the f64 reference), both in logical order.
#[allow(clippy::too_many_arguments)]
fn run_bias_act_plan(h: &Handle, plan: &FusionPlan, conv: &ConvDesc, (xd, wd, bd): (&TensorDesc, &TensorDesc, &TensorDesc), act: ActivationMode, cap: f64, fill: Fill, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let yd = plan.output_desc().clone();
    let (x, w, b) = (random(h, xd, fill, seed), random(h, wd, fill, seed + 1), random(h, bd, fill, seed + 2));
    let y = poisoned(h, &yd);
    let mut args = OpArgs::new();
    args.set(0, OpArg::Conv { w: w.ptr(), alpha: 1.0, beta: 0.0 });
    args.set(1, OpArg::Bias { b: b.ptr() });
    args.set(2, OpArg::Activation { alpha: cap, beta: 0.0, gamma: 0.0 });
    plan.execute(h, xd, x.ptr(), &yd, y.ptr(), &args).unwrap();
    let ypacked = TensorDesc::new(yd.dtype(), yd.lens()).unwrap();
    let mut want = vec![0.0; ypacked.element_space()];
    r::conv::conv_forward(conv, xd, &x.host, wd, &w.host, &ypacked, &mut want).unwrap();
    let (k, plane) = (yd.lens()[1], yd.lens()[2] * yd.lens()[3]);
    for (i, v) in want.iter_mut().enumerate() {
        let pre = *v + b.host[(i / plane) % k];
        *v = if act == ActivationMode::Relu { pre.max(0.0) } else { pre.max(0.0).min(cap) };
    }
    (logical(&yd, &download(h, &y)), want)
}

/// conv + bias + ReLU / CLIPPEDRELU plans pinned to the rewriting solvers and the stem kernel:
/// the live taps (the epilogue runs over y after the taps' sums), the strided 1×1 and patches
/// (the epilogue goes to the inner 1×1 solver) and the stem (row spans through the shared
/// store), f32 NCHW and NHWC, exact small integers bit for bit.
#[test]
fn fused_bias_relu_on_rewriting_solvers() {
    let h = Handle::cpu();
    let avx512 = conflux::backend::cpu::conv1x1::channels_kernel::best().is_some();
    // (solver, x lengths, w lengths, pad = dilation, stride)
    let cases: [(&str, [usize; 4], [usize; 4], i64, i64); 4] =
        [(LIVE_TAPS, [1, 16, 12, 12], [24, 16, 3, 3], 8, 1), (SUBSAMPLE_1X1, [2, 32, 9, 10], [24, 32, 1, 1], 0, 2), (SUBSAMPLE_1X1, [1, 16, 8, 10], [24, 16, 2, 2], 0, 2), (STEM, [2, 3, 21, 37], [20, 3, 3, 3], 1, 2)];
    for (name, xl, wl, pad, stride) in cases {
        for layout in [Layout::NCHW, Layout::NHWC] {
            for act in [ActivationMode::Relu, ActivationMode::ClippedRelu] {
                let dt = DataType::Float;
                let dil = pad.max(1);
                let conv = ConvDesc::new(ConvMode::Convolution, &[pad, pad], &[stride, stride], &[dil, dil]).unwrap();
                let xd = TensorDesc::with_layout(dt, layout, &xl).unwrap();
                let wd = TensorDesc::with_layout(dt, layout, &wl).unwrap();
                let bd = TensorDesc::new(dt, &[1, wl[0], 1, 1]).unwrap();
                let mut plan = FusionPlan::new(FusionDirection::Vertical, xd.clone());
                plan.add_conv_forward(&conv, &wd).unwrap();
                plan.add_bias(&bd).unwrap();
                plan.add_activation(act).unwrap();
                plan.set_solution(Some(solution_id(name)));
                if let Err(e) = plan.compile(&h) {
                    // The strided 1×1 hands its problem to the AVX-512 / AMX 1×1 solvers only.
                    assert!(name == SUBSAMPLE_1X1 && !avx512, "{name} {layout:?}: {e}");
                    continue;
                }
                assert_eq!(plan.solver_name(), Some(name));
                let (got, want) = run_bias_act_plan(&h, &plan, &conv, (&xd, &wd, &bd), act, 6.0, Fill::SmallInt(-2, 2), 5);
                assert_close(&format!("{name} {layout:?} {act:?}"), &got, &want, 0.0);
            }
        }
    }
}

/// The AMX 1×1 solver on an N=1 layer with few position tiles and many filter blocks, where
/// each thread splits all of x and takes a share of the filters (`few_tiles_split`), with
/// and without constant weights, exact and random data, NCHW and NHWC.
#[test]
fn amx_few_tiles_many_filters() {
    let h = Handle::cpu();
    let geo = make_geo(&[0, 0], &[1, 1], &[1, 1], 1, vec![1, 96, 14, 14], vec![300, 96, 1, 1]).unwrap();
    let threads = rayon::current_num_threads();
    for (lay, nhwc) in [(Lay::Packed, false), (Lay::ChannelsLast, true)] {
        for constant in [true, false] {
            let mut geo = make_geo(&[0, 0], &[1, 1], &[1, 1], 1, geo.x.clone(), geo.w.clone()).unwrap();
            geo.conv.set_attribute(ConvAttrib::ConstantWeights, constant as i64).unwrap();
            let dt = DataType::Float;
            let (xd, wd, yd) = (desc(dt, &geo.x, lay), desc(dt, &geo.w, lay), desc(dt, &geo.y, lay));
            let few = conflux::backend::cpu::conv1x1::amx::few_tiles_split(7, 10, 96, nhwc, threads);
            for (exact, seed) in [(true, 900), (false, 910)] {
                let (fill, tol) = if exact { (Fill::SmallInt(-2, 2), 0.0) } else { (Fill::Normal, tolerance(dt)) };
                let ran = check_solver(&h, &geo.case((&xd, &wd, &yd)), Dir::Forward, solution_id(AMX1X1), (1.0, 0.0), fill, tol, seed);
                assert_eq!(ran, conflux::backend::cpu::x86::amx::available() && few, "{lay:?} constant {constant}: applies exactly where AMX and the few-tiles split are");
            }
        }
    }
}

#[test]
fn refusals_name_the_cause() {
    let h = Handle::cpu();
    let dt = DataType::Float;
    let why = |geo: &Geo, dir: Dir, id: &str| {
        let (xd, wd, yd) = (desc(dt, &geo.x, Lay::Packed), desc(dt, &geo.w, Lay::Packed), desc(dt, &geo.y, Lay::Packed));
        solver(id).check(&problem(geo, (&xd, &wd, &yd), dir), h.device().info()).unwrap_err()
    };
    let g5 = make_geo(&[2, 2], &[1, 1], &[1, 1], 1, vec![1, 8, 9, 9], vec![8, 8, 5, 5]).unwrap();
    assert!(why(&g5, Dir::Forward, WINOGRAD).contains("3×3"));
    assert!(why(&g5, Dir::Forward, WINOGRAD4).contains("3×3"));
    assert!(why(&g5, Dir::BackwardData, WINOGRAD4).contains("3×3"));
    assert!(why(&g5, Dir::BackwardWeights, WINOGRAD4).contains("forward only"));
    assert!(why(&g5, Dir::BackwardData, WINOGRAD).contains("forward only"));
    assert!(why(&g5, Dir::BackwardWeights, IMPLICIT_GEMM).contains("forward only"));
    assert!(why(&g5, Dir::Forward, DIRECT).contains("reduction"));
    // Huge padding: the planar solvers would copy a 10⁸-element plane per task.
    let huge = make_geo(&[5000, 5000], &[1, 1], &[1, 1], 4, vec![1, 4, 10, 10], vec![4, 1, 3, 3]).unwrap();
    assert!(why(&huge, Dir::Forward, DIRECT).contains("padded input plane"));
    let s2 = make_geo(&[1, 1], &[2, 2], &[1, 1], 1, vec![1, 8, 9, 9], vec![8, 8, 3, 3]).unwrap();
    assert!(why(&s2, Dir::Forward, WINOGRAD).contains("stride"));
    assert!(why(&s2, Dir::Forward, WINOGRAD4).contains("stride"));
    assert!(why(&s2, Dir::Forward, FFT).contains("stride"));
    assert!(why(&g5, Dir::BackwardData, FFT).contains("forward only"));
    assert!(why(&g5, Dir::Forward, FFT).contains("estimated"));
    assert!(why(&s2, Dir::BackwardData, WINOGRAD4).contains("stride"));
    let wide_pad = make_geo(&[3, 3], &[1, 1], &[1, 1], 1, vec![1, 8, 9, 9], vec![8, 8, 3, 3]).unwrap();
    assert!(why(&wide_pad, Dir::BackwardData, WINOGRAD4).contains("padding 3 exceeds"));
    let deep = make_geo(&[1, 1], &[1, 1], &[1, 1], 1, vec![1, 1024, 4, 4], vec![1024, 1024, 3, 3]).unwrap();
    assert!(why(&deep, Dir::Forward, WINOGRAD4).contains("tiles"));
    let few = make_geo(&[1, 1], &[1, 1], &[1, 1], 1, vec![1, 2, 9, 9], vec![8, 2, 3, 3]).unwrap();
    assert!(why(&few, Dir::Forward, WINOGRAD).contains("channels"));
    assert!(why(&few, Dir::Forward, WINOGRAD4).contains("channels"));
    assert!(why(&few, Dir::Forward, FFT).contains("channels"));
    assert!(why(&s2, Dir::Forward, DIRECT_TAPS).contains("stride"));
    assert!(why(&g5, Dir::BackwardData, DIRECT_TAPS).contains("forward only"));
    assert!(why(&deep, Dir::Forward, DIRECT_TAPS).contains("reduction"));
    // The FFT solver applies to a 7×7 layer at ResNet width without the promise (estimated
    // ~3× faster than direct there).
    let big = make_geo(&[3, 3], &[1, 1], &[1, 1], 1, vec![1, 64, 56, 56], vec![64, 64, 7, 7]).unwrap();
    let (xd, wd, yd) = (desc(dt, &big.x, Lay::Packed), desc(dt, &big.w, Lay::Packed), desc(dt, &big.y, Lay::Packed));
    assert_eq!(solver(FFT).check(&problem(&big, (&xd, &wd, &yd), Dir::Forward), h.device().info()), Ok(()));
    assert!(why(&g5, Dir::Forward, GEMM1X1).contains("1×1"));
    let one = make_geo(&[0, 0], &[1, 1], &[1, 1], 1, vec![1, 8, 9, 9], vec![8, 8, 1, 1]).unwrap();
    assert!(why(&one, Dir::Forward, DIRECT_TAPS).contains("taps"));
    let depthwise = make_geo(&[2, 2], &[1, 1], &[1, 1], 8, vec![1, 8, 9, 9], vec![8, 1, 5, 5]).unwrap();
    assert!(why(&depthwise, Dir::Forward, DIRECT_TAPS).contains("filters per group"));
    assert!(why(&one, Dir::BackwardData, GEMM1X1).contains("forward only"));
    let gapped = |d: DataType, l: &[usize]| desc(d, l, Lay::Gapped);
    let check = |d: DataType, lay: &dyn Fn(DataType, &[usize]) -> TensorDesc| {
        let fp = problem(&one, (&lay(d, &one.x), &desc(d, &one.w, Lay::Packed), &lay(d, &one.y)), Dir::Forward);
        solver(GEMM1X1).check(&fp, h.device().info()).unwrap_err()
    };
    assert!(check(DataType::Half, &|d, l| desc(d, l, Lay::Packed)).contains("f32 only"));
    assert!(check(dt, &gapped).contains("neither its positions nor its channels consecutive"));
}

#[test]
fn gemm_workspace_is_exact_and_checked() {
    // im2col needs C/G·filter·output f32; 1×1 stride-1 pad-0 needs none; too little is refused.
    let h = Handle::cpu();
    let dt = DataType::Float;
    let solver = solver(GEMM);
    let g3 = make_geo(&[1, 1], &[1, 1], &[1, 1], 2, vec![1, 6, 7, 8], vec![4, 3, 3, 3]).unwrap();
    let g1 = make_geo(&[0, 0], &[1, 1], &[1, 1], 1, vec![1, 6, 7, 8], vec![4, 6, 1, 1]).unwrap();
    let ds = |g: &Geo| (desc(dt, &g.x, Lay::Packed), desc(dt, &g.w, Lay::Packed), desc(dt, &g.y, Lay::Packed));
    let (x3, w3, y3) = ds(&g3);
    assert_eq!(solver.workspace_bytes(&problem(&g3, (&x3, &w3, &y3), Dir::Forward)), 4 * 3 * 9 * 7 * 8);
    let (x1, w1, y1) = ds(&g1);
    assert_eq!(solver.workspace_bytes(&problem(&g1, (&x1, &w1, &y1), Dir::Forward)), 0);
    let x = random(&h, &x3, Fill::Normal, 1);
    let w = random(&h, &w3, Fill::Normal, 2);
    let y = sentinel(&h, &y3, 7.0);
    let e = api::forward(&h, &g3.conv, &x3, x.ptr(), &w3, w.ptr(), &y3, y.ptr(), 1.0, 0.0, conflux::conv::Choice::Solution(solution_id(GEMM)), Workspace::default());
    expect_err("undersized workspace", e, conflux::Status::BadParm, &["workspace"]);
    assert_unchanged("y after a refused run", &h, &y);
}
