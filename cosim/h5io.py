"""Atomic HDF5 output: write under a temporary name in the target directory, rename when complete."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from cosim.errors import CosimInputError

#: errno values that mean "the device is full" (no space, or the user's quota)
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def os_error_code(exc: BaseException) -> int | None:
    """The errno of an OSError, also when h5py only spells it in the message (``errno = 28``)."""
    if getattr(exc, "errno", None):
        return int(exc.errno)
    text = str(exc)
    m = re.search(r"errno\s*=\s*(\d+)", text)
    if m:
        return int(m.group(1))
    for code in (errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EDQUOT):
        if os.strerror(code) in text:
            return code
    return None


def free_bytes(folder: str | os.PathLike[str]) -> int | None:
    """Bytes free for an unprivileged write in ``folder`` (None if it cannot be told)."""
    try:
        return int(shutil.disk_usage(folder).free)
    except OSError:
        return None


def output_error(final: Path, exc: OSError, *, need_bytes: int | None = None) -> CosimInputError:
    """A one-line CosimInputError for a failed write of ``final``: what went wrong and how to fix it."""
    folder = final.parent
    code = os_error_code(exc)
    if code in NO_SPACE:
        free = free_bytes(folder)
        need = f"about {need_bytes} B needed" if need_bytes else "more space needed"
        have = f", {free} B free" if free is not None else ""
        return CosimInputError(str(final), f"no space left on the device of {folder} ({need}{have}); "
                               "nothing was written", "free some space or write elsewhere with -o")
    if code == errno.EROFS:
        return CosimInputError(str(final), f"folder {folder} is on a read-only file system; nothing was written",
                               "write elsewhere with -o")
    if code in (errno.EACCES, errno.EPERM):
        return CosimInputError(str(final), f"permission denied writing in {folder}; nothing was written",
                               "write elsewhere with -o, or fix the folder's permissions")
    reason = os.strerror(code) if code else (str(exc).splitlines() or ["unknown error"])[0]
    return CosimInputError(str(final), f"cannot be written ({reason}); nothing was written", "write elsewhere with -o")


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str], *, need_bytes: int | None = None) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it to ``path`` only if the block succeeds.

    A crash or an exception leaves no half-written file under the final name (and removes the temporary).
    An OSError while creating, writing or renaming (no space, read-only file system, permission denied)
    becomes a one-line CosimInputError naming ``path`` (with ``need_bytes``, the size the write needed).
    """
    final = Path(path)
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
        os.close(fd)
    except OSError as exc:
        raise output_error(final, exc, need_bytes=need_bytes) from None
    tmp = Path(tmp_name)
    try:
        yield tmp
        # mkstemp creates 0600; give the result the mode a plain open() would (0666 less the umask).
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, final)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, FileNotFoundError) and exc.filename not in (None, str(tmp), str(final)):
            raise  # an input file that vanished: not an output problem
        raise output_error(final, exc, need_bytes=need_bytes) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_image(path: str | os.PathLike[str], image: bytes) -> None:
    """Write the bytes of an HDF5 file image (an in-memory file's ``id.get_file_image()``) to ``path``
    atomically, with plain writes and an fsync: HDF5 itself does not survive a full device (an ENOSPC inside
    its metadata cache can crash the process), a Python write fails with an OSError that becomes a one-line
    error and leaves nothing behind."""
    with atomic_output(path, need_bytes=len(image)) as tmp, open(tmp, "wb") as out:
        out.write(image)
        out.flush()
        os.fsync(out.fileno())


def in_memory_h5(name: str, **kwargs):
    """An empty HDF5 file (an open h5py.File) held in memory only (core driver, no backing store); ``name``
    only labels it. Write it with ``write_image(path, f.id.get_file_image())`` after a flush."""
    import h5py  # noqa: PLC0415

    return h5py.File(f"{name}.in-memory", "w", driver="core", backing_store=False, **kwargs)
