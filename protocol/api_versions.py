"""KIP-511: answering an ApiVersions request whose version the broker does not know."""

from protocol.codec import encode_response
from protocol.errors import ErrorCode
from protocol.generated.messages import ApiVersionsResponse

API_VERSIONS_KEY = 18


def unsupported_version_response(correlation_id, supported):
    """The v0-format ApiVersions response (header v0) with UNSUPPORTED_VERSION and the supported
    ranges, which any client version can read. `supported`: {api_key: (min_version, max_version)}."""
    body = ApiVersionsResponse(
        error_code=ErrorCode.UNSUPPORTED_VERSION,
        api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=key, min_version=low, max_version=high)
            for key, (low, high) in sorted(supported.items())
        ],
    )
    return encode_response(API_VERSIONS_KEY, 0, correlation_id, body)
