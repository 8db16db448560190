"""Encoders: a run's model, built by name (:func:`build_model`), each ending in a normalization layer.

- :mod:`.normalize`: :class:`Normalize` (none / ball / sphere, docs/theory.md, section 1);
- :mod:`.encoders`: :class:`UnconstrainedFeatures`, :class:`LinearEncoder`, :class:`MLPEncoder` (vector data);
- :mod:`.resnet`: :class:`ResNetEncoder` (ResNet-18/34/50 with the CIFAR stem and the authors' head; images);
- :mod:`.stacked`: :class:`StackedEncoder` (R encoders of one kind as parameters [R, ...], the stacked driver);
- :mod:`.build`: :func:`build_model`.

Initialization never touches torch's global RNG: weights are filled from an explicit ``torch.Generator``
(random) or ``numpy.random.Generator`` (near-NC ETF). Importing this package imports torch.
"""

from ncgeom.models.build import build_model
from ncgeom.models.encoders import LinearEncoder, MLPEncoder, UnconstrainedFeatures
from ncgeom.models.normalize import Normalize
from ncgeom.models.resnet import ResNetEncoder
from ncgeom.models.stacked import StackedEncoder

__all__ = [
    "Normalize",
    "UnconstrainedFeatures",
    "LinearEncoder",
    "MLPEncoder",
    "ResNetEncoder",
    "StackedEncoder",
    "build_model",
]
