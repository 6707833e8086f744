"""Writing files: atomically, with the modes the umask asks for, and only where the user meant.

- :func:`write_atomic` / :func:`write_json_atomic`: a temporary file beside the target, renamed
  into place; a reader (or a ``kill -9``) never sees half a file. ``mkstemp`` creates files 0600;
  they are set to what the umask allows (0644 under umask 022) before the rename, so a cache shared
  by a group stays readable to it.
- :func:`honour_umask`: the same for a folder tree written by code that picks its own modes
  (``tempfile.mkdtemp`` makes folders 0700; ``save_pretrained`` writes weights 0600).
- :func:`check_output_file` / :func:`check_output_dir`: the CLI's output paths, checked before any
  compute: an existing symlink, FIFO, device or folder is refused (a rename would replace it), and
  the folder must take a new file. ``-`` means stdout. :func:`check_folder`: a folder option (a cache,
  a log folder) that exists must be a folder.
- Reading (:func:`open_regular`, :func:`read_bounded`, :func:`read_json`): every file headwatch
  reads that a user, a cache or another machine put there is opened without blocking, must be a
  regular file (a FIFO would block forever, a device such as ``/dev/zero`` never ends) no bigger
  than its kind's bound, and JSON may nest at most :data:`MAX_JSON_DEPTH` levels (deeper input would
  exhaust the parser's recursion). What was found otherwise is named: a FIFO, a device, a folder, a
  symlink loop, a file over the bound (:class:`UnreadableFile`, bad input).

Imports only the standard library (the CLI checks paths before it imports torch).
"""
from __future__ import annotations

import errno
import itertools
import json
import os
import re
import stat
import tempfile
from pathlib import Path
from typing import Any

from headwatch.validation import InputError, input_error_from

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
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            os.fchmod(f.fileno(), file_mode())  # mkstemp's 0600 is for the temporary name only
            f.flush()
            os.fsync(f.fileno())  # the bytes reach the disk (or the file server) before the name does
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        blocker = not_a_folder(path.parent) if isinstance(e, (FileExistsError, NotADirectoryError)) else None
        if blocker is not None:  # a file (or a FIFO...) where the path needs a folder: the user's, named
            raise InputError(f"cannot write {path}: {blocker} is {kind_of(blocker.lstat().st_mode)} where a folder is "
                             "needed; move it away or write somewhere else") from None
        # a full disk, a quota, a permission: the user's machine, named with the file (bad input)
        problem = input_error_from(e, f"writing {path}") if isinstance(e, OSError) else None
        if problem is not None:
            raise problem from None
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

_KINDS = ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISLNK, "a symlink"))


def kind_of(mode: int) -> str:
    """What a file of ``mode`` is, for messages: "a regular file", "a folder", "a FIFO", ..."""
    return next((name for test, name in _KINDS if test(mode)), "neither a file nor a folder")


def not_a_folder(folder: str | os.PathLike) -> Path | None:
    """The nearest of ``folder`` and its parents that exists (or is a link) when it is not a folder
    (a file where a folder must be, so nothing can be created under it); None otherwise."""
    folder = Path(folder)
    existing = next((p for p in (folder, *folder.parents) if p.exists() or p.is_symlink()), None)
    return existing if existing is not None and not existing.is_dir() else None


