"""The team server's options of `threadloom serve`: --accounts and OAuth for --http, --remote for a laptop."""

from __future__ import annotations

from typing import Annotated

import typer

RemoteOpt = Annotated[
    str | None,
    typer.Option(
        "--remote",
        metavar="URL",
        help="Serve stdio here and use the team server at URL (its /mcp) for memory and coordination; threads stay "
        "in this repository. Token: THREADLOOM_REMOTE_TOKEN, else the OS keyring.",
    ),
]
AccountsOpt = Annotated[
    bool, typer.Option("--accounts", help="With --http: each request carries its user's token (threadloom admin).")
]
IssuerOpt = Annotated[
    str | None, typer.Option("--oauth-issuer", metavar="URL", help="With --accounts: also take this issuer's JWTs.")
]
JwksOpt = Annotated[
    str | None, typer.Option("--oauth-jwks", metavar="URL", help="The issuer's JWKS (else from its metadata).")
]
ClaimOpt = Annotated[str, typer.Option("--oauth-user-claim", help="The JWT claim that names the account.")]
ResourceOpt = Annotated[
    str | None,
    typer.Option("--resource-url", metavar="URL", help="This server's public URL of /mcp: the tokens' audience."),
]


def check_options(*, http: str | None, in_process: bool, no_token: bool, remote: str | None, accounts: bool,
                  issuer: str | None, jwks: str | None, claim: str, resource: str | None) -> None:  # fmt: skip
    """Refuse an option that would do nothing where it was given, rather than ignore it."""
    from threadloom.errors import ConfigError

    team = (
        (accounts, "--accounts"),
        (issuer is not None, "--oauth-issuer"),
        (jwks is not None, "--oauth-jwks"),
        (resource is not None, "--resource-url"),
        (claim != "sub", "--oauth-user-claim"),
    )
    if remote is not None:
        server = ((http is not None, "--http"), (in_process, "--in-process"), (no_token, "--no-token"))
        for given, name in (*server, *team):
            if given:
                raise ConfigError(f"--remote serves stdio: drop {name} (the team server's option, not the laptop's)")
    if http is None:
        for given, name in team:
            if given:
                raise ConfigError(f"{name} goes with --http (a team server: serve --http HOST:PORT --accounts)")


def serve_team(http: str, no_token: bool, accounts: bool, issuer: str | None, jwks: str | None, claim: str,
               resource: str | None) -> int:  # fmt: skip
    from threadloom.cli.app import settings
    from threadloom.server.http import serve_http
    from threadloom.server.http_oauth import check_config

    oauth = check_config(issuer, resource, jwks, claim)
    return serve_http(settings(), http, no_token=no_token, accounts=accounts, oauth=oauth)


def serve_remote(url: str) -> int:
    from threadloom.server.remote import serve_remote as run

    return run(url)
