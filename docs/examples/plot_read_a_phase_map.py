"""
# Read a phase map

A phase map colours a grid of settings by the geometry training ends in: NC (neural collapse), DC (dimensional
collapse) or neither, and "not converged" for a run that has not converged (it decides nothing). This example runs a
small one with ``ncgeom.phase`` (what ``ncgeom phase SPEC --out DIR`` runs): HUCL over the hardness beta and the
dimension d, C = 4 classes, one seed, at most 200 epochs, so that it runs in about a minute. The shipped maps (``ncgeom phase
--list``) and what they show are in docs/results.md, "Where DC happens"; the rules in docs/theory.md, section 9,
"Phase maps".
"""

# %%
# The map spec, as a TOML file would give it: two axes (beta refined, d not), the fixed fields, the seeds. With
# ``levels = 1`` the first grid takes every other beta, and the betas between two cells that disagree are trained
# next; those between two cells that agree are inferred.
import tempfile
from pathlib import Path

from ncgeom.phase.figure import plot_map
from ncgeom.phase.records import Overlays
from ncgeom.phase.run import run_map
from ncgeom.phase.spec import map_spec_from_dict

spec = map_spec_from_dict({
    "name": "example", "levels": 1, "seeds": [0],
    "x": {"field": "beta", "values": [0.0, 1.0, 2.0, 3.0, 4.0]},
    "y": {"field": "dim", "values": [3, 4, 5], "refine": False},
    "base": {"setting": "hucl", "classes": 4, "samples_per_class": 16, "test_per_class": 4, "batch_size": 32,
             "epochs": 200, "lr": 0.05, "metrics_every": 5, "stop": "converged"},
})
out = Path(tempfile.mkdtemp())
record = run_map(spec, out, scale="quick", figures=False)
print(record.table_text())

# %%
# Each cell holds its seeds' classes, the mean of the deciding metrics and, per run, the epoch its spectrum dropped
# below 1e-2, the epoch it entered NC and its effective rank over the epochs.
for cell in record.cells[:3]:
    print(cell.ix, cell.iy, cell.source, cell.label, cell.counts_text(),
          [(r.nc_entry_epoch, r.rank_drop_epoch) for r in cell.runs])

# %%
# The heat map: one colour per label (pale: inferred), the boundary between labels as a black line, and the theory's
# lines where they live in these coordinates (here the HUCL thresholds by (C, d) and d = C - 1, computed by
# proofs_check; overlays.json says which evidence each has).
overlays = Overlays.load(out)
for line in overlays.lines:
    print(f"{line.name}: {line.evidence}, values {[round(v, 3) if v else v for v in line.values]}")
(path,) = plot_map(record, overlays, out)
print(path.name)

import matplotlib.pyplot as plt  # noqa: E402  (the gallery shows the figures left open)

plt.figure(figsize=(8, 4))
plt.imshow(plt.imread(path))
plt.axis("off")
