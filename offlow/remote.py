"""The options of remote devices (docs/remote.md): the addresses `offlow run --remote
NAME=ADDR:PORT` gives, the shared secret (a file or OFFLOW_REMOTE_SECRET, never the
command line) and `offlow serve-device`, the server a remote device's machine runs."""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import stat
import sys
from collections.abc import Iterable
from pathlib import Path

from offlow.errors import OfflowError
from offlow.lifecycle import pid_alive

ENV = "OFFLOW_REMOTE_SECRET"
# the folder serve-device (runtime/tools/remote_serve.c) runs a device in: PID-XXXXXX
DEV_DIRS = Path("/tmp")  # (serve-device --work-dir chooses another)
WORK_DIR_MAX = 3000  # the longest work folder remote_serve.c takes
_DEV_DIR = re.compile(r"^offlow-remote-dev-(\d+)-\w{6}$")
SECRET_MIN, SECRET_MAX = 16, 4096  # runtime/lib/remote's OFL_AUTH_SECRET_MIN and MAX
ON_COMMAND_LINE = (f"a secret on the command line is refused (every user sees it in ps): "
                   f"give --secret-file FILE (mode 0600) or set {ENV}")


def parse_address(spec: str, what: str) -> tuple[str, int]:
    """ADDR:PORT (an IPv4 address: the link, runtime/lib/remote, takes no other) as
    (ADDR, PORT)."""
    addr, colon, port = spec.rpartition(":")
    addr = addr.removeprefix("[").removesuffix("]")
    try:
        version = ipaddress.ip_address(addr).version
        ok = bool(colon) and port.isdigit() and 0 <= int(port) <= 65535
    except ValueError:
        version, ok = 4, False
    if not ok:
        raise OfflowError(f"{what} `{spec}`: expected ADDR:PORT (an IPv4 address, a port "
                          "0..65535)")
    if version != 4:
        raise OfflowError(f"{what} `{spec}`: an IPv6 address; the link between a host and "
                          "its remote devices takes IPv4 addresses only: give one")
    return addr, int(port)


def endpoints(specs: Iterable[str]) -> dict[str, str]:
    """NAME -> ADDR:PORT of each `--remote NAME=ADDR:PORT`."""
    from offlow.targets.remote import device_name

    out: dict[str, str] = {}
    for spec in specs:
        name, eq, where = spec.partition("=")
        if not eq:
            raise OfflowError(f"--remote `{spec}`: expected NAME=ADDR:PORT")
        device_name(f"remote:{name}")
        addr, port = parse_address(where, "--remote")
        if port == 0:
            raise OfflowError(f"--remote `{spec}`: give the port the device listens on")
        if name in out:
            raise OfflowError(f"--remote: `{name}` given twice")
        out[name] = f"{addr}:{port}"
    return out


def check_devices(devices: Iterable[str], given: dict[str, str]) -> None:
    """Every remote device of the program has an address, and every address a device."""
    names = [d.partition(":")[2] for d in devices if d.startswith("remote:")]
    for n in names:
        if n not in given:
            raise OfflowError(f"device `remote:{n}`: no address; give --remote {n}=ADDR:PORT "
                              "(where its `offlow serve-device` listens)")
    for n in given:
        if n not in names:
            raise OfflowError(f"--remote {n}=...: the program places no segment on "
                              f"`remote:{n}`" + (f"; its remote devices: {', '.join(names)}"
                                                 if names else ""))


def load_secret(path: Path | None) -> bytes:
    """The shared secret: the file's bytes (one trailing newline dropped; the file not
    readable by group or others), else OFFLOW_REMOTE_SECRET; 16..4096 bytes, no NUL."""
    if path is not None:
        try:
            mode = path.stat().st_mode
            data = path.read_bytes()
        except OSError as e:
            raise OfflowError(f"--secret-file {path}: {e.strerror}") from None
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise OfflowError(f"--secret-file {path}: readable by others (mode "
                              f"{stat.S_IMODE(mode):04o}); chmod 600 it")
        secret, what = data.removesuffix(b"\n"), f"--secret-file {path}"
    elif ENV in os.environ:
        secret, what = os.environ[ENV].encode(), ENV
    else:
        raise OfflowError(f"a remote device needs the shared secret: give --secret-file "
                          f"FILE or set {ENV}")
    if not SECRET_MIN <= len(secret) <= SECRET_MAX or b"\0" in secret:
        raise OfflowError(f"{what}: the secret must be {SECRET_MIN}..{SECRET_MAX} bytes "
                          f"without NUL (it has {len(secret)})")
    return secret


def sweep_device_dirs(folder: Path = DEV_DIRS) -> list[Path]:
    """Remove this user's device folders whose serve-device is gone (killed during a
    run: the executable it received stays there otherwise). Returns what it removed."""
    removed = []
    for path in folder.glob("offlow-remote-dev-*"):
        m = _DEV_DIR.match(path.name)
        try:
            mine = path.lstat().st_uid == os.getuid() and path.is_dir()
        except OSError:
            continue
        if m and mine and not pid_alive(int(m[1])):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def check_work_dir(folder: Path) -> Path:
    """`folder`, absolute, when serve-device can write and run each device's executable
    there; else an OfflowError saying why (before anything listens)."""
    what = f"--work-dir {folder}"
    if not folder.exists():
        raise OfflowError(f"{what}: no such folder")
    if not folder.is_dir():
        raise OfflowError(f"{what}: not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OfflowError(f"{what}: this user cannot make folders there")
    if os.statvfs(folder).f_flag & os.ST_NOEXEC:
        raise OfflowError(f"{what}: its file system is mounted noexec, so the device's "
                          "executable could not run there; give a folder on another")
    folder = folder.resolve()
    if len(str(folder)) > WORK_DIR_MAX:
        raise OfflowError(f"{what}: the folder's name is longer than {WORK_DIR_MAX} bytes")
    return folder


def serve_device(listen: str, secret_file: Path | None, all_interfaces: bool,
                 work_dir: Path = DEV_DIRS) -> int:
    """Serve runs of remote devices on `listen` (ADDR:PORT) until stopped (Ctrl-C), each
    run's executable in a folder of its own in `work_dir`: exec's the device server
    (runtime/tools/remote_serve.c)."""
    from offlow.targets import remote

    addr, port = parse_address(listen, "--listen")
    if ipaddress.ip_address(addr).is_unspecified and not all_interfaces:
        raise OfflowError(f"--listen {listen}: that is every interface; say so with "
                          "--all-interfaces, or give one address")
    why = remote.TARGET.unusable()
    if why:
        raise OfflowError(f"serve-device cannot run here: {why}")
    secret = load_secret(secret_file)
    work_dir = check_work_dir(work_dir)
    sweep_device_dirs(work_dir)
    exe = remote.tool("serve")
    # it listens again on the same port after each run: the last run's connection in
    # TIME_WAIT must not hold the port
    env = {"UCX_TCP_CM_REUSEADDR": "y", **os.environ, ENV: secret.decode("latin-1")}
    sys.stderr.flush()
    os.execve(exe, [str(exe), addr, str(port), str(work_dir)], env)
