"""ResNet encoders with the CIFAR stem (ncgeom.models.resnet): architecture, parameter counts, init, normalization.

The expected parameter counts come from the architecture formula written out below (he2016deep; torchvision's
layout), checked first against the totals torchvision publishes for its ImageNet models. The comparison with
torchvision itself runs only where ``import torchvision`` works (it does not with the pinned CPU torch:
see docs/images.md) and skips otherwise.
"""

import pytest
import torch
from torch import nn

from ncgeom.models.resnet import HEADS, BasicBlock, Bottleneck, ResNetEncoder, resnet_feature_dim
from ncgeom.vocabulary import RESNET_KINDS

LAYOUT = {"resnet18": ("basic", [2, 2, 2, 2]), "resnet34": ("basic", [3, 4, 6, 3]),
          "resnet50": ("bottleneck", [3, 4, 6, 3])}
# torchvision's published parameter counts (ImageNet stem, 1000-way fc): the model cards of resnet18/34/50.
TORCHVISION_TOTALS = {"resnet18": 11_689_512, "resnet34": 21_797_672, "resnet50": 25_557_032}


def conv(k, cin, cout):
    return k * k * cin * cout  # no bias


def bn(c):
    return 2 * c  # weight and bias


def backbone_params(kind, *, stem):
    """Parameters of the ResNet body from its definition: stem conv + bn, 4 stages, no fc."""
    block, counts = LAYOUT[kind]
    expansion = 1 if block == "basic" else 4
    total = (conv(3, 3, 64) if stem == "cifar" else conv(7, 3, 64)) + bn(64)
    cin = 64
    for planes, stride, count in zip([64, 128, 256, 512], [1, 2, 2, 2], counts):
        for b in range(count):
            s = stride if b == 0 else 1
            cout = planes * expansion
            if block == "basic":
                total += conv(3, cin, planes) + bn(planes) + conv(3, planes, planes) + bn(planes)
            else:
                total += (conv(1, cin, planes) + bn(planes) + conv(3, planes, planes) + bn(planes)
                          + conv(1, planes, cout) + bn(cout))
            if s != 1 or cin != cout:
                total += conv(1, cin, cout) + bn(cout)
            cin = cout
    return total, cin


def head_params(features, dim, head):
    if head == "linear":
        return features * dim + dim
    return features * 512 + bn(512) + 512 * dim + dim  # Linear(F, 512, no bias), BN1d, Linear(512, d)


def count(module):
    return sum(p.numel() for p in module.parameters())


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("kind", RESNET_KINDS)
def test_formula_reproduces_torchvision_totals(kind):
    body, features = backbone_params(kind, stem="imagenet")
    assert body + features * 1000 + 1000 == TORCHVISION_TOTALS[kind]


@pytest.mark.parametrize("kind", RESNET_KINDS)
@pytest.mark.parametrize("head", HEADS)
def test_parameter_counts(kind, head):
    enc = ResNetEncoder(kind=kind, dim=16, head=head, generator=gen())
    body, features = backbone_params(kind, stem="cifar")
    assert features == resnet_feature_dim(kind) == enc.feature_dim
    assert count(enc.backbone) == body
    assert count(enc.head) == head_params(features, 16, head)


def test_cifar_stem_and_layout():
    enc = ResNetEncoder(kind="resnet50", dim=4, generator=gen())
    conv1 = enc.backbone.conv1
    assert (conv1.kernel_size, conv1.stride, conv1.padding, conv1.bias) == ((3, 3), (1, 1), (1, 1), None)
    assert not any(isinstance(m, nn.MaxPool2d) for m in enc.modules())
    assert isinstance(enc.backbone.layer1[0], Bottleneck) and enc.backbone.layer2[0].conv2.stride == (2, 2)
    assert isinstance(ResNetEncoder(kind="resnet18", dim=4, generator=gen()).backbone.layer4[1], BasicBlock)


@pytest.mark.parametrize("norm", ["none", "ball", "sphere"])
def test_output_shape_and_normalization(norm):
    enc = ResNetEncoder(kind="resnet18", dim=8, norm=norm, generator=gen())
    x = torch.rand(4, 3, 8, 8, generator=gen(1))  # small images keep the test fast; pooling is adaptive
    z = enc(x)
    assert z.shape == (4, 8) and z.dtype == torch.float32
    assert enc.features(x).shape == (4, 512)
    norms = z.detach().norm(dim=1)
    if norm == "sphere":
        torch.testing.assert_close(norms, torch.ones(4))
    elif norm == "ball":
        assert bool((norms <= 1 + 4 * torch.finfo(torch.float32).eps).all())
    z.sum().backward()
    assert all(p.grad is not None for p in enc.parameters())


