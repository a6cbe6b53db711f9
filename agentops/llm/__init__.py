"""Model clients: the protocol the engine speaks, and the clients that implement it."""
from agentops.llm.protocol import (
    AuthError,
    ContextOverflow,
    InvalidRequest,
    ModelClient,
    ModelError,
    ModelOptions,
    ModelReply,
    ModelTimeout,
    RateLimited,
    ServerError,
    ToolCallRequest,
    Usage,
)

__all__ = [
    "AuthError",
    "ContextOverflow",
    "InvalidRequest",
    "ModelClient",
    "ModelError",
    "ModelOptions",
    "ModelReply",
    "ModelTimeout",
    "RateLimited",
    "ServerError",
    "ToolCallRequest",
    "Usage",
]
