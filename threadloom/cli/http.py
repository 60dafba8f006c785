"""`threadloom http token`: where the access token of `serve --http` is kept."""

from __future__ import annotations

import typer

from threadloom.cli.app import err, out, settings

http_app = typer.Typer(help="The HTTP server (`serve --http`) and its access token.", no_args_is_help=True)


@http_app.command()
def token() -> None:
    """Print the path of the access token file, making the token first if there is none (shown once, on stderr).

    Read the token with `cat` on that path; clients send it as `Authorization: Bearer <token>`.
    """
    from threadloom.server.http_token import stored_token

    s = settings()
    path = s.layout.http_token
    if s.http_token is not None:
        err.print(f"THREADLOOM_HTTP_TOKEN is set: serve --http uses it, not the file {path}")
    else:
        stored_token(path)
    out.print(str(path), soft_wrap=True)
