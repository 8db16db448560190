"""
# Read a phase map

A phase map colours a grid of settings by the geometry training ends in: NC (neural collapse), DC (dimensional
collapse) or neither. This example builds a small one itself, from 6 short runs (loss setting x feature
normalization, one seed each), so that it runs in seconds; ``ncgeom phase``, when it lands, will draw such maps
from sweeps and this page will use it. The diagnosis of each run is ``ncgeom.metrics.outcome.classify_geometry``,
with the thresholds of the claims (docs/theory.md, sections 8-9).
"""

# %%
# The grid: SCL, HSCL at beta = 5 and HUCL at beta = 30, each with features on the sphere and unnormalized;
# 80 epochs, unconstrained features, C = 4 classes in d = 3 dimensions.
import numpy as np

from ncgeom.metrics import nc_metrics
from ncgeom.metrics.outcome import classify_geometry
from ncgeom.runs import Config, run

losses = (("scl", 0.0), ("hscl", 5.0), ("hucl", 30.0))
norms = ("sphere", "none")
phase = {}
for setting, beta in losses:
    for norm in norms:
        config = Config(setting=setting, beta=beta, norm=norm, classes=4, samples_per_class=16, test_per_class=4,
                        dim=3, batch_size=32, epochs=80, lr=0.05, metrics_every=80, seed=0)
        result = run(config)
        metrics = nc_metrics(result.embeddings, result.labels).to_dict()
        phase[setting, norm] = classify_geometry(metrics, dim=config.dim, num_classes=config.classes)
        print(f"{setting:5s} beta {beta:4g}  {norm:6s}  {phase[setting, norm]:8s} etf_distance "
              f"{metrics['etf_distance']:.3f}, smallest spectrum value {min(metrics['spectrum']):.4f}")

# %%
# The map, one cell per setting. Read it row by row: on the sphere SCL and HSCL end at NC (claim 1 of the paper)
# and HUCL at a large beta does not (claim 3); unnormalized, no run reaches NC, and the smallest class-mean
# spectrum value says how close each is to DC (below 1e-2: DC). One seed and 80 epochs: an illustration of how to
# read a map, not evidence; the claims' sweeps decide with seeds and intervals (docs/results.md).
import matplotlib.pyplot as plt

codes = {"NC": 0, "neither": 1, "DC": 2, "undefined": 3}
grid = np.array([[codes[phase[s, n]] for s, _ in losses] for n in norms])
fig, ax = plt.subplots(figsize=(5.5, 2.8))
ax.imshow(grid, cmap="viridis", vmin=0, vmax=3)
for i, n in enumerate(norms):
    for j, (s, _) in enumerate(losses):
        ax.text(j, i, phase[s, n], ha="center", va="center", color="white" if grid[i, j] < 2 else "black")
ax.set_xticks(range(len(losses)), [f"{s.upper()}, beta {b:g}" for s, b in losses])
ax.set_yticks(range(len(norms)), norms)
ax.set_title("phase map (a stand-in for ncgeom phase)")
fig.tight_layout()
