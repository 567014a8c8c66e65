"""Where the packaged data lives (format files), in a wheel and in a source checkout alike."""

from __future__ import annotations

from pathlib import Path


def parsers_dir() -> Path:
    """The directory of ``parsers/*.toml``: the package ``nccl_doctor.parsers`` when installed."""
    try:
        from importlib.resources import files

        p = Path(str(files("nccl_doctor.parsers")))
        if (p / "launchers.toml").is_file():
            return p
    except (ImportError, ModuleNotFoundError, TypeError):
        pass
    return Path(__file__).resolve().parent.parent / "parsers"
