"""Keep docs/theory_map.md true: every test it names exists, every figure it names has a module."""

import fnmatch
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAP = (ROOT / "docs" / "theory_map.md").read_text()


def _test_names(path: Path) -> set[str]:
    return set(re.findall(r"^\s*def (test_\w+)", path.read_text(), flags=re.M))


def _referenced_tests():
    """Yield (file, name pattern) for every 'T: file::a, b; file2::c' reference in the map."""
    for cell in re.findall(r"T: ([^|]+)", MAP):
        for group in cell.split(";"):
            group = group.strip()
            if "::" not in group:
                continue
            file, names = group.split("::", 1)
            for name in names.split(","):
                name = re.sub(r"\(.*?\)", "", name).strip().split()[0] if name.strip() else ""
                if name:
                    yield file.strip(), name


def test_every_referenced_test_exists():
    refs = list(_referenced_tests())
    assert len(refs) > 50  # the parser really read the map
    missing = []
    for file, pattern in refs:
        path = ROOT / "tests" / f"{file}.py"
        if not path.exists():
            missing.append(f"{file} (no such test file)")
            continue
        if not fnmatch.filter(_test_names(path), pattern):  # '*' wildcards are allowed in the map
            missing.append(f"{file}::{pattern}")
    assert not missing, f"docs/theory_map.md names tests that do not exist: {missing}"


def test_every_referenced_figure_has_a_module():
    figures = set(re.findall(r"\b(fig_[a-z_]+)\b", MAP))
    assert figures
    missing = sorted(f for f in figures if not (ROOT / "ncgeom" / "figures" / f"{f}.py").exists())
    assert not missing, f"docs/theory_map.md names figures without a module (ncgeom/figures): {missing}"


def test_ci_runs_the_readme_test_command_and_quickstart_has_two_commands():
    readme = (ROOT / "README.md").read_text()
    quickstart = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    commands = [line for line in quickstart.splitlines() if line.startswith("python3 -m venv")]
    assert len(commands) == 2, commands
    assert "ncgeom reproduce" in commands[0] and "pytest" in commands[1]
    assert commands[1] in (ROOT / ".ci" / "run").read_text()
