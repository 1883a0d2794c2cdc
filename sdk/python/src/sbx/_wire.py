"""The REST API's requests and error replies, without any I/O.

The sync and async clients share everything here: where a host string
points, the bodies of create and exec, and how an error reply becomes an
exception. Keeping it free of I/O keeps the two clients the same.
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets as _random
import shlex
from dataclasses import dataclass
from typing import Any, Iterator, Literal, Mapping, Optional, Sequence, Union
from urllib.parse import quote, urlsplit

from ._errors import APIError, LimitError, ProtocolError, error_class
from ._models import NamedVolume, Tmpfs, Volume
from ._units import Duration, Size, duration_seconds, go_duration, lease_seconds, parse_size

#: Where a client connects when neither the argument nor SBX_HOST names a server.
DEFAULT_HOST = "unix:///run/sbx/sbx.sock"

#: One decoded line of an NDJSON reply.
Frame = dict[str, Any]
#: Network modes of a sandbox.
Network = Literal["none", "bridge", "host"]
#: User namespace modes of a sandbox: "private" (the server's default with
#: an image or rootfs) or "host" (as checkpoints need).
UserNS = Literal["private", "host"]
#: When the server pulls a create's image.
Pull = Literal["missing", "always", "never"]
#: A command: an argv list, or a string run with ``/bin/sh -c``.
Command = Union[Sequence[str], str]
#: An environment: a mapping, or a list of "KEY=VALUE" strings.
Env = Union[Mapping[str, str], Sequence[str]]

# Caps on what the client reads into memory from one reply. Output of
# sandboxed code passes through the server unchanged, so a reply is never
# trusted to be small.
MAX_JSON_BYTES = 128 << 20
MAX_LINE_BYTES = 16 << 20
# Slack added to a command's own timeout for the HTTP deadline, so the
# executor's answer (the command killed, its output) still arrives.
DEADLINE_SLACK_S = 30.0


@dataclass(frozen=True)
class Endpoint:
    """Where the server listens: a unix socket path, or an HTTP base URL."""

    base_url: str
    uds: Optional[str]


def endpoint(host: Optional[str]) -> Endpoint:
    """Resolve a host string: ``unix:///path``, ``http://h:p``,
    ``https://h:p`` or ``h:p`` (plain HTTP). None reads ``SBX_HOST`` and
    falls back to the default unix socket."""
    text = host if host is not None else os.environ.get("SBX_HOST") or DEFAULT_HOST
    text = text.strip()
    if not text:
        raise ValueError("host is empty: want unix:///path, http://host:port or https://host:port")
    if text.startswith("unix://"):
        path = text[len("unix://") :]
        if not path.startswith("/"):
            raise ValueError(f"host {text!r}: a unix socket needs an absolute path (unix:///run/sbx/sbx.sock)")
        return Endpoint("http://sbx", path)
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"host {text!r}: want unix:///path, http://host:port or https://host:port")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"host {text!r}: give the server's address only, no path")
    return Endpoint(f"{parts.scheme}://{parts.netloc}", None)


def token_from_env() -> Optional[str]:
    """The bearer token from ``SBX_TOKEN``, or from the file named by
    ``SBX_TOKEN_FILE`` (as the CLI reads it), or None."""
    tok = os.environ.get("SBX_TOKEN")
    if tok:
        return tok.strip()
    path = os.environ.get("SBX_TOKEN_FILE")
    if path:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    return None


def sandbox_path(sandbox_id: str, suffix: str = "") -> str:
    """The path of a sandbox's route: ``/v1/sandboxes/{id}{suffix}``."""
    if not sandbox_id:
        raise ValueError("sandbox id is empty")
    return "/v1/sandboxes/" + quote(sandbox_id, safe="") + suffix


def image_path(ref: str) -> str:
    """The path of an image's route, the reference escaped."""
    if not ref:
        raise ValueError("image reference is empty")
    return "/v1/images/" + quote(ref, safe="")


def pool_path(name: str, suffix: str = "") -> str:
    """The path of a warm pool's route: ``/v1/pools/{name}{suffix}``."""
    if not name:
        raise ValueError("pool name is empty")
    return "/v1/pools/" + quote(name, safe="") + suffix


