"""APIRemoteWorkspace (openhands-workspace) against sbx's Runtime API.

Start, execute_command, file upload and download, git changes, pause,
resume, re-attach to the session, stop: what the OpenHands SDK scripts and
benchmarks do. Env: RUNTIME_API_URL, RUNTIME_API_KEY, AGENT_IMAGE,
SESSION_ID. Prints one JSON line of facts the Go test checks.
"""

import json
import os
import tempfile

import httpx

from openhands.workspace import APIRemoteWorkspace

api_url = os.environ["RUNTIME_API_URL"]
api_key = os.environ["RUNTIME_API_KEY"]
image = os.environ["AGENT_IMAGE"]
session = os.environ["SESSION_ID"]
facts = {}


def workspace():
    return APIRemoteWorkspace(
        runtime_api_url=api_url,
        runtime_api_key=api_key,
        server_image=image,
        session_id=session,
        working_dir="/workspace/project",
        startup_wait_timeout=300,
        resource_factor=2,
    )


ws = workspace()
facts["runtime_id"] = ws._runtime_id
facts["host"] = ws.host

r = ws.execute_command("echo hello from $(id -un) in $(pwd); echo err >&2; exit 3", cwd="/workspace/project")
facts["exec"] = {"exit_code": r.exit_code, "stdout": r.stdout, "stderr": r.stderr}

with tempfile.TemporaryDirectory() as d:
    src = os.path.join(d, "up.bin")
    payload = bytes(range(256)) * 4096  # 1 MiB, every byte value
    with open(src, "wb") as f:
        f.write(payload)
    up = ws.file_upload(src, "/workspace/project/up.bin")
    dst = os.path.join(d, "down.bin")
    down = ws.file_download("/workspace/project/up.bin", dst)
    with open(dst, "rb") as f:
        facts["files"] = {"upload": up.success, "download": down.success, "same": f.read() == payload}

ws.execute_command(
    "cd /workspace/project && git init -q && git config user.email t@example.test && git config user.name t"
    " && echo one > tracked.txt && git add tracked.txt && git commit -qm init"
    " && echo two >> tracked.txt && echo new > untracked.txt"
)
changes = ws.git_changes("/workspace/project")
facts["git"] = sorted(f"{c.status.value}:{os.path.basename(str(c.path))}" for c in changes)

# The session key protects the Agent Server; /health needs none.
with httpx.Client() as c:
    facts["no_key_status"] = c.get(ws.host + "/api/conversations/search").status_code
    facts["health_status"] = c.get(ws.host + "/health").status_code

ws.pause()
with httpx.Client() as c:
    facts["paused_status"] = c.get(
        f"{api_url}/sessions/{session}", headers={"X-API-Key": api_key}
    ).json()["status"]
ws.resume()
facts["after_resume"] = ws.execute_command("cat /workspace/project/tracked.txt").stdout

# A second client of the same session attaches to the running runtime.
ws2 = workspace()
facts["reattached_same_runtime"] = ws2._runtime_id == ws._runtime_id
facts["reattach_exec"] = ws2.execute_command("echo again").stdout
ws2.keep_alive = True
ws2.cleanup()

ws.cleanup()  # POST /stop
with httpx.Client() as c:
    facts["stopped_status"] = c.get(
        f"{api_url}/sessions/{session}", headers={"X-API-Key": api_key}
    ).json()["status"]
print("FACTS " + json.dumps(facts))
