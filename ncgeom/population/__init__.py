"""Population losses of finite latent-class models, exactly or by Monte Carlo (docs/theory.md section 3).

Submodules: ``model`` (the latent-class model and its constructors), ``loss`` (the four losses).
"""

from ncgeom.population.loss import PopulationLoss, negative_law, population_loss, positive_law
from ncgeom.population.model import FiniteLatentModel, model_from_embeddings, nc_model

__all__ = [
    "FiniteLatentModel",
    "model_from_embeddings",
    "nc_model",
    "PopulationLoss",
    "population_loss",
    "negative_law",
    "positive_law",
]
