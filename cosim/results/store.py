"""Results files on disk: an atomic writer and a validating reader (the schema is in cosim.results.schema)."""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import datetime as _dt
import json
import logging
import os
import time
import zlib
from collections.abc import Collection
from pathlib import Path

import h5py
import numpy as np

from cosim import __version__
from cosim.errors import CosimInputError
from cosim.h5io import in_memory_h5, write_image
from cosim.results.codes import DIMENSIONS, NOT_A_VARIABLE, flag_attributes
from cosim.results.schema import (
    DATASETS,
    GROUPS,
    SCHEMA,
    SCHEMA_VERSION,
    RunRecord,
    column_rule,
    required_columns,
)
from cosim.streamed import StreamedTable


def _check_name(name: str) -> None:
    if not name or "/" in name or name.startswith("."):
        raise CosimInputError("run name", f"{name!r} is not a valid run name", "use letters, digits, - and _")


def _write_run(h5, run: RunRecord) -> None:
    _check_name(run.name)
    # Creation order is kept, so runs read back in the order they were written (roce before ib).
    runs = h5["runs"] if "runs" in h5 else h5.create_group("runs", track_order=True)
    if run.name in runs:
        del runs[run.name]
    g = runs.create_group(run.name)
    g.attrs["config"] = json.dumps(run.config, sort_keys=True)
    g.attrs["provenance"] = json.dumps(run.provenance, sort_keys=True)
    g.attrs["summary"] = json.dumps(run.summary, sort_keys=True)
    with _ChunkWriter() as writer:
        for group in GROUPS:
            table = run.table(group)
            if not table:
                continue
            sub = g.create_group(group)
            if isinstance(table, StreamedTable):  # filled a slice at a time, never held whole
                columns = [_create_column(sub, group, name, d, table.rows) for name, d in table.dtypes.items()]
                at = 0
                for part in table.slices():
                    n = next(iter(part.values())).size
                    for name, ds in zip(table.dtypes, columns):
                        if writer.takes(ds.dtype, table.rows):
                            writer.add(ds, part[name], transient=True)
                        else:
                            ds[at:at + n] = part[name]
                    at += n
                    writer.drain(keep_rows=ROWS_IN_FLIGHT)
            else:
                columns = []
                for name, values in table.items():
                    values = np.asarray(values)
                    direct = writer.takes(values.dtype, values.size)
                    columns.append(_create_column(sub, group, name, values.dtype, values.size,
                                                  None if direct else values))
                    if direct:
                        writer.add(columns[-1], values)
            writer.close(columns)
            _name_dimension(sub, DIMENSIONS.get(group, f"{group}_row"), columns)
        writer.drain()


#: columns longer than this are stored in chunks, shuffled and deflated (smaller ones contiguous, as is)
CHUNKED_ROWS = 4096
#: the deflate level of those chunks: zlib's last fast level, 2.4 times less CPU than h5py's default 4 for
#: 6 % more bytes on a training run's columns (bench/README.md, "The record of a large run")
GZIP_LEVEL = 3
#: threads deflating chunks while the main thread produces the rows and writes the chunks
DEFLATE_THREADS = 2
#: rows (over its columns) of a streamed table handed to the threads and not yet written, at most, when its
#: next slice is produced: about one slice of a fold's queue log, deflated while the next one is made
ROWS_IN_FLIGHT = 1 << 22


def _create_column(sub, group: str, name: str, dtype: np.dtype, rows: int, values: np.ndarray | None = None):
    """Dataset ``name`` of table ``group`` with its units, description and flags: holding ``values``, or
    ``rows`` rows of ``dtype`` for the caller to fill (the same chunks and compression either way)."""
    big = rows > CHUNKED_ROWS
    layout = {"chunks": True if big else None, "compression": "gzip" if big else None,
              "compression_opts": GZIP_LEVEL if big else None, "shuffle": big}
    if values is None:
        ds = sub.create_dataset(name, shape=(rows,), dtype=dtype, **layout)
    else:
        text = dtype.kind in "OUS"
        ds = sub.create_dataset(name, data=values.astype(object) if text else values,
                                dtype=h5py.string_dtype() if text else None, **layout)
    units, description = DATASETS.get((group, name), ("", ""))
    ds.attrs["units"] = units
    ds.attrs["description"] = description
    for key, value in flag_attributes(group, name, dtype).items():
        ds.attrs[key] = value
    return ds


