"""A chat's messages, checked once for every reader (instruction and preference records, the server's requests): a
non-empty list of ``{"role", "content"}`` objects, each role one of ``ROLES`` (OpenAI's ``developer`` read as
``system``; where tools are offered, ``tool`` too: a function's result), each content text (a string, or OpenAI's
list of text parts, joined; none where an assistant's message carries ``tool_calls``)."""

from __future__ import annotations

from typing import Any

__all__ = ["ROLES", "TOOL_ROLES", "MessageError", "chat_messages"]

ROLES = ("system", "user", "assistant")
TOOL_ROLES = (*ROLES, "tool")  # a function's result given back, where the model was offered tools (the server)
_NAMED = {"developer": "system"}  # OpenAI's newer name for the system message


class MessageError(ValueError):
    """What is wrong with a chat's messages, in words that follow the caller's "where": ``index`` is the message's,
    None where the value is not a non-empty list of messages at all (each caller says what it expected)."""

    def __init__(self, text: str, index: int | None = None) -> None:
        super().__init__(text)
        self.index = index


def chat_messages(value: Any, *, answered: bool = False, tools: bool = False) -> list[dict[str, str]]:
    """``value``'s messages as a template reads them (``{"role", "content"}``, the role one of ``ROLES``, the content a
    string); ``answered``: the last must be the assistant's (the answer to learn); ``tools``: a ``tool`` message, and an
    assistant's without content that carries ``tool_calls``, are accepted (their other fields are the caller's to
    read). ``MessageError`` says what is wrong."""
    roles = TOOL_ROLES if tools else ROLES
    if not isinstance(value, list) or not value:
        raise MessageError('not a non-empty list of {"role", "content"} objects')
    out = []
    for i, message in enumerate(value):
        role = message.get("role") if isinstance(message, dict) else None
        role = _NAMED.get(role, role) if isinstance(role, str) else role
        if role not in roles:
            raise MessageError(f"role {role!r} is not one of {', '.join(roles)}", i)
        content = message.get("content")
        if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text"
                                             and isinstance(p.get("text"), str) for p in content):
            content = "".join(p["text"] for p in content)
        if content is None and tools and role == "assistant" and message.get("tool_calls"):
            content = ""
        if not isinstance(content, str):
            raise MessageError("content must be text (a string, or a list of text parts)", i)
        out.append({"role": role, "content": content})
    if answered and out[-1]["role"] != "assistant":
        raise MessageError(f"the last message must be the assistant's (the answer to learn), not the "
                           f"{out[-1]['role']}'s", len(out) - 1)
    return out
