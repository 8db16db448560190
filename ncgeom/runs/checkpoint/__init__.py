"""Checkpoints of an image run: the file and its digest (:mod:`.file`), and restoring one into a run (:mod:`.state`).

``ncgeom train --resume`` (:func:`ncgeom.runs.run` with ``resume=True``) continues an image run from its
``checkpoint.pt``: on the CPU, a run of E epochs equals a run of e epochs resumed to E, bitwise. A checkpoint is
untrusted input: its file, its fields, its digest (:func:`load_checkpoint`) and then every tensor and random state
(:func:`restore`) are checked before the run folder is touched; a checkpoint made with another config is refused,
naming the differing fields (only :data:`RESUMABLE_FIELDS` may change).
"""

from ncgeom.runs.checkpoint.file import (
    CHECKPOINT_FILE,
    CHECKPOINT_FORMAT,
    DIGEST_FILE,
    RESUMABLE_FIELDS,
    Checkpoint,
    CheckpointDigest,
    file_sha256,
    load_checkpoint,
    save_checkpoint,
)
from ncgeom.runs.checkpoint.state import restore, restore_rng, rng_states

__all__ = ["CHECKPOINT_FILE", "CHECKPOINT_FORMAT", "DIGEST_FILE", "RESUMABLE_FIELDS", "Checkpoint", "CheckpointDigest",
           "file_sha256", "save_checkpoint", "load_checkpoint", "restore", "rng_states", "restore_rng"]