def _deflated_chunks(values: np.ndarray, chunk_rows: int) -> list[bytes]:
    """The chunks of ``values`` (whole chunks but the last, padded with zeros) as HDF5's shuffle and deflate
    filters store them: each chunk's bytes grouped by their place in an element, then deflated. Called in
    the writer's threads: the copies and zlib run without the GIL."""
    out = []
    width = values.dtype.itemsize
    for lo in range(0, values.size, chunk_rows):
        chunk = values[lo:lo + chunk_rows]
        if chunk.size < chunk_rows:
            chunk = np.concatenate([chunk, np.zeros(chunk_rows - chunk.size, chunk.dtype)])
        shuffled = np.ascontiguousarray(chunk.view(np.uint8).reshape(chunk_rows, width).T)
        out.append(zlib.compress(shuffled, GZIP_LEVEL))
    return out


class _ChunkWriter:
    """Writes the chunked columns of a run as HDF5 would (same chunks, shuffle and deflate level), with the
    deflating done by threads: rows are added to a column in order, cut into whole chunks, deflated by the
    threads and written by the calling thread in order (HDF5 is called from it only) with
    write_direct_chunk, the caller going on with the next tables meanwhile. The stored values, chunks and
    filters are those of h5py's own write."""

    def __init__(self):
        self._pool = None
        self._carry: dict = {}  # dataset -> (next row, rows not yet a whole chunk)
        self._pending: collections.deque = collections.deque()  # (dataset, first row, transient rows, future)
        self._transient_rows = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    @staticmethod
    def takes(dtype: np.dtype, rows: int) -> bool:
        """Whether a column of ``rows`` rows of ``dtype`` is written by the writer (chunked, not text)."""
        return rows > CHUNKED_ROWS and np.dtype(dtype).kind not in "OUSV"

    def add(self, ds, values: np.ndarray, *, transient: bool = False) -> None:
        """The next rows of column ``ds`` (created chunked, deflated and shuffled). ``transient``: ``values``
        is kept alive by the writer alone until written (a streamed table's slice), and counts in drain()."""
        chunk_rows = ds.chunks[0]
        values = np.ascontiguousarray(values, ds.dtype)
        at, carry = self._carry.get(ds, (0, None))
        if carry is not None and carry.size:
            values = np.concatenate([carry, values])
        whole = values.size // chunk_rows * chunk_rows
        self._carry[ds] = (at + whole, values[whole:].copy())
        if whole:
            self._submit(ds, at, values[:whole], transient)

    def close(self, columns) -> None:
        """No more rows for ``columns``: their last partial chunks deflated (padded, as HDF5 stores them)."""
        for ds in columns:
            at, carry = self._carry.pop(ds, (0, None))
            if carry is not None and carry.size:
                self._submit(ds, at, carry, False)

    def drain(self, keep_rows: int | None = None) -> None:
        """Write the oldest deflated chunks, every one or until at most ``keep_rows`` transient rows are in
        the threads' hands."""
        while self._pending and (keep_rows is None or self._transient_rows > keep_rows):
            ds, at, rows, future = self._pending.popleft()
            chunk_rows = ds.chunks[0]
            for i, data in enumerate(future.result()):
                ds.id.write_direct_chunk((at + i * chunk_rows,), data)
            self._transient_rows -= rows

    def _submit(self, ds, at: int, values: np.ndarray, transient: bool) -> None:
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(DEFLATE_THREADS, thread_name_prefix="deflate")
        chunk_rows = ds.chunks[0]
        # a few chunks per task: the threads share the work, the calling thread writes in order meanwhile
        step = max(chunk_rows, values.size // (4 * DEFLATE_THREADS) // chunk_rows * chunk_rows)
        for lo in range(0, values.size, step):
            part = values[lo:lo + step]
            rows = part.size if transient else 0
            self._pending.append((ds, at + lo, rows, self._pool.submit(_deflated_chunks, part, chunk_rows)))
            self._transient_rows += rows


def _name_dimension(group, dimension: str, columns) -> None:
    """Attach one dimension scale named ``dimension`` to the first axis of every column of a table (all of one
    length): a netCDF-4 dimension without a variable, written with no data, so readers of netCDF name it."""
    if not columns or dimension in group:
        return
    n = columns[0].shape[0]
    scale = group.create_dataset(dimension, shape=(n,), dtype=np.float32)  # never written: no storage
    scale.make_scale(f"{NOT_A_VARIABLE}{n:10d}")
    scale.attrs["units"] = ""
    scale.attrs["description"] = (f"dimension of the table's columns, one {dimension} per row (an HDF5 dimension "
                                  "scale holding no data)")
    for ds in columns:
        ds.dims[0].attach_scale(scale)
        ds.dims[0].label = dimension


def _table_bytes(table) -> int:
    """Bytes of ``table``'s columns held whole (a StreamedTable's without producing them)."""
    if isinstance(table, StreamedTable):
        return table.nbytes
    return sum(int(np.asarray(x).nbytes) for x in table.values())


def _write_root(h5) -> None:
    h5.attrs["schema"] = SCHEMA
    h5.attrs["schema_version"] = SCHEMA_VERSION
    h5.attrs["cosim_version"] = __version__
    h5.attrs["created_utc"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    h5.create_group("runs", track_order=True)


#: margin of the output-size estimate: HDF5 metadata, attributes, JSON documents and queue samples
OUTPUT_MARGIN_BYTES = 1 << 20


def estimate_bytes(*, flows: int = 0, ops: int = 0, collectives: int = 0, ports: int = 0) -> int:
    """An upper estimate of the bytes a run record takes on disk (uncompressed columns plus a margin).

    The record holds ``flows`` flow rows (9 columns of 8 B or less), ``ops`` op rows (trace ops times
    iterations; 8 columns), ``collectives`` collective call rows and ``ports`` egress ports (the ports
    table; queue and pause samples are in the margin).
    """
    return int(flows * 72 + ops * 64 + collectives * 64 + ports * 80 + OUTPUT_MARGIN_BYTES)


def _probe_folder(folder: Path) -> None:
    """Create and remove a file in ``folder``: the one test of writability that also holds for root."""
    import errno  # noqa: PLC0415
    import tempfile  # noqa: PLC0415

    from cosim.h5io import NO_SPACE, os_error_code  # noqa: PLC0415

    try:
        fd, name = tempfile.mkstemp(prefix=".cosim-probe.", suffix=".tmp", dir=folder)
    except OSError as exc:
        code = os_error_code(exc)
        problem = ("is on a read-only file system" if code == errno.EROFS else
                   "is not writable (permission denied)" if code in (errno.EACCES, errno.EPERM) else
                   "is full (no space left on its device)" if code in NO_SPACE else
                   f"cannot be written ({os.strerror(code) if code else exc})")
        raise CosimInputError("--output", f"folder {folder} {problem}", "choose another output path") from None
    os.close(fd)
    os.unlink(name)


def check_writable(path: str | Path, *, append: bool = False, run_names: tuple[str, ...] | list[str] = (),
                   replace: bool = False, need_bytes: int | None = None, check_runs=None) -> None:
    """Fail before a run, not after it, when ``path`` cannot be written.

    Its folder is missing, read-only or not writable (a file is created and removed there, so a read-only
    mount or missing permission is found also for root), it is a folder, it lacks ``need_bytes`` of free
    space (plus the existing file's size with ``append``, which copies it), or with ``append`` it exists but
    is not an intact cosim results file, or already holds one of ``run_names`` (unless ``replace``), or
    ``check_runs(runs, path)`` refuses the runs it holds (cosim.spec.stored.check_stored)."""
    p = Path(path)
    if not str(path):
        raise CosimInputError("--output", "is empty", "name a results file, e.g. -o results.h5")
    folder = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise CosimInputError("--output", f"{p} is a folder", "name a file inside it")
    if not folder.is_dir():
        raise CosimInputError("--output", f"folder {folder} does not exist", "create it first")
    _probe_folder(folder)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise CosimInputError("--output", f"folder {folder} is not writable", "choose another output path")
    existing = 0
    if append and p.exists():
        runs = read_results(p)
        if check_runs is not None:
            check_runs(runs, str(p))
        existing = p.stat().st_size
        if not replace:
            _refuse_existing(p, runs, run_names)
    if need_bytes is not None:
        check_space(p, int(need_bytes) + existing)


def check_space(path: str | Path, need_bytes: int) -> None:
    """Fail when the folder of ``path`` has less than ``need_bytes`` free (an estimate of the output)."""
    from cosim.h5io import free_bytes  # noqa: PLC0415

    p = Path(path)
    folder = p.parent if str(p.parent) else Path(".")
    free = free_bytes(folder)
    if free is not None and free < need_bytes:
        raise CosimInputError("--output", f"folder {folder} has {free} B free, the results need about "
                              f"{need_bytes} B", "free some space or write elsewhere with -o")


def _refuse_existing(path: Path, runs, names) -> None:
    clash = [n for n in names if n in runs]
    if clash:
        raise CosimInputError("--name", f"run {clash[0]!r} already exists in {path}",
                              "choose another --name, or pass --replace to overwrite it")


def write_results(path: str | Path, runs: list[RunRecord], *, append: bool = False, replace: bool = False,
                  need_bytes: int | None = None) -> Path:
    """Write ``runs`` to ``path`` atomically; with ``append`` keep the runs already in an existing file.

    With ``append``, a run whose name is already in the file is an error unless ``replace``. A write that
    fails (no space, read-only, permission) is a one-line CosimInputError and leaves no file behind;
    ``need_bytes`` (the estimate) is named in the no-space message."""
    path = Path(path)
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        raise CosimInputError("run name", f"duplicate run names in {names}")
    for n in names:
        _check_name(n)
    try:
        with writers_lock(path):
            return _write_results(path, runs, append=append, replace=replace, need_bytes=need_bytes)
    except FolderBusy as busy:  # the runs alone, to a rescue file: a finished simulation is never lost
        return _write_results(path, runs, append=False, replace=False, need_bytes=need_bytes, refused=busy.error)


class FolderBusy(Exception):
    """Another writer held a results folder for longer than the wait (``error``: what to tell the user)."""

    def __init__(self, error: CosimInputError):
        super().__init__(str(error))
        self.error = error


def _write_results(path: Path, runs: list[RunRecord], *, append: bool, replace: bool, need_bytes: int | None,
                   refused: CosimInputError | None = None) -> Path:
    """Build the file in memory and write it to ``path`` (``refused``: straight to a rescue file, for why)."""
    names = [r.name for r in runs]
    keep_existing = append and path.exists()
    if keep_existing:
        existing = read_results(path)  # validates the existing file before we touch it
        if not replace:
            _refuse_existing(path, existing, names)
    if need_bytes is None:
        need_bytes = sum(estimate_bytes(flows=len(r.flows.get("src", ())), ops=len(r.ops.get("rank", ())),
                                        collectives=len(r.collectives.get("coll_id", ())),
                                        ports=len(r.ports.get("node", ()))) for r in runs)
        need_bytes += sum(_table_bytes(r.table(g)) for r in runs for g in ("queues", "pauses", "stalls"))
    # The file is built in memory (HDF5 core driver) and its image written with plain writes: HDF5 does not
    # survive a full device (ENOSPC inside its metadata cache can crash the process), a Python write does.
    if keep_existing:
        h5 = h5py.File(path, "r+", driver="core", backing_store=False, locking=False)
    else:
        h5 = in_memory_h5(str(path))
    with h5:
        if not keep_existing:
            _write_root(h5)
        for run in runs:
            _write_run(h5, run)
        h5.flush()
        image = h5.id.get_file_image()
    if refused is not None:
        raise rescue(path, image, refused)
    try:
        write_image(path, image)
    except CosimInputError as exc:
        raise rescue(path, image, exc) from None
    return path


#: how long a writer waits for another cosim writing into the same folder before it gives up (its results
#: then go to a rescue file, never lost)
WRITERS_WAIT_S = 600.0


@contextlib.contextmanager
def writers_lock(path: Path, wait_s: float | None = None):
    """Hold the lock of the folder of ``path`` for a read-modify-write of a results file in it: two ``cosim
    run --append`` into one file each keep their runs (an advisory flock on the folder; waiting is logged
    once). After ``wait_s`` (default :data:`WRITERS_WAIT_S`) it raises :class:`FolderBusy`."""
    import fcntl  # noqa: PLC0415

    folder = Path(path).parent if str(Path(path).parent) else Path(".")
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # no such folder, or unreadable: the write itself says why
        yield
        return
    try:
        deadline = time.monotonic() + (WRITERS_WAIT_S if wait_s is None else wait_s)
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not told:
                    logging.getLogger("cosim").warning("waiting: another cosim is writing results in %s", folder)
                    told = True
                if time.monotonic() > deadline:
                    raise FolderBusy(CosimInputError(str(path), f"another cosim kept writing in {folder} for "
                                                     f"longer than {WRITERS_WAIT_S:g} s")) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)


#: where finished results go when their output folder refuses them (full, read-only, no permission)
RESCUE_DIR_ENV = "COSIM_RESCUE_DIR"


def _rescue_folders(refused: Path) -> list[Path]:
    import tempfile  # noqa: PLC0415

    candidates = [os.environ.get(RESCUE_DIR_ENV), tempfile.gettempdir(), Path.home(), Path.cwd()]
    folders: list[Path] = []
    for c in candidates:
        if not c:
            continue
        folder = Path(c).resolve()
        if folder != refused.resolve() and folder not in folders:
            folders.append(folder)
    return folders


def rescue(path: Path, image: bytes, failure: CosimInputError) -> CosimInputError:
    """A simulation that finished is never lost to its output: write the image to the first folder that
    takes it and return the one-line error that says where it went (or the original error if none did)."""
    problem = failure.problem.removesuffix("; nothing was written")
    for folder in _rescue_folders(path.parent if str(path.parent) else Path(".")):
        rescued = folder / f"cosim-rescued-{os.getpid()}-{path.name}"
        try:
            write_image(rescued, image)
        except CosimInputError:
            continue
        return CosimInputError(str(path), f"{problem}; the finished results were saved to {rescued} instead",
                               f"move that file to where you want it, e.g. mv {rescued} {path}")
    return failure


_DAMAGED = "the file is damaged; rerun or restore it"
_NOT_RESULTS = "pass a results file written by 'cosim run'"
_JSON_ATTRS = ("config", "provenance", "summary")
_SCALARS = (bool, int, float, str, type(None))


def _show(name: str) -> str:
    """``name`` as one printable line (HDF5 names may hold newlines or control characters)."""
    return name if name.isprintable() else name.encode("unicode_escape").decode("ascii")


def _corrupt(path: Path, problem: str) -> CosimInputError:
    return CosimInputError(str(path), problem, _NOT_RESULTS)


def _damaged(path: Path, where: str, problem: str) -> CosimInputError:
    return CosimInputError(str(path), f"{_show(where)}: {problem}", _DAMAGED)


def _member(path: Path, parent, name: str, where: str, want: type):
    """The member ``name`` of ``parent`` if it is a hard-linked ``want`` (h5py.Group or h5py.Dataset).

    Links are inspected before they are followed, so a soft-link loop or an external link to another file
    is reported instead of being resolved."""
    noun = "group" if want is h5py.Group else "dataset"
    try:
        link = parent.get(name, getlink=True)
    except (OSError, KeyError, ValueError, RuntimeError):
        link = None
    if link is None:
        raise _damaged(path, where, "cannot be opened")
    if isinstance(link, h5py.SoftLink):
        raise _damaged(path, where, f"is a soft link to {_show(str(link.path))}, not a {noun}")
    if isinstance(link, h5py.ExternalLink):
        raise _damaged(path, where, f"is an external link to {_show(str(link.filename))}:{_show(str(link.path))}, "
                                    f"not a {noun}")
    try:
        obj = parent[name]
    except (OSError, KeyError, ValueError, RuntimeError):
        raise _damaged(path, where, "cannot be opened") from None
    if not isinstance(obj, want):
        what = "group" if isinstance(obj, h5py.Group) else "dataset" if isinstance(obj, h5py.Dataset) else \
            "named datatype" if isinstance(obj, h5py.Datatype) else type(obj).__name__
        raise _damaged(path, where, f"is a {what}, expected a {noun}")
    return obj


def _names(path: Path, group, where: str) -> list[str]:
    try:
        return list(group.keys())
    except (OSError, RuntimeError, ValueError) as exc:
        raise _damaged(path, where, f"members cannot be listed ({type(exc).__name__})") from None


def _json_attr(path: Path, g, key: str, where: str) -> dict:
    """Attribute ``key`` of run group ``g``: a JSON text holding an object."""
    try:
        raw = g.attrs[key] if key in g.attrs else None
    except (OSError, KeyError, TypeError, ValueError, RuntimeError):
        raise _damaged(path, f"{where}.{key}", "cannot be read") from None
    if raw is None:
        raise _damaged(path, where, f"has no {key} attribute")
    if isinstance(raw, (bytes, np.bytes_)):
        try:
            raw = bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            raise _damaged(path, f"{where}.{key}", "is not UTF-8 text") from None
    if not isinstance(raw, str):
        raise _damaged(path, f"{where}.{key}", f"is a {type(raw).__name__}, expected JSON text")
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        raise _damaged(path, f"{where}.{key}", "is not valid JSON") from None
    if not isinstance(value, dict):
        raise _damaged(path, f"{where}.{key}", f"is a JSON {type(value).__name__}, expected an object")
    return value


def _check_summary(path: Path, summary: dict, where: str) -> None:
    """Summary values are JSON scalars or lists of them; status is text; known metrics are numbers or null."""
    from cosim.results.metrics import METRICS  # noqa: PLC0415

    numeric = {m.key for m in METRICS} - {"status"}
    for key, value in summary.items():
        at = f"{where}.summary[{key!r}]"
        if isinstance(value, list):
            if not all(isinstance(x, _SCALARS) for x in value):
                raise _damaged(path, at, "holds a nested value, expected a list of numbers")
        elif not isinstance(value, _SCALARS):
            raise _damaged(path, at, f"is a JSON {type(value).__name__}, expected a number or text")
        if key == "status" and not isinstance(value, str):
            raise _damaged(path, at, f"is {value!r}, expected text such as 'complete'")
        if key in numeric and (isinstance(value, bool) or not isinstance(value, (int, float, type(None)))):
            raise _damaged(path, at, f"is {type(value).__name__} {value!r}, expected a number")


def _read_table(path: Path, run: h5py.Group, group: str, where: str, values: bool = True) -> dict[str, np.ndarray]:
    """The columns of table ``group`` of a run, each checked against the schema (column_rule); with
    ``values=False`` only the structure is checked (members, shapes, dtypes, lengths) and nothing is read."""
    g = _member(path, run, group, where, h5py.Group)
    table: dict[str, np.ndarray] = {}
    lengths: dict[str, int] = {}
    for name in _names(path, g, where):
        at = f"{where}/{name}"
        ds = _member(path, g, name, at, h5py.Dataset)
        if ds.is_scale:  # the table's dimension (cosim.results.codes.DIMENSIONS), not a column
            continue
        if ds.ndim != 1:
            raise _damaged(path, at, f"has shape {ds.shape}, expected a 1-D column")
        rule = column_rule(group, name)
        kinds = {"f": "f", "i": "iu", "s": "O"}[rule.kind] if rule else "fiub"
        text = rule is not None and rule.kind == "s"
        if ds.dtype.kind not in kinds or (text and h5py.check_string_dtype(ds.dtype) is None):
            want = {"f": "floats", "iu": "integers", "O": "text"}.get(kinds, "numbers")
            raise _damaged(path, at, f"has dtype {ds.dtype}, expected {want}")
        if not values:
            lengths[name] = ds.shape[0]
            continue
        try:
            column = ds.asstr()[()] if text else ds[()]
        except (OSError, ValueError, TypeError, RuntimeError, UnicodeDecodeError) as exc:
            raise _damaged(path, at, f"data cannot be read ({type(exc).__name__})") from None
        if rule is not None and not text and column.size:
            if rule.kind == "f":
                bad = ~np.isfinite(column)
                if rule.nan_ok:
                    bad &= ~np.isnan(column)
                if np.any(bad):
                    i = int(np.argmax(bad))
                    allowed = "finite numbers or nan (unfinished)" if rule.nan_ok else "finite numbers"
                    raise _damaged(path, at, f"value {column[i]} at row {i}, expected {allowed}")
            low = column < rule.minimum  # nan compares False
            if np.any(low):
                i = int(np.argmax(low))
                raise _damaged(path, at, f"value {column[i]} at row {i} is negative, expected >= {rule.minimum:g}"
                               if rule.minimum == 0 else f"value {column[i]} at row {i}, expected >= {rule.minimum:g}")
        table[name] = column
        lengths[name] = column.size
    missing = [n for n in required_columns(group) if n not in lengths]
    if missing:
        raise _damaged(path, f"{where}/{missing[0]}", f"is missing (the {group} table needs "
                                                       f"{', '.join(required_columns(group))})")
    if len(set(lengths.values())) > 1:
        common = max(set(lengths.values()), key=list(lengths.values()).count)
        odd = next(n for n, k in lengths.items() if k != common)
        raise _damaged(path, f"{where}/{odd}",
                       f"length {lengths[odd]}, other columns of {group} have {common}")
    return table


def _read_run(path: Path, runs: h5py.Group, name: str, tables: Collection[str] | None = None) -> RunRecord:
    where = f"runs/{name}"
    g = _member(path, runs, name, where, h5py.Group)
    docs = {key: _json_attr(path, g, key, where) for key in _JSON_ATTRS}
    _check_summary(path, docs["summary"], where)
    members = _names(path, g, where)
    unknown = [m for m in members if m not in GROUPS]
    if unknown:
        raise _damaged(path, f"{where}/{unknown[0]}", f"is not a table of the results schema (tables: "
                                                       f"{', '.join(GROUPS)})")
    wanted = GROUPS if tables is None else tables
    read = {grp: _read_table(path, g, grp, f"{where}/{grp}", values=grp in wanted) if grp in members else {}
            for grp in GROUPS}
    return RunRecord(name=name, **docs, **read)


def read_results(path: str | Path, tables: Collection[str] | None = None) -> dict[str, RunRecord]:
    """Read every run of a results file, validating it; raise CosimInputError naming the first bad field.
    ``tables``: read only these tables (default: all); the others are left empty, their structure checked
    (members, shapes, dtypes, lengths) but no value read.

    Checked: the schema attributes; a ``/runs`` group of run groups; each run's config, provenance and summary
    attributes are JSON objects (summary values numbers, text or lists of numbers); its members are tables of
    the schema, real groups of real datasets (no soft or external links, so no link loops); each known column
    is 1-D with the schema's dtype kind, finite (nan only where documented: unfinished times) and
    non-negative (coll_id: -1 for none); the columns of a table have one length.
    """
    path = Path(path)
    if not path.is_file():
        raise CosimInputError(str(path), "no such file")
    try:
        # cosim replaces a results file by renaming a complete one over it, never writes it in place: a
        # reader needs no HDF5 file lock, and taking one would make a concurrent writer fail
        h5 = h5py.File(path, "r", locking=False)
    except OSError:
        raise _corrupt(path, "not a readable HDF5 file (corrupt or truncated?)") from None
    with h5:
        try:
            schema = h5.attrs.get("schema")
            version = h5.attrs.get("schema_version", -1)
        except (OSError, TypeError, ValueError, RuntimeError):
            raise _corrupt(path, "root attributes cannot be read") from None
        if isinstance(schema, (bytes, np.bytes_)):
            schema = bytes(schema).decode("utf-8", "replace")
        if not isinstance(schema, str) or schema != SCHEMA:
            raise _corrupt(path, f"not a cosim results file (schema attribute {_show(repr(schema))})")
        try:
            version = int(version)
        except (TypeError, ValueError):
            raise _damaged(path, "schema_version", f"is {_show(repr(version))}, expected an integer") from None
        if version != SCHEMA_VERSION:
            raise _corrupt(path, f"schema version {version}, this cosim reads version {SCHEMA_VERSION}")
        if "runs" not in _names(path, h5, "/"):
            raise _damaged(path, "runs", "the file has no /runs group")
        runs_group = _member(path, h5, "runs", "runs", h5py.Group)
        return {name: _read_run(path, runs_group, name, tables) for name in _names(path, runs_group, "runs")}
