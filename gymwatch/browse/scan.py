"""Find runs under roots: a directory walk that only lists directories, never reads files.

A directory is a run candidate when its own listing looks like one of the kinds
`discover()` knows (a manifest; an evaluator bundle; Gym's captured `gym_*` output; a
`<stem>.jsonl` with Gym sidecars; a `logs/` dir beside Hydra dirs); `discover()` then has
the last word. The walk does not descend into a run, nor into venvs, caches, VCS dirs,
hidden dirs, or a directory it has already seen (symlink loops).
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional

import msgspec

from ..core.layout import (
    BUNDLE_MARKERS,
    MANIFEST_NAME,
    SIDE_AGGREGATE,
    SIDE_FAILURES,
    SIDE_MATERIALIZED,
    Listings,
    RunLayout,
    discover,
)

SKIP_DIRS = {"node_modules", "__pycache__", "site-packages", "venv", "_stub", "_driver"}
_STREAM_RE = re.compile(r"^gym_(env|eval|validate)[\w.-]*\.(log|txt)$")
_SIDECARS = (SIDE_MATERIALIZED + ".jsonl", SIDE_FAILURES + ".jsonl", SIDE_AGGREGATE + ".json")
SIG_SUBDIRS = ("logs", "gym_run")       # their files are part of a run's cache signature


@dataclass(slots=True)
class Found:
    dir: str                            # the run dir, as the walk reached it
    files: dict[str, os.DirEntry]       # the run dir's own files, by name
    dirs: dict[str, str]                # its subdirectories: name -> path
    entries: dict[str, os.DirEntry]     # all its entries, by name (discover() starts from them)
    real: bool = False                  # `dir` is resolved: no symlink on the way down to it
    # the SIG_SUBDIRS' entries as signature() listed them, by their path: the summary made from
    # that signature reads its logs and its files' sizes and times from them
    subs: dict[str, list[os.DirEntry]] = field(default_factory=dict)
    # how the walk saw its dirs, before it listed them: [when (ns), {"": the run dir's mtime (ns),
    # "logs": ..., "gym_run": ...}] (a cache entry keeps it: Known; None when the walk had no cache
    # to check against, or on a filesystem whose directory mtimes are not trusted)
    shape: Optional[list] = None
    # not listed: the cache's look at it, its dirs unchanged since (files, dirs, entries are empty)
    known: Optional["Known"] = None

    @property
    def path(self) -> Path:
        return Path(self.dir)       # (made when asked: a warm listing needs only `dir`)


def looks_like_run(files: dict[str, os.DirEntry], dirs: set[str]) -> bool:
    names = files.keys()
    if MANIFEST_NAME in names:
        return True
    if "gym_run" in dirs and any(m in names for m in BUNDLE_MARKERS):
        return True
    if any(_STREAM_RE.match(n) for n in names):
        return True
    for n in names:
        if n.endswith(".jsonl") and any(n[:-6] + s in names for s in _SIDECARS):
            return True
    return "logs" in dirs and bool(dirs & {"hydra", ".hydra"})


# A directory's mtime changes whenever a name in it is added, removed or renamed: a run dir (and
# its logs/ and gym_run/) whose mtime is what it was when its cached summary was made has the
# same names, and need not be listed again, only its files stat'ed (their sizes and mtimes are
# still the key: an append or a rewrite in place leaves the dir's mtime alone). Trusted only
# when that mtime was older than the listing by this much: a name added later within the same
# tick of a coarse filesystem clock (or of a server's a little behind ours) would leave it as it was.
RACY_NS = 3_000_000_000
# ...and only on filesystems known to keep directory mtimes that way (Linux's mount table says
# which a directory is on). Not FUSE mounts of object stores (gcsfuse, s3fs: a directory's time
# is made up), nor anything unknown (and no mount table, as on macOS): their runs are listed.
DIR_MTIME_FILESYSTEMS = frozenset({
    "ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "f2fs", "jfs", "bcachefs", "tmpfs", "ramfs",
    "overlay", "nfs", "nfs4", "lustre", "gpfs",
})
MOUNTINFO = "/proc/self/mountinfo"


@dataclass(slots=True)
class Known:
    """A cached run's files and dirs, as its summary's signature had them."""
    key: bytes                          # the signature, as the cache keeps it
    dirs: dict[str, int]                # its dirs' mtimes (ns) then: "" (the run dir), "logs", ...
    when: int                           # when the walk saw them (ns)

    def names(self) -> list[str]:
        """Its files, as the signature names them ("logs/x.log"); [] when the key is not one
        (decoded only when its files are stat'ed: by the forked child for half of them)."""
        try:
            return [name for name, _, _ in _KEY_NAMES(self.key)]
        except (msgspec.DecodeError, ValueError, TypeError):
            return []


_KEY_NAMES = msgspec.msgpack.Decoder(list[tuple[str, object, object]]).decode


def dir_mtime_devices() -> frozenset[int]:
    """The devices (st_dev) of this machine's mounts whose directory mtimes can be trusted."""
    try:
        with open(MOUNTINFO, "rb") as fh:
            lines = fh.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return frozenset()
    out = set()
    for line in lines:
        left, sep, right = line.partition(" - ")
        fields, kind = left.split(), right.split()[:1]
        if not (sep and len(fields) > 2 and kind and kind[0] in DIR_MTIME_FILESYSTEMS):
            continue
        major, _, minor = fields[2].partition(":")
        if major.isdigit() and minor.isdigit():
            out.add(os.makedev(int(major), int(minor)))
    return frozenset(out)


def walk(roots: Iterable[str | os.PathLike],
         known: Optional[Callable[[str], Optional[Known]]] = None) -> Iterator[Found]:
    """Run candidates under `roots`, depth first, each directory visited once. `known(dir)`: a
    cached run's Known; such a run whose dir has not changed since (on a filesystem that keeps
    directory mtimes) is not listed (Found.known)."""
    trusted = dir_mtime_devices() if known is not None else frozenset()
    seen: set[tuple[int, int]] = set()
    # (dir, resolved?): a dir under a resolved root is resolved while no symlink is crossed
    stack = [_root(r) for r in reversed(list(roots))]
    while stack:
        d, real = stack.pop()
        when = time.time_ns()
        try:
            st = os.stat(d)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) in seen:
            continue
        seen.add((st.st_dev, st.st_ino))
        was = known(d) if known is not None and st.st_dev in trusted else None
        if was is not None and _unchanged(was, "", st.st_mtime_ns):
            yield Found(d, {}, {}, {}, real, known=was)
            continue
        entries, files, dirs = _listing(d)
        if looks_like_run(files, set(dirs)):
            shape = _shape(when, st, dirs, entries) if st.st_dev in trusted else None
            yield Found(d, files, dirs, entries, real, shape=shape)
            continue
        if "pyvenv.cfg" in files:
            continue
        stack.extend((dirs[n], real and not _is_link(entries[n])) for n in sorted(dirs, reverse=True) if _descend(n))


