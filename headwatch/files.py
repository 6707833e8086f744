"""Writing files: atomically, with the modes the umask asks for, and only where the user meant.

- :func:`write_atomic` / :func:`write_json_atomic`: a temporary file beside the target, renamed
  into place; a reader (or a ``kill -9``) never sees half a file. ``mkstemp`` creates files 0600;
  they are set to what the umask allows (0644 under umask 022) before the rename, so a cache shared
  by a group stays readable to it.
- :func:`honour_umask`: the same for a folder tree written by code that picks its own modes
  (``tempfile.mkdtemp`` makes folders 0700; ``save_pretrained`` writes weights 0600).
- :func:`check_output_file` / :func:`check_output_dir`: the CLI's output paths, checked before any
  compute: an existing symlink, FIFO, device or folder is refused (a rename would replace it), and
  the folder must take a new file. ``-`` means stdout.

Imports only the standard library (the CLI checks paths before it imports torch).
"""
from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from headwatch.validation import InputError

#: ``--out -`` / ``--json -``: write to stdout.
STDOUT = "-"


def current_umask() -> int:
    """The process umask, read without changing it where Linux allows (os.umask is process-wide and
    setting it, even briefly, races with other threads creating files)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode() -> int:
    """The mode a plain ``open(path, "w")`` would give a new file: 0666 less the umask."""
    return 0o666 & ~current_umask()


def dir_mode() -> int:
    """The mode ``mkdir`` would give a new folder: 0777 less the umask."""
    return 0o777 & ~current_umask()


def write_atomic(path: str | os.PathLike, data: bytes | str) -> None:
    """Write ``data`` to a temporary file beside ``path``, give it the umask's mode, rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            os.fchmod(f.fileno(), file_mode())  # mkstemp's 0600 is for the temporary name only
            f.flush()
            os.fsync(f.fileno())  # the bytes reach the disk (or the file server) before the name does
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def json_text(obj: Any) -> str:
    """The JSON text headwatch writes: indented, no NaN or Infinity (``allow_nan=False``), a final newline."""
    return json.dumps(obj, indent=1, sort_keys=False, allow_nan=False) + "\n"


def write_json_atomic(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as JSON atomically (:func:`write_atomic`)."""
    write_atomic(path, json_text(obj))


def honour_umask(root: str | os.PathLike) -> None:
    """Give ``root`` and everything under it the modes the umask asks for (folders 0755, files 0644
    under umask 022), keeping files' execute bits; symlinks are left alone."""
    fmode, dmode = file_mode(), dir_mode()
    root = Path(root)
    for path in [root, *root.rglob("*")]:
        st = path.lstat()
        if stat.S_ISDIR(st.st_mode):
            os.chmod(path, dmode)
        elif stat.S_ISREG(st.st_mode):
            os.chmod(path, fmode | (st.st_mode & 0o111 & dmode))


# ---- output paths the user names ---------------------------------------------------------------

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _writable_folder(folder: Path, flag: str) -> None:
    """Create ``folder`` if needed and prove a new file can be made in it."""
    existing = next((p for p in (folder, *folder.parents) if p.exists() or p.is_symlink()), None)
    if existing is not None and not existing.is_dir():
        raise InputError(f"{flag}: {existing} is not a folder, so nothing can be written under it; "
                         "give a path inside a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".headwatch-write-test-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise InputError(f"{flag}: cannot write in {folder} ({e.strerror or e}); give a folder you can write to") from None


def check_output_file(raw: str | os.PathLike, flag: str) -> Path | None:
    """The file a command will write its result to, checked before the compute; None for ``-`` (stdout).

    Refused: an empty name, a name ending in ``/``, an existing symlink, FIFO, device or folder
    (the atomic rename would replace it), and a folder that cannot take a new file.
    """
    text = os.fspath(raw)
    if text == STDOUT:
        return None
    if not text.strip():
        raise InputError(f"{flag}: got an empty path; give a file name, or '-' for stdout")
    if text.endswith(("/", os.sep)):
        raise InputError(f"{flag}: {text!r} ends with '/', which names a folder; give a file name such as "
                         f"{text.rstrip('/' + os.sep) or '.'}/record.json")
    path = Path(text).expanduser()
    if path.is_symlink():
        raise InputError(f"{flag}: {path} is a symlink; headwatch replaces its output file atomically and would "
                         "replace the link itself: give the real path, or a new file name")
    if path.exists():
        mode = path.stat().st_mode
        if not stat.S_ISREG(mode):
            raise InputError(f"{flag}: {path} exists and is {_kind(mode)}, not a regular file; give a new file "
                             "name (or '-' for stdout)")
    _writable_folder(path.parent if str(path.parent) else Path("."), flag)
    return path


def check_output_dir(raw: str | os.PathLike, flag: str) -> Path:
    """A folder a command will write into, created now and proven writable, before the compute."""
    text = os.fspath(raw)
    if not text.strip():
        raise InputError(f"{flag}: got an empty path; give a folder")
    path = Path(text).expanduser()
    if path.exists() and not path.is_dir():
        raise InputError(f"{flag}: {path} exists and is {_kind(path.stat().st_mode)}, not a folder; give a folder")
    _writable_folder(path, flag)
    return path
