"""
# Check your own loss

Wrap a psi (a loss of the k differences t_i = <z, z_i^-> - <z, z^+>) and an eta (the hardening weight of a
negative by its similarity to the anchor), check the hypotheses that Theorems 1-3 need (psi convex and
non-decreasing, eta non-decreasing and >= 0: docs/theory.md, sections 2-4), and get the loss at neural
collapse, the optimum when they hold. docs/check_your_loss.md goes further (hypothesis strategies).
"""

# %%
# A smooth triplet loss and an exponential hardening, as numpy functions (torch works too, for training).
import numpy as np

from ncgeom.losses import check_convex, check_monotone, custom_eta, custom_psi


def smooth_triplet(t, margin=0.5):
    """(1/k) sum_i softplus(t_i + margin)."""
    return np.logaddexp(0.0, t + margin).mean(axis=-1)


psi = custom_psi(smooth_triplet, name="smooth-triplet", symmetric=True, margin=0.5)
eta = custom_eta(lambda s: np.exp(3.0 * s) + 1.0, name="exp(3s)+1")

# %%
# The hypotheses, checked on random points (a numerical check: a sample, not a proof). Randomness is an
# explicit generator.
rng = np.random.default_rng(0)
for name, verdict in [("psi convex", check_convex(psi, k=3, rng=rng)),
                      ("psi non-decreasing", check_monotone(psi, k=3, rng=rng)),
                      ("eta non-decreasing", check_monotone(eta, rng=rng))]:
    print(f"{name:20s} holds={verdict.holds}")

# %%
# A check that cannot fail is worthless: a decreasing eta is caught, with a witness.
bad = check_monotone(custom_eta(lambda s: np.exp(-2.0 * s), name="exp(-2s)"), rng=rng)
print("decreasing eta holds:", bad.holds, "witness:", bad.witness)

# %%
# The loss at neural collapse (the simplex ETF), the minimum for SCL/HSCL and UCL when the hypotheses hold
# (docs/theory.md, section 5), against the hardness beta: HSCL stays at the SCL value, HUCL rises above UCL.
import matplotlib.pyplot as plt

from ncgeom.theory import nc_value

betas = np.linspace(0.0, 10.0, 21)
fig, ax = plt.subplots(figsize=(6, 3.5))
for setting in ("hscl", "hucl"):
    values = [nc_value(setting, psi, num_classes=10, num_negatives=4, beta=b) for b in betas]
    ax.plot(betas, values, label=setting.upper())
ax.set_xlabel("beta")
ax.set_ylabel("loss at NC")
ax.set_title("smooth triplet, C = 10, k = 4")
ax.legend()
fig.tight_layout()
