"""Fake remote services speaking real wire formats on 127.0.0.1, shared by every test.

`FakeOpenAI` (tests/fakes/openai_server.py) is the model endpoint: any code that talks to
an OpenAI-compatible server is tested against it through the real SDK and real HTTP.
"""

from tests.fakes.openai_server import FakeOpenAI, FakeReply, RecordedRequest, echo_last_user

__all__ = ["FakeOpenAI", "FakeReply", "RecordedRequest", "echo_last_user"]
