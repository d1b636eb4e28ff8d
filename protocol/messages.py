"""Every request and response body class, by spec name (e.g. `messages.ProduceRequest`).

`REQUESTS` / `RESPONSES` map api keys to classes. Each class has `SCHEMAS` ({version: construct
Message}), `VALID_VERSIONS`, `FLEXIBLE_FROM`, `API_KEY`; nested structs hang off it by spec type name.
"""

from protocol.generated.messages import *  # noqa: F401,F403
from protocol.generated.messages import ALL, REQUESTS, RESPONSES  # noqa: F401
