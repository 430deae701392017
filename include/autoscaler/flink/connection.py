"""How to reach one Flink cluster's REST API: its address (and its standbys'), credentials and TLS."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote, urlsplit, urlunsplit


@dataclass(frozen=True)
class FlinkConnection:
    """How to reach one Flink cluster's REST endpoint."""

    base_url: str = "http://127.0.0.1:8081"
    username: str | None = None
    password: str | None = None
    token: str | None = None
    verify: bool | str = True  # False, True or a CA bundle path
    client_cert: str | None = None  # PEM certificate for TLS client authentication (security.ssl.rest.authentication-enabled)
    client_key: str | None = None  # its private key (PEM), when not in client_cert
    timeout_s: float = 10.0
    # POST /jars/:id/run and /plan run the program's main() in the JobManager (a SQL job is planned there) and
    # answer only once the job graph is built and submitted; Flink itself bounds that by `web.timeout` (600 s by
    # default). A client that gives up sooner leaves a job it takes for failed -- and may submit a second -- so
    # the wait for a submission is Flink's own bound, not a REST call's.
    submit_timeout_s: float = 600.0
    retries: int = 4
    backoff_s: float = 0.5
    # Other JobManagers' REST addresses (high availability: a standby's REST serves through the leader), tried
    # in order when the one in use does not answer; the client keeps to the last that answered.
    standby_urls: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # Credentials in the URL (http://user:pw@host) move to basic auth: the URL is printed in errors.
        try:
            parts = urlsplit(self.base_url)
            username, password = parts.username, parts.password
        except ValueError:
            return
        if username is None and password is None:
            return
        host = parts.hostname or ""
        netloc = (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port else "")
        object.__setattr__(self, "base_url", urlunsplit(parts._replace(netloc=netloc)))
        if self.username is None and self.token is None:
            object.__setattr__(self, "username", unquote(username or ""))
            object.__setattr__(self, "password", unquote(password or ""))

    def __repr__(self) -> str:  # never print secrets
        auth = "token" if self.token else "basic" if self.username else "none"
        standby = f", standby_urls={self.standby_urls!r}" if self.standby_urls else ""
        return f"FlinkConnection(base_url={self.base_url!r}{standby}, auth={auth})"
