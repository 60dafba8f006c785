"""`threadloom daemon run|status|stop`."""

from __future__ import annotations

import typer
from rich.table import Table

from threadloom.cli.app import err, out, settings
from threadloom.daemon import control

daemon_app = typer.Typer(help="The per-user daemon that serves every agent session.", no_args_is_help=True)


@daemon_app.command("run")
def run_cmd() -> None:
    """Run the daemon in the foreground (bridges start it on demand; you rarely need this)."""
    from threadloom.daemon.process import main

    raise typer.Exit(main())


@daemon_app.command()
def status() -> None:
    """Show whether the daemon runs, its version, uptime and open sessions. Exit 1 when not running."""
    s = settings()
    reply = control.request(s.layout.socket, "status")
    if reply is None:
        out.print(f"daemon: [yellow]not running[/yellow] (socket {s.layout.socket})")
        raise typer.Exit(1)
    out.print(
        f"daemon: [green]running[/green] pid {reply['pid']}, version {reply['version']}, "
        f"up {reply['uptime_s']}s, {reply['open_connections']} open connection(s), "
        f"idle timeout {reply['idle_timeout_s']}s"
    )
    out.print(f"store: {reply['store']}")
    guard = reply.get("guard") or {}
    if guard:
        cap = f"cap {guard['cap_mb']} MB" if guard.get("cap_mb") else "no cap"
        out.print(f"memory: {guard['resident_mb']} MB resident (peak {guard['peak_mb']} MB, {cap}): {guard['state']}")
        if guard.get("model_unloaded"):
            out.print(guard["model_unloaded"], markup=False)
    if reply["sessions"]:
        table = Table("session", "vendor", "client", "project")
        for sess in reply["sessions"]:
            table.add_row(sess["id"], sess["vendor"], sess["client"] or "", sess["project"] or "")
        out.print(table)


@daemon_app.command()
def stop() -> None:
    """Stop the daemon now. Open agent sessions reconnect to a fresh daemon on their next call (the same session
    goes on); a call in flight is retried or answered with a retryable error."""
    s = settings()
    reply = control.stop(s.layout.socket)
    if reply is None:
        out.print("daemon: not running")
        return
    if not reply["stopped"]:
        err.print(f"daemon pid {reply['pid']} did not exit in time")
        raise typer.Exit(1)
    out.print(f"daemon pid {reply['pid']} stopped")
