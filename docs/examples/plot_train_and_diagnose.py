"""
# Train and diagnose

Train one small run (unconstrained features, hard supervised contrastive loss, features on the sphere), then
read its geometry: the NC metrics of docs/theory.md, section 8, and the one-word diagnosis NC, DC or neither
(``ncgeom.metrics.outcome``). The same on the command line: ``ncgeom train ... --out DIR`` then
``ncgeom metrics DIR/embeddings.npz``.
"""

# %%
# One run: C = 4 classes in d = 3 dimensions (the smallest with a simplex ETF), 60 epochs, one seed.
from ncgeom.runs import Config, run

config = Config(setting="hscl", beta=5.0, norm="sphere", classes=4, samples_per_class=16, test_per_class=4,
                dim=3, batch_size=32, epochs=60, lr=0.05, metrics_every=10, seed=0)
result = run(config)
print(result.status, f"final loss - NC value = {result.gap:.2e}")

# %%
# The metrics of the final embeddings, and the diagnosis with the thresholds every claim uses.
from ncgeom.metrics import nc_metrics
from ncgeom.metrics.outcome import classify_geometry

metrics = nc_metrics(result.embeddings, result.labels).to_dict()
for key in ("etf_distance", "within_class", "rankme"):
    print(f"{key:14s} {metrics[key]:.3g}")
print("diagnosis:", classify_geometry(metrics, dim=config.dim, num_classes=config.classes))

# %%
# The history: the distance to the simplex ETF falls towards 0 as training goes.
import matplotlib.pyplot as plt

epochs = [r.epoch for r in result.history if r.metrics]
etf = [r.metrics["etf_distance"] for r in result.history if r.metrics]
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.semilogy(epochs, etf, marker="o")
ax.set_xlabel("epoch")
ax.set_ylabel("ETF distance")
ax.set_title("HSCL, beta = 5, sphere")
fig.tight_layout()