def volume_path(name: str, suffix: str = "") -> str:
    """The path of a volume's route: ``/v1/volumes/{name}{suffix}``."""
    if not name:
        raise ValueError("volume name is empty")
    return "/v1/volumes/" + quote(name, safe="") + suffix


def snapshot_path(name: str, suffix: str = "") -> str:
    """The path of a snapshot's route: ``/v1/snapshots/{name}{suffix}``."""
    if not name:
        raise ValueError("snapshot name is empty")
    return "/v1/snapshots/" + quote(name, safe="") + suffix


def env_list(env: Optional[Env], what: str = "env") -> Optional[list[str]]:
    if env is None:
        return None
    if isinstance(env, Mapping):
        return [f"{k}={v}" for k, v in env.items()]
    if isinstance(env, str):
        raise TypeError(f"{what}: want a mapping or a list of 'KEY=VALUE' strings, not a string")
    out = list(env)
    for kv in out:
        if not isinstance(kv, str) or "=" not in kv or kv.startswith("="):
            raise ValueError(f"{what} entry {kv!r}: want 'KEY=VALUE'")
    return out


def _env_map(env: Optional[Env]) -> Optional[dict[str, str]]:
    lst = env_list(env)
    if lst is None:
        return None
    return dict(kv.split("=", 1) for kv in lst)


def _argv(cmd: Sequence[str], what: str) -> list[str]:
    if isinstance(cmd, (bytes, bytearray)):
        raise TypeError(f"{what}: want a list of strings or a string, not bytes")
    argv = list(cmd)
    if not argv or not all(isinstance(a, str) for a in argv):
        raise ValueError(f"{what}: want a non-empty list of strings")
    return argv


def describe(cmd: Command) -> str:
    """A command as a shell line, for messages."""
    return cmd if isinstance(cmd, str) else shlex.join(cmd)


def _volume(v: Union[Volume, NamedVolume, str, Sequence[Any]]) -> dict[str, Any]:
    if isinstance(v, str) and ":" in v and "/" not in v.split(":")[0]:
        parts = v.split(":")
        if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] not in ("ro", "rw")):
            raise ValueError(f"volume {v!r}: want 'NAME:PATH[:ro|rw]'")
        v = NamedVolume(parts[0], parts[1], len(parts) == 3 and parts[2] == "ro")
    if isinstance(v, NamedVolume):
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{1,63}", v.name) or not v.path.startswith("/"):
            raise ValueError(f"volume {v.name}:{v.path}: want a name of 2 to 64 letters, digits, '.', '_', '-' and an absolute path")
        named: dict[str, Any] = {"name": v.name, "path": v.path}
        if v.read_only:
            named["read_only"] = True
        return named
    if isinstance(v, str):
        parts = v.split(":")
        opts = parts[2].split(",") if len(parts) == 3 else []
        if len(parts) not in (2, 3) or len(set(opts)) != len(opts) or not set(opts) <= {"ro", "rw", "idmap=host"} \
                or {"ro", "rw"} <= set(opts):
            raise ValueError(f"volume {v!r}: want 'HOST_PATH:PATH[:ro|rw][,idmap=host]'")
        v = Volume(parts[0], parts[1], "ro" in opts, "host" if "idmap=host" in opts else None)
    elif not isinstance(v, Volume):
        v = Volume(*v)
    if not v.host_path.startswith("/") or not v.path.startswith("/"):
        raise ValueError(f"volume {v.host_path}:{v.path}: both paths must be absolute")
    out: dict[str, Any] = {"host_path": v.host_path, "path": v.path}
    if v.read_only:
        out["read_only"] = True
    if v.idmap is not None:
        if v.idmap != "host":
            raise ValueError(f"volume {v.host_path}:{v.path}: idmap {v.idmap!r}: use 'host' or None")
        out["idmap"] = v.idmap
    return out


def _tmpfs(t: Union[Tmpfs, str]) -> dict[str, Any]:
    if isinstance(t, str):
        path, _, size = t.partition(":")
        t = Tmpfs(path, size or None)
    if not t.path.startswith("/"):
        raise ValueError(f"tmpfs {t.path!r}: the path must be absolute")
    out: dict[str, Any] = {"path": t.path}
    if t.size is not None:
        out["size_bytes"] = parse_size(t.size, f"tmpfs {t.path} size")
    return out


