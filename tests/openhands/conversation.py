"""A full RemoteConversation through sbx: an agent in the sandbox's Agent
Server runs a command and edits a file, driven by the test's fake
OpenAI-compatible LLM; events stream over the WebSocket through sbx's
proxy. Env: RUNTIME_API_URL, RUNTIME_API_KEY, AGENT_IMAGE, SESSION_ID,
LLM_BASE_URL. Prints one JSON line of facts.
"""

import json
import os

from pydantic import SecretStr

from openhands.sdk import LLM, Agent, Conversation
from openhands.sdk.tool import Tool
from openhands.tools.file_editor import FileEditorTool
from openhands.tools.terminal import TerminalTool
from openhands.workspace import APIRemoteWorkspace

facts = {"events": []}
llm = LLM(
    model="openai/sbx-fake",
    base_url=os.environ["LLM_BASE_URL"],
    api_key=SecretStr("fake-key"),
    usage_id="agent",
    num_retries=0,
)
agent = Agent(llm=llm, tools=[Tool(name=TerminalTool.name), Tool(name=FileEditorTool.name)])

with APIRemoteWorkspace(
    runtime_api_url=os.environ["RUNTIME_API_URL"],
    runtime_api_key=os.environ["RUNTIME_API_KEY"],
    server_image=os.environ["AGENT_IMAGE"],
    session_id=os.environ["SESSION_ID"],
    working_dir="/workspace/project",
    startup_wait_timeout=300,
) as ws:
    received = []

    def on_event(event):
        received.append(type(event).__name__)

    conv = Conversation(agent=agent, workspace=ws, callbacks=[on_event], visualizer=None)
    conv.send_message("Write hello into /workspace/project/hello.txt, then add a second line with the editor.")
    conv.run()
    facts["status"] = str(conv.state.execution_status.value)
    facts["events"] = received
    facts["file"] = ws.execute_command("cat /workspace/project/hello.txt").stdout
    conv.close()
print("FACTS " + json.dumps(facts))
