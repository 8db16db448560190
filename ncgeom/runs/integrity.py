"""Is a finished run directory whole? The check a sweep makes before it skips a run on resume.

A run directory (:mod:`ncgeom.runs.records`) counts as finished when its summary.json exists. A
crash, a second writer or a full disk can still leave a "finished" run whose other files are damaged;
:func:`check_run` reads every file back with the record types that own it (read-only) and says what is
wrong, so that :func:`ncgeom.campaigns.sweep.run_sweep` reruns the run instead of trusting it:

- ``summary.json`` parses as a `~ncgeom.runs.records.RunSummary` (strict keys);
- ``config.json`` parses (:func:`~ncgeom.runs.records.load_config`) and equals the expected
  config, and so does the summary's config in the fields the run's data set reads (those it records);
- every ``history.jsonl`` line (the last one included) parses as an `~ncgeom.runs.records.EpochRecord`, there are
  exactly ``epochs_run`` of them (the summary's count), numbered 1, 2, ..., ``epochs_run``;
- ``embeddings.npz`` holds exactly ``z`` [N, d] (float) and ``labels`` [N] (integer):
  :func:`ncgeom.runs.embeddings.check_embeddings`.
"""

from __future__ import annotations

from pathlib import Path

from ncgeom.runs.config import Config
from ncgeom.runs.embeddings import check_embeddings
from ncgeom.runs.records import CONFIG_FILE, HISTORY_FILE, SUMMARY_FILE, RunSummary, load_config, load_history
from ncgeom.validate import one_line_error

__all__ = ["check_run", "is_finished"]


def is_finished(run_dir: str | Path) -> bool:
    """True when ``run_dir`` has a summary.json (the last file a run writes), valid or not."""
    return (Path(run_dir) / SUMMARY_FILE).is_file()


def check_run(run_dir: str | Path, expected: Config | None = None) -> str | None:
    """None when the finished run in ``run_dir`` is whole, else one line saying what is wrong.

    Parameters
    ----------
    run_dir : path
        A run directory with a summary.json (a directory without one is reported as not finished).
    expected : Config, optional
        The config the run must have been made with (a sweep's grid point); None: the one in config.json.

    Returns
    -------
    str or None
        ``"<file>: <problem>"`` for the first problem found, None when every check passes.
    """
    path = Path(run_dir)
    if not is_finished(path):
        return f"{SUMMARY_FILE}: missing (the run did not finish)"
    try:
        summary = RunSummary.load(path)
    except (ValueError, TypeError, OSError) as exc:  # JSON errors are ValueErrors; a bad field type is a TypeError
        return f"{SUMMARY_FILE}: {one_line_error(exc, path / SUMMARY_FILE)}"
    assert summary is not None  # is_finished above
    try:
        config, _ = load_config(path)
    except (ValueError, TypeError, OSError) as exc:
        return f"{CONFIG_FILE}: {one_line_error(exc, path / CONFIG_FILE)}"
    expected = config if expected is None else expected
    if config != expected:
        return f"{CONFIG_FILE}: the config differs from the expected one ({_first_difference(config, expected)})"
    if summary.config.applicable_dict() != expected.applicable_dict():  # summary.json holds the fields that apply
        return f"{SUMMARY_FILE}: its config differs from the expected one ({_first_difference(summary.config, expected)})"
    try:
        history = load_history(path)
        file = path / HISTORY_FILE
        lines = file.read_text(encoding="utf-8").splitlines() if file.is_file() else []
    except (ValueError, TypeError, OSError) as exc:
        return f"{HISTORY_FILE}: {one_line_error(exc, path / HISTORY_FILE)}"
    if len(lines) != len(history):  # load_history drops a torn last line; a finished run has none
        return f"{HISTORY_FILE}: line {len(history) + 1} is not a complete epoch record"
    epochs = [r.epoch for r in history]
    if epochs != list(range(1, summary.epochs_run + 1)):
        return (f"{HISTORY_FILE}: {len(history)} complete epoch record(s) (epochs {_span(epochs)}), "
                f"the summary says {summary.epochs_run}")
    return check_embeddings(path, expected)


def _first_difference(a: Config, b: Config) -> str:
    da, db = a.to_dict(), b.to_dict()
    for key in da:
        if da[key] != db.get(key):
            return f"{key} = {da[key]!r}, expected {db.get(key)!r}"
    return "same fields"


def _span(epochs: list[int]) -> str:
    return "none" if not epochs else f"{epochs[0]}..{epochs[-1]}"
