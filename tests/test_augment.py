"""SimCLR augmentations on batches (ncgeom.data.augment): determinism, identities, naive references, statistics."""

import colorsys
import math
import random

import pytest
import torch
import torch.nn.functional as F

from ncgeom.data.augment import (
    CIFAR_MEAN,
    CIFAR_STD,
    adjust_brightness,
    adjust_contrast,
    adjust_hue,
    adjust_saturation,
    color_jitter,
    random_grayscale,
    random_horizontal_flip,
    random_resized_crop,
    random_resized_crop_boxes,
    resized_crop,
    rgb_to_grayscale,
    simclr_augment,
    standardize,
    two_views,
)

EPS32 = torch.finfo(torch.float32).eps
EPS64 = torch.finfo(torch.float64).eps


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def images(b=8, h=16, w=16, seed=0, dtype=torch.uint8):
    x = torch.randint(0, 256, (b, 3, h, w), generator=gen(seed), dtype=torch.uint8)
    return x if dtype == torch.uint8 else x.to(dtype) / 255


# --- whole pipeline ---------------------------------------------------------------------------------
def test_determinism_and_range():
    x = images()
    a = simclr_augment(x, generator=gen(1))
    b = simclr_augment(x, generator=gen(1))
    c = simclr_augment(x, generator=gen(2))
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    assert a.dtype == torch.float32 and a.shape == x.shape
    assert float(a.min()) >= 0.0 and float(a.max()) <= 1.0
    d = simclr_augment(images(dtype=torch.float64), generator=gen(1))
    assert d.dtype == torch.float64 and float(d.min()) >= 0.0 and float(d.max()) <= 1.0


def test_two_views_are_two_draws():
    x = images(b=4)
    g = gen(3)
    v1, v2 = two_views(x, generator=g)
    g2 = gen(3)
    torch.testing.assert_close(v1, simclr_augment(x, generator=g2), rtol=0, atol=0)
    torch.testing.assert_close(v2, simclr_augment(x, generator=g2), rtol=0, atol=0)
    assert not torch.equal(v1, v2)


def test_all_identity_settings_give_the_input():
    """scale (1, 1), no flip, no jitter, no grayscale: the pipeline is the identity on square images."""
    x = images(dtype=torch.float32)
    y = simclr_augment(x, generator=gen(), scale=(1.0, 1.0), flip_p=0.0, jitter_p=0.0, gray_p=0.0)
    assert torch.equal(y, x)


def test_validation():
    with pytest.raises(ValueError, match=r"floating images must lie in \[0, 1\]"):
        simclr_augment(torch.full((1, 3, 4, 4), 1.5), generator=gen())
    with pytest.raises(ValueError, match=r"images must be a tensor \[B, 3, H, W\]"):
        simclr_augment(torch.zeros(3, 4, 4), generator=gen())
    with pytest.raises(ValueError, match="generator must be a torch.Generator"):
        simclr_augment(images(), generator=None)
    with pytest.raises(ValueError, match=r"hue must be a finite real number >= 0.0, <= 0.5"):
        simclr_augment(images(), generator=gen(), jitter=(0.4, 0.4, 0.4, 0.7))
    with pytest.raises(ValueError, match="flip_p must be"):
        simclr_augment(images(), generator=gen(), flip_p=2.0)


# --- crop -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("ratio", [(3 / 4, 4 / 3), (1.0, 1.0)])
def test_full_scale_crop_is_identity(ratio):
    x = images(dtype=torch.float32)
    assert torch.equal(random_resized_crop(x, scale=(1.0, 1.0), ratio=ratio, generator=gen()), x)


def test_resized_crop_matches_interpolate_of_the_crop():
    """Naive reference: crop each image, then F.interpolate(bilinear, align_corners=False) to the input size."""
    x = images(b=32, h=12, w=20, dtype=torch.float32)
    boxes = random_resized_crop_boxes(32, 12, 20, generator=gen(4))
    got = resized_crop(x, boxes)
    ref = torch.stack([F.interpolate(x[k:k + 1, :, t:t + h, l:l + w], size=(12, 20), mode="bilinear",
                                     align_corners=False)[0] for k, (t, l, h, w) in enumerate(boxes.tolist())])
    # The two compute the same convex combination of 4 pixels in a different order, and the source coordinate
    # (<= 20) is rounded differently (float32 vs float64): weight error <= 20 eps, pixel values in [0, 1].
    torch.testing.assert_close(got, ref, rtol=0, atol=(20 + 8) * EPS32)


