"""ResNet-18/34/50 encoders with the CIFAR stem, a projection head and a normalization layer.

The backbone is torchvision's ResNet (he2016deep; ``torchvision/models/resnet.py`` of pytorch/vision): the
same blocks (:class:`BasicBlock` for resnet18/34, :class:`Bottleneck` with the stride on the 3x3 convolution,
"ResNet v1.5", for resnet50), the same stage layout (blocks [2, 2, 2, 2], [3, 4, 6, 3], [3, 4, 6, 3]; widths
64, 128, 256, 512; strides 1, 2, 2, 2), the same module names (so a torchvision ``state_dict`` without
``fc`` loads into :attr:`ResNetEncoder.backbone`) and the same initialization (convolutions
``kaiming_normal_(mode="fan_out", nonlinearity="relu")``, batch-norm weight 1 and bias 0).

The stem is the CIFAR stem of the paper authors' code (rjiang03/HCL, ``main/UCL/model.py`` and
``main/SCL/model.py``, class ``Model``): ``conv1`` is a 3x3 convolution with stride 1, padding 1 and no bias,
the max-pool is removed, and so is the final ``fc``; global average pooling gives the features
h [B, F] (F = 512 for resnet18/34, 2048 for resnet50). Their projection head is

    g = Linear(F, 512, bias=False) -> BatchNorm1d(512) -> ReLU -> Linear(512, d)

(``head="mlp"`` here, the default; ``head="linear"`` is one ``Linear(F, d)``), and their output is
z / max(1, ||z||), which is ``norm="ball"`` of :class:`ncgeom.models.Normalize` (docs/theory.md,
section 1). The encoder computes

.. math:: z = \\mathrm{normalize}(g(h(x))),\\qquad x \\in \\mathbb{R}^{B\\times 3\\times H\\times W},

where h = :meth:`ResNetEncoder.features` and normalize = ``norm`` (none / ball / sphere).

Why not torchvision: with the pinned CPU torch (2.13.0+cpu), PyPI's torchvision wheel is a CUDA build whose
``_C`` extension does not load (``import torchvision`` raises "operator torchvision::nms does not exist").
This module therefore has no torchvision dependency; tests/test_resnet.py compares it with torchvision's
resnet18/34/50 (weights copied, features equal) only where ``import torchvision`` works, and skips otherwise.

Initialization never touches torch's global RNG: the modules are built on the ``meta`` device, moved to
real (empty) storage and filled from an explicit ``torch.Generator``.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import nn

from ncgeom.models.normalize import Normalize
from ncgeom.validate import require_choice, require_int
from ncgeom.vocabulary import RESNET_KINDS, Normalization, ResNetKind

__all__ = [
    "BasicBlock",
    "Bottleneck",
    "ResNetBackbone",
    "ResNetEncoder",
    "resnet_feature_dim",
    "HEADS",
]

Head = Literal["mlp", "linear"]
HEADS: tuple[Head, ...] = ("mlp", "linear")

# (block, blocks per stage) as in torchvision's resnet18 / resnet34 / resnet50.
_LAYOUT: dict[str, tuple[str, tuple[int, int, int, int]]] = {
    "resnet18": ("basic", (2, 2, 2, 2)),
    "resnet34": ("basic", (3, 4, 6, 3)),
    "resnet50": ("bottleneck", (3, 4, 6, 3)),
}
_WIDTHS = (64, 128, 256, 512)
_STRIDES = (1, 2, 2, 2)
_HIDDEN = 512  # width of the authors' projection head (rjiang03/HCL, Model.g)


def _conv3x3(cin: int, cout: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, kernel_size=3, stride=stride, padding=1, bias=False)


def _conv1x1(cin: int, cout: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, kernel_size=1, stride=stride, bias=False)


def _downsample(cin: int, cout: int, stride: int) -> nn.Sequential | None:
    """The projection shortcut (1x1 convolution + batch norm) when the shape changes, else None (identity)."""
    if stride == 1 and cin == cout:
        return None
    return nn.Sequential(_conv1x1(cin, cout, stride), nn.BatchNorm2d(cout))


class BasicBlock(nn.Module):
    """y = relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)), two 3x3 convolutions (resnet18/34)."""

    expansion = 1

    def __init__(self, cin: int, planes: int, stride: int = 1):
        super().__init__()
        self.conv1 = _conv3x3(cin, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = _conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = _downsample(cin, planes, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    """1x1 -> 3x3 (stride here, torchvision's v1.5) -> 1x1 (4x wider) + shortcut, then relu (resnet50)."""

    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int = 1):
        super().__init__()
        self.conv1 = _conv1x1(cin, planes)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = _conv3x3(planes, planes, stride)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = _conv1x1(planes, planes * self.expansion)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = _downsample(cin, planes * self.expansion, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


def resnet_feature_dim(kind: ResNetKind) -> int:
    """F, the width of the pooled features: 512 (resnet18, resnet34) or 2048 (resnet50)."""
    kind = require_choice("model", kind, RESNET_KINDS)
    block = BasicBlock if _LAYOUT[kind][0] == "basic" else Bottleneck
    return _WIDTHS[-1] * block.expansion


class ResNetBackbone(nn.Module):
    """torchvision's ResNet with the CIFAR stem, without max-pool and fc: x [B, 3, H, W] -> h [B, F].

    Built with random-free default tensors; :class:`ResNetEncoder` initializes it from a generator.
    """

    def __init__(self, kind: ResNetKind):
        super().__init__()
        kind = require_choice("model", kind, RESNET_KINDS)
        block_name, counts = _LAYOUT[kind]
        block: type[BasicBlock] | type[Bottleneck] = BasicBlock if block_name == "basic" else Bottleneck
        self.conv1 = _conv3x3(3, 64)  # the CIFAR stem (rjiang03/HCL); torchvision: 7x7, stride 2, then max-pool
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        cin = 64
        stages = []
        for planes, stride, count in zip(_WIDTHS, _STRIDES, counts):
            blocks = []
            for b in range(count):
                blocks.append(block(cin, planes, stride if b == 0 else 1))
                cin = planes * block.expansion
            stages.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.feature_dim = cin

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return torch.flatten(self.avgpool(x), 1)


class ResNetEncoder(nn.Module):
    """z = normalize(g(h(x))): a CIFAR-stem ResNet h, a projection head g to d dimensions, a normalization.

    Parameters
    ----------
    kind : {"resnet18", "resnet34", "resnet50"}
    dim : int
        d >= 1, the dimension of z.
    norm : {"none", "ball", "sphere"}
        The normalization (docs/theory.md, section 1); the authors' code uses "ball".
    head : {"mlp", "linear"}
        "mlp": Linear(F, 512, bias=False) -> BatchNorm1d -> ReLU -> Linear(512, d) (rjiang03/HCL);
        "linear": Linear(F, d).
    generator : torch.Generator
        The only source of randomness of the initialization; the model is created on its device.
    dtype : torch.dtype

    Examples
    --------
    >>> enc = ResNetEncoder(kind="resnet18", dim=8, generator=torch.Generator().manual_seed(0))
    >>> enc(torch.zeros(2, 3, 32, 32)).shape
    torch.Size([2, 8])

    Notes
    -----
    The network has batch norm, so train mode (the default) normalizes with batch statistics and needs
    batches of more than one sample; call ``.eval()`` to encode with the running statistics.
    """

    takes_indices = False

    def __init__(self, *, kind: ResNetKind = "resnet18", dim: int = 128, norm: Normalization = "sphere",
                 head: Head = "mlp", generator: torch.Generator, dtype: torch.dtype = torch.float32):
        super().__init__()
        kind = require_choice("model", kind, RESNET_KINDS)
        d = require_int("dim", dim, min_value=1)
        head = require_choice("head", head, HEADS)
        if not isinstance(generator, torch.Generator):
            raise ValueError("generator must be a torch.Generator")
        if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
            raise ValueError(f"dtype must be a floating torch.dtype, got {dtype!r}")
        self.kind = kind
        with torch.device("meta"):  # no storage, no draw from the global RNG
            self.backbone = ResNetBackbone(kind)
            f = self.backbone.feature_dim
            if head == "mlp":
                self.head: nn.Module = nn.Sequential(nn.Linear(f, _HIDDEN, bias=False), nn.BatchNorm1d(_HIDDEN),
                                                     nn.ReLU(inplace=True), nn.Linear(_HIDDEN, d))
            else:
                self.head = nn.Linear(f, d)
        self.norm = Normalize(norm)
        self.to_empty(device=torch.device(generator.device))
        self.to(dtype)
        _initialize(self, generator)
        self.feature_dim = f
        self.dim = d

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The pooled backbone features h(x) [B, F] (the representation used for linear evaluation)."""
        if x.ndim != 4 or x.shape[1] != 3:
            raise ValueError(f"x must be a batch of RGB images [B, 3, H, W], got shape {tuple(x.shape)}")
        return self.backbone(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The normalized projections z [B, d] of the images x [B, 3, H, W]."""
        return self.norm(self.head(self.features(x)))


def _initialize(model: nn.Module, generator: torch.Generator) -> None:
    """torchvision's ResNet initialization (and torch's nn.Linear default for the head), drawn from ``generator``."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu", generator=generator)
            elif isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
                m.reset_running_stats()
            elif isinstance(m, nn.Linear):
                # as nn.Linear.reset_parameters: kaiming_uniform_(a=sqrt 5) = U(+-1/sqrt(fan_in)), bias alike
                bound = 1.0 / math.sqrt(m.in_features)
                m.weight.uniform_(-bound, bound, generator=generator)
                if m.bias is not None:
                    m.bias.uniform_(-bound, bound, generator=generator)