def _unchanged(was: Known, sub: str, mtime_ns: int) -> bool:
    """A dir of a cached run (its `sub`: "" the run dir) has the names it had: its mtime is the
    same, and was older than that listing by RACY_NS."""
    then = was.dirs.get(sub)
    return then == mtime_ns and then < was.when - RACY_NS


def _shape(when: int, st: os.stat_result, dirs: dict[str, str], entries: dict[str, os.DirEntry]) -> Optional[list]:
    """Found.shape: the run dir's mtime and its SIG_SUBDIRS', stat'ed before they are listed
    (None: one could not be stat'ed, or is another mount: the walk checked only the run dir's)."""
    mtimes = {"": st.st_mtime_ns}
    for sub in SIG_SUBDIRS:
        if sub in dirs:
            try:
                sub_st = entries[sub].stat()
            except OSError:
                return None
            if sub_st.st_dev != st.st_dev:
                return None
            mtimes[sub] = sub_st.st_mtime_ns
    return [when, mtimes]


def _root(r: str | os.PathLike) -> tuple[str, bool]:
    """The root as given (made absolute), and whether that is already its resolved path."""
    path = Path(r).expanduser().absolute()
    try:
        return str(path), path.resolve() == path
    except (OSError, RuntimeError):
        return str(path), False


def _is_link(e: os.DirEntry) -> bool:
    try:
        return e.is_symlink()
    except OSError:
        return True


def _listing(d: str) -> tuple[dict[str, os.DirEntry], dict[str, os.DirEntry], dict[str, str]]:
    """A directory's entries (name -> entry), its files (name -> entry) and its subdirectories
    (name -> path), in one pass over one listing ({} each when it cannot be listed)."""
    entries: dict[str, os.DirEntry] = {}
    files: dict[str, os.DirEntry] = {}
    dirs: dict[str, str] = {}
    try:
        with os.scandir(d) as it:
            for e in it:
                name = e.name
                entries[name] = e
                try:
                    if e.is_file():         # (most entries: one test each; a file is never a dir)
                        files[name] = e
                    elif e.is_dir():
                        dirs[name] = e.path
                except OSError:
                    continue
    except OSError:
        return {}, {}, {}
    return entries, files, dirs


