# Run on the GPU machine: Nsight Compute evidence, per problem, for why the fused forward
# kernel is where it is against cuDNN. For each row of LIST and each precision, profiles the
# conflux conv kernel of `ex/bench_cba` (the fourth launch: after the warm-up ones) and prints
# one line: kernel time, grid vs the 132 SMs, SM-active share of elapsed cycles, tensor-pipe
# share of active cycles, issue rate and the three largest stall reasons (warps stalled per
# issued instruction). Raw ncu CSV goes to $OUT/gap_profile_raw.csv.
# Usage: python3 gap_profile.py LIST N [precisions...]   (names as in bench_spec.py)
import csv, io, os, subprocess, sys, time
from bench_spec import SPEC

lst, N = sys.argv[1], int(sys.argv[2])
precs = sys.argv[3:] or ["fp16", "bf16", "tf32"]
here = os.path.dirname(os.path.abspath(__file__))
out = os.environ.get("OUT", "/tmp")
budget_s = float(os.environ.get("GAP_BUDGET_S", "420"))
cfgs = [l.strip() for l in open(lst) if l.strip() and not l.startswith("#")]
sections = ["LaunchStats", "SpeedOfLight", "WarpStateStats", "ComputeWorkloadAnalysis"]
raw = open(os.path.join(out, "gap_profile_raw.csv"), "w")
start = time.time()


def profile(cfg, cdt, clay):
    one = os.path.join(here, "gap_row.txt")
    open(one, "w").write(cfg + "\n")
    cmd = ["ncu", "--csv", "--page", "details", "--print-details", "all", "--kernel-name", "regex:igemm",
           "--launch-skip", "3", "--launch-count", "1"]
    for s in sections:
        cmd += ["--section", s]
    cmd += [os.path.join(here, "ex", "bench_cba"), one, str(N), cdt, clay, "5"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    text = res.stdout[res.stdout.find('"ID"'):] if '"ID"' in res.stdout else ""
    metrics = {}
    for row in csv.DictReader(io.StringIO(text)):
        raw.write(f'{cfg},{cdt},{clay},"{row["Section Name"]}","{row["Metric Name"]}","{row["Metric Unit"]}","{row["Metric Value"]}"\n')
        metrics[row["Metric Name"]] = row["Metric Value"]
    if not metrics:
        sys.stderr.write(res.stdout[-1500:] + res.stderr[-1500:])
    return metrics


def num(m, key):
    try:
        return float(m.get(key, "nan").replace(",", ""))
    except ValueError:
        return float("nan")


print("| precision | problem | kernel (us) | grid | SM active / elapsed | tensor pipe / active | issue slots busy | top stalls (warps per issued instr.) |")
print("|---|---|---:|---:|---:|---:|---:|---|")
for prec in precs:
    _, _, cdt, clay = SPEC[prec]
    for cfg in cfgs:
        if time.time() - start > budget_s:
            print(f"(stopped: {budget_s:.0f} s budget spent)")
            sys.exit(0)
        m = profile(cfg, cdt, clay)
        if not m:
            print(f"| {prec} | {cfg} | profile failed | | | | | |", flush=True)
            continue
        dur = num(m, "Duration")
        unit_scale = 1e-3 if "Duration" in m and num(m, "Duration") > 1000 else 1.0  # ns -> us when ncu reports ns
        active, elapsed = num(m, "SM Active Cycles"), num(m, "Elapsed Cycles")
        tensor = [(k, num(m, k)) for k in m if "ensor" in k and "%" not in k]
        stalls = sorted(((num(m, k), k) for k in m if k.startswith("Stall ") or "stalled" in k), reverse=True)[:3]
        top = ", ".join(f"{k.replace('Stall ', '').lower()} {v:.2f}" for v, k in stalls)
        tens = "; ".join(f"{k} {v:.1f}" for k, v in tensor[:2]) or "n/a"
        print(f"| {prec} | {cfg} | {dur * unit_scale:.1f} | {m.get('Grid Size', '?')} | {100 * active / elapsed:.0f}% | {tens} | "
              f"{m.get('Issue Slots Busy', '?')} | {top} |", flush=True)
raw.close()
