"""How the service commands reach a service: the embedded or given Ray with its token
(:func:`init_ray`, :func:`ensure_token`), the named actor, and the service's own HTTP door
on 127.0.0.1 (:class:`ServiceClient` tries the door first, then Ray). Ray is imported lazily."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from psched.core.errors import InputError

__all__ = [
    "BAR_WIDTH",
    "CLIENT_LOG",
    "DEFAULT_DIR",
    "TOKEN_FILE",
    "ServiceClient",
    "ensure_token",
    "init_ray",
    "page_address",
    "service_handle",
    "use_token",
]

log = logging.getLogger(__name__)



#: Default folder of the journal, checkpoints and the embedded Ray's address.
DEFAULT_DIR = ".psched"


#: The embedded Ray's authentication token, in ``--dir`` (mode 0600).
TOKEN_FILE = "auth_token"


#: Ray's own messages below warnings, from the commands that connect to it, in ``--dir``.
CLIENT_LOG = "psched.log"


BAR_WIDTH = 20


# -- Ray connection -------------------------------------------------------------------------
def init_ray(address: str | None, *, num_cpus: int | None = None,
             resources: dict[str, float] | None = None,
             token_dir: str | Path | None = None, log_dir: str | Path | None = None) -> str:
    """Connect to ``address`` (or ``RAY_ADDRESS``), else start an embedded Ray on 127.0.0.1.

    Returns the GCS address. The embedded Ray binds to the loopback interface only
    (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, node IP 127.0.0.1), has no dashboard, a capped
    object store and token authentication on, with the token in ``token_dir/auth_token``
    (mode 0600; created if missing; a fresh private folder if ``token_dir`` is None).
    Connecting to a loopback address keeps it on the loopback (Ray would rewrite
    127.0.0.1 to the host's first interface). ``resources``: custom resources of the
    embedded node (for instance ``psched_worker_cpu``, see
    :mod:`ray_cluster.runtime.cluster_model`).
    A client's connection prints Ray's warnings only; its lower messages go to
    ``log_dir/psched.log`` (mode 0600) when ``log_dir`` is given.
    """
    if "ray" in sys.modules and sys.modules["ray"].is_initialized():
        import ray

        return str(ray.get_runtime_context().gcs_address)  # connected already: as it is
    address = address or os.environ.get("RAY_ADDRESS")
    embedded = not address
    if embedded:
        use_token(ensure_token(token_dir))
    if embedded or _is_loopback(address or ""):  # read when Ray is first imported
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    import ray
    from ray._private import ray_constants

    if not ray.is_initialized():
        if embedded or _is_loopback(address or ""):
            ray_constants.ENABLE_RAY_CLUSTER = False  # Ray was imported before: loopback
        if address:
            _quiet_ray(log_dir)
            ray.init(address=address, namespace=_namespace(), log_to_driver=False,
                     configure_logging=False)
        else:
            ray.init(address="local", _node_ip_address="127.0.0.1", include_dashboard=False,
                     num_cpus=num_cpus or os.cpu_count() or 1,
                     object_store_memory=300 * 2**20, namespace=_namespace(),
                     resources=dict(resources or {}), log_to_driver=False,
                     configure_logging=False)  # Ray's INFO lines off the terminal
    return str(ray.get_runtime_context().gcs_address)


def _quiet_ray(log_dir: str | Path | None) -> None:
    """Ray's messages below warnings off the terminal (``ray.init(configure_logging=False)``
    leaves Ray's logger without a handler: Python then prints warnings only), and its
    connection's messages into ``log_dir/psched.log`` (0600)."""
    if log_dir is None or not Path(log_dir).is_dir():
        return
    path = Path(log_dir) / CLIENT_LOG
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger("ray._private.worker").addHandler(handler)  # Ray's config keeps it


def _is_loopback(address: str) -> bool:
    host = address.removeprefix("ray://").rsplit(":", 1)[0].strip("[]")
    return host in ("localhost", "::1") or host.startswith("127.")


def ensure_token(token_dir: str | Path | None) -> Path:
    """The token file ``token_dir/auth_token`` (mode 0600), created with a random token if
    missing; a group- or world-readable one is refused.

    Raises
    ------
    InputError
        If the file is readable by others or empty.
    """
    import secrets
    import stat
    import tempfile

    folder = Path(token_dir) if token_dir is not None else Path(
        tempfile.mkdtemp(prefix="psched-token-"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / TOKEN_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        fd = -1
    if fd < 0:
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            raise InputError(f"token file is readable by others (mode {mode:o}); "
                             "chmod 600 it", path=str(path))
        if not path.read_text().strip():
            raise InputError("token file is empty", path=str(path))
        return path
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32))
    return path


def use_token(path: Path) -> None:
    """Token authentication for this process and the Ray processes it starts, with the token
    in ``path`` (Ray's ``RAY_AUTH_MODE=token`` and ``RAY_AUTH_TOKEN_PATH``)."""
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN_PATH"] = str(path.resolve())
    os.environ.pop("RAY_AUTH_TOKEN", None)
    if "ray._raylet" in sys.modules:  # Ray read its configuration already: read it again
        from ray._raylet import AuthenticationTokenLoader, Config  # type: ignore[attr-defined]

        Config.initialize("")
        AuthenticationTokenLoader.instance().reset_cache()


def _namespace() -> str:
    from ray_cluster.service import SERVICE_NAMESPACE

    return SERVICE_NAMESPACE


def _reachable(address: str, timeout_s: float = 3.0) -> str | None:
    """None if a TCP connection to ``address`` opens, else why not."""
    import socket

    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return None
    except (OSError, ValueError) as err:
        return getattr(err, "strerror", None) or str(err) or type(err).__name__


def service_handle(args: argparse.Namespace) -> Any:
    """The service actor: on ``--address``, ``RAY_ADDRESS`` or the address in ``--dir``
    (with the token ``serve`` wrote there). A stale address fails at once, in one line."""
    import ray

    from ray_cluster.service import SERVICE_NAME, SERVICE_NAMESPACE

    address = args.address or os.environ.get("RAY_ADDRESS")
    if not address and not ray.is_initialized():
        f = Path(args.dir) / "address"
        if not f.exists():
            raise InputError("no service: start 'psched serve' (or give --address)",
                             path=str(f))
        address = f.read_text().strip()
        token = Path(args.dir) / TOKEN_FILE
        if token.exists():
            use_token(token)
        why = _reachable(address)
        if why is not None:
            raise InputError(f"no service at {address} ({why}): the address is stale; "
                             "start 'psched serve'", path=str(f))
    init_ray(address, log_dir=args.dir)
    try:
        return ray.get_actor(SERVICE_NAME, namespace=SERVICE_NAMESPACE)
    except ValueError:
        raise InputError(f"no service named {SERVICE_NAME!r} on this Ray; start "
                         "'psched serve'", field="address") from None


_UNREACHABLE = object()


class ServiceClient:
    """The service: through its HTTP door in ``--dir`` (``page.json``, ``control_token``)
    while it answers and the Ray it runs on is up, else through Ray (``--address``, a
    service without the door, or an actor left behind by a killed ``serve``)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self._actor: Any = None
        self.door: tuple[str, str] | None = None
        folder = Path(args.dir)
        if not (args.address or os.environ.get("RAY_ADDRESS")):
            try:
                self.door = (json.loads((folder / "page.json").read_text())["url"],
                             (folder / "control_token").read_text().strip())
                if _reachable((folder / "address").read_text().strip(), 1.0) is not None:
                    self.door = None  # its Ray is gone (serve killed): Ray's path says so
            except (OSError, ValueError, KeyError, TypeError):
                self.door = None

    def call(self, method: str, http: tuple[str, str, Any], *args: Any, **kwargs: Any) -> Any:
        """``method`` of the service: ``http`` (verb, path, JSON body) at the door, else the
        actor's ``method(*args, **kwargs)`` through Ray."""
        if self.door is not None:
            out = _http(self.door, *http)
            if out is not _UNREACHABLE:
                return out
            self.door = None  # gone, or another server's port now: Ray decides
        import ray

        return ray.get(getattr(self.actor(), method).remote(*args, **kwargs))

    def actor(self) -> Any:
        """The service actor, through Ray (connecting once)."""
        if self._actor is None:
            self._actor = service_handle(self.args)
        return self._actor


def _http(door: tuple[str, str], verb: str, path: str, body: Any,
          timeout_s: float = 900.0) -> Any:
    """The door's JSON answer (``{"error": ...}`` for a request it refused with a 4xx
    status); :data:`_UNREACHABLE` if nothing listens there (or a server that does not know
    this folder's token).

    Raises
    ------
    InputError
        Any other failure, in one line.
    """
    import urllib.error
    import urllib.request

    url, token = door
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method=verb, headers={
        "Authorization": f"token {token}", "Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a proxy
    t0 = time.perf_counter()
    try:
        with opener.open(req, timeout=timeout_s) as answer:
            out = json.loads(answer.read())
            log.debug("%s %s: answered in %.1f ms (the service's own: %s)", verb, path,
                      (time.perf_counter() - t0) * 1e3,
                      answer.headers.get("Server-Timing", "not given"))
            return out
    except urllib.error.HTTPError as err:
        if err.code == 401:
            return _UNREACHABLE
        refused = _refusal(err)
        if refused is not None:
            return refused
        raise InputError(f"the service answered HTTP {err.code}: "
                         f"{err.read().decode(errors='replace').strip()[:200]}",
                         field=url) from None
    except ConnectionRefusedError:
        return _UNREACHABLE
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        if isinstance(reason, ConnectionRefusedError):
            return _UNREACHABLE
        raise InputError(f"the service did not answer: {reason}", field=url) from None


def _refusal(err: Any) -> dict[str, str] | None:
    """``{"error": message}`` of a 4xx answer carrying one (a request the service refused:
    a bad job, an unknown one), else None."""
    if not 400 <= err.code < 500:
        return None
    try:
        body = json.loads(err.read())
    except ValueError:
        return None
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        return {"error": body["error"]}
    return None


def page_address(workdir: str | Path, *, timeout_s: float = 5.0) -> str:
    """The live page's address with its token, once it answers.

    Raises
    ------
    InputError
        No page recorded in ``workdir``, or the recorded one does not answer, in one line.
    """
    folder = Path(workdir)
    record, token_file = folder / "page.json", folder / "page_token"
    if not folder.is_dir():
        raise InputError("no such service folder", path=str(folder))
    try:
        url = str(json.loads(record.read_text())["url"])
        token = token_file.read_text().strip()
    except FileNotFoundError as err:
        raise InputError("no live page: start 'psched serve' (it serves the page)",
                         path=str(err.filename)) from None
    except (ValueError, KeyError, TypeError):
        raise InputError("cannot be read: start 'psched serve' again", path=str(record)
                         ) from None
    ray_address = folder / "address"
    ray_gone = ray_address.exists() and _reachable(ray_address.read_text().strip(), 1.0)
    out = _UNREACHABLE if ray_gone else _http((url, token), "GET", "api/status", None,
                                               timeout_s=timeout_s)
    if out is _UNREACHABLE:
        raise InputError(f"no page answers at {url}: the address is stale; start "
                         "'psched serve'", path=str(record))
    return f"{url}?token={token}"
