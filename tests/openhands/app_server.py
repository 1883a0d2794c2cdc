"""The OpenHands app server's RemoteSandboxService (openhands-ai) against
sbx's Runtime API: start a sandbox, wait for it, list (search), batch get,
pause, resume and delete it, with the service's own code and an in-memory
database. Env: RUNTIME_API_URL, RUNTIME_API_KEY, AGENT_IMAGE, and
WARM_SPEC_NAME: when set, the sandbox specs come from the Runtime API's
warm shapes (DynamicRemoteSandboxSpecService, GET /api/warm-runtime-configs)
and the start takes the default one, that name. Prints one JSON line of
facts.
"""

import asyncio
import json
import os

import httpx
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

from openhands.app_server.sandbox.dynamic_remote_sandbox_spec_service import DynamicRemoteSandboxSpecService
from openhands.app_server.sandbox.preset_sandbox_spec_service import PresetSandboxSpecService
from openhands.app_server.sandbox.remote_sandbox_service import RemoteSandboxService
from openhands.app_server.sandbox.sandbox_models import SandboxStatus
from openhands.app_server.sandbox.sandbox_spec_models import SandboxSpecInfo
from openhands.app_server.user.specifiy_user_context import ADMIN
from openhands.app_server.utils.sql_utils import Base


async def main():
    facts = {}
    engine = create_async_engine("sqlite+aiosqlite:///:memory:")
    async with engine.begin() as conn:
        await conn.run_sync(Base.metadata.create_all)
    spec = SandboxSpecInfo(
        id=os.environ["AGENT_IMAGE"],
        command=["/usr/local/bin/openhands-agent-server", "--port", "60000"],
        initial_env={"OH_ENABLE_VNC": "0", "LOG_JSON": "true"},
        working_dir="/workspace/project",
    )
    specs = PresetSandboxSpecService(specs=[spec])
    warm_spec = os.environ.get("WARM_SPEC_NAME")
    if warm_spec:
        specs = DynamicRemoteSandboxSpecService(
            api_url=os.environ["RUNTIME_API_URL"], api_key=os.environ["RUNTIME_API_KEY"], default_spec_name=warm_spec
        )
        default = await specs.get_default_sandbox_spec()
        facts["spec"] = [default.id, default.command, sorted(default.initial_env)]
    async with async_sessionmaker(engine)() as db, httpx.AsyncClient(timeout=30) as http:
        svc = RemoteSandboxService(
            sandbox_spec_service=specs,
            api_url=os.environ["RUNTIME_API_URL"],
            api_key=os.environ["RUNTIME_API_KEY"],
            web_url=None,
            resource_factor=1,
            runtime_class=None,
            start_sandbox_timeout=300,
            max_num_sandboxes=10,
            user_context=ADMIN,
            httpx_client=http,
            db_session=db,
        )
        info = await svc.start_sandbox(None if warm_spec else spec.id)
        facts["started"] = info.status.value
        info = await svc.wait_for_sandbox_running(info.id, timeout=300, poll_interval=1, httpx_client=http)
        facts["running"] = info.status.value
        facts["urls"] = sorted(u.name for u in info.exposed_urls or [])
        agent_url = next(u.url for u in info.exposed_urls if u.name == "AGENT_SERVER")
        r = await http.get(agent_url + "/api/conversations/search", headers={"X-Session-API-Key": info.session_api_key})
        facts["agent_server_status"] = r.status_code
        page = await svc.search_sandboxes()
        facts["search"] = [(s.id == info.id, s.status.value) for s in page.items]
        facts["batch"] = [s.status.value if s else None for s in await svc.batch_get_sandboxes([info.id, "unknown"])]
        facts["paused"] = await svc.pause_sandbox(info.id)
        facts["after_pause"] = (await svc.get_sandbox(info.id)).status.value
        facts["resumed"] = await svc.resume_sandbox(info.id)
        info = await svc.wait_for_sandbox_running(info.id, timeout=120, poll_interval=1, httpx_client=http)
        facts["after_resume"] = info.status.value
        facts["deleted"] = await svc.delete_sandbox(info.id)
        facts["after_delete"] = await svc.get_sandbox(info.id)
        facts["missing"] = (await svc.get_sandbox("no-such")) is None
    print("FACTS " + json.dumps(facts, default=str))


asyncio.run(main())
