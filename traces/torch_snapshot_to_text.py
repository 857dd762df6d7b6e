#!/usr/bin/env python3
"""torch_snapshot_to_text.py: a torch memory snapshot pickle into the text form
`gpumemsim import torch-snapshot` reads (one entry a line:
`action addr size stream time_us`).

Input: the pickle torch.cuda.memory._dump_snapshot(PATH) writes (a dict with
"device_traces": one list of entries per device). Needs only the standard
library: unknown classes in the pickle (torch internals) load as inert
placeholders instead of being imported.

usage: torch_snapshot_to_text.py SNAPSHOT.pickle OUT.txt [--device N]
Exit 0 on success, 1 on bad input (message on stderr), 2 on usage.
"""
import pickle
import sys


class _Placeholder:
    """Stands in for any class the pickle names; accepts any state."""

    def __init__(self, *args, **kwargs):
        self.args = args

    def __setstate__(self, state):
        self.state = state


class _PermissiveUnpickler(pickle.Unpickler):
    """Never imports: builtins containers load, everything else is a placeholder."""

    def find_class(self, module, name):
        if module in ("builtins", "__builtin__") and name in (
                "dict", "list", "tuple", "set", "frozenset", "int", "float", "str",
                "bytes", "bool", "complex", "bytearray"):
            return getattr(__import__("builtins"), name)
        if module == "collections" and name == "OrderedDict":
            from collections import OrderedDict
            return OrderedDict
        return _Placeholder


def convert(src, dst, device):
    with open(src, "rb") as f:
        try:
            snap = _PermissiveUnpickler(f).load()
        except Exception as e:  # noqa: BLE001 - any unpickling failure is bad input
            raise ValueError("%s: not a readable pickle (%s)" % (src, e))
    if not isinstance(snap, dict) or "device_traces" not in snap:
        raise ValueError("%s: no 'device_traces' (not a torch memory snapshot)" % src)
    traces = snap["device_traces"]
    if not isinstance(traces, list) or device >= len(traces):
        raise ValueError("%s: no device %d in device_traces" % (src, device))
    lines = []
    for i, e in enumerate(traces[device]):
        if not isinstance(e, dict) or "action" not in e:
            raise ValueError("%s: device_traces[%d][%d]: not an entry" % (src, device, i))
        try:
            lines.append("%s %d %d %d %d\n" % (
                e["action"], int(e.get("addr", 0)), int(e.get("size", 0)),
                int(e.get("stream", 0)) & 0xFFFFFFFFFFFFFFFF, int(e.get("time_us", 0))))
        except (TypeError, ValueError):
            raise ValueError("%s: device_traces[%d][%d]: bad field" % (src, device, i))
    with open(dst, "w") as f:
        f.writelines(lines)


def main(argv):
    args = argv[1:]
    device = 0
    if "--device" in args:
        k = args.index("--device")
        try:
            device = int(args[k + 1])
        except (IndexError, ValueError):
            print(__doc__, file=sys.stderr)
            return 2
        del args[k:k + 2]
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        convert(args[0], args[1], device)
    except (OSError, ValueError) as e:
        print("torch_snapshot_to_text: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
