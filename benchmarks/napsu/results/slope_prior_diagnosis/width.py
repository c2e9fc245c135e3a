"""What drives the Framingham posterior's width: delta-method attribution of the exact OLS slope's posterior variance to parameter groups."""
from pathlib import Path
import sys, warnings, collections
import numpy as np
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # benchmarks/napsu
import framingham_ols as F
from synthinfer.generate import NapsuMQ
from synthinfer._precision import float64

design, eps, seed, inter = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
warnings.simplefilter("ignore")
df, domain = F.table(design)
real = F.ols(df); rq, se = real.params.to_numpy(), real.bse.to_numpy()
gen = NapsuMQ(F.marginals(), epsilon=eps, inference="laplace", coarse_interactions=inter, seed=seed).fit(df, domain)
lap = gen.laplace_
mean0 = np.asarray(lap.mean, float)
def coef(theta):
    gen.laplace_ = type(lap)(theta, lap.cov, lap.chol, lap.optim, 0.0)
    return np.asarray(F.model_at_mode(gen, df)["coef"])
with float64():
    c0 = coef(mean0)
    d = mean0.size; h = 1e-4
    J = np.stack([(coef(mean0 + h*e) - coef(mean0 - h*e)) / (2*h) for e in np.eye(d)], axis=1)  # (4, d)
    cov = np.asarray(lap.cov)
    rng = np.random.default_rng(0)
    draws = np.stack([coef(t) for t in lap.sample(200, rng)])
print("mode err (se):", ((c0 - rq) / se).round(2))
print("delta sd / real se:", (np.sqrt(np.einsum('kd,de,ke->k', J, cov, J)) / se).round(2))
print("draws sd / real se:", (draws.std(0) / se).round(2), " draws mean err:", ((draws.mean(0) - rq) / se).round(2))
q = gen.network_.queries
labels = []
for i in range(d):
    m = q.queryset.marginals[int(q.query_marginal[i])]
    labels.append(("+".join(m.columns), int(q.order[i]), "slope" if q.is_slope[i] else "cell"))
for k, name in [(2, "BMI"), (1, "age")]:
    contrib = J[k] * (cov @ J[k])
    agg = collections.defaultdict(float)
    for lab, c in zip(labels, contrib): agg[lab] += c
    tot = contrib.sum()
    print(f"--- {name}: variance {tot:.4g} (real se^2 {se[k]**2:.4g}); share by group:")
    for lab, v in sorted(agg.items(), key=lambda t: -abs(t[1]))[:12]:
        print(f"   {lab}: {v/tot:+.3f}")
# prior-only comparison: which parameters have posterior sd near the prior's
sd = np.sqrt(np.diag(cov))
print("params with posterior sd > 0.5:", int((sd > 0.5).sum()), "of", d)
# nonlinear attribution: vary one group of parameters at a time (the others at the mean)
thetas = lap.sample(200, np.random.default_rng(0))
groups = collections.defaultdict(list)
for i, lab in enumerate(labels): groups[lab].append(i)
with float64():
    for lab, idx in sorted(groups.items()):
        vals = []
        for t in thetas:
            x = mean0.copy(); x[idx] = t[idx]; vals.append(coef(x))
        vals = np.asarray(vals)
        print(f"only {lab} ({len(idx)} params): sd/se", (vals.std(0) / se).round(2), "max|err| BMI", np.abs((vals[:,2]-c0[2])/se[2]).max().round(1))