def _descend(name: str) -> bool:
    return not name.startswith(".") and name not in SKIP_DIRS


def found_at(path: str | os.PathLike, real: bool = False, shaped: bool = False) -> Found:
    """A run dir as the walk would have found it (for a worker given only its path; for a run the
    walk did not list, to be summarised: `shaped`, with its Found.shape for the cache)."""
    d, when = os.fspath(path), time.time_ns()
    st: Optional[os.stat_result] = None
    if shaped:
        try:
            st = os.stat(d)
        except OSError:
            pass
    entries, files, dirs = _listing(d)
    shape = _shape(when, st, dirs, entries) if st is not None else None
    return Found(d, files, dirs, entries, real, shape=shape)


def discover_found(found: Found, listed: Optional[Listings] = None) -> RunLayout:
    """discover() of a run the walk found, from the walk's own listings (`listed`: listings(found),
    taken already) when the walk's path is a resolved one (else discover resolves it and lists
    afresh)."""
    listed = listed if listed is not None else listings(found)
    return discover(found.path, listed=listed) if listed is not None else discover(found.path)


def listings(found: Found) -> Optional[Listings]:
    """The listings the walk and the signature took of a run (None: the walk's path is not the
    resolved one discovery goes by, or the walk did not list it)."""
    if not found.real or found.known is not None:
        return None
    seed = {found.dir: found.entries}
    for path, entries in found.subs.items():
        seed[path] = {e.name: e for e in entries}
    return Listings(seed)


def signature(found: Found) -> list:
    """(name, size, mtime) of the run dir's files and of its logs/ and gym_run/ dirs: what a
    summary reads. Cheap: the walk's DirEntry objects cache most of the stat calls, and only
    the subdirectories the walk saw are listed (a warm listing of 1,000 runs is mostly this);
    their listings are kept in `found.subs`, the stat calls in their entries. A run the walk did
    not list (Found.known) has its files stat'ed by the names the cache has."""
    if found.known is not None:
        return _known_signature(found.dir, found.known)
    sig = [_entry_sig("", e) for e in found.files.values()]
    for sub in SIG_SUBDIRS:
        path = found.dirs.get(sub)
        if path is not None:
            entries = found.subs[path] = _entries(path)
            _files_sig(sub + "/", entries, sig)
    sig.sort()
    return sig


def _known_signature(d: str, was: Known) -> list:
    """signature() of a run dir whose names are as they were (the walk saw its mtime unchanged):
    its files stat'ed by name, relative to the dir opened once (joining each path costs more than
    it should beside the stat call); a subdirectory whose mtime changed is listed. [] when the dir cannot be
    opened (no cached key is that: the run is listed)."""
    try:
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return []
    try:
        return _stat_names(d, fd, was)
    finally:
        os.close(fd)


def _stat_names(d: str, fd: int, was: Known) -> list:
    listed: dict[str, list] = {}
    for sub in SIG_SUBDIRS:
        if sub in was.dirs:
            try:
                mtime_ns: Optional[int] = os.stat(sub, dir_fd=fd).st_mtime_ns
            except OSError:
                mtime_ns = None
            if mtime_ns is None or not _unchanged(was, sub, mtime_ns):
                listed[sub + "/"] = []
                _files_sig(sub + "/", _entries(os.path.join(d, sub)), listed[sub + "/"])
    sig = []
    for name in was.names():
        cut = name.find("/") + 1
        if cut and name[:cut] in listed:
            continue
        try:
            st = os.stat(name, dir_fd=fd)
            sig.append([name, st.st_size, st.st_mtime_ns])
        except OSError:
            sig.append([name, None, None])
    for part in listed.values():
        sig += part
    sig.sort()
    return sig


def _entries(d: str) -> list[os.DirEntry]:
    try:
        with os.scandir(d) as it:
            return list(it)
    except OSError:
        return []


def _files_sig(prefix: str, entries: list[os.DirEntry], sig: list) -> None:
    """The signatures of the files among `entries`, added to `sig` (no dicts: a warm listing)."""
    for e in entries:
        try:
            if e.is_file():
                sig.append(_entry_sig(prefix, e))
        except OSError:
            continue


def _entry_sig(prefix: str, e: os.DirEntry) -> list:
    try:
        st = e.stat()
        return [prefix + e.name, st.st_size, st.st_mtime_ns]
    except OSError:
        return [prefix + e.name, None, None]
