"""The official archives of CIFAR-10, CIFAR-100 and STL-10: fetched, md5-checked and unpacked.

Used by ``ncgeom train --download`` only (a run never reaches the network by itself). The URLs, file
names and md5 digests are torchvision's (pytorch/vision, ``torchvision/datasets/cifar.py``: ``url``,
``filename``, ``tgz_md5`` of CIFAR10 and CIFAR100; ``torchvision/datasets/stl10.py``: those of STL10), as
docs/images.md cites for the md5 of the extracted files. :func:`download_image_data`:

1. returns at once when the layout folder already holds every file of :data:`ncgeom.data.images.OFFICIAL_MD5`
   with its official md5 (nothing is fetched twice);
2. otherwise fetches the archive into ``root`` unless a copy with the right md5 is already there: the
   bytes are streamed to a temporary file in ``root`` while their md5 is computed, and the file is renamed
   to the archive's name only when the md5 is the official one (a mismatch is a ValueError naming the URL
   and both digests, and the temporary file is removed);
3. unpacks it with :mod:`tarfile`'s ``filter="data"`` (PEP 706): absolute paths, members that leave
   ``root``, links pointing outside it and device files are refused (ValueError naming the archive).

The archive is kept beside the extracted folder, as torchvision does (170 MB for CIFAR-10, 169 MB for
CIFAR-100, 2.6 GB for STL-10, whose unlabeled split is extracted but not read). :data:`ARCHIVES` is a
module-level table so that tests can point it at a ``file://`` URL of a generated archive.
"""

from __future__ import annotations

import hashlib
import os
import tarfile
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import NamedTuple

from ncgeom.data.images.inert_pickle import one_line
from ncgeom.data.images.readers import OFFICIAL_MD5
from ncgeom.validate import require_choice

__all__ = ["Archive", "ARCHIVES", "download_image_data"]


class Archive(NamedTuple):
    """Where an official archive is (``url``), its file name, its md5 and the folder it unpacks to."""

    url: str
    filename: str
    md5: str
    folder: str


ARCHIVES: dict[str, Archive] = {
    "cifar10": Archive("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz", "cifar-10-python.tar.gz",
                       "c58f30108f718f92721af3b95e74349a", "cifar-10-batches-py"),
    "cifar100": Archive("https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz", "cifar-100-python.tar.gz",
                        "eb9058c3a382ffc7106e4002c42a8d85", "cifar-100-python"),
    "stl10": Archive("http://ai.stanford.edu/~acoates/stl10/stl10_binary.tar.gz", "stl10_binary.tar.gz",
                     "91f7769df0f17e558f3565bffb0c7dfb", "stl10_binary"),
}
_CHUNK = 2**20  # bytes read from the URL at a time
_TIMEOUT_S = 60.0  # per socket operation, not for the whole download


def download_image_data(name: str, root: str | os.PathLike, *, progress: bool = False) -> Path:
    """Fetch, check and unpack the official archive of ``name`` (cifar10, cifar100 or stl10) into ``root``.

    Parameters
    ----------
    name : {"cifar10", "cifar100", "stl10"}
        ImageFolder trees have no official archive.
    root : path
        The folder :func:`ncgeom.data.load_image_data` then reads (created if missing).
    progress : bool
        A tqdm bar of the bytes fetched.

    Returns
    -------
    pathlib.Path
        ``root``. Every failure (unreachable URL, md5 mismatch, unsafe or broken archive) is a ValueError
        with one line naming the URL or the file.
    """
    name = require_choice("dataset", name, tuple(ARCHIVES))
    archive = ARCHIVES[name]
    base = Path(root).expanduser()
    try:
        base.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise ValueError(f"{base}: not a folder (data_dir must be a folder to download {name} into)") from None
    if _official_files_present(base / archive.folder):
        return base
    target = base / archive.filename
    if not (target.is_file() and _md5_of_file(target) == archive.md5):
        _fetch(archive, target, progress)
    _extract(target, base)
    return base


def _official_files_present(folder: Path) -> bool:
    expected = OFFICIAL_MD5.get(folder.name, {})
    return bool(expected) and all((folder / f).is_file() and _md5_of_file(folder / f) == md5
                                  for f, md5 in expected.items())


def _md5_of_file(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def _fetch(archive: Archive, target: Path, progress: bool) -> None:
    """Stream ``archive.url`` to a temporary file beside ``target``; rename it there only if its md5 is right."""
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    tmp = Path(tmp_name)
    digest = hashlib.md5(usedforsecurity=False)
    bar = None
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(archive.url, timeout=_TIMEOUT_S) as response:
            if progress:
                from tqdm import tqdm

                length = response.headers.get("Content-Length")
                bar = tqdm(total=int(length) if length and length.isdigit() else None, unit="B", unit_scale=True,
                           desc=target.name, leave=False)
            for block in iter(lambda: response.read(_CHUNK), b""):
                out.write(block)
                digest.update(block)
                if bar is not None:
                    bar.update(len(block))
        got = digest.hexdigest()
        if got != archive.md5:
            raise ValueError(f"{archive.url}: md5 {got} differs from the official {archive.md5} (torchvision's list); "
                             "the download is corrupt or not the official archive")
        os.replace(tmp, target)
    except (urllib.error.URLError, OSError) as exc:
        raise ValueError(f"{archive.url}: cannot be fetched ({type(exc).__name__}: {one_line(exc)})") from None
    finally:
        if bar is not None:
            bar.close()
        tmp.unlink(missing_ok=True)


def _extract(archive: Path, root: Path) -> None:
    """Unpack ``archive`` into ``root`` with tarfile's "data" filter (no path or link outside ``root``)."""
    try:
        with tarfile.open(archive, "r:*") as tar:
            tar.extractall(root, filter="data")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise ValueError(f"{archive}: cannot be unpacked safely ({type(exc).__name__}: {one_line(exc)})") from None
