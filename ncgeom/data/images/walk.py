"""The walk of an ImageFolder split: which files are the images of which class (docs/images.md, "ImageFolder").

The order is torchvision's ``make_dataset``: the classes in the order given (sorted names), within a class
the folders of an ``os.walk`` sorted by path and their files sorted by name, keeping the names whose
lower-cased extension is in :data:`IMAGE_EXTENSIONS`. Symbolic links are followed, but each file and
folder is resolved by its real path and identity (``st_dev``, ``st_ino``), which makes the walk finite and
the labels unambiguous:

- every class folder must really lie inside its split folder, and the split folder inside the data root:
  a link that leaves them (``train/cat -> /elsewhere``, ``test/cat -> ../train/cat``) is refused;
- every image and sub-folder must really lie inside its class folder: a link into another class's folder
  (which would move that class's images under this label) or out of the tree is refused;
- two class folders that are one folder (``train/b -> a``) are refused;
- a folder link back to a folder that contains it (a loop, which ``os.walk(followlinks=True)`` follows
  until the path is too long, and two of which it follows for ever) is refused, and so is a link that
  leads back to itself;
- a folder reached twice by links that are not loops is walked once, and a file reached twice (two links,
  or hard links) is counted once, where the walk order first meets it; the same file in two classes
  (hard links) is refused;
- an entry with an image extension must be a regular file (a FIFO named ``x.png`` is refused) and may not
  be a broken link; a sub-folder that cannot be listed is refused (``os.walk`` skips it silently).

Every refusal is a ValueError naming the path and, for a link, where it leads.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import numpy as np

from ncgeom.files import describe_kind

__all__ = ["IMAGE_EXTENSIONS", "split_samples", "real_inside", "refuse_nested"]

# torchvision's IMG_EXTENSIONS (torchvision/datasets/folder.py), compared with the lower-cased file name.
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def split_samples(root: Path, split: Path, classes: tuple[str, ...], *,
                  need_all: bool) -> tuple[list[Path], np.ndarray]:
    """The image paths of the split folder ``split`` of the data root ``root``, and their labels [N] (int64).

    Parameters
    ----------
    root : Path
        The data root; everything read must really lie inside it.
    split : Path
        ``root / "train"`` or ``root / "test"``.
    classes : tuple of str
        The class folder names, label c = ``classes[c]``.
    need_all : bool
        Every class folder must hold an image (the train split); otherwise a missing class folder has none.

    Returns
    -------
    paths : list of Path
        Each image once, by the path the walk found it at (under its class folder), in torchvision's order.
    labels : numpy.ndarray
        int64 [N].
    """
    real_split = real_inside(split, os.path.realpath(root), "the data root")
    class_dirs = [(label, split / cls) for label, cls in enumerate(classes) if (split / cls).is_dir()]
    reals = {label: real_inside(path, real_split, f"its split folder {split}") for label, path in class_dirs}
    refuse_nested({split / classes[label]: real for label, real in reals.items()}, "class folder")
    paths: list[Path] = []
    labels: list[int] = []
    owner: dict[tuple[int, int], tuple[Path, int]] = {}  # file identity -> (first path, label)
    for label, class_dir in class_dirs:
        found = 0
        for path, key in _class_images(class_dir, reals[label]):
            if key in owner:
                first, first_label = owner[key]
                if first_label != label:
                    raise ValueError(f"{path}: the same file as {first} of class {classes[first_label]!r}; an "
                                     "image belongs to one class")
                continue  # reached twice within its class: counted once
            owner[key] = (path, label)
            paths.append(path)
            labels.append(label)
            found += 1
        if need_all and not found:
            raise ValueError(f"{class_dir}: no image file ({', '.join(IMAGE_EXTENSIONS)})")
    return paths, np.asarray(labels, dtype=np.int64)


def refuse_nested(folders: dict[Path, str], what: str) -> None:
    """ValueError if two of ``folders`` ({path: real path}) are one folder or one lies in the other.

    The real paths sorted by their components put a folder right before the folders inside it, so
    comparing neighbours finds a nested pair if there is one (O(n log n) for n class folders).
    """
    ordered = sorted(folders.items(), key=lambda item: Path(item[1]).parts)
    for (path_a, real_a), (path_b, real_b) in zip(ordered, ordered[1:]):
        if _contains(real_a, real_b):
            relation = "is the same folder as" if real_a == real_b else f"is {real_b}, inside"
            raise ValueError(f"{path_b}: {relation} the {what} {path_a}; each needs its own folder (a symbolic "
                             "link?)")


def _class_images(class_dir: Path, real_class: str) -> list[tuple[Path, tuple[int, int]]]:
    """(path, file identity) of the images under ``class_dir`` in sorted-walk order; links checked, loops
    refused, every folder walked once."""
    top = os.stat(class_dir)
    visited = {(top.st_dev, top.st_ino)}
    # (lexical path, identities of the folders from the class folder down to it): the chain finds loops
    pending: list[tuple[str, frozenset[tuple[int, int]]]] = [(str(class_dir), frozenset(visited))]
    groups: list[tuple[str, list[tuple[str, tuple[int, int]]]]] = []
    while pending:
        folder, chain = pending.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            raise ValueError(f"{folder}: cannot be listed ({exc.strerror or exc})") from None
        files: list[tuple[str, tuple[int, int]]] = []
        subfolders: list[tuple[str, frozenset[tuple[int, int]]]] = []
        for entry in entries:
            is_image = entry.name.lower().endswith(IMAGE_EXTENSIONS)
            try:
                st = os.stat(entry.path)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise ValueError(f"{entry.path}: is a symbolic link loop (its links never reach a file or "
                                     "folder)") from None
                if is_image:
                    raise ValueError(f"{entry.path}: {_link_words(entry.path)}cannot be read "
                                     f"({exc.strerror or exc})") from None
                continue  # not an image and unreadable (a broken link, say): ignored as torchvision does
            is_dir = stat.S_ISDIR(st.st_mode)
            if not (is_dir or is_image):
                continue  # not an image: ignored as torchvision does, wherever a link leads
            if is_image and not is_dir and not stat.S_ISREG(st.st_mode):
                raise ValueError(f"{entry.path}: is {_link_words(entry.path)}{describe_kind(st.st_mode)}, not "
                                 "an image file; expected a regular file")
            if entry.is_symlink():
                real_inside(Path(entry.path), real_class, f"its class folder {class_dir}")
            key = (st.st_dev, st.st_ino)
            if is_dir:
                if key in chain:
                    raise ValueError(f"{entry.path}: {_link_words(entry.path)}a loop: it leads back to a folder "
                                     f"that contains it ({os.path.realpath(entry.path)})")
                if key not in visited:  # a folder reached again by another link is walked once
                    visited.add(key)
                    subfolders.append((entry.path, chain | {key}))
            else:
                files.append((entry.name, key))
        groups.append((folder, files))
        pending.extend(reversed(subfolders))  # depth first, in name order
    groups.sort(key=lambda group: group[0])  # torchvision: sorted(os.walk(...)), by folder path
    return [(Path(folder) / name, key) for folder, found in groups for name, key in found]


def real_inside(path: Path, real_parent: str, what: str) -> str:
    """The real path of ``path`` (links resolved); ValueError naming ``path`` and where it leads if that does
    not lie inside ``real_parent`` (described as ``what`` in the message)."""
    real = os.path.realpath(path)
    if not _contains(real_parent, real):
        raise ValueError(f"{path}: {_link_words(str(path))}leads to {real}, outside {what}; ImageFolder follows "
                         "links only within the tree (docs/images.md)")
    return real


def _contains(parent: str, child: str) -> bool:
    return child == parent or child.startswith(parent.rstrip(os.sep) + os.sep)


def _link_words(path: str) -> str:
    """``"a symbolic link to TARGET, "`` for a link, else ``""``."""
    try:
        return f"a symbolic link to {os.readlink(path)}, " if os.path.islink(path) else ""
    except OSError:
        return ""
