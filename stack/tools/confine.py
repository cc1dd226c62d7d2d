"""Runs a command unable to read or write the lane's own files (Linux Landlock), then execs it.

Used by the terminal as `python -I -S confine.py --protect PATH... --allow PATH -- COMMAND...`.
The command runs as the shim's own user, so file modes cannot keep it from $LANE_HOME: Landlock
can. It allows reading and writing files everywhere except under the protected paths ($LANE_HOME,
the store and its WAL files), where only the allowed path (the workspace) is open. Landlock only
grants, so "everywhere except" is every entry beside each folder on the way to a protected path;
files created later directly in those folders are out of reach too. Listing folders, executing and
creating or deleting names stay unrestricted (an `rm` in $LANE_HOME still works), and a command
cannot lift the rules for itself or its children. Standard library only, nothing of the lane
imported: it starts in milliseconds. Without Landlock (an old kernel, a seccomp filter that
forbids it) the terminal does not use it: `available()`.
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same on every Linux architecture
_VERSION_FLAG = 1
_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
_WRITE_FILE, _READ_FILE, _REFER, _TRUNCATE = 1 << 1, 1 << 2, 1 << 13, 1 << 14
_FILE_RIGHTS = _WRITE_FILE | _READ_FILE | _TRUNCATE


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def available() -> int:
    """The kernel's Landlock ABI version; 0 where Landlock cannot be used."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        version = _libc().syscall(_CREATE_RULESET, None, 0, _VERSION_FLAG)
    except (OSError, AttributeError):
        return 0
    return max(int(version), 0)


def handled_rights(abi: int) -> int:
    """What the rules govern: reading and writing files; moving a file into another folder
    (REFER, ABI 2: without rules for it Landlock refuses every such move); truncating (ABI 3)."""
    rights = _WRITE_FILE | _READ_FILE
    if abi >= 2:
        rights |= _REFER
    if abi >= 3:
        rights |= _TRUNCATE
    return rights


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def open_entries(protected: list[str], allowed: list[str]) -> list[str]:
    """The paths to open: every entry beside each folder on the way to a protected path that
    neither is nor leads to nor lies in one (followed through symlinks), and the allowed paths."""
    resolved = {os.path.realpath(p) for p in protected}
    protected = [p for p in resolved if not any(q != p and _inside(p, q) for q in resolved)]  # outermost
    on_the_way = {os.path.dirname(p) for p in protected}
    for path in list(on_the_way):
        while path != os.path.dirname(path):
            path = os.path.dirname(path)
            on_the_way.add(path)
    entries = []
    for folder in sorted(on_the_way):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            entry = os.path.join(folder, name)
            real = os.path.realpath(entry)
            if entry in on_the_way or any(_inside(real, p) or _inside(p, real) for p in protected):
                continue
            entries.append(entry)
    return entries + [os.path.realpath(p) for p in allowed]


def confine(protected: list[str], allowed: list[str]) -> None:
    """Restricts this process (and what it execs) as the module says; OSError when it cannot."""
    abi = available()
    if not abi:
        raise OSError("Landlock is not available")
    libc, rights = _libc(), handled_rights(abi)
    ruleset = libc.syscall(_CREATE_RULESET, ctypes.c_char_p(struct.pack("=Q", rights)), 8, 0)
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    for path in open_entries(protected, allowed):
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            is_folder = os.path.isdir(f"/proc/self/fd/{fd}")
            rule = struct.pack("=Qi", rights if is_folder else rights & _FILE_RIGHTS, fd)
            if libc.syscall(_ADD_RULE, ruleset, _PATH_BENEATH, ctypes.c_char_p(rule), 0) < 0:
                continue  # a special file Landlock takes no rule for
        finally:
            os.close(fd)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 or libc.syscall(_RESTRICT_SELF, ruleset, 0) < 0:
        raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    os.close(ruleset)


def main(argv: list[str]) -> None:
    split = argv.index("--")
    options, command = argv[:split], argv[split + 1:]
    protected = [options[i + 1] for i, o in enumerate(options) if o == "--protect"]
    allowed = [options[i + 1] for i, o in enumerate(options) if o == "--allow"]
    try:
        confine(protected, allowed)
    except OSError as exc:  # the terminal checked available() first: say so rather than run open
        print(f"the lane could not confine this command ({exc}); it did not run", file=sys.stderr)
        sys.exit(126)
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
