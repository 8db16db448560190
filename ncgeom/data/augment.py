"""The SimCLR augmentations on batches of images [B, 3, H, W], vectorized, from an explicit torch.Generator.

The positive pair of an image is two independent draws of (chen2020simple, Appendix A; the authors' code
rjiang03/HCL, ``main/UCL/utils_2.py``, ``train_transform``):

1. random resized crop: area fraction s ~ U(0.08, 1) and log aspect ratio log r ~ U(log 3/4, log 4/3),
   10 attempts then the central crop (torchvision's ``RandomResizedCrop.get_params``); the crop is resized
   back to H x W bilinearly (half-pixel centres, ``align_corners=False``, coordinates clamped to the crop);
2. horizontal flip with probability 0.5;
3. with probability 0.8, colour jitter (brightness 0.4, contrast 0.4, saturation 0.4, hue 0.1): factors
   b, c, s ~ U(0.6, 1.4), hue shift ~ U(-0.1, 0.1), applied in a uniformly random order, each as in
   torchvision's tensor functions (``adjust_brightness`` = clamp(b x), ``adjust_contrast`` blends with the
   mean luminance, ``adjust_saturation`` with the luminance image, ``adjust_hue`` shifts h in HSV);
4. grayscale with probability 0.2: every channel becomes 0.2989 R + 0.587 G + 0.114 B.

Every image of the batch gets its own draws; the work is done on the whole batch (one batched matrix
product for all crops, boolean masks for the coin flips, a loop over the 4 x 4 (position, operation)
pairs of the jitter order, never a loop over images).

Differences from torchvision (which ncgeom does not import: with the pinned CPU torch, PyPI's torchvision
wheel fails at import with "operator torchvision::nms does not exist"; see docs/images.md): the random
numbers come from ``generator`` in a different order, so the draws are equal in law, not bitwise; the
images are float in [0, 1] throughout (HCL applies the transforms to 8-bit PIL images, rounding after each
step, at most 1/255 per step); the authors' extra Gaussian blur (kernel 3, p = 0.5, via OpenCV) is not
applied. Inputs: uint8 (divided by 255) or floating in [0, 1]; the result is float (float32 for uint8 input)
in [0, 1]: every step maps [0, 1] into itself, and a final clamp removes rounding excursions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ncgeom.validate import require_int, require_real

__all__ = [
    "CIFAR_MEAN",
    "CIFAR_STD",
    "to_float_images",
    "resized_crop",
    "random_resized_crop_boxes",
    "random_resized_crop",
    "random_horizontal_flip",
    "rgb_to_grayscale",
    "random_grayscale",
    "adjust_brightness",
    "adjust_contrast",
    "adjust_saturation",
    "adjust_hue",
    "color_jitter",
    "simclr_augment",
    "two_views",
    "standardize",
]

# Per-channel mean and standard deviation the authors standardize CIFAR with (rjiang03/HCL, main/UCL/utils_2.py).
CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2023, 0.1994, 0.2010)
_LUMA = (0.2989, 0.587, 0.114)  # torchvision's rgb_to_grayscale weights (ITU-R 601-2, as TensorFlow)
_ATTEMPTS = 10  # torchvision's RandomResizedCrop.get_params


def to_float_images(x: torch.Tensor) -> torch.Tensor:
    """Images [B, 3, H, W] as floats in [0, 1]: uint8 divided by 255, floating input checked and returned as is."""
    if not isinstance(x, torch.Tensor) or x.ndim != 4 or x.shape[1] != 3:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"images must be a tensor [B, 3, H, W], got {shape}")
    if x.dtype == torch.uint8:
        return x.to(torch.float32) / 255.0
    if not x.is_floating_point():
        raise ValueError(f"images must be uint8 or floating, got {x.dtype}")
    if x.numel():
        lo, hi = torch.aminmax(x)
        if not (lo >= 0 and hi <= 1):  # also rejects NaN
            raise ValueError(f"floating images must lie in [0, 1], got values in [{float(lo)}, {float(hi)}]")
    return x


def _uniform(shape: Sequence[int], lo: float, hi: float, generator: torch.Generator, device) -> torch.Tensor:
    """U(lo, hi) in float64, drawn on the generator's device and moved to ``device``."""
    u = torch.rand(tuple(shape), generator=generator, dtype=torch.float64, device=generator.device)
    return (lo + (hi - lo) * u).to(device)


