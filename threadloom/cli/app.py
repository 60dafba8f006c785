"""The typer application and its top-level commands."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.console import Console

from threadloom import __version__
from threadloom.cli import team
from threadloom.config import Settings, configure_logging, load_settings
from threadloom.errors import ThreadloomError

try:  # typer 0.2x carries its own click; older ones use click's
    from typer._click import exceptions as _errors
except ImportError:  # pragma: no cover
    from click import exceptions as _errors  # type: ignore[no-redef]

app = typer.Typer(
    name="threadloom",
    help="Persistent memory and coordination for AI coding agents, served over MCP.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console()
err = Console(stderr=True)


def settings() -> Settings:
    """The settings, built once per command, with logging to stderr at the configured level."""
    loaded = load_settings()
    configure_logging(loaded)
    return loaded


@app.command()
def version() -> None:
    """Print threadloom's version."""
    out.print(__version__)


@app.command()
def serve(
    in_process: Annotated[
        bool, typer.Option("--in-process", help="Run the whole server in this process, not the daemon.")
    ] = False,
    http: Annotated[
        str | None,
        typer.Option("--http", metavar="[HOST:]PORT", help="Serve streamable HTTP at /mcp (127.0.0.1 unless given)."),
    ] = None,
    no_token: Annotated[
        bool,
        typer.Option(
            "--no-token",
            help="With --http on loopback only: accept requests without the access token. Any local user can then "
            "read and change your memories.",
        ),
    ] = False,
    remote: team.RemoteOpt = None,
    accounts: team.AccountsOpt = False,
    oauth_issuer: team.IssuerOpt = None,
    oauth_jwks: team.JwksOpt = None,
    oauth_user_claim: team.ClaimOpt = "sub",
    resource_url: team.ResourceOpt = None,
) -> None:
    """Serve MCP on stdio (what an agent CLI runs), or HTTP with --http.

    By default this is a thin bridge to the user's one threadloom daemon, started on demand. Over HTTP every
    request must carry `Authorization: Bearer <token>`: THREADLOOM_HTTP_TOKEN, else the token made on first use
    and kept in the home (`threadloom http token` shows where); with --accounts, each user's own token
    (`threadloom admin token create`). --remote URL: stdio for a laptop on a team server.
    """
    if in_process and http:
        raise typer.BadParameter("choose --in-process or --http, not both")
    if no_token and http is None:
        raise typer.BadParameter("--no-token goes with --http")
    team.check_options(http=http, in_process=in_process, no_token=no_token, remote=remote, accounts=accounts,
                       issuer=oauth_issuer, jwks=oauth_jwks, claim=oauth_user_claim, resource=resource_url)  # fmt: skip
    if remote is not None:
        raise typer.Exit(team.serve_remote(remote))
    if http is not None:
        raise typer.Exit(
            team.serve_team(http, no_token, accounts, oauth_issuer, oauth_jwks, oauth_user_claim, resource_url)
        )
    if in_process:
        from threadloom.server.stdio import serve_in_process

        raise typer.Exit(serve_in_process(settings()))
    from threadloom.daemon.bridge import main as bridge_main

    raise typer.Exit(bridge_main())


@app.command()
def init(
    target: Annotated[
        list[str] | None, typer.Option(help="agents (AGENTS.md), cursor (a Cursor rule) or generic; repeatable.")
    ] = None,
) -> None:
    """Write threadloom's agent instructions into this repository's instruction files (a managed block)."""
    import os

    from threadloom.identity import project_root
    from threadloom.threads.agent_files import write_instruction_files

    for row in write_instruction_files(project_root(os.environ, [], os.getcwd()), list(target or [])):
        out.print(f"{row['action']:>9}  {row['path']}")


def _register_groups() -> None:
    from threadloom.cli.admin import admin_app
    from threadloom.cli.backup import backup_app
    from threadloom.cli.brief import brief
    from threadloom.cli.check import check
    from threadloom.cli.consolidate import consolidate
    from threadloom.cli.curate import register as register_curation
    from threadloom.cli.daemon import daemon_app
    from threadloom.cli.doctor import doctor
    from threadloom.cli.forget import forget
    from threadloom.cli.http import http_app
    from threadloom.cli.ingest import ingest_app
    from threadloom.cli.learn import learn_app
    from threadloom.cli.memory import memory_app
    from threadloom.cli.migrate import migrate
    from threadloom.cli.portable import export, import_
    from threadloom.cli.reindex import reindex
    from threadloom.cli.retention import compact, retention
    from threadloom.cli.setup import setup
    from threadloom.cli.skills import skills_app
    from threadloom.cli.stats import stats, top
    from threadloom.cli.style import style_app
    from threadloom.cli.threads import thread_app
    from threadloom.cli.usermodel import user_app
    from threadloom.cli.watch import watch

    app.add_typer(daemon_app, name="daemon")
    app.add_typer(admin_app, name="admin")
    app.add_typer(backup_app, name="backup")
    app.add_typer(memory_app, name="memory")
    app.add_typer(thread_app, name="thread")
    app.add_typer(http_app, name="http")
    app.add_typer(ingest_app, name="ingest")
    register_curation(learn_app)  # learn curate|snapshots|restore|insights
    app.add_typer(learn_app, name="learn")
    app.add_typer(skills_app, name="skills")
    app.add_typer(user_app, name="user")
    app.add_typer(style_app, name="style")
    app.command()(doctor)
    app.command()(check)
    app.command()(consolidate)
    app.command()(reindex)
    app.command()(watch)
    app.command()(setup)
    app.command()(brief)
    app.command()(forget)
    app.command()(stats)
    app.command()(retention)
    app.command()(compact)
    app.command()(top)
    app.command()(export)
    app.command(name="import")(import_)
    app.command()(migrate)


def run() -> None:
    _register_groups()
    try:
        code = app(standalone_mode=False)  # click's own errors come here, to be said in one line
    except ThreadloomError as exc:
        _refuse(exc.message)
        sys.exit(2)
    except _errors.UsageError as exc:  # a missing argument, an option out of range, an unknown command
        if isinstance(exc, getattr(_errors, "NoArgsIsHelpError", ())):  # `threadloom memory` alone: its help
            shown = exc.ctx.get_help() if exc.ctx else exc.format_message()  # rich prints it itself, saying ""
            if shown:
                print(shown, file=sys.stderr)
        else:
            where = f" (see {exc.ctx.command_path} --help)" if exc.ctx else ""
            _refuse(exc.format_message().rstrip(".") + where)
        sys.exit(exc.exit_code)
    except _errors.ClickException as exc:
        _refuse(exc.format_message())
        sys.exit(exc.exit_code)
    except typer.Abort:  # a question answered with Ctrl-D, or none to read
        _refuse("aborted: nothing was done")
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


def _refuse(message: str) -> None:
    err.print("[red]threadloom:[/red] ", end="")
    err.print(message, markup=False, highlight=False, soft_wrap=True)  # text, not markup; a path stays whole
