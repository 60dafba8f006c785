"""Files in a repository, which is untrusted input: a clone can hold symlinks to anywhere, and a
process that follows one overwrites someone else's file, or reads it into the working tree. Every
file threadloom reads or writes in a repository goes through `Repository`, which

- resolves the path and refuses it, naming the link, when its real location is outside the
  repository or inside its `.git` (a link that stays inside is followed);
- then opens each folder on the way, and the file, relative to a folder descriptor with
  `O_NOFOLLOW`, so a link swapped in after the check is refused rather than followed;
- writes a file whole: an `O_EXCL` temp file beside it, fsynced, then renamed into place;
- reads only regular files, up to `MAX_FILE_BYTES`, as UTF-8 (a planted FIFO cannot block it);
- gives what it creates the repository folder's permissions (files without execute): files shared
  through git get the user's normal permissions, whatever the umask of this process (the daemon's
  is 077, for the home's sake).
"""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import stat
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Final

from threadloom.errors import InvalidInput
from threadloom.identity import unsafe_repository_root

MAX_FILE_BYTES: Final = 4 * 1024 * 1024
_FOLDER: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NEW: Final = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_LINK_UNSUPPORTED: Final = frozenset({errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV})
# What identifies a file's content without reading it: inode, size, mtime and ctime (ns).
Signature = tuple[int, int, int, int]


