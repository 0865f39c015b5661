"""Reading the user cue lexicon files of ``CUEMEM_LEXICON_PATHS`` and installing them.

The I/O half of the user lexicon: read and decode each file (TOML through ``tomllib``; ``.yaml`` /
``.yml`` through PyYAML when it is installed), hand the mapping to the pure validation in
``shared.language.lexicon`` and install the result with ``shared.language.cues.configure``. Called by the
composition root (``workers.bootstrap.build_container``), by the worker entry point and before a
CLI command starts any service, so a bad file fails fast with its name, key and problem.
"""

from __future__ import annotations

import logging
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from shared.language import cues
from shared.language.lexicon import LexiconError, LexiconOverlay, parse_overlay
from shared.settings import Settings

log = logging.getLogger(__name__)

_YAML_SUFFIXES = (".yaml", ".yml")

# What was installed last (file identity and modification) and the lexicon it gave: building the
# container again (every CLI command does it twice, workers once per process) must not re-read and
# re-merge unchanged files.
_installed: tuple[tuple[tuple[str, int, int], ...], cues.Lexicon] | None = None


def _decode(path: Path, text: str) -> Any:
    source = str(path)
    if path.suffix.lower() in _YAML_SUFFIXES:
        try:
            import yaml
        except ImportError:
            raise LexiconError(source, "", "YAML needs PyYAML (pip install pyyaml); or use TOML") from None
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc)
            raise LexiconError(source, "", f"invalid YAML{where}: {problem}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # tomllib's message carries the place: "... (at line 3, column 7)".
        raise LexiconError(source, "", f"invalid TOML: {exc}") from None


def read_lexicon_file(path: Path) -> LexiconOverlay:
    """One user lexicon file, read, decoded and validated; :class:`LexiconError` names the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LexiconError(str(path), "", "no such file (from CUEMEM_LEXICON_PATHS)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LexiconError(str(path), "", f"cannot read it ({exc})") from None
    return parse_overlay(_decode(path, text), str(path))


def read_lexicon_files(paths: Sequence[Path]) -> list[LexiconOverlay]:
    return [read_lexicon_file(Path(p).expanduser()) for p in paths]


def _identity(paths: Sequence[Path]) -> tuple[tuple[str, int, int], ...]:
    out: list[tuple[str, int, int]] = []
    for p in paths:
        path = Path(p).expanduser()
        try:
            st = path.stat()
        except OSError:
            return ()  # unreadable: do not cache, so the read below reports it
        out.append((str(path.resolve()), st.st_mtime_ns, st.st_size))
    return tuple(out)


def apply_lexicon(settings: Settings) -> None:
    """Install the shipped lexicon merged with ``settings.lexicon_paths`` for this process.

    Without paths this restores the shipped lexicon. Raises :class:`LexiconError` for a missing,
    unreadable or invalid file, before anything is installed (the previous lexicon stays).
    """
    global _installed
    paths = list(settings.lexicon_paths)
    if not paths:
        cues.configure()  # cheap: nothing to read or parse
        _installed = None
        return
    key = _identity(paths)
    if key and _installed is not None and _installed[0] == key and cues.load_lexicon() is _installed[1]:
        return
    overlays = read_lexicon_files(paths)
    lexicon = cues.configure(overlays)
    _installed = (key, lexicon) if key else None
    log.info("cue lexicon: shipped words plus %s", ", ".join(o.source for o in overlays))
