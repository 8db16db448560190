"""Parameters of the reproduction at each scale: how much computation ``ncgeom reproduce`` spends.

The scale names are ncgeom.vocabulary.SCALES; the claim sweeps use the table of the same name in each spec.

- ``tiny``: for the end-to-end tests (well under a minute): the fastest checks and sweeps.
- ``quick``: the default, every claim at reduced size (under 3 minutes on 2 CPU cores; the budget is
  10 minutes).
- ``full``: the paper-scale settings (5 seeds, 325 runs: about 23 minutes on 2 cores; see docs/getting_started.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ncgeom.validate import require_choice
from ncgeom.vocabulary import SCALES, SETTINGS, PhaseSource, Scale, is_hard

__all__ = ["ScaleParameters", "scale_parameters"]


@dataclass(frozen=True)
class ScaleParameters:
    """Parameters of one reproduction scale (the scales of ncgeom.vocabulary.SCALES).

    name : the scale name, also the scale of the claim sweeps (the [tiny]/[quick]/[full] tables of the specs)
    verify : "quick", "full" or "skip": how proofs_check.report.run_all is called
    verify_modules : the proofs_check checker modules run (None: all of them)
    num_classes : C of the theory curves (nc values vs beta)
    num_negatives : the k values of the theory curves
    theory_betas : beta grid of the theory curves
    harris_models : number of random finite latent models in the Harris-gap figure
    harris_betas : beta grid of the Harris-gap figure
    harris_k : number of negatives k of the Harris-gap population losses
    certificate_cases : (setting, C, k, tau, domain) infonce cases certified by convex optimization,
        in addition to the certificates the verify stage ran
    figure_formats : image formats of the figures (tiny: PNG only, for speed)
    phase_maps : the shipped phase maps (ncgeom.phase) of the phase stage at this scale (tiny: the first one's 2 x 2
        smoke map)
    phase_source : "train": the phase stage trains ``phase_maps`` at this scale (tiny); "shipped": it reads their
        records shipped with the package (:mod:`ncgeom.phase.shipping`, computed by ``ncgeom phase NAME`` on the
        confirmatory seeds: about an hour each, beyond the quick and full reproductions)
    hucl_betas, hucl_classes, hucl_starts : beta grid, C and number of L-BFGS starts of the HUCL
        exploration (used only when the verify stage did not produce one)
    """

    name: Scale
    verify: Literal["quick", "full", "skip"]
    num_classes: int
    num_negatives: tuple[int, ...]
    theory_betas: tuple[float, ...]
    harris_models: int
    harris_betas: tuple[float, ...]
    harris_k: int
    certificate_cases: tuple[tuple[str, int, int, float, str], ...]
    hucl_betas: tuple[float, ...]
    hucl_classes: int = 4
    hucl_starts: int = 4
    verify_modules: tuple[str, ...] | None = None
    figure_formats: tuple[str, ...] = ("png", "pdf")
    phase_maps: tuple[str, ...] = ("phase_classes_batch", "phase_norm_encoder", "phase_hucl_beta_dim")
    phase_source: PhaseSource = "shipped"


_PLAIN_SETTINGS = tuple(s for s in SETTINGS if not is_hard(s))  # scl, ucl: the certified cases
_BETA_GRID = tuple(float(b) for b in (0, 0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30))

_SCALES = {
    "tiny": ScaleParameters(
        name="tiny",
        verify="quick",
        num_classes=10,
        num_negatives=(1, 16),
        theory_betas=(0.0, 2.0, 5.0, 10.0, 30.0),
        harris_models=3,
        harris_betas=(0.0, 1.0, 5.0),
        harris_k=2,
        certificate_cases=(("scl", 3, 1, 1.0, "sphere"),),
        hucl_betas=(0.0, 2.0, 5.0),
        hucl_classes=3,
        hucl_starts=1,
        verify_modules=("harris",),
        figure_formats=("png",),
        phase_maps=("phase_classes_batch",),
        phase_source="train",
    ),
    "quick": ScaleParameters(
        name="quick",
        verify="quick",
        num_classes=10,
        num_negatives=(1, 4, 16, 256),
        theory_betas=_BETA_GRID,
        harris_models=12,
        harris_betas=(0.0, 0.5, 1.0, 2.0, 5.0, 10.0),
        harris_k=2,
        certificate_cases=tuple(
            (setting, c, k, tau, domain)
            for setting in _PLAIN_SETTINGS
            for c, k, tau, domain in ((3, 2, 1.0, "sphere"), (5, 2, 1.0, "ball"), (6, 2, 0.5, "sphere"), (8, 1, 1.0, "ball"))
        ),
        hucl_betas=(0.0, 1.0, 2.0, 5.0, 10.0, 30.0),
    ),
    "full": ScaleParameters(
        name="full",
        verify="full",
        num_classes=10,
        num_negatives=(1, 4, 16, 64, 256),
        theory_betas=tuple(float(b) for b in (0, 0.25, 0.5, 1, 1.5, 2, 3, 4, 5, 7.5, 10, 12.5, 15, 20, 25, 30)),
        harris_models=40,
        harris_betas=(0.0, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 7.5, 10.0),
        harris_k=3,
        certificate_cases=tuple(
            (setting, c, k, tau, domain)
            for setting in _PLAIN_SETTINGS
            for domain in ("ball", "sphere")
            for c, k, tau in ((3, 1, 1.0), (4, 2, 0.5), (5, 2, 1.0), (6, 3, 1.0), (8, 2, 0.5), (10, 1, 1.0), (10, 2, 1.0))
        ),
        hucl_betas=(0.0, 0.5, 1.0, 2.0, 3.0, 5.0, 7.5, 10.0, 20.0, 30.0),
        hucl_starts=8,
    ),
}


def scale_parameters(name: str) -> ScaleParameters:
    """The :class:`ScaleParameters` of the scale ``name`` (tiny, quick or full)."""
    return _SCALES[require_choice("scale", name, SCALES)]
