"""`chatterd` command line: run, chat, db upgrade, config check, memory, turns, usage."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from bot.config import ConfigError, Settings, config_path, load_config, mask_secrets
from bot.errors import StartupError

EXIT_CONFIG = 2
log = logging.getLogger("chatterd")


def _version() -> str:
    try:
        return version("chatterd")
    except PackageNotFoundError:
        return "unknown"


class CommandParser(argparse.ArgumentParser):
    """A parser for chatterd or one of its subcommands; every one takes the global options.

    Subcommand parsers are made with the parent's class (argparse's default
    `parser_class`), so each level, nested ones included (`chatterd memory list`), accepts
    `--config` and `--log-level` and lists them in its `--help`: a systemd unit or a Docker
    CMD can write `chatterd run --config FILE`. The options default to "not given" on every
    level, and a deeper level's values are copied over the upper one's, so a value typed
    after the subcommand wins over one typed before it.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        options = self.add_argument_group("global options (before or after the subcommand)")
        options.add_argument(
            "--config",
            default=argparse.SUPPRESS,
            help="path to config.toml (default: $CHATTERD_CONFIG or ./config.toml)",
        )
        options.add_argument(
            "--log-level",
            default=argparse.SUPPRESS,
            help="DEBUG, INFO, WARNING (default INFO)",
        )


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="chatterd", description="Chat-bot agent daemon.")
    parser.set_defaults(config=None, log_level="INFO")
    parser.add_argument("--version", action="version", version=f"chatterd {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("run", help="run the daemon with every enabled channel")
    sub.add_parser("chat", help="talk to the bot in this terminal")
    db = sub.add_parser("db", help="database maintenance")
    db.add_subparsers(dest="db_command", required=True).add_parser(
        "upgrade", help="apply migrations"
    )
    cfg = sub.add_parser("config", help="configuration")
    cfg.add_subparsers(dest="config_command", required=True).add_parser(
        "check", help="validate and print the effective config (secrets masked)"
    )
    from bot.cli.memory import add_memory_parser

    add_memory_parser(sub)
    from bot.cli.turns import add_turns_parser

    add_turns_parser(sub)
    from bot.cli.usage import add_usage_parser

    add_usage_parser(sub)
    from bot.cli.reminders import add_reminders_parser

    add_reminders_parser(sub)
    from bot.cli.jobs import add_jobs_parser

    add_jobs_parser(sub)
    from bot.cli.kb import add_kb_parser

    add_kb_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _setup_logging(args.log_level, quiet=args.command == "chat")
    try:
        settings = load_config(config_path(args.config))
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_CONFIG
    try:
        return _dispatch(args, settings)
    except StartupError as exc:
        log.debug("start-up failure", exc_info=True)  # the traceback, with --log-level debug
        print(f"chatterd: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt:
        return 130


def _dispatch(args: argparse.Namespace, settings: Settings) -> int:
    if args.command in ("run", "chat"):
        return asyncio.run(_serve(settings, args.command))
    if args.command == "db":
        from memory.db.migrate import upgrade

        upgrade(settings.storage.url)
        print(f"database is at the newest schema: {_safe_url(settings.storage.url)}")
        return 0
    if args.command == "config":
        print(json.dumps(mask_secrets(settings), indent=2, ensure_ascii=False))
        return 0
    if args.command == "turns":
        from bot.cli.turns import run_turns_command

        return asyncio.run(run_turns_command(args, settings))
    if args.command == "kb":
        from bot.cli.kb import run_kb_command

        return asyncio.run(run_kb_command(args, settings))
    if args.command == "reminders":
        from bot.cli.reminders import run_reminders_command

        return asyncio.run(run_reminders_command(args, settings))
    if args.command == "jobs":
        from bot.cli.jobs import run_jobs_command

        return asyncio.run(run_jobs_command(args, settings))
    if args.command == "usage":
        from bot.cli.usage import run_usage_command

        return asyncio.run(run_usage_command(args, settings))
    from bot.cli.memory import run_memory_command

    return asyncio.run(run_memory_command(args, settings))


async def _serve(settings: Settings, mode: str) -> int:
    from bot.wiring.app import App

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # pragma: no cover - non-Unix
            pass
    app = App(settings, mode="chat" if mode == "chat" else "run")
    try:
        await app.__aenter__()
    except (StartupError, KeyboardInterrupt, asyncio.CancelledError):
        raise
    except Exception as exc:  # anything else that stops the start: still one line, exit 2
        raise StartupError(f"cannot start: {type(exc).__name__}: {exc}") from exc
    try:
        names = ", ".join(channel.name for channel in app.channels) or "none"
        log.info("chatterd %s ready; channels: %s", _version(), names)
        await app.wait_console_or(stop)
        grace = settings.bot.shutdown_grace_s
        log.info("stopping: finishing turns in flight (up to %.0fs)", grace)
        await app.stop(grace)
    finally:
        await app.__aexit__(None, None, None)
    return 0


def _safe_url(url: str) -> str:
    """A database URL without its password."""
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def _setup_logging(level: str, *, quiet: bool) -> None:
    logging.basicConfig(
        level=logging.WARNING if quiet else getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # Library loggers that would print request URLs (a Telegram URL carries the token).
    for noisy in (
        "httpx",
        "httpcore",
        "httpx2",
        "httpcore2",
        "telegram.ext",
        "openai",
        "aiohttp.access",
        "alembic",
    ):
        logging.getLogger(noisy).setLevel(logging.WARNING)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