def test_other_input_size_and_eval_mode():
    """Adaptive pooling: 96 x 96 (STL-10) works; eval mode encodes a single image."""
    enc = ResNetEncoder(kind="resnet18", dim=3, generator=gen()).eval()
    with torch.no_grad():
        assert enc(torch.rand(1, 3, 96, 96, generator=gen(2))).shape == (1, 3)


def test_init_from_generator_only():
    before = torch.random.get_rng_state()
    a = ResNetEncoder(kind="resnet18", dim=8, generator=gen(5))
    assert torch.equal(torch.random.get_rng_state(), before)  # the global RNG is neither used nor seeded
    b = ResNetEncoder(kind="resnet18", dim=8, generator=gen(5))
    c = ResNetEncoder(kind="resnet18", dim=8, generator=gen(6))
    for (name, pa), pb in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(pa, pb), name
    assert not torch.equal(a.backbone.conv1.weight, c.backbone.conv1.weight)


def test_init_law():
    """torchvision's init: conv weights N(0, 2 / fan_out), batch norm (1, 0), fresh running statistics."""
    enc = ResNetEncoder(kind="resnet34", dim=8, generator=gen(0))
    w = enc.backbone.layer3[0].conv1.weight  # 3x3, 128 -> 256: fan_out = 256 * 9, n = 294912 draws
    std = (2.0 / (256 * 9)) ** 0.5
    # sample std of n normals: relative standard error 1/sqrt(2n) ~ 0.0013; 5 of them as the tolerance
    torch.testing.assert_close(w.std().item(), std, rtol=5 / (2 * w.numel()) ** 0.5, atol=0.0)
    bn1 = enc.backbone.layer3[0].bn1
    assert torch.equal(bn1.weight, torch.ones(256)) and torch.equal(bn1.bias, torch.zeros(256))
    assert torch.equal(bn1.running_mean, torch.zeros(256)) and torch.equal(bn1.running_var, torch.ones(256))
    assert int(bn1.num_batches_tracked) == 0
    lin = enc.head[3]
    bound = 1 / 512**0.5
    assert float(lin.weight.detach().abs().max()) <= bound and float(lin.bias.detach().abs().max()) <= bound


def test_float64_and_validation():
    enc = ResNetEncoder(kind="resnet18", dim=2, dtype=torch.float64, generator=gen())
    assert all(p.dtype == torch.float64 for p in enc.parameters())
    with pytest.raises(ValueError, match="model must be one of"):
        ResNetEncoder(kind="resnet101", generator=gen())
    with pytest.raises(ValueError, match="generator must be a torch.Generator"):
        ResNetEncoder(kind="resnet18", generator=0)
    with pytest.raises(ValueError, match="dim must be an integer >= 1"):
        ResNetEncoder(kind="resnet18", dim=0, generator=gen())
    with pytest.raises(ValueError, match=r"x must be a batch of RGB images \[B, 3, H, W\]"):
        enc(torch.zeros(2, 1, 8, 8, dtype=torch.float64))


def _torchvision():
    try:
        import torchvision  # noqa: F401  (fails at import with the pinned CPU torch: docs/images.md)
        from torchvision import models
    except Exception as exc:  # ImportError, or RuntimeError "operator torchvision::nms does not exist"
        pytest.skip(f"torchvision is not importable here ({type(exc).__name__})")
    return models


@pytest.mark.parametrize("kind", RESNET_KINDS)
def test_matches_torchvision(kind):
    models = _torchvision()
    tv = getattr(models, kind)()
    tv.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
    tv.maxpool = nn.Identity()
    tv.fc = nn.Identity()
    enc = ResNetEncoder(kind=kind, dim=8, generator=gen())
    assert count(tv) == count(enc.backbone)
    enc.backbone.load_state_dict(tv.state_dict(), strict=True)  # same module names and shapes
    tv.eval()
    enc.eval()
    x = torch.rand(2, 3, 32, 32, generator=gen(3))
    with torch.no_grad():
        torch.testing.assert_close(enc.features(x), tv(x))
