# Merges passes of `bench_cpu conv` (the same build, or a new and a baseline build) into one table.
# Columns are found by their header names, so tables of older builds with fewer columns merge too.
# Per row and column: the minimum over passes of the medians (the least disturbed pass); oneDNN
# columns take the minimum over every pass given. Also the per-pass geomeans, where conflux and
# oneDNN ran next to each other.
# usage: python3 bench/cpu_conv_agg.py N new1.md,new2.md [base1.md,base2.md]
import sys, math

def parse(f):
    rows, head = {}, None
    for l in open(f):
        c = [x.strip() for x in l.strip().strip('|').split('|')]
        if c and c[0] == 'config':
            head = c
        elif head and len(c) == len(head) and c[0][:1].isdigit():
            rows[c[0]] = dict(zip(head, c))
    return rows

def num(r, key):
    try:
        return float(r[key])
    except (KeyError, ValueError):
        return float('nan')

def best_peer(r):
    v = [num(r, k) for k in ('oneDNN any µs', 'oneDNN nchw µs', 'oneDNN wino µs')]
    v = [x for x in v if not math.isnan(x)]
    return min(v) if v else float('nan')

def geo(xs):
    xs = [x for x in xs if not math.isnan(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float('nan')

n = sys.argv[1]
new = [parse(f) for f in sys.argv[2].split(',')]
base = [parse(f) for f in sys.argv[3].split(',')] if len(sys.argv) > 3 else []
order = list(new[0].keys())
cols = [('conflux NCHW µs', 'NCHW'), ('NCHW const-w µs', 'NCHW const-w'), ('NHWC const-w µs', 'NHWC const-w')]

def mn(passes, cfg, key):
    v = [num(p[cfg], key) for p in passes if cfg in p]
    v = [x for x in v if not math.isnan(x)]
    return min(v) if v else float('nan')

f = lambda x: 'n/a' if math.isnan(x) else f"{x:.0f}"
head = ['config', 'N'] + (['baseline NCHW µs'] if base else []) + [c[1] + ' µs' for c in cols] + ['oneDNN best µs'] + \
       (['baseline / oneDNN'] if base else []) + [c[1] + ' / oneDNN' for c in cols]
print('| ' + ' | '.join(head) + ' |')
print('|---|' + '---:|' * (len(head) - 1))
ratios = {c[1]: [] for c in cols}
bratios = []
for cfg in order:
    peer = min(best_peer(p[cfg]) for p in new + base if cfg in p)
    vals = [mn(new, cfg, c[0]) for c in cols]
    b = mn(base, cfg, 'conflux NCHW µs') if base else None
    for c, v in zip(cols, vals):
        ratios[c[1]].append(v / peer)
    cells = [cfg, n] + ([f(b)] if base else []) + [f(v) for v in vals] + [f(peer)]
    if base:
        bratios.append(b / peer)
        cells.append(f"{b / peer:.2f}")
    cells += [f"{v / peer:.2f}" for v in vals]
    print('| ' + ' | '.join(cells) + ' |')
print()
if base:
    print(f"geomean baseline NCHW / oneDNN best at N={n}: {geo(bratios):.2f}")
for c in cols:
    print(f"geomean {c[1]} / oneDNN best at N={n} (min over passes): {geo(ratios[c[1]]):.2f}")
for i, p in enumerate(new):
    per = [', '.join(f"{c[1]} {geo([num(r, c[0]) / best_peer(r) for r in p.values()]):.2f}" for c in cols)]
    print(f"pass {i + 1} (conflux and oneDNN side by side): {per[0]}")