def _check_generator(generator) -> torch.Generator:
    if not isinstance(generator, torch.Generator):
        raise ValueError("generator must be a torch.Generator")
    return generator


def _check_pair(name: str, value, *, min_value: float) -> tuple[float, float]:
    if not isinstance(value, Sequence) or len(value) != 2:
        raise ValueError(f"{name} must be a pair (low, high), got {value!r}")
    lo = require_real(f"{name}[0]", value[0], min_value=min_value)
    hi = require_real(f"{name}[1]", value[1], min_value=lo)
    return lo, hi


def _interpolation_matrix(start: torch.Tensor, length: torch.Tensor, size_in: int, size_out: int,
                          dtype: torch.dtype) -> torch.Tensor:
    """R [B, size_out, size_in]: row u holds the bilinear weights of output pixel u of the crop [start, start + length).

    Source coordinate (in crop pixels) y = (u + 1/2) length / size_out - 1/2, clamped to [0, length - 1];
    weights 1 - (y - floor y) at floor y and y - floor y at floor y + 1 (capped at length - 1): PyTorch's
    ``interpolate(mode="bilinear", align_corners=False)`` of the cropped image.
    """
    b = start.shape[0]
    u = torch.arange(size_out, dtype=torch.float64, device=start.device)
    scale = length.to(torch.float64)[:, None] / size_out
    y = ((u[None, :] + 0.5) * scale - 0.5).clamp(min=0.0)
    y = torch.minimum(y, (length - 1).to(torch.float64)[:, None])
    y0 = y.floor()
    frac = y - y0
    y0 = y0.long()
    y1 = torch.minimum(y0 + 1, (length - 1)[:, None])
    r = torch.zeros(b, size_out, size_in, dtype=torch.float64, device=start.device)
    r.scatter_add_(2, (start[:, None] + y0)[..., None], (1.0 - frac)[..., None])
    r.scatter_add_(2, (start[:, None] + y1)[..., None], frac[..., None])
    return r.to(dtype)


def resized_crop(x: torch.Tensor, boxes: torch.Tensor, *, size: tuple[int, int] | None = None) -> torch.Tensor:
    """Crop box k of image k and resize it bilinearly to ``size``: a batched separable matrix product.

    .. math:: \\mathrm{out}_k = R^{(y)}_k \\, x_k \\, R^{(x)\\top}_k

    where R^(y)_k [S_h, H] and R^(x)_k [S_w, W] hold the bilinear weights of the box's rows and columns
    (``align_corners=False``, coordinates clamped to the box, as ``F.interpolate`` of the cropped image).

    Parameters
    ----------
    x : torch.Tensor
        [B, C, H, W], floating.
    boxes : torch.Tensor
        [B, 4] integers (top, left, height, width), each inside the image, height and width >= 1.
    size : (int, int) or None
        (S_h, S_w); None keeps (H, W).

    A box covering the whole image with ``size`` = (H, W) returns ``x`` exactly (weights 1 and 0).
    """
    if not x.is_floating_point() or x.ndim != 4:
        raise ValueError("x must be a floating tensor [B, C, H, W]")
    bsz, _, height, width = x.shape
    if boxes.shape != (bsz, 4) or boxes.is_floating_point():
        raise ValueError(f"boxes must be an integer tensor [{bsz}, 4] (top, left, height, width)")
    boxes = boxes.to(device=x.device, dtype=torch.long)
    top, left, h, w = boxes.unbind(1)
    if bool(((top < 0) | (left < 0) | (h < 1) | (w < 1) | (top + h > height) | (left + w > width)).any()):
        raise ValueError("every box must lie inside its image with height and width >= 1")
    out_h, out_w = (height, width) if size is None else size
    ry = _interpolation_matrix(top, h, height, out_h, x.dtype)  # [B, S_h, H]
    rx = _interpolation_matrix(left, w, width, out_w, x.dtype)  # [B, S_w, W]
    return ry[:, None] @ x @ rx[:, None].transpose(-1, -2)


