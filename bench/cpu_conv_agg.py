# Merges several `bench_cpu conv` tables (passes of the new build and of a baseline build) into one:
# per row, the min over passes of each median; oneDNN columns take the min over all passes.
# usage: python3 bench/cpu_conv_agg.py N new1.md,new2.md base1.md,base2.md
import sys, math, glob
def parse(f):
    rows = {}
    for l in open(f):
        c = [x.strip() for x in l.strip().strip('|').split('|')]
        if len(c) == 11 and c[0][0].isdigit():
            rows[c[0]] = dict(probe=float(c[2]), nchw=float(c[3]), solver=c[4], nhwc=float(c[6]), any=float(c[7]), dnchw=float(c[8]), wino=float(c[9]))
    return rows
n = sys.argv[1]
new = [parse(f) for f in sys.argv[2].split(',')]
base = [parse(f) for f in sys.argv[3].split(',')]
allp = new + base
order = list(new[0].keys())
def mn(ps, cfg, key):
    v = [p[cfg][key] for p in ps if cfg in p and not math.isnan(p[cfg][key])]
    return min(v) if v else float('nan')
print("| config | N | conflux before µs | conflux NCHW µs | solver | GFLOP/s | conflux NHWC µs | oneDNN any µs | oneDNN nchw µs | oneDNN wino µs | before / oneDNN best | NCHW / oneDNN best |")
print("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
lb = ln = 0.0
for cfg in order:
    c = [int(x) for x in cfg.split('-')]
    N = int(n)
    ho, wo = c[1] + 2*c[6] + 1 - c[4], c[2] + 2*c[7] + 1 - c[5]
    gf = 2.0 * N * c[3] * ho * wo * c[0] * c[4] * c[5] * 1e-9
    b, v, h = mn(base, cfg, 'nchw'), mn(new, cfg, 'nchw'), mn(new, cfg, 'nhwc')
    solver = min((p[cfg]['nchw'], p[cfg]['solver']) for p in new if cfg in p)[1]
    a, dn, w = mn(allp, cfg, 'any'), mn(allp, cfg, 'dnchw'), mn(allp, cfg, 'wino')
    best = min(x for x in (a, dn, w) if not math.isnan(x))
    lb += math.log(b / best); ln += math.log(v / best)
    f = lambda x: 'n/a' if math.isnan(x) else f"{x:.0f}"
    print(f"| {cfg} | {N} | {b:.0f} | {v:.0f} | {solver} | {gf / v * 1e6:.0f} | {h:.0f} | {f(a)} | {f(dn)} | {f(w)} | {b / best:.2f} | {v / best:.2f} |")
k = len(order)
print(f"\ngeomean NCHW / oneDNN best at N={n}: before {math.exp(lb / k):.2f}, after {math.exp(ln / k):.2f}")
