"""ApiVersions: the one coherent set of version ranges this broker serves."""
from __future__ import annotations

import re

from protocol.errors import ErrorCode
from protocol.messages import ApiVersionsResponse

from . import api_version_entries

NAME = "ApiVersions"
VERSIONS = (0, 4)

_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


def handle(broker, ctx, request, respond) -> None:
    error = ErrorCode.NONE
    if ctx.api_version >= 3 and not (_SOFTWARE.match(request.client_software_name or "") and
                                     _SOFTWARE.match(request.client_software_version or "")):
        error = ErrorCode.INVALID_REQUEST
    respond(ApiVersionsResponse(error_code=error, api_keys=api_version_entries()))