def _writable_folder(folder: Path, flag: str) -> None:
    """Create ``folder`` if needed and prove a new file can be made in it."""
    existing = not_a_folder(folder)
    if existing is not None:
        raise InputError(f"{flag}: {existing} is {kind_of(existing.lstat().st_mode)}, not a folder, so nothing can be "
                         "written under it; give a path inside a folder")
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
            raise InputError(f"{flag}: {path} exists and is {kind_of(mode)}, not a regular file; give a new file "
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
        raise InputError(f"{flag}: {path} exists and is {kind_of(path.stat().st_mode)}, not a folder; give a folder")
    _writable_folder(path, flag)
    return path


def check_folder(raw: str | os.PathLike, what: str) -> Path:
    """A folder option (``--cache-dir``, ``--log-dir``, ``HEADWATCH_CACHE_DIR``): where something exists
    at that path, it must be a folder (or a symlink to one). Nothing is created here."""
    path = Path(raw).expanduser()
    try:
        st = path.stat()
    except FileNotFoundError:
        return path
    except NotADirectoryError:  # a part of the path is a file
        blocker = next((p for p in path.parents if p.exists() and not p.is_dir()), path.parent)
        raise InputError(f"{what} {path} cannot be created: {blocker} is a file, not a folder; give a folder") from None
    except OSError as e:
        raise UnreadableFile(f"{what} {path}: {_os_reason(e)}; give a folder") from None
    if not stat.S_ISDIR(st.st_mode):
        raise InputError(f"{what} {path} is {kind_of(st.st_mode)}, "
                         "not a folder; give a folder (it is created if missing)")
    return path


def inside(root: str | os.PathLike, name: str, what: str) -> Path:
    """``root / name`` for a ``name`` that stays inside ``root`` as written: not absolute, no ``..``
    part, nothing empty (``sub/step1`` is fine). Symlinks inside are followed later as usual (a Hub
    cache's snapshot links into its blobs). InputError naming ``what`` otherwise."""
    text = os.fspath(name)
    parts = text.replace(os.sep, "/").split("/")
    if not text.strip() or text.startswith(("/", os.sep)) or os.path.isabs(text) or ".." in parts or "\0" in text:
        raise InputError(f"{what} {text!r} leaves {root} (an absolute path, or one with '..'); it must name "
                         f"something inside that folder, such as {Path(text).name or 'step1000'!r}")
    return Path(root) / text


# ---- reading files a user, a cache or another machine put there ------------------------------------

#: Bounds on what one read may take, by kind of file. Records of the paper's models are ~100 KB,
#: a Hub ref 40 bytes, a panel a few KB, a config.json a few KB (tokenizer vocabularies are not read).
MAX_BYTES = {"record": 64 << 20, "cache entry": 64 << 20, "panel": 4 << 20, "json": 16 << 20, "ref": 4096}
#: JSON (and TOML) nesting headwatch reads; its records nest 5 deep. Python's parsers recurse once per
#: level and raise RecursionError near 1000, so the text is checked before it is parsed.
MAX_JSON_DEPTH = 64


class UnreadableFile(InputError):
    """A file headwatch was to read is not a regular file of bounded size, or cannot be opened; the
    message names the path and what was found there."""


class MissingFile(UnreadableFile):
    """The file (or what its symlink points at) does not exist."""


def _os_reason(e: OSError) -> str:
    if e.errno == errno.ELOOP:
        return "a symlink loop (a link that points back at itself, directly or through other links)"
    return e.strerror or str(e)


def open_regular(path: str | os.PathLike, what: str, limit: int | None = None):
    """``path`` opened for binary reading; it must be a regular file (after symlinks) of at most
    ``limit`` bytes (None: any size). Opened non-blocking, so a FIFO is named instead of waited on.

    Returns ``(file, size)``; a reader takes no more than ``size`` bytes (the file may grow).
    Raises :class:`MissingFile` or :class:`UnreadableFile` naming ``what`` and the path."""
    path = os.fspath(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        if e.errno == errno.ENOENT:
            target = f" (a symlink to {os.readlink(path)}, which does not exist)" if os.path.islink(path) else ""
            raise MissingFile(f"{what} {path}: no such file{target}") from None
        raise UnreadableFile(f"{what} {path}: cannot be opened: {_os_reason(e)}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnreadableFile(f"{what} {path} is {kind_of(st.st_mode)}, not a regular file; headwatch reads "
                                 "only regular files here (replace it with the file it should be)")
        if limit is not None and st.st_size > limit:
            raise UnreadableFile(f"{what} {path} is {st.st_size:,} bytes, over the {limit:,}-byte bound for a "
                                 f"{what}; it is not one (or is damaged): replace it")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb"), st.st_size
    except BaseException:
        os.close(fd)
        raise


def read_bounded(path: str | os.PathLike, what: str, limit: int | None = None) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (:func:`open_regular`)."""
    f, size = open_regular(path, what, limit if limit is not None else MAX_BYTES.get(what, MAX_BYTES["json"]))
    with f:
        return f.read(size)


_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_NOT_SYNTAX = bytes(b for b in range(256) if b not in b'[]{}"')
_STRINGS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')  # a JSON string, the loop unrolled (twice as fast)
_PLAIN_STRINGS = re.compile(rb'"[^"]*"')
_STEP = [1 if b in b"[{" else -1 for b in range(256)]


def nesting_depth(text: str | bytes) -> int:
    """How deep ``[`` / ``{`` nest in JSON (or TOML) text, strings skipped; linear time, no recursion."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if b"\\" not in data:
        # No escapes: a string is exactly "...", so dropping every byte but quotes and brackets first
        # changes nothing the string pattern sees, and leaves it a twentieth of a record to scan.
        brackets = _PLAIN_STRINGS.sub(b"", data.translate(None, _NOT_SYNTAX)).translate(None, _NOT_BRACKETS)
    else:
        brackets = _STRINGS.sub(b"", data).translate(None, _NOT_BRACKETS)
    # the deepest prefix sum of +1 per opening bracket, -1 per closing one (0 for none)
    return max(0, max(itertools.accumulate(map(_STEP.__getitem__, brackets)), default=0))


def check_depth(text: str | bytes, where: str, limit: int = MAX_JSON_DEPTH) -> None:
    """InputError naming ``where`` when ``text`` nests deeper than ``limit`` (checked before parsing)."""
    depth = nesting_depth(text)
    if depth > limit:
        raise UnreadableFile(f"{where}: nests {depth} levels deep, over the bound of {limit}; headwatch's files "
                             "nest a few levels: this is not one (replace it)")


def refuse_non_finite(name: str) -> Any:
    """json's hook for NaN, Infinity and -Infinity, which headwatch never writes and never accepts."""
    raise ValueError(f"holds {name}, which is not a number a measurement can have (headwatch writes "
                     "finite numbers only); regenerate the file")


def parse_json(text: str | bytes, where: str, *, finite: bool = True) -> Any:
    """JSON text parsed after its depth is checked; NaN/Infinity refused with ``finite`` (ValueError)."""
    check_depth(text, where)
    try:
        return json.loads(text, parse_constant=refuse_non_finite if finite else None)
    except RecursionError:  # unreachable after check_depth; kept so that it never escapes
        raise UnreadableFile(f"{where}: nests too deep to read") from None


def read_json(path: str | os.PathLike, what: str = "json", *, limit: int | None = None, finite: bool = True) -> Any:
    """A JSON file read through :func:`read_bounded` and :func:`parse_json`.

    Raises UnreadableFile (missing, not a regular file, too big, too deep), UnicodeDecodeError,
    json.JSONDecodeError or ValueError (NaN / Infinity); callers name the file in their own words."""
    data = read_bounded(path, what, limit)
    return parse_json(data.decode("utf-8"), f"{what} {os.fspath(path)}", finite=finite)
