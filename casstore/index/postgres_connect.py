"""
The first connection to a shared store's PostgreSQL index: what the URL must look like, and which failures are worth
waiting out.

A server that is down or still starting up may be there in a moment, so connecting is tried again until a deadline.
A wrong password, a database that does not exist or a URL that is not PostgreSQL's will not get better by waiting: the
server's own reason is reported at once.
"""

import time

import psycopg
from psycopg.conninfo import conninfo_to_dict

from casstore.errors import StorageError

URL_FORM = "postgresql://user:password@host:5432/db"
# libpq's words for failures that waiting can cure: nothing listens yet, the server is starting or stopping, or is full.
_PASSING = (
    "connection refused",
    "the database system is starting up",
    "the database system is shutting down",
    "the database system is in recovery mode",
    "the database system is not yet accepting connections",
    "the database system is not accepting connections",
    "sorry, too many clients already",
    "timeout expired",
    "no route to host",
    "network is unreachable",
    "server closed the connection unexpectedly",
)
_RETRY_PAUSE_SECONDS = 0.2
# libpq's second line under a refused or timed-out connection.
_LIBPQ_HINT = "Is the server running"
# libpq's and the resolver's words for a host name that does not resolve: nothing was asked, nothing refused.
_UNRESOLVED = ("failed to resolve host", "could not translate host name", "name or service not known")


def check_url(url: str) -> None:
    """
    Refuse an index URL that is not a PostgreSQL connection string, before any connection is tried.

    :param url: A `postgresql://` (or `postgres://`) URL, or libpq's `key=value` form.
    :raises ValueError: If it is neither; the message shows the URL's scheme, never its password.
    """
    scheme, separator, _ = url.partition("://")
    if separator:
        if scheme.lower() not in {"postgresql", "postgres"}:
            raise ValueError(
                f"The index URL (index_url, --index, CASSTORE_INDEX_URL) must be a PostgreSQL URL such as {URL_FORM}, "
                f"not a {scheme}:// URL."
            )
        return
    try:
        parameters = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        parameters = {}
    if not parameters:
        raise ValueError(
            f"The index URL (index_url, --index, CASSTORE_INDEX_URL) must be a PostgreSQL URL such as {URL_FORM} (or "
            "libpq's host=... dbname=... form); what was given is neither."
        )


def wait_until_connectable(conninfo: str, *, description: str, timeout: float) -> None:
    """
    Connect once and let go, trying again while the failure is one that waiting can cure, until `timeout` seconds.

    :param conninfo: The connection string, with its `connect_timeout`.
    :param description: The database, for messages (no password).
    :param timeout: Seconds after which a server that is still down is reported.
    :raises ValueError: If libpq refuses the URL itself (an unknown or malformed parameter).
    :raises StorageError: At once with the server's reason if it refuses the connection (a wrong password, no such
        database or user, a host name that does not resolve), or after `timeout` if it stays down.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            psycopg.connect(conninfo, autocommit=True).close()
        except psycopg.ProgrammingError as error:
            # libpq refused the URL itself (an unknown or malformed parameter, such as `?foo=bar`): no server was
            # asked, and asking again cannot help.
            raise ValueError(
                f"The index URL (index_url, --index, CASSTORE_INDEX_URL) for {description} is not one PostgreSQL "
                f"accepts: {reason_of(error)}. It takes the form {URL_FORM}."
            ) from None
        except psycopg.OperationalError as error:
            reason = reason_of(error)
            if is_unresolved(reason):
                raise StorageError(
                    f"The host name of the PostgreSQL index at {description} does not resolve: {reason}. Check the "
                    "host in the index URL (index_url, --index or CASSTORE_INDEX_URL), and this machine's DNS."
                ) from error
            if not is_passing(reason):
                raise StorageError(
                    f"The PostgreSQL index at {description} refused the connection: {reason} (check the index URL: "
                    f"index_url, --index or CASSTORE_INDEX_URL)."
                ) from error
            if time.monotonic() + _RETRY_PAUSE_SECONDS >= deadline:
                raise StorageError(
                    f"Could not connect to the PostgreSQL index at {description} within {timeout:.0f} s ({reason}): "
                    "is the server running, and the host and port right?"
                ) from error
            time.sleep(_RETRY_PAUSE_SECONDS)
        else:
            return


def reason_of(error: psycopg.Error) -> str:
    """
    :returns: libpq's message without its `connection failed: connection to server at ... failed:` preamble, its
        lines joined as sentences, and without libpq's hint `Is the server running on that host ...?` (the messages
        made of it ask that in their own words).
    """
    lines = (" ".join(line.split()) for line in str(error).splitlines())
    kept = [line for line in lines if line and not line.startswith(_LIBPQ_HINT)]
    text = "; ".join(line.rstrip(".") for line in kept)
    for marker in ("FATAL:", "failed:"):
        _, found, rest = text.rpartition(marker)
        if found and rest.strip():
            return rest.strip()
    return text or type(error).__name__


def is_unresolved(reason: str) -> bool:
    """:returns: Whether a failure to connect is a host name that does not resolve (no server was reached)."""
    lowered = reason.lower()
    return any(words in lowered for words in _UNRESOLVED)


def is_passing(reason: str) -> bool:
    """:returns: Whether a failure to connect is one that waiting can cure (the server is down or not ready yet)."""
    lowered = reason.lower()
    return any(words in lowered for words in _PASSING)
