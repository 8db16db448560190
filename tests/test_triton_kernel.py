"""Triton backend of batch_loss (docs/theory.md section 7).

On the CPU the kernels run in Triton's interpreter: TRITON_INTERPRET=1 must be set before triton is
imported, so these checks run in a subprocess (tiny sizes: the interpreter is slow). The GPU tests run
only with CUDA. Also: ``import ncgeom.losses`` never imports triton, and without triton the package works.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

pytest.importorskip("triton")

CHILD = textwrap.dedent('''
    import math, os
    assert os.environ["TRITON_INTERPRET"] == "1"
    import numpy as np
    import torch
    from ncgeom.losses import batch_loss

    def naive_mean(z, labels, setting, beta, tau, k):
        zz, y = z.tolist(), labels.tolist()
        n = len(y)
        sim = [[math.fsum(a * b for a, b in zip(zz[i], zz[m])) for m in range(n)] for i in range(n)]
        b = beta if setting in ("hscl", "hucl") else 0.0
        vals = []
        for i in range(n):
            pos = [j for j in range(n) if j != i and y[j] == y[i]]
            neg = [m for m in range(n) if (y[m] != y[i] if setting in ("scl", "hscl") else m != i)]
            if not pos or not neg:
                continue
            w = [math.exp(b * sim[i][m]) for m in neg]
            kk = len(neg) if k == "batch" else k
            for j in pos:
                mass = math.fsum(wt * math.exp((sim[i][m] - sim[i][j]) / tau) for wt, m in zip(w, neg)) / math.fsum(w)
                vals.append(math.log1p(kk * mass))
        return math.fsum(vals) / len(vals)

    gen = torch.Generator().manual_seed(0)
    size, dim = 21, 5  # two 16-row tiles, the second one partial; d padded to 16
    z = torch.nn.functional.normalize(torch.randn(size, dim, generator=gen, dtype=torch.float64), dim=1)
    labels = torch.tensor([0, 3, 3, 7, 0, 3, 7, 7, 0, 3, 0, 7, 3, 0, 7, 3, 0, 7, 3, 0, 11])  # 11: singleton
    cases = [("scl", True, 1), ("hscl", False, 3), ("ucl", True, "batch"), ("hucl", True, 2), ("hucl", False, "batch")]
    for setting, detach, k in cases:
        x = z.clone().requires_grad_()
        got = batch_loss(x, labels, setting, beta=1.7, tau=0.6, num_negatives=k, detach_weights=detach,
                         backend="triton", block_size=16)
        want = naive_mean(z, labels, setting, 1.7, 0.6, k)
        np.testing.assert_allclose(float(got.detach()), want, rtol=1e-10)
        (g,) = torch.autograd.grad(got * 2.5, x)  # upstream gradient != 1
        xd = z.clone().requires_grad_()
        dense = batch_loss(xd, labels, setting, beta=1.7, tau=0.6, num_negatives=k, detach_weights=detach,
                           backend="dense")
        (gd,) = torch.autograd.grad(dense * 2.5, xd)
        torch.testing.assert_close(g, gd, rtol=1e-10, atol=1e-14)
        total = batch_loss(z, labels, setting, beta=1.7, tau=0.6, num_negatives=k, reduction="sum",
                           backend="triton", block_size=16)
        np.testing.assert_allclose(float(total), float(dense.detach()) * 114, rtol=1e-10)  # 7*6 + 7*6 + 6*5 pairs
    # float32, extreme corner: finite, close to float64
    x = z.float().requires_grad_()
    got = batch_loss(x, labels, "hucl", beta=100.0, tau=0.01, num_negatives="batch", backend="triton", block_size=16)
    (g,) = torch.autograd.grad(got, x)
    assert torch.isfinite(got) and bool(torch.isfinite(g).all())
    ref = batch_loss(z, labels, "hucl", beta=100.0, tau=0.01, num_negatives="batch", backend="dense")
    np.testing.assert_allclose(float(got.detach()), float(ref), rtol=1e-3)
    # no pair: an attached zero
    x = z.clone().requires_grad_()
    zero = batch_loss(x, torch.arange(size), "scl", backend="triton", block_size=16)
    assert float(zero.detach()) == 0.0 and zero.requires_grad
    print("OK")
''')


def _run(code: str, env_extra: dict) -> subprocess.CompletedProcess:
    env = {**os.environ, **env_extra}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)


def test_triton_interpreter_matches_naive_loop_and_dense_gradient():
    out = _run(CHILD, {"TRITON_INTERPRET": "1"})
    assert out.returncode == 0 and out.stdout.strip().endswith("OK"), out.stdout[-2000:] + out.stderr[-4000:]


def test_package_imports_without_triton():
    code = textwrap.dedent('''
        import sys
        import ncgeom, ncgeom.losses
        assert "triton" not in sys.modules, "import ncgeom.losses must not import triton"
        sys.modules["triton"] = None  # from now on `import triton` raises ImportError
        import torch
        from ncgeom.losses import batch_loss, select_backend
        z = torch.nn.functional.normalize(torch.randn(8, 3), dim=1)
        y = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
        assert select_backend(z, estimator="weighted", reduction="mean", detach_weights=True) == "blocked"
        float(batch_loss(z, y, "hscl", beta=1.0))
        try:
            batch_loss(z, y, "scl", backend="triton")
        except ValueError as exc:
            assert "triton is not installed" in str(exc), exc
        else:
            raise AssertionError("backend='triton' without triton must raise ValueError")
        print("OK")
    ''')
    out = _run(code, {"TRITON_INTERPRET": "1"})
    assert out.returncode == 0 and out.stdout.strip().endswith("OK"), out.stderr[-3000:]


def test_triton_on_cpu_without_interpreter_is_refused():
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("the interpreter is enabled in this process")
    from ncgeom.losses import batch_loss

    z, y = torch.randn(4, 3), torch.tensor([0, 0, 1, 1])
    with pytest.raises(ValueError, match="CUDA"):
        batch_loss(z, y, "scl", backend="triton")
    with pytest.raises(ValueError, match="reduction"):
        batch_loss(z.cuda() if torch.cuda.is_available() else z, y, "scl", backend="triton", reduction="none")


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.gpu
@cuda
@pytest.mark.parametrize("setting", ["scl", "hscl", "ucl", "hucl"])
@pytest.mark.parametrize("detach", [True, False])
def test_triton_gpu_matches_dense(setting, detach):
    from ncgeom.losses import batch_loss

    gen = torch.Generator().manual_seed(1)
    z = torch.nn.functional.normalize(torch.randn(1000, 128, generator=gen, dtype=torch.float64), dim=1).cuda()
    y = torch.randint(0, 17, (1000,), generator=gen).cuda()
    for k in (1, "batch"):
        x = z.float().requires_grad_()
        got = batch_loss(x, y, setting, beta=3.0, tau=0.2, num_negatives=k, detach_weights=detach, backend="triton")
        (g,) = torch.autograd.grad(got, x)
        xd = z.clone().requires_grad_()
        want = batch_loss(xd, y, setting, beta=3.0, tau=0.2, num_negatives=k, detach_weights=detach, backend="dense")
        (gd,) = torch.autograd.grad(want, xd)
        torch.testing.assert_close(got.double(), want.detach(), rtol=1e-4, atol=1e-6)
        torch.testing.assert_close(g.double(), gd, rtol=1e-3, atol=1e-6)


@pytest.mark.gpu
@cuda
def test_triton_gpu_is_auto_and_finite_at_extremes():
    from ncgeom.losses import batch_loss, select_backend

    gen = torch.Generator().manual_seed(2)
    z = torch.nn.functional.normalize(torch.randn(8192, 128, generator=gen), dim=1).cuda().requires_grad_()
    y = torch.randint(0, 100, (8192,), generator=gen).cuda()
    assert select_backend(z, estimator="weighted", reduction="mean", detach_weights=True) == "triton"
    loss = batch_loss(z, y, "hucl", beta=100.0, tau=0.01, num_negatives="batch")
    (g,) = torch.autograd.grad(loss, z)
    assert torch.isfinite(loss) and bool(torch.isfinite(g).all())
