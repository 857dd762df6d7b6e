"""run_record.py: what the capture workloads share.

A workload always leaves its JSON record, the error included when it
failed, so a sweep on a GPU host can tell a crash from a run that never
started; the file is written under a temporary name and renamed, so a run
cut short never leaves half a record for the importers to trip on.
"""
import json
import os
import sys
import traceback


def run_and_record(path, info, work):
    """Run WORK(INFO), set INFO's "ok" or "error", write INFO to PATH.

    Returns the process exit code: 0, or 1 when WORK raised.
    """
    rc = 0
    try:
        work(info)
        info["ok"] = True
    except Exception:
        info["error"] = traceback.format_exc()[-4000:]
        print(info["error"], file=sys.stderr, flush=True)
        rc = 1
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(info, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)
    return rc
