"""Writing files so that no run leaves half of one: atomic writes, output-folder checks, and the JSON writer."""

from __future__ import annotations

import contextlib
import errno
import glob
import json
import os
import re
import secrets
import shutil
import signal
import stat
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from ..errors import PSPInputError, os_error_of

TEMP_SUFFIX = ".tmp"


def _temp_name(path: Path) -> Path:
    # The pid in the name lets a later run recognise the leftovers of a killed one (see _remove_stale_temps).
    return path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}{TEMP_SUFFIX}")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


_TEMP_TAIL = re.compile(r"\.(\d+)-[0-9a-f]{8}" + re.escape(TEMP_SUFFIX) + "$")


def _remove_stale_temps(path: Path) -> list[Path]:
    """Remove the temporaries that writers which died (SIGKILL, power loss) left in `path`'s folder, whatever
    output they were for (`.NAME.PID-XXXXXXXX.tmp` of a dead PID); returns what was removed."""
    removed = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(path.parent):
            match = _TEMP_TAIL.search(entry.name)
            if not (entry.name.startswith(".") and match and entry.is_file(follow_symlinks=False)):
                continue
            pid = int(match.group(1))
            if pid != os.getpid() and not pid_alive(pid):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
                    removed.append(Path(entry.path))
    return removed


def _umask() -> int:
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)  # no /proc: read it the portable way (and put it back)
    os.umask(mask)
    return mask


def follow_umask(paths: Iterable[Path]) -> None:
    """Give files psp just wrote the mode a new file gets (0666 less the umask): safetensors' writer, and so
    transformers' save_pretrained and Accelerate's checkpoints, create theirs 0600 whatever the umask says."""
    mode = 0o666 & ~_umask()
    for path in paths:
        with contextlib.suppress(OSError):
            if stat.S_ISREG(os.lstat(path).st_mode):
                os.chmod(path, mode)


class Terminated(BaseException):
    """Raised in the main thread by SIGTERM while an atomic write is open, so its temporary file is removed."""

    def __init__(self, signum: int):
        super().__init__(f"terminated by signal {signum}")
        self.signum = signum