def _secret(s: Mapping[str, Any]) -> dict[str, Any]:
    """A secret of a create: name, hosts, prefix and value, checked."""
    if not isinstance(s, Mapping) or not isinstance(s.get("name"), str) or not isinstance(s.get("value"), str):
        raise TypeError(f"secret {s!r}: want a mapping with a name and a value (strings)")
    unknown = set(s) - {"name", "hosts", "prefix", "value"}
    if unknown:
        raise ValueError(f"secret {s['name']}: unknown keys {sorted(unknown)}")
    out: dict[str, Any] = {"name": s["name"], "value": s["value"]}
    if "hosts" in s:
        if isinstance(s["hosts"], str):
            raise TypeError(f"secret {s['name']}: hosts: want a list of strings, not a string")
        out["hosts"] = list(s["hosts"])
    if s.get("prefix"):
        out["prefix"] = s["prefix"]
    return out


def _restart(policy: Any, has_cmd: bool, auto_remove: bool) -> dict[str, Any]:
    """A create's restart policy, docker's form ("on-failure:3"), as the
    server's object."""
    if not isinstance(policy, str):
        raise TypeError(f"restart {policy!r}: want a string like 'on-failure:3'")
    name, _, count = policy.partition(":")
    if name not in ("no", "on-failure", "always", "unless-stopped"):
        raise ValueError(f"restart {policy!r}: want 'no', 'on-failure[:N]', 'always' or 'unless-stopped'")
    out: dict[str, Any] = {"name": name}
    if count:
        if name != "on-failure" or not count.isdigit():
            raise ValueError(f"restart {policy!r}: only on-failure takes a count, e.g. 'on-failure:3'")
        out["max_retries"] = int(count)
    if name != "no" and not has_cmd:
        raise ValueError("restart needs a cmd: it is that command the policy runs again")
    if name != "no" and auto_remove:
        raise ValueError("restart does not go with auto_remove (as docker's --restart and --rm)")
    return out


