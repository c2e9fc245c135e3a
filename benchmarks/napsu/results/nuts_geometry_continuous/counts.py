"""Real-data row counts of the cells of the parameters with wide / skewed whitened draws (diagnostic only)."""
import sys, json, re, numpy as np
sys.path.insert(0, "/work/runs/s51/wt/benchmarks/napsu")
import continuous_coverage as cc
from scipy import stats
df, _ = cc.load()
params = json.load(open("params.json"))
Z = np.load("z1.npy"); d = Z.shape[-1]; flat = Z.reshape(-1, d)
sd, sk, mz = flat.std(0), stats.skew(flat, axis=0), flat.mean(0)
def match(col, v):
    x = df[col]
    m = re.fullmatch(r"\[(\d+), (\d+)([)\]])", v)
    if m:
        lo, hi, br = int(m[1]), int(m[2]), m[3]
        x = x.astype(float)
        return (x >= lo) & ((x < hi) if br == ")" else (x <= hi))
    return x.astype(str) == v
sel = sorted(set(np.argsort(-sd)[:20]) | set(np.argsort(-np.abs(sk))[:15]) | set(np.argsort(-np.abs(mz))[:10]))
rows = []
for p in sel:
    q = params[p]
    total = 0
    for cell in q["cells"]:
        m = np.ones(len(df), bool)
        for col, v in zip(q["marginal"], cell):
            m &= match(col, v).to_numpy()
        total += int(m.sum())
    rows.append((p, round(float(sd[p]), 2), round(float(sk[p]), 2), round(float(mz[p]), 2), "/".join(q["marginal"]),
                 "slope" if q["slope"] else f"ord{q['order']}", q["n_members"], q["cells"][0], q["cells"][-1] if len(q["cells"]) > 1 else "", total))
for r in rows: print(r)
json.dump([list(map(str, r)) for r in rows], open("flagged_counts.json", "w"))
