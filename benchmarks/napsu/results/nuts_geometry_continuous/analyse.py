import json, sys
import numpy as np
from scipy import stats
OUT = "/work/runs/s51/helper_nuts/"
f = np.load(OUT + "fit1.npz")
params = json.load(open(OUT + "params.json"))
draws, mean, chol = f["draws"], f["mean"], f["chol"]
C, S, d = draws.shape
Z = np.load(OUT + "z1.npy")
flat = Z.reshape(-1, d)
sd = flat.std(0); sk = stats.skew(flat, axis=0); ku = stats.kurtosis(flat, axis=0)
mz = flat.mean(0)
sd_c = Z.std(1)  # per chain
print("step sizes", f["step_size"], "divergences", f["diverging"].sum())
print("z sd quantiles", np.quantile(sd, [0, .05, .25, .5, .75, .95, 1]).round(3))
print("z mean quantiles", np.quantile(mz, [0, .05, .5, .95, 1]).round(3))
print("skew quantiles", np.quantile(sk, [0, .05, .5, .95, 1]).round(3))
print("n sd>1.5", (sd > 1.5).sum(), "sd<0.5", (sd < .5).sum(), "|skew|>0.5", (np.abs(sk) > .5).sum())
def show(p):
    q = params[p]
    return (f"z{p:3d} sd {sd[p]:5.2f} (chains {np.round(sd_c[:, p], 2)}) mean {mz[p]:+5.2f} skew {sk[p]:+5.2f} kurt {ku[p]:+5.2f} | "
            f"{'/'.join(q['marginal'])} ord{q['order']} {'SLOPE ' if q['slope'] else ''}mem{q['n_members']} "
            f"cells {q['cells'][:3]} count {q['count']:.1f} sd {q['sd']:.1f} (count/sd {q['count']/q['sd']:.2f})")
print("--- largest sd"); [print(show(p)) for p in np.argsort(-sd)[:15]]
print("--- smallest sd"); [print(show(p)) for p in np.argsort(sd)[:8]]
print("--- largest |skew|"); [print(show(p)) for p in np.argsort(-np.abs(sk))[:12]]
# theta-space: which theta params? whitened coordinate p is not parameter p; map z axis -> theta via chol column
# Covariance and correlation eigen-structure
Cz = np.cov(flat, rowvar=False)
w, V = np.linalg.eigh(Cz)
print("cov(z) eig: top", w[-8:].round(3), "bottom", w[:8].round(4), "ratio", w[-1] / w[0])
R = Cz / np.outer(sd, sd)
wr, Vr = np.linalg.eigh(R)
print("corr(z) eig: top", wr[-8:].round(3), "bottom", wr[:8].round(4), "ratio", wr[-1] / wr[0])
# sampling noise of eigenvalues with N draws: for identity, MP law edges
N = flat.shape[0]; g = d / N
print("MP edges for identity with N=%d, d=%d: [%.3f, %.3f] (ESS lower -> wider)" % (N, d, (1 - g**.5)**2, (1 + g**.5)**2))
# eigen-directions in theta space: direction v in z -> chol @ v in theta; report top z-components and theta comps
for name, idx in (("largest", [-1, -2, -3]), ("smallest", [0, 1, 2])):
    for i in idx:
        v = V[:, i]
        top = np.argsort(-np.abs(v))[:5]
        th = chol @ v; th = th / np.linalg.norm(th); tt = np.argsort(-np.abs(th))[:5]
        print(f"{name} eig {w[i]:.3f}: z comps {[(int(j), round(float(v[j]), 2)) for j in top]}; theta comps "
              f"{[(int(j), round(float(th[j]), 2)) for j in tt]}")
        for j in tt[:3]:
            q = params[j]; print("     theta", j, "/".join(q["marginal"]), "SLOPE" if q["slope"] else "", q["cells"][:2], "count %.1f sd %.1f" % (q["count"], q["sd"]))
# ESS-ish: per-chain stds agreement
