"""
Checks of a shared store's object-store settings before any request, and plain words for the client's failures.

The object-store client reports a mistyped URL as `relative URL without a base`, a plain-HTTP endpoint it was not
told to allow as `HTTP error: builder error`, and missing credentials as a refused request to the cloud's metadata
address. Each is caught here and said in terms of what to set.
"""

from collections.abc import Mapping
from typing import Any

BLOB_URL_NAMES = "blob_url, --blobs or CASSTORE_BLOB_URL"
BLOB_URL_FORMS = "s3://bucket/prefix, gs://bucket/prefix, az://container/prefix or file:///path"
# The schemes obstore's `from_url` knows.
_SCHEMES = frozenset({"s3", "s3a", "gs", "az", "adl", "azure", "abfs", "abfss", "http", "https", "file", "memory"})
_S3_SCHEMES = frozenset({"s3", "s3a"})
_ENDPOINT_OPTIONS = ("endpoint", "aws_endpoint", "aws_endpoint_url", "endpoint_url")
_ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT")
# What the S3 client asks for a machine's or a container's role when the environment holds no credentials: the
# instance metadata service's paths and addresses (AWS_METADATA_ENDPOINT moves the service, not its paths).
_ROLE_ADDRESSES = ("/latest/api/token", "/latest/meta-data/", "169.254.169.254", "169.254.170.2", "fd00:ec2::254")
_CREDENTIALS_ADVICE = (
    "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary credentials) in the "
    "environment, or run where a role gives them"
)


def check_blob_url(url: str) -> str:
    """
    :param url: The blob location as given.
    :returns: Its scheme, lower case.
    :raises ValueError: If it is not an object-store URL obstore knows (the message names the option and the forms).
    """
    scheme, separator, rest = url.partition("://")
    if not separator or not scheme:
        raise ValueError(
            f"The blob URL ({BLOB_URL_NAMES}) must be an object-store URL such as {BLOB_URL_FORMS}; "
            f"{url!r} has no scheme."
        )
    scheme = scheme.lower()
    if scheme not in _SCHEMES:
        raise ValueError(
            f"The blob URL ({BLOB_URL_NAMES}) must be an object-store URL such as {BLOB_URL_FORMS}; "
            f"{scheme}:// is not one."
        )
    if scheme in _S3_SCHEMES and not rest.partition("/")[0]:
        raise ValueError(f"The blob URL ({BLOB_URL_NAMES}) {url!r} names no bucket: use s3://bucket/prefix.")
    return scheme


def check_s3_settings(*, client: Mapping[str, Any], config: Mapping[str, str], environ: Mapping[str, str]) -> None:
    """
    Refuse S3 settings the client would fail on at its first request: a plain-HTTP endpoint without `allow_http`, or
    half of a key pair.

    :param client: The HTTP client's options as they will be passed (`allow_http` a bool if given).
    :param config: The store's options as they will be passed.
    :param environ: The environment the client reads.
    :raises ValueError: Naming what to set.
    """
    endpoint = next((config[name] for name in _ENDPOINT_OPTIONS if config.get(name)), None)
    endpoint = endpoint or next((environ[name] for name in _ENDPOINT_VARIABLES if environ.get(name)), None)
    if endpoint and endpoint.lower().startswith("http://") and not client.get("allow_http"):
        raise ValueError(
            f"The object store's endpoint {endpoint} is plain HTTP, which the S3 client refuses unless allowed: set "
            "AWS_ALLOW_HTTP=true (or blob_options allow_http='true'), or use an https:// endpoint."
        )
    key, secret = environ.get("AWS_ACCESS_KEY_ID"), environ.get("AWS_SECRET_ACCESS_KEY")
    if bool(key) != bool(secret):
        missing = "AWS_SECRET_ACCESS_KEY" if key else "AWS_ACCESS_KEY_ID"
        present = "AWS_ACCESS_KEY_ID" if key else "AWS_SECRET_ACCESS_KEY"
        raise ValueError(f"{present} is set but {missing} is not: set both for the object store's credentials.")


# S3's code for a bucket that does not exist (AWS, MinIO, R2...), and its message.
_NO_BUCKET = ("NoSuchBucket", "The specified bucket does not exist")
# A server's own failure (HTTP 500): what SeaweedFS answers a write into a bucket that does not exist.
_SERVER_FAILED = ("500 Internal Server Error", "<Code>InternalError</Code>")


def advice(summary: str) -> str:
    """
    :param summary: The object-store client's message for a failed request.
    :returns: What to set or check, as a sentence to append; empty if the failure says nothing about the settings.
    """
    if any(address in summary for address in _ROLE_ADDRESSES):
        return (
            " No credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set, and the cloud's metadata "
            f"address gave no role's either; {_CREDENTIALS_ADVICE}."
        )
    if "builder error" in summary:
        return " The endpoint is plain HTTP: set AWS_ALLOW_HTTP=true (or blob_options allow_http='true')."
    if any(words in summary for words in _NO_BUCKET):
        return f" The bucket does not exist: create it, or correct the bucket in the blob URL ({BLOB_URL_NAMES})."
    if any(code in summary for code in ("SignatureDoesNotMatch", "InvalidAccessKeyId", "InvalidToken")):
        return (
            " The credentials were refused: check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN)."
        )
    return ""


def first_write_advice(message: str) -> str:
    """
    :param message: Why the first object write of a store being made (its marker) failed, with `advice` appended.
    :returns: A sentence to append when a bucket that does not exist is the likely cause: the server failed (HTTP 500)
        and nothing else was found to advise; empty otherwise.
    """
    if not any(words in message for words in _SERVER_FAILED) or "bucket does not exist" in message:
        return ""
    return (
        " This was the store's first write to that bucket: check that the bucket exists (some servers, SeaweedFS "
        "among them, answer a write into a missing bucket with 500 InternalError), and create it if not; if it "
        "exists, the server's own log says why it failed (a full disk, no free volume)."
    )
