"""Where a learner keeps its checkpoints: a local directory or any URL fsspec opens.

``open_storage(url_or_path)`` is the one place a checkpoint store is opened; the run
config's ``storage`` field is checked by ``check_storage_url`` at start, so that a URL
that cannot be opened here stops the run before any actor starts, naming the package
to install. A checkpoint is one whole object under a plain name (``learner.ckpt``).

- A local path or ``file://PATH``: a directory, created when missing; no fsspec
  import. A write goes to a temporary file beside the final name, is fsynced and
  renamed over it (``engine.network.write_atomically``), so a reader or a restarted
  learner sees the previous checkpoint or the new one, never half of one.
- ``sftp://user@host[:port]/abs/path`` (``pip install 'tengen-zero[sftp]'``, paramiko): the
  same temporary-then-rename, the rename being OpenSSH's ``posix-rename``, which
  replaces the target atomically.
- ``s3://bucket/prefix`` (``tengen-zero[s3]``, s3fs), ``gs://bucket/prefix``
  (``tengen-zero[gcs]``, gcsfs) and any other fsspec URL: one put of the whole object to
  its final name. Object stores make an object visible only once it is complete; a
  filesystem of another kind may not, and its directory must exist.
- ``memory://`` lives inside one process: a learner restarted elsewhere finds nothing.
- ``HeldStorage``: no place of its own: the learner's owner is handed what is written
  (``take_written``) and keeps it, and gives it back to a new learner. The cluster's
  default (no ``storage``): the driver keeps the checkpoints in the run directory on
  its own node, whatever node the learner runs on, so that a learner restarted on
  another node after its own was preempted finds them.

Credentials never go into the URL (the config is copied into the run directory):
``check_storage_url`` refuses ``user:password@``. Each backend finds them where it
always does, on the node that runs the learner:

- s3: boto's chain: ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, ``AWS_PROFILE``
  and ``~/.aws``, or the instance's role on EC2 (the cluster launcher's IAM profile);
- gs: Google's application default credentials: ``GOOGLE_APPLICATION_CREDENTIALS``,
  ``gcloud auth application-default login``, or the VM's service account;
- sftp: the user from the URL; keys from ``~/.ssh/id_*`` or a running ``ssh-agent``
  (paramiko's defaults), or a key file named by ``FSSPEC_SFTP_KEY_FILENAME``. fsspec's
  sftp accepts a host key it has not seen before (paramiko's AutoAddPolicy): use it
  on a network you trust.

Any backend option can be given without code through fsspec's own configuration:
an environment variable ``FSSPEC_<PROTOCOL>_<OPTION>`` (e.g.
``FSSPEC_S3_ENDPOINT_URL``, ``FSSPEC_SFTP_TIMEOUT=30``) or a JSON file in
``~/.config/fsspec/`` (``FSSPEC_CONFIG_DIR``); fsspec reads both when it is imported,
so set them in the learner's environment (Ray ``runtime_env`` env_vars, the node's
setup) before it starts.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit

from tengen import DISTRIBUTION

__all__ = ["CheckpointStorage", "LocalStorage", "FsspecStorage", "HeldStorage", "open_storage",
           "check_storage_url"]

#: scheme -> (the package fsspec needs for it, the tengen extra that brings it)
EXTRAS = {
    "s3": ("s3fs", "s3"),
    "s3a": ("s3fs", "s3"),
    "gs": ("gcsfs", "gcs"),
    "gcs": ("gcsfs", "gcs"),
    "sftp": ("paramiko", "sftp"),
    "ssh": ("paramiko", "sftp"),
}
_T = TypeVar("_T")
#: fsspec protocols whose rename replaces the target atomically (sftp: posix-rename)
ATOMIC_RENAME = {"sftp", "ssh"}


class CheckpointStorage(Protocol):
    """A flat store of whole named objects (names without '/')."""

    #: the URL or path it was opened from, for messages
    url: str

    def read_bytes(self, name: str) -> bytes | None:
        """The object's bytes, or None when there is none under ``name``."""
        ...

    def write_bytes(self, name: str, data: bytes) -> None:
        """Store ``data`` under ``name``, replacing what was there (atomically where the
        backend allows: see the module's docstring)."""
        ...

    def exists(self, name: str) -> bool: ...


def open_storage(url_or_path: str | os.PathLike) -> CheckpointStorage:
    """Open the checkpoint store at a local path, ``file://``, or any fsspec URL.

    A remote store connects here (sftp logs in; s3 and gs connect on first use)."""
    url = os.fspath(url_or_path)
    local = _local_path(url)
    if local is not None:
        return LocalStorage(local, url=url)
    return FsspecStorage(url)


def check_storage_url(url: str) -> None:
    """Raise ValueError with a message for the ``storage`` field when ``url`` cannot be
    opened by this installation: a scheme fsspec does not know, a backend package that
    is not installed, or a password in the URL. Opens no connection (it only imports
    the backend's module)."""
    if _local_path(url) is not None:
        return
    for part in url.split("::"):
        if "://" in part and urlsplit(part).password is not None:
            raise ValueError("no password in the URL (the config is copied into the run directory): give "
                             "credentials the way the backend finds them, see learner/storage.py")
    import fsspec

    for protocol in _protocols(url):
        try:
            fsspec.get_filesystem_class(protocol)
        except ValueError:
            raise ValueError(f"{url}: fsspec knows no '{protocol}://' filesystem") from None
        except ImportError as e:
            if protocol in EXTRAS:
                package, extra = EXTRAS[protocol]
                raise ValueError(f"{url} needs the {package} package: pip install '{DISTRIBUTION}[{extra}]'") from None
            raise ValueError(f"{url}: {e}") from None


