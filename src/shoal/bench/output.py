"""Where results are written: a folder checked (and created) before any work, so a bad path fails in a line, not
after a measurement."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from shoal.errors import ConfigError


def output_folder(path: str | Path, what: str = "out") -> Path:
    """``path`` as a folder that exists and can be written, created if needed; :class:`ConfigError` saying why not
    (a file in the way, no permission, a read-only file system), naming the argument ``what``."""
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{what}={str(folder)!r} is a file, not a folder: pass a folder to write the results in")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):  # what access() cannot tell: ACLs, read-only mounts
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigError(f"{what}={str(folder)!r} cannot be written ({reason}): pass a folder you can write") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(f"{what}={str(folder)!r} cannot be written (no permission): pass a folder you can write")
    return folder