class Repository:
    """One repository's files, named by paths relative to its root (`.threadloom/projects/x.yaml`)."""

    def __init__(self, root: Path) -> None:
        try:
            real = Path(root).resolve(strict=True)
            st = os.stat(real)
        except (OSError, RuntimeError):
            raise InvalidInput(f"the project folder {root} does not exist") from None
        if not stat.S_ISDIR(st.st_mode):
            raise InvalidInput(f"the project folder {root} is not a folder")
        reason = unsafe_repository_root(real)
        if reason:
            raise InvalidInput(reason)
        self.root = real
        self._top = str(real).rstrip("/")  # "/" itself is refused above: never empty
        self.folder_mode = stat.S_IMODE(st.st_mode) & 0o775 | 0o700  # never world-writable
        self.file_mode = self.folder_mode & 0o666

    # reading

    def read_text(self, rel: str) -> str | None:
        """The file's text, or None when it does not exist."""
        real = self._real(rel, "read")
        with _plainly("read", rel):
            try:
                folder = self._folder(real[:-1], create=False)
            except FileNotFoundError:
                return None
            try:
                fd = os.open(real[-1], _READ, dir_fd=folder)
            except FileNotFoundError:
                return None
            finally:
                os.close(folder)
            return _read(fd, rel)

    def read_folder(self, rel: str, suffix: str) -> tuple[dict[str, str], dict[str, str]]:
        """The texts of the folder's `*<suffix>` files by name, and why the others could not be read
        (a link out of the repository, not a regular file, not text). A missing folder has none."""
        read, _, problems = self.read_folder_changed(rel, suffix, {})
        return {name: text for name, (_, text) in read.items()}, problems

    def read_folder_changed(
        self, rel: str, suffix: str, known: Mapping[str, Signature]
    ) -> tuple[dict[str, tuple[Signature | None, str]], set[str], dict[str, str]]:
        """As `read_folder`, but a regular file whose signature (inode, size, mtime, ctime) is the one
        `known` gives is not read: it is named in the second result. Each file read comes with the
        signature of what was read, taken from the open file before reading, so a change made while
        it is read moves the signature again (None for a file reached through a link: never kept)."""
        real = self._real(rel, "read")
        read: dict[str, tuple[Signature | None, str]] = {}
        same: set[str] = set()
        problems: dict[str, str] = {}
        with _plainly("read", rel):
            try:
                folder = self._folder(real, create=False)
            except FileNotFoundError:
                return read, same, problems
            try:
                for name in sorted(n for n in os.listdir(folder) if n.endswith(suffix)):
                    try:
                        st = os.stat(name, dir_fd=folder, follow_symlinks=False)
                        if stat.S_ISLNK(st.st_mode):
                            text = self.read_text(f"{rel}/{name}")  # checked like any other path
                            if text is not None:
                                read[name] = (None, text)
                            continue
                        if name in known and _signature(st) == known[name] and stat.S_ISREG(st.st_mode):
                            same.add(name)
                            continue
                        fd = os.open(name, _READ, dir_fd=folder)
                        read[name] = (_signature(os.fstat(fd)), _read(fd, f"{rel}/{name}"))
                    except FileNotFoundError:
                        continue  # deleted meanwhile
                    except InvalidInput as exc:
                        problems[name] = exc.message
                    except OSError as exc:
                        problems[name] = f"cannot read {rel}/{name}: {exc.strerror}"
            finally:
                os.close(folder)
        return read, same, problems

    # writing

    def check(self, rel: str, verb: str = "write") -> None:
        """Refuse now what writing `rel` would refuse, so that nothing is written before the refusal."""
        self._real(rel, verb)

    def make_folder(self, rel: str) -> None:
        real = self._real(rel, "write")
        with _plainly("write", rel):
            os.close(self._folder(real, create=True))

    def write_text(self, rel: str, text: str, replace: bool = True, keep_mode: bool = False) -> bool:
        """Write the whole file (a temp file beside it, fsynced, renamed over it). With `replace`
        False an existing file is left as it is and False returned. With `keep_mode` a file that
        exists keeps its permissions (it is the user's); otherwise it gets the repository's."""
        data = text.encode("utf-8")
        real = self._real(rel, "write")
        with _plainly("write", rel):
            folder = self._folder(real[:-1], create=True)
            try:
                return self._put(folder, real[-1], data, replace, keep_mode)
            finally:
                os.close(folder)

    def delete(self, rel: str) -> None:
        """Remove the file (a link itself, never what it points at); nothing when it is missing."""
        real = self._real(rel, "delete", follow_last=False)
        with _plainly("delete", rel):
            try:
                folder = self._folder(real[:-1], create=False)
            except FileNotFoundError:
                return
            try:
                with suppress(FileNotFoundError):
                    os.unlink(real[-1], dir_fd=folder)
            finally:
                os.close(folder)

    @contextmanager
    def locked(self, rel: str) -> Iterator[None]:
        """Hold an exclusive lock on the file `rel` (created when missing) for the block."""
        fd = self._lock_file(rel)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    # the mechanism

    def _real(self, rel: str, verb: str, follow_last: bool = True) -> tuple[str, ...]:
        """The parts of `rel`'s real path below the root; refused, naming the link, when a symlink
        takes it outside the repository or into `.git`. Without `follow_last` the last part is
        kept as it is (it is then used without being followed)."""
        parts = tuple(rel.split("/"))
        if rel.startswith("/") or not all(p and p not in (".", "..") for p in parts):
            raise InvalidInput(f"{rel!r} is not a path inside the repository")
        lead = parts if follow_last else parts[:-1]
        inside = self._inside(os.path.realpath(os.path.join(self._top, *lead)))
        if inside is None:
            raise self._refusal(verb, rel, lead)
        real = inside if follow_last else (*inside, parts[-1])
        if not real:
            raise InvalidInput(f"cannot {verb} {rel}: it is the repository's own folder")
        return real

    def _inside(self, real: str) -> tuple[str, ...] | None:
        """`real`'s parts below the root; None when it is outside, or in `.git`."""
        if real == self._top:
            return ()
        if not real.startswith(self._top + "/"):
            return None
        parts = tuple(real[len(self._top) + 1 :].split("/"))
        return None if ".git" in parts else parts

    def _refusal(self, verb: str, rel: str, lead: tuple[str, ...]) -> InvalidInput:
        """The refusal, naming the first link on the way that leads out."""
        for n in range(1, len(lead) + 1):
            path = self.root.joinpath(*lead[:n])
            if not path.is_symlink():
                continue
            dest = Path(os.path.realpath(path))
            if self._inside(str(dest)) is None:
                name = "/".join(lead[:n])
                who = "it is" if name == rel else f"{name} is"
                where = "inside the repository's .git" if dest.is_relative_to(self.root) else "outside the repository"
                return InvalidInput(f"refusing to {verb} {rel}: {who} a symlink to {dest} {where}")
        return InvalidInput(f"refusing to {verb} {rel}: it leads outside the repository")

    def _folder(self, parts: tuple[str, ...], create: bool) -> int:
        """A descriptor of the folder `parts` (real, below the root), each step opened without
        following a link; missing folders are made when `create`, with the repository's mode."""
        fd = os.open(self.root, _FOLDER)
        try:
            for name in parts:
                try:
                    step = os.open(name, _FOLDER, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    made = True
                    try:
                        os.mkdir(name, 0o700, dir_fd=fd)
                    except FileExistsError:
                        made = False  # another writer made it first
                    step = os.open(name, _FOLDER, dir_fd=fd)
                    if made:
                        os.fchmod(step, self.folder_mode | (os.fstat(step).st_mode & stat.S_ISGID))
                os.close(fd)
                fd = step
            return fd
        except BaseException:
            os.close(fd)
            raise

    def _put(self, folder: int, name: str, data: bytes, replace: bool, keep_mode: bool) -> bool:
        mode = self.file_mode
        try:
            st = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        if st is not None and not replace:
            return False
        if st is not None and keep_mode and stat.S_ISREG(st.st_mode):
            mode = stat.S_IMODE(st.st_mode)
        tmp = f".{name}.{secrets.token_hex(4)}.tmp"
        fd = os.open(tmp, _NEW, 0o600, dir_fd=folder)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fchmod(fd, mode)
                os.fsync(fd)
            finally:
                os.close(fd)
            if replace:
                os.rename(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
            else:
                try:  # a hard link never replaces: of racing creators exactly one wins
                    os.link(tmp, name, src_dir_fd=folder, dst_dir_fd=folder, follow_symlinks=False)
                except FileExistsError:
                    return False
                except OSError as exc:
                    if exc.errno not in _LINK_UNSUPPORTED:
                        raise
                    os.rename(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
        finally:
            with suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=folder)
        with suppress(OSError):
            os.fsync(folder)  # the rename itself survives a crash
        return True

    def _lock_file(self, rel: str) -> int:
        real = self._real(rel, "lock")
        with _plainly("lock", rel):
            folder = self._folder(real[:-1], create=True)
            try:
                try:
                    fd = os.open(real[-1], _NEW, 0o600, dir_fd=folder)
                    os.fchmod(fd, self.file_mode)
                except FileExistsError:
                    fd = os.open(real[-1], os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
            finally:
                os.close(folder)
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise InvalidInput(f"cannot lock {rel}: it is not a regular file")
            return fd


def _signature(st: os.stat_result) -> Signature:
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _read(fd: int, rel: str) -> str:
    """A regular file's whole text (closes `fd`)."""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InvalidInput(f"cannot read {rel}: it is not a regular file")
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_FILE_BYTES:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > MAX_FILE_BYTES:
        raise InvalidInput(f"cannot read {rel}: it is larger than {MAX_FILE_BYTES // 2**20} MiB")
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(f"cannot read {rel}: it is not UTF-8 text") from None


@contextmanager
def _plainly(verb: str, rel: str) -> Iterator[None]:
    """What the file system refused, as a clear InvalidInput naming the file."""
    try:
        yield
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InvalidInput(
                f"refusing to {verb} {rel}: a symlink on its way loops or changed while in use"
            ) from None
        why = {
            errno.ENOTDIR: "a part of its path is not a folder",
            errno.EISDIR: "it is a folder",
            errno.ENOTEMPTY: "it is a folder",
        }.get(exc.errno or 0, exc.strerror or str(exc))
        raise InvalidInput(f"cannot {verb} {rel}: {why}") from None
