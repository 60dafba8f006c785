"""Reading and writing a client's config file without harming it.

- A symlink is followed only when its real target stays inside the folder setup works in (the home
  folder for user files, the repository for `--project`); the rename then happens beside the target,
  so the link stays a link. A link out of that folder is refused, naming the link.
- A file or folder owned by another user, a read-only file (no owner write bit, which root would
  otherwise ignore), or something that is not a regular file is refused, naming it.
- A write is whole: a temporary file beside the target, with the target's permissions, fsynced, then
  renamed over it. Just before the rename the file is read again: if it changed since setup read it
  (the client rewrote it meanwhile), the write is refused and the temporary file removed.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import stat
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from threadloom.errors import InvalidInput

MAX_BYTES: Final = 8 * 1024 * 1024


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Snapshot:
    """A config file as setup read it: `shown` is the path as the user knows it, `real` where it is."""

    shown: Path
    real: Path
    data: bytes | None  # None: the file does not exist yet
    mode: int | None

    @property
    def text(self) -> str | None:
        if self.data is None:
            return None
        try:
            return self.data.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidInput(f"cannot read {self.shown}: it is not UTF-8 text") from None


def resolve(path: Path, root: Path) -> Path:
    """The real path of `path`, refused when a symlink takes it outside `root`."""
    real = Path(os.path.realpath(path))
    top = Path(os.path.realpath(root))
    if real != top and top not in real.parents:
        link = next((p for p in [path, *path.parents] if p.is_symlink()), path)
        raise InvalidInput(f"refusing to touch {path}: {link} is a symlink to {os.path.realpath(link)}, outside {top}")
    return real


def read(path: Path, root: Path) -> Snapshot:
    real = resolve(path, root)
    try:
        st = os.stat(real)
    except FileNotFoundError:
        return Snapshot(path, real, None, None)
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise InvalidInput(f"refusing to touch {path}: it is not a regular file")
    if st.st_size > MAX_BYTES:
        raise InvalidInput(f"refusing to touch {path}: it is larger than {MAX_BYTES // 2**20} MiB")
    try:
        data = real.read_bytes()
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror}") from None
    return Snapshot(path, real, data, stat.S_IMODE(st.st_mode))


def check_writable(snap: Snapshot) -> None:
    """Refuse now what writing the file would refuse, so that nothing is written before a refusal."""
    uid = os.getuid()
    if snap.data is not None:
        st = os.stat(snap.real)
        if st.st_uid != uid:
            raise InvalidInput(f"refusing to change {snap.shown}: it belongs to another user")
        if not st.st_mode & stat.S_IWUSR:
            raise InvalidInput(
                f"refusing to change {snap.shown}: it is read-only (chmod u+w it, or leave this client out)"
            )
    folder = _existing_folder(snap.real.parent)
    st = os.stat(folder)
    if st.st_uid != uid:
        raise InvalidInput(f"refusing to write {snap.shown}: the folder {folder} belongs to another user")
    if not st.st_mode & stat.S_IWUSR:
        raise InvalidInput(f"refusing to write {snap.shown}: the folder {folder} is read-only")


def _existing_folder(folder: Path) -> Path:
    while not folder.exists():
        folder = folder.parent
    return folder


def make_folders(folder: Path, mode: int) -> list[Path]:
    """Create `folder` and missing parents; the ones made, outermost first."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    made = []
    for path in reversed(missing):
        try:
            path.mkdir(mode)
        except FileExistsError:
            continue
        made.append(path)
    return made


def write(snap: Snapshot, data: bytes, mode: int = 0o644) -> None:
    """Replace the file by `data`, whole, if it is still what `snap` read."""
    check_writable(snap)
    target = snap.real
    keep = snap.mode if snap.mode is not None else mode
    tmp = target.parent / f".{target.name}.{secrets.token_hex(4)}.threadloom-tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, keep)
            os.fsync(fd)
        finally:
            os.close(fd)
        ensure_unchanged(snap)
        os.rename(tmp, target)
    except OSError as exc:
        raise InvalidInput(f"cannot write {snap.shown}: {exc.strerror}; it was left as it was") from None
    finally:
        with suppress(FileNotFoundError):
            os.unlink(tmp)
    _sync_folder(target.parent)


def delete(snap: Snapshot) -> None:
    check_writable(snap)
    ensure_unchanged(snap)
    with suppress(FileNotFoundError):
        os.unlink(snap.real)


def ensure_unchanged(snap: Snapshot) -> None:
    try:
        now: bytes | None = snap.real.read_bytes()
    except FileNotFoundError:
        now = None
    if now != snap.data:
        raise InvalidInput(
            f"{snap.shown} changed while setup was working on it (another program wrote it); nothing was "
            "written to it: run setup again"
        )


def _sync_folder(folder: Path) -> None:
    with suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