def create_body(options: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON body of ``POST /v1/sandboxes`` from the parameters of
    ``Sandboxes.create`` (its ``locals()``), checked and normalised: sizes
    in bytes, the TTL as a Go duration string. Parameters left None are
    left out."""
    o = {k: v for k, v in options.items() if k != "self" and v is not None}
    if ("image" in o) == ("rootfs" in o):
        raise ValueError("give exactly one of image and rootfs")
    # Passed as they are: strings, and the flag when set.
    body: dict[str, Any] = {
        k: o[k]
        for k in ("image", "rootfs", "name", "workdir", "user", "hostname", "egress", "egress_policy", "seccomp")
        if k in o
    }
    if "secrets" in o:
        body["secrets"] = [_secret(x) for x in o["secrets"]]
    if o.get("readonly_rootfs"):
        body["readonly_rootfs"] = True
    if o.get("auto_remove"):
        if "cmd" not in o:
            raise ValueError("auto_remove needs a cmd: the sandbox is removed when that command ends")
        body["auto_remove"] = True
    if "disk_backing" in o:
        if o["disk_backing"] not in ("memory", "disk"):
            raise ValueError(f"disk_backing {o['disk_backing']!r}: want 'memory' or 'disk'")
        body["disk_backing"] = o["disk_backing"]
    if "restart" in o:
        body["restart"] = _restart(o["restart"], "cmd" in o, bool(o.get("auto_remove")))
    if "cmd" in o:
        cmd = o["cmd"]
        body["cmd"] = _argv(["/bin/sh", "-c", cmd] if isinstance(cmd, str) else cmd, "cmd")
    if "pull" in o:
        if o["pull"] not in ("missing", "always", "never"):
            raise ValueError(f"pull {o['pull']!r}: want 'missing', 'always' or 'never'")
        body["pull"] = o["pull"]
    limits: dict[str, Any] = {}
    for key in ("memory", "disk"):
        if key in o:
            limits[key + "_bytes"] = parse_size(o[key], key)
    cpus = o.get("cpus")
    if cpus is not None:
        if isinstance(cpus, bool) or not isinstance(cpus, (int, float)) or not cpus > 0:
            raise ValueError(f"cpus {cpus!r}: want a positive number")
        limits["cpus"] = float(cpus)
    pids = o.get("pids")
    if pids is not None:
        if isinstance(pids, bool) or not isinstance(pids, int) or pids <= 0:
            raise ValueError(f"pids {pids!r}: want a positive integer")
        limits["pids"] = pids
    if limits:
        body["limits"] = limits
    if "userns" in o:
        if o["userns"] not in ("private", "host"):
            raise ValueError(f"userns {o['userns']!r}: want 'private' or 'host'")
        body["userns"] = o["userns"]
    if "network" in o:
        if o["network"] not in ("none", "bridge", "host"):
            raise ValueError(f"network {o['network']!r}: want 'none', 'bridge' or 'host'")
        body["network"] = o["network"]
    for key in ("ttl", "idle_timeout", "lease"):
        if key in o:
            if key == "lease":
                lease_seconds(o[key])
            body[key] = go_duration(o[key], key)
    for key in ("publish", "allow_host_ports", "dns", "cap_add", "cap_drop"):
        if key in o:
            if isinstance(o[key], str):
                raise TypeError(f"{key}: want a list of strings, not a string")
            body[key] = list(o[key])
    envs = env_list(o.get("env"))
    if envs is not None:
        body["env"] = envs
    if "volumes" in o:
        body["volumes"] = [_volume(v) for v in o["volumes"]]
    if "tmpfs" in o:
        body["tmpfs"] = [_tmpfs(t) for t in o["tmpfs"]]
    if "labels" in o:
        body["labels"] = {str(k): str(v) for k, v in o["labels"].items()}
    if o.get("publish_all"):
        body["publish_all"] = True
    if "extra_hosts" in o:
        if isinstance(o["extra_hosts"], str):
            raise TypeError("extra_hosts: want a list of 'NAME:IP' strings, not a string")
        body["extra_hosts"] = list(o["extra_hosts"])
    if "ulimits" in o:
        body["ulimits"] = [_ulimit(u) for u in o["ulimits"]]
    if "shm_size" in o:
        body["shm_size_bytes"] = parse_size(o["shm_size"], "shm_size")
    return body


def _ulimit(u: Union[str, Mapping[str, Any]]) -> dict[str, Any]:
    """A ulimit as "NAME=SOFT[:HARD]" (docker's --ulimit) or a mapping of
    name, soft and hard; -1 is unlimited."""
    if isinstance(u, str):
        name, sep, vals = u.partition("=")
        soft, _, hard = vals.partition(":")
        try:
            lim = {"name": name, "soft": int(soft), "hard": int(hard or soft)}
        except ValueError:
            raise ValueError(f"ulimit {u!r}: want NAME=SOFT[:HARD], e.g. nofile=1024:2048") from None
        if not sep or not name:
            raise ValueError(f"ulimit {u!r}: want NAME=SOFT[:HARD], e.g. nofile=1024:2048")
        return lim
    if not isinstance(u, Mapping) or set(u) - {"name", "soft", "hard"} or not isinstance(u.get("name"), str):
        raise TypeError(f"ulimit {u!r}: want 'NAME=SOFT[:HARD]' or a mapping of name, soft and hard")
    soft = u.get("soft", u.get("hard"))
    hard = u.get("hard", soft)
    if not isinstance(soft, int) or not isinstance(hard, int) or isinstance(soft, bool) or isinstance(hard, bool):
        raise ValueError(f"ulimit {u['name']}: soft and hard must be integers (-1: unlimited)")
    return {"name": u["name"], "soft": soft, "hard": hard}


def build_params(options: Mapping[str, Any]) -> tuple[list[tuple[str, str]], str]:
    """The query of ``POST /v1/images/build`` from the parameters of
    ``Images.build`` (its ``locals()``), checked, and the Dockerfile's
    slash path inside the context."""
    context = os.path.abspath(os.fspath(options["context_dir"]))
    df = options.get("dockerfile") or "Dockerfile"
    if not isinstance(df, str):
        raise TypeError(f"dockerfile {df!r}: want a path inside the context")
    rel = os.path.relpath(df, context) if os.path.isabs(df) else df
    clean = os.path.normpath(rel).replace(os.sep, "/")
    if clean in (".", "..") or clean.startswith("../") or os.path.isabs(clean):
        raise ValueError(f"dockerfile {df!r}: want a path inside the context {context}")
    params = [("dockerfile", clean)]
    for key in ("tag", "target", "network", "pull"):
        value = options.get(key)
        if value is not None:
            if not isinstance(value, str) or not value:
                raise ValueError(f"{key} {value!r}: want a non-empty string")
            params.append((key, value))
    if options.get("no_cache"):
        params.append(("no_cache", "true"))
    for key, value in (options.get("build_args") or {}).items():
        if not isinstance(key, str) or not key or "=" in key or not isinstance(value, str):
            raise ValueError(f"build_args {key!r}: want string names without '=' and string values")
        params.append(("build_arg", f"{key}={value}"))
    return params, clean


#: The largest build secret the server takes (sbx.MaxBuildSecretBytes).
MAX_BUILD_SECRET = 1 << 20


def build_body(secrets: Optional[Mapping[str, Union[str, bytes]]], context: Iterator[bytes]) -> tuple[str, Iterator[bytes]]:
    """The content type and body of ``POST /v1/images/build``: the
    context's tar stream alone, or with ``secrets`` (id -> value) a
    multipart body whose "secrets" part, a JSON object of base64 values by
    id, comes before the "context" part. The secrets are checked here and
    never leave the body."""
    if not secrets:
        return "application/x-tar", context
    values: dict[str, str] = {}
    for key, value in secrets.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"secrets: {key!r} is not a secret id")
        raw = value.encode() if isinstance(value, str) else value
        if not isinstance(raw, (bytes, bytearray)):
            raise TypeError(f"secret {key!r}: want str or bytes")
        if len(raw) > MAX_BUILD_SECRET:
            raise ValueError(f"secret {key!r} is {len(raw)} bytes, more than {MAX_BUILD_SECRET}")
        values[key] = base64.b64encode(bytes(raw)).decode()
    boundary = "sbx-build-" + _random.token_hex(16)
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="secrets"\r\nContent-Type: application/json\r\n\r\n'
        + json.dumps(values)
        + f'\r\n--{boundary}\r\nContent-Disposition: form-data; name="context"; filename="context.tar"\r\n'
        + "Content-Type: application/x-tar\r\n\r\n"
    ).encode()

    def parts() -> Iterator[bytes]:
        yield head
        yield from context
        yield f"\r\n--{boundary}--\r\n".encode()

    return f"multipart/form-data; boundary={boundary}", parts()


@dataclass(frozen=True)
class ExecCall:
    """A checked exec request: the body, the command's timeout in seconds
    (None: none) and the HTTP deadline that goes with it."""

    body: dict[str, Any]
    timeout_s: Optional[float]
    deadline_s: Optional[float]
    label: str


def exec_call(options: Mapping[str, Any]) -> ExecCall:
    """The body of ``POST /v1/sandboxes/{id}/exec`` and its deadlines, from
    the parameters of ``Sandbox.exec`` or ``exec_stream`` (their
    ``locals()``)."""
    o = {k: v for k, v in options.items() if k not in ("self", "check") and v is not None}
    cmd = o.get("cmd")
    body: dict[str, Any] = {}
    if isinstance(cmd, str):
        if not cmd.strip():
            raise ValueError("command is empty")
        body["command"] = cmd
    else:
        body["argv"] = _argv(cmd or [], "command")
    env_map = _env_map(o.get("env"))
    if env_map:
        body["env"] = env_map
    body.update({k: o[k] for k in ("cwd", "user") if k in o})
    stdin = o.get("stdin")
    if stdin is not None:
        if isinstance(stdin, (bytes, bytearray)):
            try:
                stdin = bytes(stdin).decode("utf-8")
            except UnicodeDecodeError as e:
                raise ValueError("stdin must be UTF-8 text; copy binary input in with sb.files.write") from e
        body["stdin"] = stdin
    max_output = o.get("max_output_bytes")
    if max_output is not None:
        if isinstance(max_output, bool) or not isinstance(max_output, int) or max_output <= 0:
            raise ValueError(f"max_output_bytes {max_output!r}: want a positive integer")
        body["max_output_bytes"] = max_output
    timeout_s = None
    if "timeout" in o:
        timeout_s = duration_seconds(o["timeout"], "timeout")
        if timeout_s <= 0:
            raise ValueError("timeout must be positive")
        body["timeout_s"] = timeout_s
    deadline = None if timeout_s is None else timeout_s + DEADLINE_SLACK_S
    return ExecCall(body, timeout_s, deadline, describe(cmd if isinstance(cmd, str) else list(cmd or [])))


def session_run_body(
    command: str,
    *,
    is_input: bool = False,
    timeout: Optional[Duration] = None,
    no_output_timeout: Optional[Duration] = None,
    max_output_bytes: Optional[int] = None,
    stop_signal: Optional[str] = None,
    stop_grace: Optional[Duration] = None,
) -> tuple[dict[str, Any], float]:
    """The body of a session run and the HTTP deadline that goes with it
    (the executor's default call limit is 120 s)."""
    if not isinstance(command, str):
        raise TypeError("command: want a string")
    body: dict[str, Any] = {"command": command}
    if is_input:
        body["is_input"] = True
    limit = 120.0
    if timeout is not None:
        limit = duration_seconds(timeout, "timeout")
        body["timeout_s"] = limit
    if no_output_timeout is not None:
        body["no_output_timeout_s"] = duration_seconds(no_output_timeout, "no_output_timeout")
    if max_output_bytes is not None:
        body["max_output_bytes"] = max_output_bytes
    if stop_signal is not None:
        body["stop_signal"] = stop_signal
    if stop_grace is not None:
        if stop_signal is None:
            raise ValueError("stop_grace needs a stop_signal")
        body["stop_grace"] = go_duration(stop_grace, "stop_grace")
    return body, limit + DEADLINE_SLACK_S


def decode_json(data: bytes, what: str) -> Any:
    """Decode a JSON reply, or raise ProtocolError."""
    try:
        return json.loads(data)
    except ValueError as e:
        raise ProtocolError(f"{what}: the server sent malformed JSON: {e}") from e


def api_error(status: int, data: bytes, headers: Mapping[str, str], *, file_op: bool = False) -> APIError:
    """The exception for an error reply: its class follows the body's code,
    or the status when the body has none."""
    code, message, body = "", "", {}
    try:
        decoded = json.loads(data) if data else None
    except ValueError:
        decoded = None
    if isinstance(decoded, dict) and isinstance(decoded.get("error"), dict):
        body = decoded["error"]
        code = str(body.get("code") or "")
        message = str(body.get("message") or "")
    if not message:
        text = data[:500].decode("utf-8", "replace").strip()
        message = text or f"HTTP {status}"
    cls = error_class(status, code, file_op=file_op)
    err = cls(status, code or cls.code_name, message, body)
    if isinstance(err, LimitError):
        try:
            err.retry_after = float(headers.get("retry-after", ""))
        except ValueError:
            err.retry_after = None
    return err


def octal_mode(mode: Optional[int]) -> Optional[str]:
    """A file mode as the executor takes it ("0644")."""
    if mode is None:
        return None
    if isinstance(mode, bool) or not isinstance(mode, int) or not 0 <= mode <= 0o7777:
        raise ValueError(f"mode {mode!r}: want permission bits such as 0o644")
    return f"{mode:04o}"


def decode_frame(line: bytes, what: str) -> Frame:
    """One line of an NDJSON reply: a JSON object, or ProtocolError."""
    try:
        frame = json.loads(line)
    except ValueError as e:
        raise ProtocolError(f"{what}: the server sent a malformed line: {e}") from e
    if not isinstance(frame, dict):
        raise ProtocolError(f"{what}: the server sent a line that is not a JSON object")
    return frame


def frame_error(frame: Mapping[str, Any]) -> APIError:
    """The exception of an ``{"type":"error","error":{...}}`` frame."""
    body = frame.get("error")
    data = json.dumps({"error": body}).encode() if isinstance(body, dict) else b""
    return api_error(0, data, {})
