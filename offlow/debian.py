"""Installing a peer's Debian packages on demand (benchmarks and their tests do, as
root, when a peer is missing), the way the README's setup command installs offlow's."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Sequence


def apt_install(packages: Sequence[str], what: str, who: str = "setup") -> str | None:
    """Install `packages` with apt-get as root (after `apt-get update` when the first
    try fails: a fresh machine may have no package lists), saying so under `who`.
    `what` names the missing thing in the reasons. None on success, else why not."""
    if shutil.which("apt-get") is None:
        return f"{what} is not installed and there is no apt-get to install it"
    if os.geteuid() != 0:
        return f"{what} is not installed and installing it needs root"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    cmd = ["apt-get", "install", "-y", "-qq", *packages]
    print(f"{who}: {what} not found; running {' '.join(cmd)}", flush=True)
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
        if res.returncode != 0:
            print(f"{who}: that failed; running apt-get update -qq and trying again",
                  flush=True)
            subprocess.run(["apt-get", "update", "-qq"], capture_output=True, text=True,
                           env=env, timeout=600)
            res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"apt-get install {' '.join(packages)} failed: {e}"
    if res.returncode != 0:
        tail = (res.stderr.strip() or res.stdout.strip()).splitlines()[-1:] or ["?"]
        return f"apt-get install {' '.join(packages)} failed (exit {res.returncode}): {tail[0]}"
    return None


def find_or_install(find: Callable[[], str | None], packages: Sequence[str], what: str,
                    who: str, absent: str) -> tuple[str | None, str | None]:
    """What `find` finds (a path, a version): (found, None); when it finds nothing,
    `packages` are installed first (apt_install, `what` and `who` as there) and it looks
    again. (None, why not): apt_install's reason, or `absent` when the packages went in
    and `find` still finds nothing."""
    found = find()
    if found:
        return found, None
    why = apt_install(packages, what, who)
    if why:
        return None, why
    found = find()
    return (found, None) if found else (None, absent)