def test_boxes_inside_and_fallback():
    boxes = random_resized_crop_boxes(2000, 10, 30, generator=gen(5))
    top, left, h, w = boxes.unbind(1)
    assert bool(((top >= 0) & (left >= 0) & (h >= 1) & (w >= 1) & (top + h <= 10) & (left + w <= 30)).all())
    # ratio (2, 2) on a 10 x 30 image with scale 1: every attempt has w = round(sqrt(600)) = 24 > ... no: area 300,
    # w = round(sqrt(600)) = 24, h = round(sqrt(150)) = 12 > 10, so all attempts fail and the central crop with
    # ratio clamped to 2 is used: h = 10, w = round(10 * 2) = 20, top = 0, left = (30 - 20) // 2 = 5.
    fallback = random_resized_crop_boxes(3, 10, 30, scale=(1.0, 1.0), ratio=(2.0, 2.0), generator=gen())
    assert fallback.tolist() == [[0, 5, 10, 20]] * 3


def _torchvision_get_params(height, width, scale, ratio, rnd):
    """torchvision's RandomResizedCrop.get_params, one image at a time, with Python's random module."""
    area = height * width
    for _ in range(10):
        target_area = area * rnd.uniform(*scale)
        aspect = math.exp(rnd.uniform(math.log(ratio[0]), math.log(ratio[1])))
        w = int(round(math.sqrt(target_area * aspect)))
        h = int(round(math.sqrt(target_area / aspect)))
        if 0 < w <= width and 0 < h <= height:
            return rnd.randint(0, height - h), rnd.randint(0, width - w), h, w
    in_ratio = width / height
    if in_ratio < min(ratio):
        w, h = width, int(round(width / min(ratio)))
    elif in_ratio > max(ratio):
        h, w = height, int(round(height * max(ratio)))
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


def _mean_and_se(values):
    n = values.numel()
    return float(values.mean()), float(values.std() / math.sqrt(n))


def test_crop_area_statistics_match_torchvision_algorithm():
    """Mean area fraction and mean log aspect ratio equal those of a loop over torchvision's algorithm."""
    n, side = 20000, 32
    boxes = random_resized_crop_boxes(n, side, side, generator=gen(6)).double()
    rnd = random.Random(7)
    ref = torch.tensor([_torchvision_get_params(side, side, (0.08, 1.0), (3 / 4, 4 / 3), rnd) for _ in range(n)],
                       dtype=torch.float64)
    for stat in (lambda b: b[:, 2] * b[:, 3] / side**2, lambda b: torch.log(b[:, 3] / b[:, 2]),
                 lambda b: b[:, 0] / side):
        m1, se1 = _mean_and_se(stat(boxes))
        m2, se2 = _mean_and_se(stat(ref))
        # two independent sample means: their difference has standard error sqrt(se1^2 + se2^2); 5 of those
        assert abs(m1 - m2) <= 5 * math.hypot(se1, se2), (m1, m2)


def test_crop_area_mean_without_rejection():
    """With scale (0.08, 0.5) no attempt is rejected (w <= sqrt(0.5 * 4/3) W < W), so E[h w] = E[A] = 0.29 H W up to
    rounding: |h w - A| <= (h + w) / 2 + 1/4 <= W + 1/4 pixels."""
    n, side = 20000, 64
    boxes = random_resized_crop_boxes(n, side, side, scale=(0.08, 0.5), generator=gen(8)).double()
    frac = boxes[:, 2] * boxes[:, 3] / side**2
    mean, se = _mean_and_se(frac)
    rounding = (side + 0.25) / side**2
    assert abs(mean - 0.29) <= rounding + 5 * se
    assert float(frac.min()) >= 0.08 - rounding and float(frac.max()) <= 0.5 + rounding


# --- flip and grayscale -----------------------------------------------------------------------------
def test_flip_is_exact():
    x = images(b=400, dtype=torch.float32)
    y = random_horizontal_flip(x, generator=gen(9))
    same = (y == x).flatten(1).all(1)
    flipped = (y == x.flip(-1)).flatten(1).all(1)
    assert bool((same | flipped).all())  # each image is untouched or exactly mirrored
    k = int(flipped.sum())
    # Binomial(400, 1/2): standard deviation 10; 5 of them as the tolerance
    assert abs(k - 200) <= 50
    assert torch.equal(random_horizontal_flip(x, p=0.0, generator=gen()), x)
    assert torch.equal(random_horizontal_flip(x, p=1.0, generator=gen()), x.flip(-1))