class HeldStorage:
    """Checkpoints held in this process for their owner to keep elsewhere: ``held``,
    what the owner kept from an earlier learner; ``take_written()``, what was written
    since the last call (the newest bytes of each name), for the owner to store."""

    url = "the driver's run directory"

    def __init__(self, held: Mapping[str, bytes] | None = None):
        self._objects: dict[str, bytes] = {_checked(name): bytes(data) for name, data in (held or {}).items()}
        self._written: dict[str, bytes] = {}

    def read_bytes(self, name: str) -> bytes | None:
        return self._objects.get(_checked(name))

    def write_bytes(self, name: str, data: bytes) -> None:
        self._objects[_checked(name)] = self._written[name] = bytes(data)

    def exists(self, name: str) -> bool:
        return _checked(name) in self._objects

    def take_written(self) -> dict[str, bytes]:
        written, self._written = self._written, {}
        return written


class LocalStorage:
    """A local directory; each write is a temporary file fsynced and renamed over the
    final name."""

    def __init__(self, directory: str | os.PathLike, *, url: str | None = None):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.url = url if url is not None else str(self.directory)

    def read_bytes(self, name: str) -> bytes | None:
        try:
            return (self.directory / _checked(name)).read_bytes()
        except FileNotFoundError:
            return None

    def write_bytes(self, name: str, data: bytes) -> None:
        # Imported here: engine.network brings TensorFlow, and the config schema
        # imports this module only to check URLs.
        from tengen.engine.network import write_atomically

        write_atomically(self.directory / _checked(name), data)

    def exists(self, name: str) -> bool:
        return (self.directory / _checked(name)).exists()


class FsspecStorage:
    """A directory or prefix on any filesystem fsspec opens.

    A call that fails for another reason than a missing object reconnects once and
    tries again (an sftp connection dropped by the server or the network between two
    checkpoints); a second failure raises, and the learner's actor is replaced."""

    def __init__(self, url: str):
        self.url = url
        self.fs, self.root = self._open()
        protocols = self.fs.protocol if isinstance(self.fs.protocol, tuple | list) else (self.fs.protocol,)
        self.renames_atomically = bool(ATOMIC_RENAME & set(protocols))
        if self.renames_atomically:
            # A real directory tree: the rename needs the directory. (Object stores have
            # none, and makedirs on s3 would create the bucket.)
            self._call(lambda fs: fs.makedirs(self.root, exist_ok=True))

    def _open(self) -> tuple[Any, str]:
        from fsspec.core import url_to_fs

        # A fresh instance, not fsspec's per-process cache: a reconnect must not get
        # the dead connection back.
        fs, root = url_to_fs(self.url, skip_instance_cache=True)
        return fs, root.rstrip("/")

    def _path(self, name: str) -> str:
        return f"{self.root}/{_checked(name)}"

    def _call(self, operation: Callable[[Any], _T]) -> _T:
        try:
            return operation(self.fs)
        except FileNotFoundError:
            raise
        except Exception:
            self.fs, self.root = self._open()
            return operation(self.fs)

    def read_bytes(self, name: str) -> bytes | None:
        try:
            return bytes(self._call(lambda fs: fs.cat_file(self._path(name))))
        except FileNotFoundError:
            return None

    def write_bytes(self, name: str, data: bytes) -> None:
        final = self._path(name)
        if not self.renames_atomically:
            self._call(lambda fs: fs.pipe_file(final, data))
            return

        def put_then_rename(fs: Any) -> None:
            # A crash leaves at most this temporary name behind; readers only read
            # the final one.
            temporary = f"{self.root}/.{name}.{uuid.uuid4().hex}.tmp"
            try:
                fs.pipe_file(temporary, data)
                fs.mv(temporary, final)
            except BaseException:
                try:
                    fs.rm_file(temporary)
                except Exception:  # the connection that failed the write may be gone
                    pass
                raise

        self._call(put_then_rename)

    def exists(self, name: str) -> bool:
        return bool(self._call(lambda fs: fs.exists(self._path(name))))


def _local_path(url: str) -> Path | None:
    """The directory a local path or a plain ``file://`` URL names; None for others."""
    if "::" in url:
        return None
    if url.startswith("file://"):
        return Path(url.removeprefix("file://"))
    return None if "://" in url else Path(url)


def _protocols(url: str) -> list[str]:
    """Every protocol of a (possibly chained, ``simplecache::s3://...``) fsspec URL."""
    parts = url.split("::")
    found = []
    for i, part in enumerate(parts):
        if "://" in part:
            found.append(part.split("://", 1)[0].lower())
        elif i < len(parts) - 1:  # a bare protocol before '::' (a cache in front)
            found.append(part.lower())
    return found


def _checked(name: str) -> str:
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"a checkpoint name is a plain file name, not {name!r}")
    return name
