"""Where headwatch keeps what it computes: one function decides every default folder.

- ``$HEADWATCH_CACHE_DIR`` (measurements), ``$HEADWATCH_ORGANISMS_CACHE`` (organism checkpoints),
  ``$HEADWATCH_FULL_SIZE_CACHE`` (the full-size random-init checkpoints ``benchmarks/full_size.py``
  builds, ~21 GB for all three) and ``$HEADWATCH_PACKAGES_CACHE`` (packaged models' wheels and their
  dequantized safetensors, ``headwatch.fixtures.packaged``: 1.9 GB for the real-tiny panel) win when set;
- run from a source checkout (an editable install of the repository), the repository's own
  ``.cache/headwatch``, ``.cache/organisms``, ``.cache/full-size`` and ``.cache/packages`` (gitignored);
- an installed wheel never writes into site-packages: ``$XDG_CACHE_HOME/headwatch`` (default
  ``~/.cache/headwatch``) and its ``organisms/``, ``full-size/`` and ``packages/`` sub-folders.

The measurement cache's lock files are the exception: they live on this host only
(:func:`host_lock_dir`), never beside the entries on a filesystem other machines share.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

#: Environment variable that overrides each default folder.
ENV = {"measurements": "HEADWATCH_CACHE_DIR", "organisms": "HEADWATCH_ORGANISMS_CACHE",
       "full-size": "HEADWATCH_FULL_SIZE_CACHE", "packages": "HEADWATCH_PACKAGES_CACHE"}
#: The folder of each kind inside a checkout's ``.cache/``.
CHECKOUT_FOLDER = {"measurements": "headwatch", "organisms": "organisms", "full-size": "full-size", "packages": "packages"}


def source_checkout() -> Path | None:
    """The repository root when headwatch runs from a source checkout, else None.

    A checkout is the folder above the ``headwatch`` package holding ``pyproject.toml`` and the
    ``claims``, ``fixtures`` and ``probes`` folders; an installed wheel has none of these beside it.
    """
    root = Path(__file__).resolve().parent.parent
    if (root / "pyproject.toml").is_file() and all((root / d).is_dir() for d in ("claims", "fixtures", "probes")):
        return root
    return None


def default_cache_dir(kind: str = "measurements") -> Path:
    """The default folder for ``kind``: "measurements" (the headwatch cache), "organisms", "full-size" or "packages"."""
    if kind not in ENV:
        raise ValueError(f"unknown cache kind {kind!r}; one of {', '.join(ENV)}")
    env = os.environ.get(ENV[kind])
    if env:
        return Path(env).expanduser()
    checkout = source_checkout()
    if checkout is not None:
        return checkout / ".cache" / CHECKOUT_FOLDER[kind]
    user = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "headwatch"
    return user if kind == "measurements" else user / kind


#: Environment variable naming the folder of this host's lock files (default: under the temp folder).
LOCK_DIR_ENV = "HEADWATCH_LOCK_DIR"


def host_lock_dir() -> Path:
    """This host's folder for the measurement cache's lock files: ``$HEADWATCH_LOCK_DIR``, else
    ``<temp folder>/headwatch-locks-<uid>``.

    Host-local on purpose: the locks only spare one host's processes (xdist workers, a local pool)
    computing one entry twice; correctness never depends on them, so they need not work, and must
    not hang, on a network filesystem that several machines share.
    """
    env = os.environ.get(LOCK_DIR_ENV)
    if env:
        return Path(env).expanduser()
    return Path(tempfile.gettempdir()) / f"headwatch-locks-{os.getuid()}"