def test_grayscale():
    x = images(dtype=torch.float32)
    y = random_grayscale(x, p=1.0, generator=gen())
    assert torch.equal(y[:, 0], y[:, 1]) and torch.equal(y[:, 1], y[:, 2])
    r, g, b = x.unbind(1)
    torch.testing.assert_close(y[:, 0], 0.2989 * r + 0.587 * g + 0.114 * b, rtol=0, atol=2 * EPS32)
    assert torch.equal(random_grayscale(x, p=0.0, generator=gen()), x)


# --- colour jitter ------------------------------------------------------------------------------------
def test_zero_strength_jitter_is_identity():
    x = images(dtype=torch.float32)
    y = color_jitter(x, brightness=0, contrast=0, saturation=0, hue=0, p=1.0, generator=gen())
    assert torch.equal(y, x)
    assert torch.equal(color_jitter(x, p=0.0, generator=gen()), x)


def test_brightness_only_scales_each_image():
    x = 0.1 + 0.6 * images(b=16, dtype=torch.float64)  # in [0.1, 0.7]: no clamping, 1.4 * 0.7 < 1
    y = color_jitter(x, brightness=0.4, contrast=0, saturation=0, hue=0, p=1.0, generator=gen(10))
    factor = y.flatten(1) / x.flatten(1)
    per_image = factor[:, 0]
    # y = fl(b x), so y / x = b (1 + delta) with |delta| <= 2 eps (one product, one quotient)
    torch.testing.assert_close(factor, per_image[:, None].expand_as(factor), rtol=4 * EPS64, atol=0)
    assert bool(((per_image >= 0.6) & (per_image <= 1.4)).all()) and float(per_image.std()) > 0


def test_adjust_functions_against_formulas():
    x = images(b=3, h=4, w=5, dtype=torch.float64)
    f = torch.tensor([0.0, 0.7, 1.3], dtype=torch.float64)
    lum = 0.2989 * x[:, 0] + 0.587 * x[:, 1] + 0.114 * x[:, 2]
    for k in range(3):
        torch.testing.assert_close(adjust_brightness(x, f)[k], (f[k] * x[k]).clamp(0, 1))
        mean = lum[k].mean()
        torch.testing.assert_close(adjust_contrast(x, f)[k], (f[k] * x[k] + (1 - f[k]) * mean).clamp(0, 1))
        torch.testing.assert_close(adjust_saturation(x, f)[k], (f[k] * x[k] + (1 - f[k]) * lum[k]).clamp(0, 1))
    torch.testing.assert_close(rgb_to_grayscale(x)[:, 0], lum)
    torch.testing.assert_close(adjust_brightness(x, torch.ones(3, dtype=torch.float64)), x, rtol=0, atol=0)


def test_adjust_hue_against_colorsys():
    """Naive reference: Python's colorsys per pixel (the same HSV model) with h -> (h + shift) mod 1."""
    x = images(b=3, h=3, w=4, seed=11, dtype=torch.float64)
    x[0, :, 0, 0] = 0.5  # a gray pixel (hue undefined, s = 0)
    x[1, :, 1, 1] = torch.tensor([0.2, 0.2, 0.9], dtype=torch.float64)  # a tie between two channels
    shift = torch.tensor([0.1, -0.25, 0.5], dtype=torch.float64)
    got = adjust_hue(x, shift)
    ref = torch.empty_like(x)
    for k in range(3):
        for i in range(3):
            for j in range(4):
                h, s, v = colorsys.rgb_to_hsv(*x[k, :, i, j].tolist())
                rgb = colorsys.hsv_to_rgb((h + float(shift[k])) % 1.0, s, v)
                ref[k, :, i, j] = torch.tensor(rgb, dtype=torch.float64)
    # a few float64 roundings on values in [0, 6], carried to the RGB values by factors <= 1
    torch.testing.assert_close(got, ref, rtol=0, atol=64 * EPS64)
    torch.testing.assert_close(adjust_hue(x, torch.zeros(3, dtype=torch.float64)), x, rtol=0, atol=64 * EPS64)


def test_standardize():
    x = torch.tensor(CIFAR_MEAN).view(1, 3, 1, 1).expand(2, 3, 2, 2) + torch.tensor(CIFAR_STD).view(1, 3, 1, 1)
    torch.testing.assert_close(standardize(x), torch.ones(2, 3, 2, 2))