def random_resized_crop_boxes(batch: int, height: int, width: int, *, scale: tuple[float, float] = (0.08, 1.0),
                              ratio: tuple[float, float] = (3 / 4, 4 / 3), generator: torch.Generator) -> torch.Tensor:
    """Boxes [batch, 4] (top, left, height, width) drawn as torchvision's ``RandomResizedCrop.get_params``.

    For each image, up to 10 attempts: target area A = s H W with s ~ U(scale), aspect ratio r with
    log r ~ U(log ratio); w = round(sqrt(A r)), h = round(sqrt(A / r)) (half to even, as Python's round);
    the first attempt with 0 < w <= W and 0 < h <= H is kept, its corner uniform over the valid positions.
    Without one, the central crop of the largest size whose ratio is clamped to ``ratio``.
    All attempts of all images are drawn at once, in this order: s [batch, 10], log r [batch, 10], then the
    corner (top, left) [batch, 2].
    """
    g = _check_generator(generator)
    batch = require_int("batch", batch, min_value=0)
    height = require_int("height", height, min_value=1)
    width = require_int("width", width, min_value=1)
    s0, s1 = _check_pair("scale", scale, min_value=0.0)
    r0, r1 = _check_pair("ratio", ratio, min_value=0.0)
    if r0 <= 0:
        raise ValueError(f"ratio must be positive, got {ratio!r}")
    shape = (batch, _ATTEMPTS)
    area = float(height * width)
    target = area * _uniform(shape, s0, s1, g, "cpu")
    aspect = torch.exp(_uniform(shape, math.log(r0), math.log(r1), g, "cpu"))
    w = torch.round(torch.sqrt(target * aspect)).long()
    h = torch.round(torch.sqrt(target / aspect)).long()
    valid = (w > 0) & (w <= width) & (h > 0) & (h <= height)
    first = valid.to(torch.int8).argmax(dim=1, keepdim=True)  # first True (0 where none)
    found = valid.any(dim=1)
    w_sel = w.gather(1, first).squeeze(1)
    h_sel = h.gather(1, first).squeeze(1)
    corner = torch.rand((batch, 2), generator=g, dtype=torch.float64, device=g.device).cpu()
    top = torch.floor(corner[:, 0] * (height - h_sel + 1)).long().clamp(max=height - h_sel)
    left = torch.floor(corner[:, 1] * (width - w_sel + 1)).long().clamp(max=width - w_sel)
    # Fallback: torchvision's central crop.
    in_ratio = width / height
    if in_ratio < r0:
        fw, fh = width, int(round(width / r0))
    elif in_ratio > r1:
        fw, fh = int(round(height * r1)), height
    else:
        fw, fh = width, height
    w_sel = torch.where(found, w_sel, fw)
    h_sel = torch.where(found, h_sel, fh)
    top = torch.where(found, top, (height - fh) // 2)
    left = torch.where(found, left, (width - fw) // 2)
    return torch.stack((top, left, h_sel, w_sel), dim=1)


def random_resized_crop(x: torch.Tensor, *, scale: tuple[float, float] = (0.08, 1.0),
                        ratio: tuple[float, float] = (3 / 4, 4 / 3), generator: torch.Generator) -> torch.Tensor:
    """Random resized crop of every image to its own size (:func:`random_resized_crop_boxes`, :func:`resized_crop`).

    The result is clamped to [0, 1] (bilinear weights summing to 1 can overshoot by one rounding).
    """
    x = to_float_images(x)
    boxes = random_resized_crop_boxes(x.shape[0], x.shape[2], x.shape[3], scale=scale, ratio=ratio,
                                      generator=generator)
    return resized_crop(x, boxes).clamp_(0.0, 1.0)


def _coins(batch: int, p: float, generator: torch.Generator, device) -> torch.Tensor:
    """[batch] booleans, True with probability p (u < p, u ~ U[0, 1))."""
    return torch.rand(batch, generator=generator, dtype=torch.float64, device=generator.device).to(device) < p


def random_horizontal_flip(x: torch.Tensor, *, p: float = 0.5, generator: torch.Generator) -> torch.Tensor:
    """Each image mirrored left-right (x[..., ::-1]) with probability p, independently."""
    p = require_real("p", p, min_value=0.0, max_value=1.0)
    return _flip(to_float_images(x), p, _check_generator(generator))


def _flip(x: torch.Tensor, p: float, generator: torch.Generator) -> torch.Tensor:
    flip = _coins(x.shape[0], p, generator, x.device)
    return torch.where(flip[:, None, None, None], x.flip(-1), x)


def rgb_to_grayscale(x: torch.Tensor) -> torch.Tensor:
    """Luminance L = 0.2989 R + 0.587 G + 0.114 B of floating images [B, 3, H, W], as [B, 1, H, W]."""
    r, g, b = x.unbind(dim=-3)
    return (_LUMA[0] * r + _LUMA[1] * g + _LUMA[2] * b).unsqueeze(-3)


def random_grayscale(x: torch.Tensor, *, p: float = 0.2, generator: torch.Generator) -> torch.Tensor:
    """Each image replaced by its luminance in all three channels with probability p, independently."""
    p = require_real("p", p, min_value=0.0, max_value=1.0)
    return _grayscale(to_float_images(x), p, _check_generator(generator))


def _grayscale(x: torch.Tensor, p: float, generator: torch.Generator) -> torch.Tensor:
    gray = _coins(x.shape[0], p, generator, x.device)
    return torch.where(gray[:, None, None, None], rgb_to_grayscale(x).expand_as(x), x)


def _blend(x: torch.Tensor, other: torch.Tensor, ratio: torch.Tensor) -> torch.Tensor:
    """clamp(ratio x + (1 - ratio) other, 0, 1): torchvision's ``_blend`` for floating images, ratio [B]."""
    r = ratio.to(x.dtype)[:, None, None, None]
    return (r * x + (1.0 - r) * other).clamp(0.0, 1.0)


def adjust_brightness(x: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """clamp(b_k x_k, 0, 1) for image k, b = ``factor`` [B] >= 0 (b = 1: identity)."""
    return _blend(x, torch.zeros_like(x), factor)


def adjust_contrast(x: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """clamp(c_k x_k + (1 - c_k) m_k, 0, 1), m_k the mean luminance of image k, c = ``factor`` [B]."""
    mean = rgb_to_grayscale(x).mean(dim=(-3, -2, -1), keepdim=True)
    return _blend(x, mean, factor)


def adjust_saturation(x: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """clamp(s_k x_k + (1 - s_k) L(x_k), 0, 1), L the luminance image, s = ``factor`` [B] (s = 0: grayscale)."""
    return _blend(x, rgb_to_grayscale(x), factor)


def _rgb_to_hsv(x: torch.Tensor) -> torch.Tensor:
    """torchvision's ``_rgb2hsv`` (after Pillow's Convert.c): h, s, v in [0, 1], h = 0 and s = 0 for grays."""
    r, g, b = x.unbind(dim=-3)
    maxc = x.amax(dim=-3)
    minc = x.amin(dim=-3)
    eqc = maxc == minc
    cr = maxc - minc
    ones = torch.ones_like(maxc)
    s = cr / torch.where(eqc, ones, maxc)
    cr_divisor = torch.where(eqc, ones, cr)
    rc = (maxc - r) / cr_divisor
    gc = (maxc - g) / cr_divisor
    bc = (maxc - b) / cr_divisor
    hr = (maxc == r) * (bc - gc)
    hg = ((maxc == g) & (maxc != r)) * (2.0 + rc - bc)
    hb = ((maxc != g) & (maxc != r)) * (4.0 + gc - rc)
    h = torch.fmod((hr + hg + hb) / 6.0 + 1.0, 1.0)
    return torch.stack((h, s, maxc), dim=-3)


def _hsv_to_rgb(x: torch.Tensor) -> torch.Tensor:
    """torchvision's ``_hsv2rgb``: sector i = floor(6h) mod 6, fraction f = 6h - floor(6h)."""
    h, s, v = x.unbind(dim=-3)
    i = torch.floor(h * 6.0)
    f = h * 6.0 - i
    i = i.to(torch.int64) % 6
    p = (v * (1.0 - s)).clamp(0.0, 1.0)
    q = (v * (1.0 - s * f)).clamp(0.0, 1.0)
    t = (v * (1.0 - s * (1.0 - f))).clamp(0.0, 1.0)
    # (R, G, B) per sector: 0 (v,t,p) 1 (q,v,p) 2 (p,v,t) 3 (p,q,v) 4 (t,p,v) 5 (v,p,q)
    table = torch.stack((torch.stack((v, q, p, p, t, v)), torch.stack((t, v, v, q, p, p)),
                         torch.stack((p, p, t, v, v, q))))  # [3, 6, B, H, W]
    index = i.unsqueeze(0).unsqueeze(0).expand(3, 1, *i.shape)
    return table.gather(1, index).squeeze(1).movedim(0, -3)


def adjust_hue(x: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """Rotate the hue of image k by ``factor[k]`` in [-0.5, 0.5] turns: HSV with h -> (h + factor) mod 1."""
    hsv = _rgb_to_hsv(x)
    h, s, v = hsv.unbind(dim=-3)
    h = torch.remainder(h + factor.to(x.dtype)[:, None, None], 1.0)
    return _hsv_to_rgb(torch.stack((h, s, v), dim=-3))


def color_jitter(x: torch.Tensor, *, brightness: float = 0.4, contrast: float = 0.4, saturation: float = 0.4,
                 hue: float = 0.1, p: float = 0.8, generator: torch.Generator) -> torch.Tensor:
    """torchvision's ``RandomApply([ColorJitter(brightness, contrast, saturation, hue)], p)``, per image.

    With probability p, image k gets b_k ~ U(max(0, 1 - brightness), 1 + brightness), c_k and s_k likewise,
    hue shift h_k ~ U(-hue, hue), applied in a uniformly random order (the argsort of 4 uniforms); an
    operation whose strength is 0 is skipped (as torchvision does), so all strengths 0 is the identity.
    Draws, in order: the p-coins [B], the order keys [B, 4], b, c, s, h [B] each.
    """
    strengths = [require_real(name, v, min_value=0.0) for name, v in
                 (("brightness", brightness), ("contrast", contrast), ("saturation", saturation))]
    hue = require_real("hue", hue, min_value=0.0, max_value=0.5)
    p = require_real("p", p, min_value=0.0, max_value=1.0)
    return _jitter(to_float_images(x), strengths, hue, p, _check_generator(generator))


def _jitter(x: torch.Tensor, strengths: list[float], hue: float, p: float, g: torch.Generator) -> torch.Tensor:
    bsz = x.shape[0]
    applied = _coins(bsz, p, g, x.device)
    keys = torch.rand((bsz, 4), generator=g, dtype=torch.float64, device=g.device).to(x.device)
    order = keys.argsort(dim=1)  # order[k, position] = operation
    factors = [_uniform((bsz,), max(0.0, 1.0 - a), 1.0 + a, g, x.device) for a in strengths]
    factors.append(_uniform((bsz,), -hue, hue, g, x.device))
    ops = (adjust_brightness, adjust_contrast, adjust_saturation, adjust_hue)
    active = [a > 0 for a in strengths] + [hue > 0]
    out = x.clone()
    for position in range(4):
        for op_id, op in enumerate(ops):
            if not active[op_id]:
                continue
            sel = torch.nonzero(applied & (order[:, position] == op_id)).squeeze(1)
            if sel.numel():
                out[sel] = op(out[sel], factors[op_id][sel])
    return out


def simclr_augment(x: torch.Tensor, *, generator: torch.Generator, scale: tuple[float, float] = (0.08, 1.0),
                   ratio: tuple[float, float] = (3 / 4, 4 / 3), flip_p: float = 0.5,
                   jitter: tuple[float, float, float, float] = (0.4, 0.4, 0.4, 0.1), jitter_p: float = 0.8,
                   gray_p: float = 0.2) -> torch.Tensor:
    """One SimCLR view of every image: crop -> flip -> colour jitter -> grayscale (module docstring).

    Parameters
    ----------
    x : torch.Tensor
        [B, 3, H, W], uint8 or floating in [0, 1].
    generator : torch.Generator
        All draws; any device (the draws are moved to ``x``'s device).
    scale, ratio : (float, float)
        Area fraction and aspect-ratio ranges of the crop.
    flip_p, jitter_p, gray_p : float
        Probabilities of the flip, the jitter and the grayscale.
    jitter : (brightness, contrast, saturation, hue)

    Returns
    -------
    torch.Tensor
        [B, 3, H, W], float in [0, 1].
    """
    if not isinstance(jitter, Sequence) or len(jitter) != 4:
        raise ValueError(f"jitter must be (brightness, contrast, saturation, hue), got {jitter!r}")
    strengths = [require_real(name, v, min_value=0.0)
                 for name, v in zip(("brightness", "contrast", "saturation"), jitter)]
    hue = require_real("hue", jitter[3], min_value=0.0, max_value=0.5)
    flip_p, jitter_p, gray_p = (require_real(name, v, min_value=0.0, max_value=1.0)
                                for name, v in (("flip_p", flip_p), ("jitter_p", jitter_p), ("gray_p", gray_p)))
    g = _check_generator(generator)
    x = random_resized_crop(x, scale=scale, ratio=ratio, generator=g)  # validates x, clamps to [0, 1]
    x = _flip(x, flip_p, g)
    x = _jitter(x, strengths, hue, jitter_p, g)
    return _grayscale(x, gray_p, g).clamp_(0.0, 1.0)


def two_views(x: torch.Tensor, *, generator: torch.Generator, **options) -> tuple[torch.Tensor, torch.Tensor]:
    """Two independent SimCLR views (x', x'') of every image: augmentation positives (docs/theory.md, section 3).

    Such positives are not conditionally independent given the class (the hypothesis of Theorem 3 fails);
    as with noise positives, a batch of the two views is labelled by image ids. ``options`` are those of
    :func:`simclr_augment`. The first view is drawn before the second.
    """
    return simclr_augment(x, generator=generator, **options), simclr_augment(x, generator=generator, **options)


def standardize(x: torch.Tensor, *, mean: Sequence[float] = CIFAR_MEAN,
                std: Sequence[float] = CIFAR_STD) -> torch.Tensor:
    """(x - mean_c) / std_c per channel c of floating images [B, 3, H, W] (default: the authors' CIFAR values)."""
    if len(mean) != 3 or len(std) != 3 or min(std) <= 0:
        raise ValueError("mean and std must hold 3 values each, std > 0")
    m = torch.as_tensor(mean, dtype=x.dtype, device=x.device)[:, None, None]
    s = torch.as_tensor(std, dtype=x.dtype, device=x.device)[:, None, None]
    return (x - m) / s