def _raise_terminated(signum, frame) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def terminate_as_exception() -> Iterator[None]:
    """Turn SIGTERM into an exception for the duration, when psp may own the signal (main thread, default)."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


# Write failures that `output_error` words for the user (others are not about the output and propagate).
_OUTPUT_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EROFS, errno.EISDIR)


def output_error(path: str | os.PathLike, error: OSError) -> PSPInputError:
    """One clear line for a failed write of `path` (disk full, permission, missing folder)."""
    reasons = {
        errno.ENOSPC: "no space left on the device",
        errno.EDQUOT: "disk quota exceeded",
        errno.EACCES: "permission denied",
        errno.EROFS: "read-only file system",
        errno.EISDIR: "is a directory",
    }
    reason = reasons.get(error.errno, error.strerror or str(error))
    return PSPInputError(f"{path}: cannot write it: {reason} (nothing was replaced)")


def check_writable_parent(path: str | os.PathLike, label: str | None = None) -> None:
    """Before the work starts: the nearest existing folder above `path` is writable (the rest gets created).

    Errors start with `label` (e.g. "--output PATH"; default: the path).
    """
    label = label or str(path)
    parent = Path(os.path.abspath(path)).parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise PSPInputError(f"{label}: {parent} is not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PSPInputError(f"{label}: cannot write in {parent} (permission denied or read-only)")


def check_output(path: str | os.PathLike, flag: str = "-o") -> None:
    """Before the work starts: refuse an output path that is empty, a directory, or whose folder is not writable."""
    if not os.fspath(path).strip():  # Path("") is ".", which would be reported as "a directory"
        raise PSPInputError(f"{flag}: empty path; give a file name for the output")
    path = Path(path)
    if path.is_dir():
        raise PSPInputError(f"{path}: is a directory; give a file name for the output")
    check_writable_parent(path)


def _written_through(path: Path) -> bool:
    """True when `path` is written into instead of replaced: a device or FIFO named directly (`-o /dev/null` as root
    must not turn /dev/null into a regular file), or a link to a descriptor this process holds open for writing
    (`-o /dev/stdout`, `/dev/fd/3`, whatever they are). Any other symlink is replaced itself, never followed: a link
    planted in an output folder cannot make psp write into its target (a link through `/proc/self/root` or to a
    FIFO included). A socket is refused."""
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return False  # nothing there: the new file takes the name
    if stat.S_ISSOCK(mode):
        raise PSPInputError(f"{path}: is a socket; give a file name for the output")
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISFIFO(mode):
        return True
    return stat.S_ISLNK(mode) and _descriptor_link(path)


# A folder of descriptors, as `os.path.realpath` spells /proc/self/fd, /dev/fd and their thread forms.
_DESCRIPTOR_FOLDER = re.compile(r"/proc/(\d+)(?:/task/\d+)?/fd")


def _descriptor(path: str) -> int | None:
    """The descriptor `path` names (`/proc/self/fd/N`, `/dev/fd/N`) when it is this process's and open for writing:
    writing there goes where the process's owner sent that descriptor, never to a file a link chose. -1 for any other
    descriptor name (another process's, one not open, or one open for reading only); None for a path that names
    none."""
    folder = _DESCRIPTOR_FOLDER.fullmatch(os.path.realpath(os.path.dirname(path)))
    name = os.path.basename(path)
    if not (folder and name.isdigit()):
        return None
    if int(folder.group(1)) != os.getpid():
        return -1
    import fcntl

    try:
        flags = fcntl.fcntl(int(name), fcntl.F_GETFL)
    except OSError:  # not open
        return -1
    return int(name) if flags & os.O_ACCMODE in (os.O_WRONLY, os.O_RDWR) else -1


def _descriptor_link(path: Path) -> bool:
    # /dev/stdout -> /proc/self/fd/1, /dev/fd/N: follow the chain a link at a time; it counts only when a step names
    # one of this process's writable descriptors (a link to /proc/self/root/... names a file, not a descriptor).
    current, seen = os.fspath(path), 0
    while seen < 40:
        descriptor = _descriptor(current)
        if descriptor is not None:
            if descriptor < 0:  # replacing the link would replace /dev/stdout itself when stdout is closed
                raise PSPInputError(f"{path}: names a descriptor that is not open for writing")
            return True
        if not os.path.islink(current):
            return False
        target = os.readlink(current)
        current, seen = os.path.join(os.path.dirname(current), target), seen + 1
    return False


def _copy_through(tmp: Path, target: Path) -> None:
    # O_APPEND and no O_TRUNC: a device has nothing to truncate, and stdout redirected with `>>` is appended to.
    fd = os.open(target, os.O_WRONLY | os.O_APPEND)
    with open(tmp, "rb") as source, open(fd, "wb", closefd=True) as sink:
        while block := source.read(1 << 20):
            sink.write(block)


# The folders commands write into (`output_folder`), so every writer below them can be held inside.
_OUTPUT_FOLDERS: list[Path] = []


_OUTPUT_FOLDERS_LOCK = threading.Lock()


@contextlib.contextmanager
def output_folder(folder: str | os.PathLike) -> Iterator[Path]:
    """While the block runs, outputs under `folder` stay inside it: `atomic_path` (and any writer calling
    `check_inside`) refuses a path below `folder` that passes through a symlinked folder, such as a link planted at
    `RUN/training` that would send a run's state elsewhere. `folder` itself may be a link: the user named it."""
    folder = Path(os.path.abspath(folder))
    with _OUTPUT_FOLDERS_LOCK:
        _OUTPUT_FOLDERS.append(folder)
    try:
        yield folder
    finally:
        with _OUTPUT_FOLDERS_LOCK:
            _OUTPUT_FOLDERS.remove(folder)


def check_inside(path: str | os.PathLike, folder: str | os.PathLike | None = None) -> None:
    """Refuse to write `path` when a folder between `folder` (default: each `output_folder` above `path`) and `path`
    is a symlink, so the output would land outside the folder it belongs to. The last component is the writer's
    concern (`atomic_path` replaces a link there)."""
    absolute = Path(os.path.abspath(path))
    with _OUTPUT_FOLDERS_LOCK:
        folders = [Path(os.path.abspath(folder))] if folder is not None else list(_OUTPUT_FOLDERS)
    for root in folders:
        if root not in absolute.parents:
            continue
        current = root
        for part in absolute.relative_to(root).parts[:-1]:
            current = current / part
            if os.path.islink(current):
                raise PSPInputError(
                    f"{current}: is a symlink inside the output folder {root}; psp writes only inside that folder "
                    "(remove the link)"
                )


def check_no_links(folder: str | os.PathLike, files: bool = True) -> None:
    """Refuse a symlink anywhere below `folder` (nothing is followed): a linked folder would take the files written
    into it elsewhere, and a linked file is written through by plain opens (`save_pretrained`). `files=False` looks
    at folders only, for folders whose files are all replaced atomically."""
    for parent, folders, names in os.walk(folder):
        for name in [*folders, *names] if files else folders:
            path = os.path.join(parent, name)
            if os.path.islink(path):
                raise PSPInputError(f"{path}: is a symlink in an output folder; psp does not write through it")


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; it replaces `path` only if the block succeeds.

    The temporary file is removed on any error and on SIGTERM; ones left by killed runs are removed the next
    time. The result gets the mode a newly created file would (the umask's). Write errors such as a full disk
    become a `PSPInputError` naming `path`. An existing device or FIFO at `path` (or a link to a descriptor open for
    writing, `/dev/stdout`) is written into instead (the temporary's bytes are copied to it); any other symlink at
    `path` is replaced, not followed, and a symlinked folder below an `output_folder` is refused.
    """
    path = Path(path)
    check_inside(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise output_error(path, error) from None
    if path.is_dir():
        raise PSPInputError(f"{path}: is a directory; give a file name for the output")
    through = _written_through(path)
    # Written through, the temporary need not sit beside its target: /dev/fd/N's folder takes no files.
    beside = Path(tempfile.gettempdir()) / path.name if through else path
    _remove_stale_temps(beside)
    tmp = _temp_name(beside)
    try:
        with terminate_as_exception():
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 & ~_umask())
                os.close(fd)
                yield tmp
                follow_umask([tmp])  # the writer may have replaced the file we created (safetensors does)
                if through:
                    _copy_through(tmp, path)
                else:
                    os.replace(tmp, path)
            except Exception as error:  # an OSError, or the SafetensorError of a full disk under save_file
                failure = os_error_of(error)
                if failure is not None and failure.errno in _OUTPUT_ERRNOS:
                    raise output_error(path, failure) from None
                raise
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def publish_new(
    folder: str | os.PathLike, name_for: Callable[[int], str], first: int, write: Callable[[Path], None]
) -> Path:
    """Write a file with `write(tmp)` and publish it as `name_for(i)` for the first free `i >= first`.

    Unlike `atomic_path`, an existing file is never replaced: the hard link that publishes the file fails on a
    name another writer took meanwhile, and the next number is tried. So processes appending numbered files to
    one folder (a shared teacher cache) cannot overwrite each other's.
    """
    folder = Path(folder)
    stem = folder / "publish"
    check_inside(stem)
    _remove_stale_temps(stem)
    tmp = _temp_name(stem)
    try:
        with terminate_as_exception():
            try:
                write(tmp)
            except OSError as error:
                raise output_error(folder / name_for(first), error) from None
            index = first
            while True:
                path = folder / name_for(index)
                try:
                    os.link(tmp, path)
                    return path
                except FileExistsError:
                    index += 1
                except OSError as error:
                    raise output_error(path, error) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def write_json(path: str | os.PathLike, data: Any) -> None:
    """Write `data` as indented JSON (UTF-8, a final newline) through `atomic_path`: the one JSON writer, so a kill
    never leaves a half-written config or report that would make a whole folder unreadable."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def staging_folder(out: str | os.PathLike, kind: str = "tmp") -> Path:
    """A new empty folder beside `out` to build it in, `.OUT.KIND-PID-XXXXXXXX`, with the mode a plain `mkdir` would
    give (it becomes `out`), after removing the staging folders that dead processes left beside `out`; put it in
    place with `publish_folder`. A run killed half-way so leaves no half `out`, and the next run cleans up after it."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_dead_staging(out)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.{kind}-{os.getpid()}-", dir=out.parent))
    staging.chmod(0o777 & ~_umask())  # mkdtemp makes it 0700
    return staging


def remove_dead_staging(out: str | os.PathLike) -> list[Path]:
    """Remove the folders beside `out` that `staging_folder` made for processes now gone; returns them."""
    out = Path(out)
    removed = []
    prefix = f".{out.name}."
    for folder in out.parent.glob(glob.escape(prefix) + "*-*-*"):
        parts = folder.name[len(prefix) :].split("-")  # KIND-PID-XXXXXXXX
        if len(parts) != 3 or not parts[1].isdigit() or not folder.is_dir() or folder.is_symlink():
            continue
        pid = int(parts[1])
        if pid != os.getpid() and not pid_alive(pid):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def publish_folder(staging: str | os.PathLike, out: str | os.PathLike) -> None:
    """Move the finished `staging` folder into place as `out`; an old `out` is replaced only now, after everything
    succeeded (it is moved aside, then removed)."""
    staging, out = Path(staging), Path(out)
    if out.exists() or out.is_symlink():
        old = staging_folder(out, "old")
        os.replace(out, old / "previous")
        os.replace(staging, out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(staging, out)
